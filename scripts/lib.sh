# Shared by the scripts in this folder: progress messages and the one build tree.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MODELFLEET_BUILD_DIR:-$ROOT/build}"
PYTHON="${MODELFLEET_VENV:-$ROOT/.cache/venv}/bin/python"  # the tests' venv (install-deps: requirements/test.txt over Debian's python3 and torch)

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# Configures (once) and builds the tree in $BUILD_DIR; extra arguments are build targets. The real
# Kubernetes components (and etcd, helm, Prometheus) come first, from their pinned Go modules
# (scripts/build-go-tools.sh: only when the pins changed), unless MODELFLEET_GO_TOOLS=background
# says the caller builds them itself meanwhile.
build_tree() {
  if [ "${MODELFLEET_GO_TOOLS:-}" != background ]; then
    say "Building the Kubernetes control plane, etcd, helm and Prometheus from their pinned Go modules"
    bash "$ROOT/scripts/build-go-tools.sh" || return 1
  fi
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK=content
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    say "Configuring the build in ${BUILD_DIR#"$ROOT"/} (CMake + Ninja, Release with assertions)"
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja "${launcher[@]}" ${MODELFLEET_CMAKE_ARGS:-}
  fi
  say "Building ${*:-everything} with $(nproc) jobs (ccache: $(command -v ccache >/dev/null && echo on || echo off))"
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
}

# --- For the demos -------------------------------------------------------------------------------
# demo_start NAME: a work folder ($work) and a list of the processes the demo starts ($pids), both
# cleaned up when the script exits, however it exits.
demo_start() {
  work=$(mktemp -d "/tmp/modelfleet-$1.XXXXXX")
  pids=()
  trap demo_cleanup EXIT
}
demo_cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}

# Echoes a command as a user would type it, then runs it.
run() { printf '\n$ %s\n' "$*"; "$@"; }

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The JSON body of a TF Serving :predict request with two of scikit-learn's digits.
digits_predict_body() {
  "$PYTHON" -c 'import json; from sklearn.datasets import load_digits
print(json.dumps({"signature_name": "serving_default", "instances": load_digits().data[:2].tolist()}))'
}

# demo_cluster_up [IMAGE: PATH]...: starts modelfleet-local with this build's binaries as the images
# the chart and the operator name (plus the extra image lines given), waits until its kubeconfig is
# written (the node is Ready then), and points kubectl and helm at it.
demo_cluster_up() {
  {
    echo "images:"
    echo "  modelfleet/operator: $BUILD_DIR/operator/modelfleet-operator"
    echo "  modelfleet/server: $BUILD_DIR/server/main/modelfleet-server"
    echo "  modelfleet/router: $BUILD_DIR/server/router/modelfleet-router"
    echo "  modelfleet/sync: $BUILD_DIR/server/sync/modelfleet-sync"
    for extra in "$@"; do echo "  $extra"; done
  } >"$work/images.yaml"
  "$BUILD_DIR/tools/local/modelfleet-local" up --data-dir "$work/cluster" --port "$(free_port)" \
    --kubeconfig "$work/kubeconfig" --image-map "$work/images.yaml" >"$work/local.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 1200); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
  [ -s "$work/kubeconfig" ] || { echo "demo: the cluster did not start; see its log:"; cat "$work/local.log"; exit 1; }
  export KUBECONFIG="$work/kubeconfig"
  export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"
}

# Prints the LoadBalancer address of Service $1 once it has one (empty after 30 s).
demo_lb_address() {
  local lb=""
  for _ in $(seq 1 150); do
    lb=$(kubectl get service "$1" -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null || true)
    [ -n "$lb" ] && break
    sleep 0.2
  done
  echo "$lb"
}
