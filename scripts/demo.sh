#!/usr/bin/env bash
# The main job on the embedded default, narrated: builds everything, runs the example digits model
# through the runtime CLI, serves it with modelfleet-server (TF Serving REST and gRPC, KServe v2),
# swaps in version 2 without dropping a request, then starts the local cluster (modelfleet-local:
# the real kube-apiserver, etcd, controller-manager and scheduler plus our node agent), installs the
# operator with its Helm chart and serves a ModelDeployment through the router, driven by kubectl.
# Everything listens on loopback; everything it starts is stopped when it ends.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

say "Installing dependencies (Debian packages; idempotent)"
bash "$ROOT/scripts/install-deps.sh"
build_tree modelfleet-run modelfleet-server modelfleet-local modelfleet-operator modelfleet-router modelfleet-sync

demo_start demo
wait_http() {  # url, seconds
  # $1 may carry curl options after the URL (e.g. --cacert FILE).
  # shellcheck disable=SC2086
  for _ in $(seq 1 $(( $2 * 10 ))); do curl -sf -o /dev/null $1 && return 0; sleep 0.1; done
  echo "demo: $1 did not answer within $2 s"; return 1
}

say "1. The runtime: modelfleet-run on the digits model (an MLP trained on sklearn's digits, exported by examples/models/make_digits.py)"
"$PYTHON" - "$work/digits.npy" "$work/labels.txt" <<'PY'
import sys, numpy as np
from sklearn.datasets import load_digits
d = load_digits()
np.save(sys.argv[1], d.data[:4].astype(np.float32))
open(sys.argv[2], "w").write(" ".join(map(str, d.target[:4])))
PY
run "$BUILD_DIR/tools/run/modelfleet-run" "$ROOT/examples/models/digits/1/model.onnx" --input "$work/digits.npy" --iterations 20
echo "(true labels of these 4 images: $(cat "$work/labels.txt"))"

say "2. The model server: modelfleet-server, a drop-in for tensorflow_model_server"
mkdir -p "$work/models/digits"
cp -r "$ROOT/examples/models/digits/1" "$work/models/digits/1"
rest=$(free_port); grpc=$(free_port)
run_server=("$BUILD_DIR/server/main/modelfleet-server" --model_name=digits --model_base_path="$work/models/digits"
  --rest_api_port="$rest" --port="$grpc" --file_system_poll_wait_seconds=0.5)
echo "$ ${run_server[*]}"
"${run_server[@]}" >"$work/server.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$rest/v2/health/ready" 60
run curl -s "http://127.0.0.1:$rest/v1/models/digits"; echo
body=$(digits_predict_body)
printf '\n$ curl -s -X POST localhost:%s/v1/models/digits:predict -d {"signature_name": "serving_default", "instances": <2 digit images>}\n' "$rest"
curl -s -X POST "http://127.0.0.1:$rest/v1/models/digits:predict" -d "$body" | "$PYTHON" -c '
import json, sys; r = json.load(sys.stdin)
for i, row in enumerate(r["predictions"]):
    print(f"  image {i}: predicted digit {max(range(len(row)), key=row.__getitem__)}  scores {[round(v, 2) for v in row]}")'
say "   The same model over gRPC (tensorflow.serving.PredictionService/Predict, stubs generated from src/proto)"
"$PYTHON" "$ROOT/scripts/demo_grpc.py" "127.0.0.1:$grpc" digits
say "   KServe v2 / Open Inference Protocol"
run curl -s "http://127.0.0.1:$rest/v2/models/digits"; echo
say "   Prometheus metrics (excerpt)"
curl -s "http://127.0.0.1:$rest/metrics" | grep -E '^(modelfleet_requests_total|:tensorflow:serving:request_count)' | head -6

say "3. Hot swap: version 2 appears in the repository while a client keeps sending requests"
"$PYTHON" "$ROOT/scripts/demo_load.py" "http://127.0.0.1:$rest/v1/models/digits:predict" 6 >"$work/load.txt" &
load_pid=$!
sleep 1.5
cp -r "$ROOT/examples/models/digits/2" "$work/models/digits/.2.tmp" && mv "$work/models/digits/.2.tmp" "$work/models/digits/2"
echo "copied version 2 into the repository"
wait "$load_pid"
cat "$work/load.txt"
run curl -s "http://127.0.0.1:$rest/v1/models/digits"; echo

