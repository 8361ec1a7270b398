#!/usr/bin/env bash
# What modelfleet-router adds to a request: wrk straight at an upstream (bench/http's
# http_bench_server, one io thread) against wrk through the router to two such upstreams (a
# 70/30 weighted split over keep-alive pooled connections). Rounds alternate between the two paths
# and the median is reported, since the machine is shared; besides requests/s and latency the
# table shows the router's own CPU time per request (user + system from /proc), which stays
# meaningful when other load competes for the cores.
# Usage: bench/router/run.sh [seconds per run (10)] [connections (32)] [rounds (3)]
# Env: MODELFLEET_BUILD_DIR (build), ROUTER_THREADS (1: io and upstream threads each), WRK_THREADS (1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${1:-10}"
CONNECTIONS="${2:-32}"
ROUNDS="${3:-3}"
WRK_THREADS="${WRK_THREADS:-1}"
ROUTER_THREADS="${ROUTER_THREADS:-1}"
BUILD_DIR="${MODELFLEET_BUILD_DIR:-$ROOT/build}"

command -v wrk >/dev/null || { echo "run.sh needs wrk on PATH" >&2; exit 1; }
ninja -C "$BUILD_DIR" modelfleet-router http_bench_server >/dev/null
ROUTER="$BUILD_DIR/server/router/modelfleet-router"
UPSTREAM="$BUILD_DIR/bench/http/http_bench_server"

TMP="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "nothing listens on port $1" >&2
  return 1
}

UP1="$(free_port)"; UP2="$(free_port)"
"$UPSTREAM" --port "$UP1" --threads 1 --log_level warning >/dev/null & PIDS+=($!); UP1_PID=$!
"$UPSTREAM" --port "$UP2" --threads 1 --log_level warning >/dev/null & PIDS+=($!)
wait_port "$UP1"; wait_port "$UP2"

cat >"$TMP/router.yaml" <<YAML
model: bench
versions:
- {name: v1, weight: 70, endpoints: ["127.0.0.1:$UP1"]}
- {name: v2, weight: 30, endpoints: ["127.0.0.1:$UP2"]}
YAML
RP="$(free_port)"; AP="$(free_port)"
"$ROUTER" --config="$TMP/router.yaml" --rest-port="$RP" --admin-port="$AP" --grpc-port=0 \
  --io-threads="$ROUTER_THREADS" --upstream-threads="$ROUTER_THREADS" --log-level=warning & PIDS+=($!)
ROUTER_PID=$!
wait_port "$RP"
curl -sf "http://127.0.0.1:$RP/" >/dev/null || { echo "the router does not answer" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US="$(echo "1000000 / $(getconf CLK_TCK)" | bc -l)"

measure() {  # $1: port, $2: pid whose CPU to charge -> "requests/s p50-ms p99-ms cpu-us-per-request"
  local before after out
  before="$(cpu_ticks "$2")"
  out="$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$1/")"
  after="$(cpu_ticks "$2")"
  echo "$out" | awk -v ticks="$((after - before))" -v tick_us="$TICK_US" '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /requests in/ {total = $1}
    /Requests\/sec/ {rps = $2}
    $1 == "50%" {p50 = ms($2)}
    $1 == "99%" {p99 = ms($2)}
    END {printf "%s %.3f %.3f %.2f\n", rps, p50, p99, ticks * tick_us / total}'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RPS=() P50=() P99=() CPU=()
for round in $(seq 1 "$ROUNDS"); do
  for path in direct router; do
    if [ "$path" = direct ]; then read -r r a b c <<<"$(measure "$UP1" "$UP1_PID")";
    else read -r r a b c <<<"$(measure "$RP" "$ROUTER_PID")"; fi
    RPS[$path]+="$r "; P50[$path]+="$a "; P99[$path]+="$b "; CPU[$path]+="$c "
    echo "round $round: $path $r req/s, p50 $a ms, p99 $b ms, $c us CPU/request" >&2
  done
done
med_of() { echo "$1" | tr ' ' '\n' | grep . | median; }
echo
echo "wrk -t$WRK_THREADS -c$CONNECTIONS, ${DURATION}s per run, median of $ROUNDS rounds, router threads $ROUTER_THREADS+$ROUTER_THREADS, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %12s %9s %9s %22s\n' "path" "requests/s" "p50 ms" "p99 ms" "CPU us/request"
printf '%-44s %12.0f %9.3f %9.3f %22s\n' "direct to one upstream (1 io thread)" "$(med_of "${RPS[direct]}")" \
  "$(med_of "${P50[direct]}")" "$(med_of "${P99[direct]}")" "$(med_of "${CPU[direct]}") (upstream)"
printf '%-44s %12.0f %9.3f %9.3f %22s\n' "through the router to two upstreams, 70/30" "$(med_of "${RPS[router]}")" \
  "$(med_of "${P50[router]}")" "$(med_of "${P99[router]}")" "$(med_of "${CPU[router]}") (router)"
