#!/usr/bin/env bash
# Train -> canary -> promote, narrated, on modelfleet-local: the chart-installed operator runs a
# data-parallel PyTorch TrainingJob (a Master and 2 Workers on the digits), hands the trained model
# to the `digits` ModelDeployment as a 10 % canary, the canary answers through the router, and a
# kubectl patch promotes it to all the traffic. Everything it starts is stopped when it ends
# (about 3 minutes; docs/training.md).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

build_tree modelfleet-local modelfleet-operator modelfleet-server modelfleet-router modelfleet-sync
demo_start training-demo

say "1. The local cluster, the operator (Helm chart) and the digits ModelDeployment (v1 90 %, v2 10 %)"
# modelfleet/python-train: the image the training examples name, here the repository's venv python
# (Debian's torch, scikit-learn).
demo_cluster_up "modelfleet/python-train: $PYTHON"
run "$BUILD_DIR/go/bin/helm" install modelfleet "$ROOT/helm/modelfleet" -n modelfleet-system --create-namespace --wait --timeout 180s
sed "s|/MODELFLEET_ROOT|$ROOT|" "$ROOT/examples/modeldeployment-digits-local.yaml" | kubectl apply -f -
run kubectl wait md/digits --for condition=Ready --timeout=240s
run kubectl get md digits

say "2. Train: a PyTorch TrainingJob, Master + 2 Workers (examples/training/trainingjob-pytorch-local.yaml)"
sed -e "s|/MODELFLEET_ROOT|$ROOT|" -e "s|file://$ROOT/.cache/trained/digits|file://$work/models/digits|" \
  "$ROOT/examples/training/trainingjob-pytorch-local.yaml" >"$work/job.yaml"
run kubectl apply -f "$work/job.yaml"
sleep 3
run kubectl get pods -l modelfleet.io/job-name=digits-pytorch
echo "$ kubectl get pod digits-pytorch-worker-1 -o jsonpath=<its env>  (what the operator set, as Kubeflow's PyTorchJob does)"
kubectl get pod digits-pytorch-worker-1 -o jsonpath='{range .spec.containers[0].env[*]}  {.name}={.value}{"\n"}{end}'
run kubectl wait tj/digits-pytorch --for condition=Succeeded --timeout=300s
run kubectl get tj digits-pytorch -o wide
run kubectl logs digits-pytorch-master-0 --tail=4

say "3. Canary: the operator added the trained model to the ModelDeployment at 10 %"
kubectl get tj digits-pytorch -o jsonpath='{.status.handoff}{"\n"}'
run kubectl get md digits -o jsonpath='{.spec.traffic}{"\n"}'
lb=$(demo_lb_address digits)
body=$(digits_predict_body)
echo "waiting for the canary v3 to answer through the router (http://$lb:8501)..."
for _ in $(seq 1 600); do
  version=$(curl -s -o /dev/null -w '%header{x-modelfleet-version}' -X POST "http://$lb:8501/v1/models/digits:predict" -d "$body" || true)
  [ "$version" = v3 ] && break; sleep 0.1
done
echo "200 requests through the router, by the version that answered:"
for _ in $(seq 1 200); do
  curl -s -o /dev/null -w '%header{x-modelfleet-version}\n' -X POST "http://$lb:8501/v1/models/digits:predict" -d "$body"
done | sort | uniq -c

say "4. Promote: all the traffic to the trained model"
run kubectl patch md digits --type merge -p '{"spec":{"traffic":{"v1":0,"v2":0,"v3":100}}}'
sleep 3
for _ in $(seq 1 100); do
  curl -s -o /dev/null -w '%header{x-modelfleet-version}\n' -X POST "http://$lb:8501/v1/models/digits:predict" -d "$body"
done | sort | uniq -c
run kubectl get md digits
say "Done. Everything started here has been stopped."