say "4. The local cluster: modelfleet-local (the real kube-apiserver, etcd, controller-manager and scheduler, built from their Go modules, plus our node agent running pods as processes)"
# The image names the chart and the operator use are mapped to this build's binaries; the
# kubeconfig (admin client certificate, the cluster's own CA) is written once the node is Ready.
demo_cluster_up
run kubectl get --raw /version; echo
run kubectl get nodes

say "5. The operator, installed by its Helm chart (CRDs, RBAC, two replicas with leader election)"
run "$BUILD_DIR/go/bin/helm" install modelfleet "$ROOT/helm/modelfleet" -n modelfleet-system --create-namespace --wait --timeout 180s
run kubectl get pods -n modelfleet-system
run kubectl get lease modelfleet-operator -n modelfleet-system -o jsonpath='{.spec.holderIdentity}{" leads\n"}'

say "6. A ModelDeployment: the digits model, two versions, 90/10 (examples/modeldeployment-digits-local.yaml)"
sed "s|/MODELFLEET_ROOT|$ROOT|" "$ROOT/examples/modeldeployment-digits-local.yaml" >"$work/digits.yaml"
run kubectl apply -f "$work/digits.yaml"
run kubectl wait md/digits --for condition=Ready --timeout=240s
run kubectl get md digits
run kubectl get deployments,services -l modelfleet.io/modeldeployment=digits
lb=$(demo_lb_address digits)
echo "(the router's LoadBalancer Service got the host address $lb, as \`minikube tunnel\` gives one)"

say "7. Predictions through the router: REST (x-modelfleet-version names the version that answered) and gRPC"
printf '\n$ 200 x curl -X POST %s:8501/v1/models/digits:predict ... | count x-modelfleet-version\n' "$lb"
for _ in $(seq 1 200); do
  curl -s -o /dev/null -D - -X POST "http://$lb:8501/v1/models/digits:predict" -d "$body" | tr -d '\r' | grep -i '^x-modelfleet-version' || true
done | sort | uniq -c
"$PYTHON" "$ROOT/scripts/demo_grpc.py" "$lb:8500" digits

say "8. A canary weight edit under load: kubectl patch to 50/50 while clients keep sending"
"$PYTHON" "$ROOT/scripts/demo_load.py" "http://$lb:8501/v1/models/digits:predict" 6 >"$work/load2.txt" &
load_pid=$!
sleep 2
run kubectl patch md digits --type merge -p '{"spec":{"traffic":{"v1":50,"v2":50}}}'
wait "$load_pid"
cat "$work/load2.txt"
run kubectl get md digits
run kubectl describe md digits

say "9. Autoscaling on QPS: the routers push their rates to the operator every second"
# The autoscaler reads rates over the last 2 s: let step 8's burst (hundreds of requests/s) leave
# that window first, or its first decision rightly scales to the maximum at once.
sleep 3
run kubectl patch md digits --type merge -p '{"spec":{"autoscaling":{"targetPerReplica":20,"minReplicas":1,"maxReplicas":3,"scaleDownStabilizationSeconds":30}}}'
printf '%s' "$body" >"$work/body.json"
echo "$ hey -z 20s -c 4 -q 15 -m POST -D body.json http://$lb:8501/v1/models/digits:predict   (about 60 requests/s)"
hey -z 20s -c 4 -q 15 -m POST -T application/json -D "$work/body.json" "http://$lb:8501/v1/models/digits:predict" >"$work/hey.txt" 2>&1 &
hey_pid=$!
for i in 1 2 3 4; do
  sleep 5
  kubectl get md digits -o jsonpath='{range .status.versions[*]}  {.name}: {.qps} qps, {.readyReplicas}/{.desiredReplicas} ready{"\n"}{end}'
done
wait "$hey_pid"
grep -E "Requests/sec|\[200\]" "$work/hey.txt" || true
run kubectl get deployments -l modelfleet.io/modeldeployment=digits
kubectl get events --field-selector involvedObject.name=digits,reason=ScaledUp -o custom-columns=REASON:.reason,MESSAGE:.message

say "10. kubectl delete md: the garbage collector removes every object the operator made"
run kubectl delete md digits --wait=true
sleep 2
run kubectl get deployments,services,configmaps -l modelfleet.io/modeldeployment=digits
say "Done. Everything started here has been stopped."
echo "Training -> canary -> promote is its own demo (about 3 minutes): bash scripts/demo-training.sh"
