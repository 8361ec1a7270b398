#!/usr/bin/env bash
# Installs every Debian package that the build, the tests, the benchmarks and the demo need, then
# the pinned Python venv of the tests (requirements/test.txt) and, where /usr/local/cuda is missing,
# NVIDIA's CUDA 13 wheels (requirements/cuda.txt) laid out as a toolkit for the CUDA backend.
# Idempotent: when everything is present it prints one line per part and returns at once.
#   install-deps.sh [all|debian|python]   (default all)
#   MODELFLEET_VENV=DIR      where the venv lives (default .cache/venv)
#   MODELFLEET_CUDA=OFF      installs no CUDA wheels (as -DMODELFLEET_CUDA=OFF builds no CUDA backend)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config clang lld libclang-rt-14-dev clang-format-14 git
  # C++ libraries
  libboost1.74-dev libssl-dev zlib1g-dev nlohmann-json3-dev libyaml-cpp-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libonnx-dev libdnnl-dev libsimdjson-dev libre2-dev
  libjemalloc-dev  # the router's allocator (docs/router.md, "Allocator")
  libgtest-dev libgmock-dev libbenchmark-dev
  # Python side (always /usr/bin/python3, never a pyenv one). The tests run on the venv below, made
  # from it with --system-site-packages so that Debian's torch and torchvision stay reachable.
  python3 python3-venv python3-pytest python3-pytest-timeout python3-requests python3-grpcio python3-grpc-tools python3-kubernetes
  python3-torch python3-torchvision python3-onnx python3-numpy python3-sklearn python3-yaml
  # real peers used by tests and benchmarks (Prometheus is built from its Go module instead:
  # Debian's has no kubernetes_sd_configs; scripts/build-go-tools.sh)
  hey wrk nginx-light curl openssl libonnx-testdata
  # the local cluster's network namespace (ip route add local ...)
  iproute2
  # HTTP/2 (gRPC transport) and h2load
  libnghttp2-dev nghttp2-client
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

