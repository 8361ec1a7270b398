#!/usr/bin/env bash
# Runs every test: installs dependencies, checks the C++ format, builds the one build tree, runs
# ctest (unit tests, ASan+UBSan tests of the parsers, fuzz corpus replays) and the pytest
# end-to-end suites.
# Ends with one line "N passed, N failed" and a non-zero exit on any failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
start=$(date +%s)

# The Go components need only the machine's Go: they build in the background from the start, as
# SCHED_IDLE, so they take only the CPU time nothing else wants: the Debian packages' install and
# the Python venv's (mostly downloads), the gaps in the C++ build, ctest's and then the idle
# half of the end-to-end tests that need no cluster, which run before them. The control plane,
# etcd and helm come first: only the tests that need them (marked go_components) wait for them.
# Prometheus builds after them, beside those tests, for the few that need it too (marked
# prometheus_server): they run last among them and wait for it (MODELFLEET_GO_AWAIT), sharing
# their cluster. Each build's output goes to a log, shown when it is done, and its exit status
# to LOG.status.
mkdir -p "$BUILD_DIR"
idle=()
if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0); fi
go_pids=()
trap 'for pid in "${go_pids[@]}"; do kill -- -"$pid" 2>/dev/null; done' EXIT  # an early exit leaves no go build behind
# start_go_build LOG COMPONENT...: build-go-tools.sh for these components, in the background,
# writing its exit status to LOG.status when it ends; its pid in go_pid.
start_go_build() {
  local log=$1
  shift
  rm -f "$log.status"
  setsid "${idle[@]}" bash -c 'bash "$0" "${@:2}" >"$1" 2>&1; rc=$?; echo "$rc" >"$1.status"; exit "$rc"' \
    "$ROOT/scripts/build-go-tools.sh" "$log" "$@" &
  go_pid=$!
  go_pids+=("$go_pid")
}
# wait_go_build LOG: waits for the last start_go_build, shows its log, and ends the run if it failed.
wait_go_build() {
  wait "$go_pid"
  local rc=$?
  cat "$1"
  if [ "$rc" -ne 0 ]; then
    echo "$passed passed, $((failed + 1)) failed"
    echo "test.sh: building the Go components failed"
    exit 1
  fi
}
kube_log="$BUILD_DIR/build-go-tools.log"
prometheus_log="$BUILD_DIR/build-go-prometheus.log"
say "Building the Kubernetes control plane, etcd and helm from their pinned Go modules, in the background at idle priority (log: ${kube_log#"$ROOT"/})"
start_go_build "$kube_log" kube etcd helm

say "Installing dependencies (Debian packages; idempotent)"
bash "$ROOT/scripts/install-deps.sh" debian || { echo "test.sh: installing Debian packages failed"; exit 1; }

passed=0
failed=0

# Counted as one test: a misformatted file fails the run, but everything else still runs.
say "Checking that the C++/CUDA sources match .clang-format"
if bash "$ROOT/scripts/check-format.sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# The build's CUDA toolkit comes from the CUDA wheels where /usr/local/cuda is missing.
say "Installing the Python venv and the CUDA wheels"
bash "$ROOT/scripts/install-deps.sh" python || { echo "0 passed, 1 failed"; echo "test.sh: installing the Python venv or CUDA wheels failed"; exit 1; }

MODELFLEET_GO_TOOLS=background build_tree || { echo "0 passed, 1 failed"; echo "test.sh: the build failed"; exit 1; }

log_dir="$BUILD_DIR/test-logs"
mkdir -p "$log_dir"

say "Running ctest (unit, sanitized and fuzz-corpus tests; each has a timeout)"
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600) 2>&1 | tee "$log_dir/ctest.log"
summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log_dir/ctest.log" | tail -1)
if [ -n "$summary" ]; then
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
  bad=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$summary")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
else
  echo "test.sh: ctest printed no summary"
  failed=$((failed + 1))
fi

# run_pytest LOG ARGS...: one pytest run (ARGS: what to collect, markers); adds its counts to
# passed/failed.
run_pytest() {
  local log=$1
  shift
  (cd "$ROOT" && "$PYTHON" -m pytest -p no:cacheprovider -o timeout=300 -q -rfE --durations=12 "$@") 2>&1 |
    tee "$log"
  local line p f
  line=$(grep -E '[0-9]+ (passed|failed|errors?)\b.* in [0-9.]+s' "$log" | tail -1)
  p=$(grep -oE '[0-9]+ passed' <<<"$line" | awk '{s+=$1} END {print s+0}')
  f=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$line" | awk '{s+=$1} END {print s+0}')
  if [ -z "$line" ]; then
    echo "test.sh: pytest printed no summary"
    f=1
  fi
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
}

export MODELFLEET_BUILD_DIR="$BUILD_DIR"
say "Running the end-to-end tests that need no cluster (pytest on $PYTHON, real clients against real processes)"
MODELFLEET_GO_BUILDING="kube-apiserver kube-controller-manager kube-scheduler etcd helm prometheus" \
  run_pytest "$log_dir/pytest.log" tests/e2e -m "not go_components and not tensorflow_in_process"

say "Waiting for the control plane, etcd and helm"
wait_go_build "$kube_log"

say "Building Prometheus from its pinned Go module, in the background at idle priority (log: ${prometheus_log#"$ROOT"/})"
start_go_build "$prometheus_log" prometheus

say "Running the end-to-end tests on the local cluster (those that need Prometheus last, once it is built)"
MODELFLEET_GO_AWAIT="prometheus=$prometheus_log.status" \
  run_pytest "$log_dir/pytest-cluster.log" tests/e2e -m "go_components and not tensorflow_in_process"
say "Waiting for Prometheus (built by now, unless no test needed it)"
wait_go_build "$prometheus_log"
trap - EXIT
# These import TensorFlow itself, which cannot share a process with the generated TF Serving stubs.
say "Running the tests that import TensorFlow, in a pytest process of their own"
run_pytest "$log_dir/pytest-tensorflow.log" tests/e2e/test_training_tf.py -m tensorflow_in_process

say "Finished in $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
