#!/usr/bin/env bash
# Runs every test: installs dependencies, checks the C++ format, builds the one build tree, runs
# ctest (unit tests, ASan+UBSan tests of the parsers, fuzz corpus replays) and the pytest
# end-to-end suites.
# Ends with one line "N passed, N failed" and a non-zero exit on any failure.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
start=$(date +%s)

# The Go components need only the machine's Go: they build in the background from the start,
# beside the Debian packages' install (mostly downloads and unpacking), the Python venv's and the
# C++ build. Their output goes to a log, shown when they are done.
mkdir -p "$BUILD_DIR"
go_log="$BUILD_DIR/build-go-tools.log"
say "Building the Kubernetes control plane, etcd, helm and Prometheus from their pinned Go modules, in the background (log: ${go_log#"$ROOT"/})"
setsid bash "$ROOT/scripts/build-go-tools.sh" >"$go_log" 2>&1 &
go_pid=$!
trap 'kill -- -"$go_pid" 2>/dev/null' EXIT  # an early exit leaves no go build behind

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

say "Waiting for the Go components"
wait "$go_pid"
go_rc=$?
cat "$go_log"
[ "$go_rc" -eq 0 ] || { echo "0 passed, 1 failed"; echo "test.sh: building the Go components failed"; exit 1; }

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

if compgen -G "$ROOT/tests/e2e/test_*.py" >/dev/null; then
  say "Running the end-to-end suites (pytest on $PYTHON, real clients against real processes)"
  export MODELFLEET_BUILD_DIR="$BUILD_DIR"
  run_pytest "$log_dir/pytest.log" tests/e2e -m "not tensorflow_in_process"
  # These import TensorFlow itself, which cannot share a process with the generated TF Serving stubs.
  say "Running the tests that import TensorFlow, in a pytest process of their own"
  run_pytest "$log_dir/pytest-tensorflow.log" tests/e2e/test_training_tf.py -m tensorflow_in_process
fi

say "Finished in $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
