#!/usr/bin/env bash
# Runs every test: installs dependencies, checks the C++ format, builds the one build tree, runs
# ctest (unit tests, ASan+UBSan tests of the parsers, fuzz corpus replays) and the pytest
# end-to-end suites.
# Ends with one line "N passed, N failed" and a non-zero exit on any failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
start=$(date +%s)

# The work is ordered so that the two cores are never idle while anything is left to do:
# - the Go components (the control plane, etcd and helm from the start; Prometheus once the cluster
#   tests begin) and the C++ programs the end-to-end suites start build side by side, sharing the
#   cores: the cluster tests need both;
# - the rest of the C++ build (unit tests, sanitized tests, fuzz replays, benches) starts once those
#   programs are built, at the lowest priority, so it takes only the CPU the end-to-end tests leave
#   while they wait on processes and the cluster. ctest runs once it is done.
# Each background job runs in a session of its own (so an early exit can kill all of it), and with
# the kernel's autogroups each session is scheduled as one group, fairly against the others,
# whatever its processes' nice values or policies: the lowest priority is set on the group itself
# (/proc/self/autogroup), with nice 19 and SCHED_IDLE for kernels without autogroups.
# The tests that need a Go component are marked (go_components, prometheus_server) and run after it
# is built: Prometheus's last, waiting for it (MODELFLEET_GO_AWAIT). Each background job's output
# goes to a log, shown when it is done, and its exit status to LOG.status.
mkdir -p "$BUILD_DIR"
background_pids=()
trap 'for pid in "${background_pids[@]}"; do kill -- -"$pid" 2>/dev/null; done' EXIT  # an early exit leaves no build behind
# start_background LOG normal|lowest COMMAND...: COMMAND in a session of its own at that priority,
# writing its output to LOG and its exit status to LOG.status; its pid in last_pid.
start_background() {
  local log=$1 priority=$2
  shift 2
  rm -f "$log.status"
  setsid bash -c '
    if [ "$2" = lowest ]; then
      echo 19 >/proc/self/autogroup 2>/dev/null
      renice -n 19 -p $$ >/dev/null
      chrt --idle -p 0 $$ 2>/dev/null
    fi
    "${@:3}" >"$1" 2>&1; rc=$?; echo "$rc" >"$1.status"; exit "$rc"' _ "$log" "$priority" "$@" &
  last_pid=$!
  background_pids+=("$last_pid")
}
# wait_background PID LOG: waits for it and shows its log; returns its exit status.
wait_background() {
  wait "$1"
  local rc=$?
  cat "$2"
  return "$rc"
}
# wait_go_build PID LOG: wait_background, ending the run if the Go build failed.
wait_go_build() {
  if ! wait_background "$1" "$2"; then
    echo "$passed passed, $((failed + 1)) failed"
    echo "test.sh: building the Go components failed"
    exit 1
  fi
}
kube_log="$BUILD_DIR/build-go-tools.log"
prometheus_log="$BUILD_DIR/build-go-prometheus.log"
say "Building the Kubernetes control plane, etcd and helm from their pinned Go modules, in the background (log: ${kube_log#"$ROOT"/})"
start_background "$kube_log" normal bash "$ROOT/scripts/build-go-tools.sh" kube etcd helm
kube_pid=$last_pid

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

MODELFLEET_GO_TOOLS=background build_tree mf_e2e_programs ||
  { echo "0 passed, 1 failed"; echo "test.sh: the build failed"; exit 1; }
rest_log="$BUILD_DIR/build-rest.log"
say "Building the rest (unit tests, sanitized tests, fuzz replays, benches) in the background at the lowest priority (log: ${rest_log#"$ROOT"/})"
start_background "$rest_log" lowest cmake --build "$BUILD_DIR" -j "$(nproc)"
rest_pid=$last_pid

log_dir="$BUILD_DIR/test-logs"
mkdir -p "$log_dir"

# run_ctest: once the rest of the build is done, ctest over the whole tree; adds its counts to
# passed/failed.
run_ctest() {
  say "Waiting for the rest of the build"
  wait "$rest_pid"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$rest_log"
    echo "test.sh: the build failed"
    failed=$((failed + 1))
    return
  fi
  tail -n 3 "$rest_log"
  say "Running ctest (unit, sanitized and fuzz-corpus tests; each has a timeout)"
  (cd "$BUILD_DIR" && ctest --output-on-failure -j "$(nproc)" --timeout 600) 2>&1 | tee "$log_dir/ctest.log"
  local summary total bad
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
}

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
wait_go_build "$kube_pid" "$kube_log"

say "Building Prometheus from its pinned Go module, in the background (log: ${prometheus_log#"$ROOT"/})"
start_background "$prometheus_log" normal bash "$ROOT/scripts/build-go-tools.sh" prometheus
prometheus_pid=$last_pid

say "Running the end-to-end tests on the local cluster (those that need Prometheus last, once it is built)"
MODELFLEET_GO_AWAIT="prometheus=$prometheus_log.status" \
  run_pytest "$log_dir/pytest-cluster.log" tests/e2e -m "go_components and not tensorflow_in_process"
say "Waiting for Prometheus (built by now, unless no test needed it)"
wait_go_build "$prometheus_pid" "$prometheus_log"

run_ctest
trap - EXIT
# These import TensorFlow itself, which cannot share a process with the generated TF Serving stubs.
say "Running the tests that import TensorFlow, in a pytest process of their own"
run_pytest "$log_dir/pytest-tensorflow.log" tests/e2e/test_training_tf.py -m tensorflow_in_process

say "Finished in $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