install_debian_packages() {
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages already installed"
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${#missing[@]} missing packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null | grep -E '^(Setting up|E:)' | sed 's/^/install-deps: /' || true
  # nginx-light ships a service; tests start their own instances.
  $sudo systemctl disable --now nginx >/dev/null 2>&1 || true
  $sudo pkill -x nginx >/dev/null 2>&1 || true
  echo "install-deps: Debian packages done"
}

# pip_install WHAT REQUIREMENTS PIP-ARGS...: exact versions and hashes only, nothing unpinned
# (--no-deps: requirements/*.txt already list every dependency). Prints one line per package.
pip_install() {
  local what=$1 requirements=$2
  shift 2
  local started=$SECONDS
  echo "install-deps: installing $what from ${requirements#"$ROOT"/} ($(grep -c '^[a-zA-Z]' "$requirements") packages; the first time downloads them, several hundred MB)"
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_PROGRESS_BAR=off \
    "$venv/bin/pip" install --require-hashes --no-deps --only-binary :all: -r "$requirements" "$@" 2>&1 |
    { grep -E --line-buffered '^ *(Collecting|Downloading|Using cached|Installing|Successfully|ERROR|error)' || true; } |
    sed -u 's/^ */install-deps: pip: /'
  echo "install-deps: $what installed in $((SECONDS - started)) s"
}

# The stamp of a pinned environment: its requirements, the interpreter and how it is laid out
# (bump layout= when the steps below change what they make).
stamp_for() { { cat "$1"; readlink -f /usr/bin/python3; echo "layout=1"; } | sha256sum | cut -d' ' -f1; }

# The tests' Python: a venv of Debian's python3 with requirements/test.txt. --system-site-packages
# keeps Debian's python3-torch/torchvision (1.13; no PyPI torch, its wheels are GBs) importable;
# the venv's own packages come first on sys.path, so numpy is the pinned 1.26 (Debian's torch is
# built against numpy 1 and does not import with numpy 2).
install_venv() {
  local requirements="$ROOT/requirements/test.txt" stamp
  stamp=$(stamp_for "$requirements")
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.modelfleet-stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "install-deps: Python venv ${venv#"$ROOT"/} is up to date"
    return 0
  fi
  echo "install-deps: creating the Python venv ${venv#"$ROOT"/} (Debian's python3 + requirements/test.txt)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  pip_install "the test packages" "$requirements"
  # What the tests rely on most: Debian's torch working with the venv's numpy, and onnx export.
  "$venv/bin/python" - <<'PY'
import numpy, torch, onnx, onnxruntime, grpc, sklearn
assert numpy.__version__.startswith("1."), numpy.__version__
assert torch.from_numpy(numpy.ones(2, dtype=numpy.float32)).sum().item() == 2.0
print(f"install-deps: venv check: numpy {numpy.__version__}, torch {torch.__version__} (Debian), "
      f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, grpcio {grpc.__version__}")
PY
  echo "$stamp" >"$venv/.modelfleet-stamp"
}

# CUDA 13 from NVIDIA's PyPI wheels where no toolkit is installed (/usr/local/cuda). The wheels
# put everything under one folder, nvidia/cu13/{bin,include,lib,nvvm} (cuDNN: nvidia/cudnn/); it
# becomes a toolkit root that CMake's FindCUDAToolkit and nvcc accept with a few symlinks: lib64,
# the unversioned libraries to link (libcudart.so, libcudnn.so...) and cuDNN's headers and
# libraries beside CUDA's. cmake/Dependencies.cmake uses .cache/cuda/toolkit when it exists.
install_cuda() {
  if [ "${MODELFLEET_CUDA:-ON}" = OFF ]; then
    echo "install-deps: MODELFLEET_CUDA=OFF: no CUDA wheels"
    return 0
  fi
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "install-deps: CUDA toolkit found in /usr/local/cuda: no CUDA wheels"
    return 0
  fi
  local requirements="$ROOT/requirements/cuda.txt" prefix="$ROOT/.cache/cuda" stamp
  stamp=$(stamp_for "$requirements")
  if [ -x "$prefix/toolkit/bin/nvcc" ] && [ "$(cat "$prefix/.modelfleet-stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "install-deps: CUDA wheels in ${prefix#"$ROOT"/} are up to date"
    return 0
  fi
  rm -rf "$prefix"
  mkdir -p "$prefix"
  pip_install "the CUDA 13 wheels (nvcc, runtime, CCCL, cuBLAS, cuDNN)" "$requirements" --target "$prefix/site"
  local cu="$prefix/site/nvidia/cu13" f
  ln -sfn lib "$cu/lib64"
  (cd "$cu/lib" && for f in *.so.* ../../cudnn/lib/*.so.*; do  # relative links: the folder may move
    [ -e "$f" ] || continue
    local base=${f##*/}
    [ "$f" = "$base" ] || ln -sfn "$f" "$base"
    [ -e "${base%%.so.*}.so" ] || ln -s "$base" "${base%%.so.*}.so"
  done)
  (cd "$cu/include" && for f in ../../cudnn/include/*.h; do
    [ ! -e "$f" ] || ln -sfn "$f" "${f##*/}"
  done)
  ln -sfn site/nvidia/cu13 "$prefix/toolkit"
  "$prefix/toolkit/bin/nvcc" --version | tail -2 | sed 's/^/install-deps: /'
  echo "$stamp" >"$prefix/.modelfleet-stamp"
}

venv="${MODELFLEET_VENV:-$ROOT/.cache/venv}"
# Which part: all (default), debian, or python (the venv and the CUDA wheels: mostly downloads, so
# scripts/test.sh runs them beside the CPU-bound Go build).
case "${1:-all}" in
  all) install_debian_packages; install_venv; install_cuda ;;
  debian) install_debian_packages ;;
  python) install_venv; install_cuda ;;
  *) echo "usage: install-deps.sh [all|debian|python]" >&2; exit 2 ;;
esac
echo "install-deps: done (${1:-all})"
