#!/usr/bin/env bash
# How long `modelfleet-local up` takes from nothing (a fresh data directory: new CA and
# certificates, an empty etcd) until its kubeconfig is written (the API answers and the node is
# Ready), and how long a SIGTERM takes to stop everything. Prints a table over N rounds.
#   bench/local/cluster_start.sh [rounds]
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
rounds=${1:-5}
binary="$BUILD_DIR/tools/local/modelfleet-local"
[ -x "$binary" ] || { echo "build it first: source scripts/lib.sh && build_tree modelfleet-local"; exit 1; }
work=$(mktemp -d /tmp/modelfleet-bench.XXXXXX)
trap 'pkill -f "up --data-dir $work" || true; rm -rf "$work"' EXIT
now() { date +%s.%N; }
printf '%-6s %10s %10s\n' round "up (s)" "stop (s)"
for i in $(seq 1 "$rounds"); do
  dir="$work/$i"
  start=$(now)
  "$binary" up --data-dir "$dir" --port 0 --log-level warning >"$work/$i.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 1200); do [ -f "$dir/kubeconfig" ] && break; kill -0 "$pid" || break; sleep 0.05; done
  [ -f "$dir/kubeconfig" ] || { cat "$work/$i.log"; exit 1; }
  ready=$(now)
  kill "$pid"
  wait "$pid" || true
  stopped=$(now)
  printf '%-6s %10.2f %10.2f\n' "$i" "$(echo "$ready - $start" | bc)" "$(echo "$stopped - $ready" | bc)"
done
