#!/usr/bin/env bash
# How libgomp's spinning between parallel regions (GOMP_SPINCOUNT) changes the runtime's latency,
# on a quiet machine and with HOGS busy processes competing for the cores. For each model: the
# mean of modelfleet-run's timed runs under the libgomp default (300,000 spins), 10,000 spins
# (what the server image and the operator's pods set) and OMP_WAIT_POLICY=passive (no spinning),
# alternating settings per round.
# Usage: bench/runtime/openmp_spin.sh [hogs (0)] [rounds (2)]   (env MODELFLEET_BUILD_DIR)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HOGS="${1:-0}"
ROUNDS="${2:-2}"
BUILD_DIR="${MODELFLEET_BUILD_DIR:-$ROOT/build}"
RUN="$BUILD_DIR/tools/run/modelfleet-run"
PY="$ROOT/.cache/venv/bin/python"
WORK="$(mktemp -d)"
HOG_PIDS=()
cleanup() { for p in "${HOG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

echo "exporting the models (tests/e2e/runtime_fixtures.py) ..."
(cd "$ROOT/tests/e2e" && "$PY" - "$WORK" <<'PY' 2>/dev/null
import pathlib, sys
import numpy as np
import runtime_fixtures as rf
out = pathlib.Path(sys.argv[1])
for name, batch in [("mlp", 64), ("resnet18", 1), ("mobilenet_v2", 1), ("bert_encoder", 1)]:
    rf.export(name, out)
    x, _ = rf.reference(name, batch)
    np.save(out / f"{name}.npy", x)
PY
)
for ((i = 0; i < HOGS; i++)); do yes >/dev/null & HOG_PIDS+=($!); done

mean_ms() {  # env-assignment model iterations
  env "$1" "$RUN" "$WORK/$2.onnx" --input "$WORK/$2.npy" --iterations "$3" --warmup 5 --threads 2 --show 0 2>&1 |
    grep -oE 'mean [0-9.]+ ms' | grep -oE '[0-9.]+'
}
SETTINGS=("MF_DEFAULT=1" "GOMP_SPINCOUNT=10000" "OMP_WAIT_POLICY=passive")
echo "$(nproc) cores, $HOGS hog(s), $ROUNDS round(s); best round's mean ms per setting"
echo
echo "| model | default (300,000 spins) | GOMP_SPINCOUNT=10000 | OMP_WAIT_POLICY=passive |"
echo "|---|---|---|---|"
for spec in "mlp 300" "resnet18 20" "mobilenet_v2 40" "bert_encoder 60"; do
  set -- $spec
  declare -A best=()
  for ((r = 0; r < ROUNDS; r++)); do
    for s in "${SETTINGS[@]}"; do
      ms="$(mean_ms "$s" "$1" "$2")"
      if [[ -z "${best[$s]:-}" ]] || awk -v a="$ms" -v b="${best[$s]}" 'BEGIN{exit !(a < b)}'; then best[$s]="$ms"; fi
    done
  done
  echo "| $1 | ${best[MF_DEFAULT=1]} | ${best[GOMP_SPINCOUNT=10000]} | ${best[OMP_WAIT_POLICY=passive]} |"
  unset best
done
