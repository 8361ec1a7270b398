#!/usr/bin/env bash
# On a GPU machine (no apt, no network): unpacks .device/bundle.tar.xz (scripts/device-bundle.sh)
# and runs the CUDA checks, writing logs under $OUT (or /tmp/mf-out).
#   scripts/device-run.sh tests        # CUDA unit tests + the ONNX conformance suite on the GPU
#   scripts/device-run.sh models       # ResNet/MobileNet/BERT on the GPU vs PyTorch
#   scripts/device-run.sh bench        # bench/runtime/bench_gpu.py
#   scripts/device-run.sh serve        # bench/server/gpu_batching.py (bundle made with --server)
#   scripts/device-run.sh placement    # a YAML model config placing version 1 on the CPU, 2 on the GPU
#   scripts/device-run.sh router       # bench/router/run.sh with cores to spare (bundle made with --router)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/mf-out}
mkdir -p "$OUT"
if [ ! -d /tmp/mf/stage ]; then
  mkdir -p /tmp/mf && tar -C /tmp/mf -xJf .device/bundle.tar.xz
  mkdir -p /usr/share/libonnx-testdata && ln -sfn /tmp/mf/stage/testdata /usr/share/libonnx-testdata/data
fi
# The GPU machine's CUDA libraries come with its PyTorch wheels.
nvlibs=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p) if os.path.isdir(os.path.join(p, d, "lib"))))' 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/mf/stage/lib:${nvlibs}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export MODELFLEET_BIN=/tmp/mf/stage/bin
status=0
for what in "${@:-tests}"; do
  case "$what" in
    tests)
      echo "== CUDA unit tests"
      timeout 600 "$MODELFLEET_BIN/runtime_cuda_test" --gtest_brief=1 2>&1 | tee "$OUT/cuda_unit.log" | tail -60 || status=1
      echo "== ONNX conformance on the GPU"
      MODELFLEET_TEST_BACKEND=cuda timeout 600 "$MODELFLEET_BIN/runtime_onnx_conformance_test" --gtest_brief=1 \
        > "$OUT/conformance_cuda.log" 2>&1 || status=1
      grep -E "FAILED|ONNX conformance" "$OUT/conformance_cuda.log" | head -80
      ;;
    models)
      echo "== models on the GPU vs PyTorch"
      MODELFLEET_TEST_BACKEND=cuda python3 -m pytest -q -p no:cacheprovider tests/e2e/test_runtime_models.py \
        2>&1 | tee "$OUT/models.log" | tail -30 || status=1
      ;;
    bench)
      python3 bench/runtime/bench_gpu.py --bin "$MODELFLEET_BIN" 2>&1 | tee "$OUT/bench_gpu.log" || status=1
      ;;
    serve)
      python3 bench/server/gpu_batching.py --bin "$MODELFLEET_BIN" 2>&1 | tee "$OUT/gpu_batching.log" || status=1
      ;;
    placement)
      # Per-version placement from a YAML model config: version 1 on the CPU, version 2 on the GPU;
      # both must become AVAILABLE on their device and answer (bundle made with --server).
      echo "== per-version placement on the GPU machine"
      work=$(mktemp -d)
      printf 'model_config_list:\n- name: digits\n  base_path: %s\n  model_version_policy: {all: {}}\n  device: cpu\n  version_devices: {2: cuda}\n' \
        "$PWD/examples/models/digits" > "$work/models.yaml"
      "$MODELFLEET_BIN/modelfleet-server" --model_config_file="$work/models.yaml" --port=0 --rest_api_port=18601 \
        --rest_api_address=127.0.0.1 > "$work/server.log" 2>&1 &
      pid=$!
      for _ in $(seq 1 100); do
        python3 -c 'import urllib.request,sys; sys.exit(0 if urllib.request.urlopen("http://127.0.0.1:18601/v2/health/ready").status == 200 else 1)' 2>/dev/null && break
        sleep 0.2
      done
      for v in 1 2; do
        python3 -c "import json,urllib.request; r=urllib.request.Request('http://127.0.0.1:18601/v1/models/digits/versions/$v:predict', data=json.dumps({'instances': [[0.0]*64]}).encode()); print('version $v:', urllib.request.urlopen(r).read().decode()[:80])" || status=1
      done
      grep -E "model version available" "$work/server.log" | tee "$OUT/placement.log"
      grep -q 'version=1.*device=cpu' "$OUT/placement.log" && grep -q 'version=2.*device=cuda' "$OUT/placement.log" \
        && echo "placement: version 1 on cpu, version 2 on cuda" || { echo "placement: wrong devices"; status=1; }
      kill "$pid"; wait "$pid" 2>/dev/null
      ;;
    router)
      # The router's targets on a machine where the proxy has cores of its own: wrk or h2load on
      # cores 0-3, the proxy (router: 4 io + 4 upstream threads; nginx: 4 workers) on 4-7, the two
      # backends (one io thread each) on 8-9.
      echo "== router vs direct vs nginx, cores to spare"
      PATH="$MODELFLEET_BIN:$PATH" MODELFLEET_BENCH_BIN="$MODELFLEET_BIN" CLIENT_CPUS=0-3 PROXY_CPUS=4-7 \
        BACKEND_CPUS=8-9 ROUTER_THREADS=4 NGINX_WORKERS=4 WRK_THREADS=4 GRPC_CONNECTIONS=16 \
        bash bench/router/run.sh "${ROUTER_SECONDS:-5}" "${ROUTER_CONNECTIONS:-64}" "${ROUTER_ROUNDS:-3}" \
        2>&1 | tee "$OUT/router.log" || status=1
      ;;
    *) echo "unknown: $what"; status=2 ;;
  esac
done
exit $status
