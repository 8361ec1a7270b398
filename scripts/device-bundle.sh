#!/usr/bin/env bash
# Packs what a GPU machine without apt needs to run the CUDA tests and benchmarks into
# .device/bundle.tar.xz: the built test, tool and server binaries, the Debian shared libraries they
# link (not the CUDA/cuDNN/cuBLAS ones: the GPU machine has those), and the ONNX conformance data.
# scripts/device-run.sh unpacks it there. See docs/development.md ("Testing on a GPU machine").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# scripts/device-bundle.sh [--server] [--router]: --server adds the model server (for the GPU
# serving bench); --router adds the router, bench/router's backends and this machine's nginx, wrk
# and h2load (bench/router/run.sh on a machine with more cores than this one).
BINARIES=(tests/unit/runtime_cuda/runtime_cuda_test tests/unit/runtime/runtime_onnx_conformance_test
          tools/run/modelfleet-run)
TARGETS=(runtime_cuda_test runtime_onnx_conformance_test modelfleet-run)
PEERS=()
for flag in "$@"; do
  case "$flag" in
    --server)
      BINARIES+=(server/main/modelfleet-server bench/server/grpc_predict_load)
      TARGETS+=(modelfleet-server grpc_predict_load)
      ;;
    --router)
      BINARIES+=(server/router/modelfleet-router bench/http/http_bench_server bench/router/grpc_bench_server)
      TARGETS+=(modelfleet-router http_bench_server grpc_bench_server)
      PEERS+=("$(command -v nginx)" "$(command -v wrk)" "$(command -v h2load)" "$(command -v curl)" "$(command -v bc)")
      ;;
    *) echo "device-bundle.sh: unknown flag $flag" >&2; exit 2 ;;
  esac
done
say "Building the binaries a GPU machine runs"
build_tree "${TARGETS[@]}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/stage
mkdir -p .device "$stage/bin" "$stage/lib" "$stage/testdata"
for b in "${BINARIES[@]}"; do cp "$BUILD_DIR/$b" "$stage/bin/"; done
for p in "${PEERS[@]}"; do cp "$p" "$stage/bin/"; done
say "Collecting the Debian libraries they link"
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | grep -v -E 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so|librt\.so|/usr/local/cuda|libcud|libcublas' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp -r /usr/share/libonnx-testdata/data/{node,pytorch-converted,pytorch-operator,simple} "$stage/testdata/"
say "Compressing"
tar -C "$work" -cJf .device/bundle.tar.xz stage
ls -la .device/bundle.tar.xz
