# Shared by the scripts in this folder: progress messages and the one build tree.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MODELFLEET_BUILD_DIR:-$ROOT/build}"
PYTHON="${MODELFLEET_VENV:-$ROOT/.cache/venv}/bin/python"  # the tests' venv (install-deps: requirements/test.txt over Debian's python3 and torch)

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

# Configures (once) and builds the tree in $BUILD_DIR; extra arguments are build targets. The real
# Kubernetes components (and etcd, helm, Prometheus) come first, from their pinned Go modules
# (scripts/build-go-tools.sh: only when the pins changed).
build_tree() {
  say "Building the Kubernetes control plane, etcd, helm and Prometheus from their pinned Go modules"
  bash "$ROOT/scripts/build-go-tools.sh" || return 1
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
