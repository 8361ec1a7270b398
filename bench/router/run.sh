#!/usr/bin/env bash
# What modelfleet-router adds to a request, REST and gRPC, against the same backends reached
# directly and through nginx as a weighted proxy. One run measures, in alternating rounds (the
# machine is shared; medians are reported):
#   REST: wrk straight at one backend (bench/http's http_bench_server, one io thread), through the
#         router to two of them (70/30), through nginx to the same two (weight=7/3, keepalive);
#   gRPC: h2load unary calls (a framed 16-byte message, content-type application/grpc, te:
#         trailers) straight at one backend (grpc_bench_server, one io thread), through the
#         router's gRPC port, through nginx (http2 + grpc_pass, keepalive).
# Besides requests/s and p50/p99 (added over direct), the proxy's own CPU per request from /proc
# (user + system), which stays meaningful when other load competes for the cores.
#
# Layout: the load generator, the proxy and the backends are pinned with taskset so that the
# router and nginx compete for the same cores in the same way: CLIENT_CPUS (default 0),
# PROXY_CPUS (1), BACKEND_CPUS (2-3 with 4+ cores, else 1). The router runs one client io thread
# and one upstream io thread (ROUTER_THREADS), nginx one worker (NGINX_WORKERS).
# Usage: bench/router/run.sh [seconds per run (5)] [REST connections (32)] [rounds (3)]
# Env: MODELFLEET_BUILD_DIR (build), ROUTER_BINARY (another modelfleet-router to measure, e.g. an
# older build), GRPC_CONNECTIONS (8), GRPC_STREAMS per connection (4), WRK_THREADS (1),
# MODELFLEET_BENCH_BIN (a folder holding modelfleet-router, http_bench_server and
# grpc_bench_server already built: nothing is built then; scripts/device-run.sh router uses it on a
# machine with more cores).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${1:-5}"
CONNECTIONS="${2:-32}"
ROUNDS="${3:-3}"
GRPC_CONNECTIONS="${GRPC_CONNECTIONS:-8}"
GRPC_STREAMS="${GRPC_STREAMS:-4}"
ROUTER_THREADS="${ROUTER_THREADS:-1}"
NGINX_WORKERS="${NGINX_WORKERS:-1}"
WRK_THREADS="${WRK_THREADS:-1}"
BUILD_DIR="${MODELFLEET_BUILD_DIR:-$ROOT/build}"
CORES="$(nproc)"
CLIENT_CPUS="${CLIENT_CPUS:-0}"
PROXY_CPUS="${PROXY_CPUS:-1}"
if [ -z "${BACKEND_CPUS:-}" ]; then BACKEND_CPUS=$([ "$CORES" -ge 4 ] && echo 2-3 || echo 1); fi

for tool in wrk h2load nginx taskset; do
  command -v "$tool" >/dev/null || { echo "run.sh needs $tool on PATH" >&2; exit 1; }
done
if [ -n "${MODELFLEET_BENCH_BIN:-}" ]; then
  ROUTER="${ROUTER_BINARY:-$MODELFLEET_BENCH_BIN/modelfleet-router}"
  REST_BACKEND="$MODELFLEET_BENCH_BIN/http_bench_server"
  GRPC_BACKEND="$MODELFLEET_BENCH_BIN/grpc_bench_server"
else
  ninja -C "$BUILD_DIR" modelfleet-router http_bench_server grpc_bench_server >/dev/null
  ROUTER="${ROUTER_BINARY:-$BUILD_DIR/server/router/modelfleet-router}"
  REST_BACKEND="$BUILD_DIR/bench/http/http_bench_server"
  GRPC_BACKEND="$BUILD_DIR/bench/router/grpc_bench_server"
fi

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

R1="$(free_port)"; R2="$(free_port)"; G1="$(free_port)"; G2="$(free_port)"
taskset -c "$BACKEND_CPUS" "$REST_BACKEND" --port "$R1" --threads 1 --log_level warning >/dev/null & PIDS+=($!); R1_PID=$!
taskset -c "$BACKEND_CPUS" "$REST_BACKEND" --port "$R2" --threads 1 --log_level warning >/dev/null & PIDS+=($!)
taskset -c "$BACKEND_CPUS" "$GRPC_BACKEND" --port "$G1" --threads 1 >/dev/null & PIDS+=($!); G1_PID=$!
taskset -c "$BACKEND_CPUS" "$GRPC_BACKEND" --port "$G2" --threads 1 >/dev/null & PIDS+=($!)
for p in "$R1" "$R2" "$G1" "$G2"; do wait_port "$p"; done

cat >"$TMP/router.yaml" <<YAML
model: bench
versions:
- {name: v1, weight: 70, endpoints: ["127.0.0.1:$R1"], grpcEndpoints: ["127.0.0.1:$G1"]}
- {name: v2, weight: 30, endpoints: ["127.0.0.1:$R2"], grpcEndpoints: ["127.0.0.1:$G2"]}
YAML
RP="$(free_port)"; RG="$(free_port)"; AP="$(free_port)"
taskset -c "$PROXY_CPUS" "$ROUTER" --config="$TMP/router.yaml" --rest-port="$RP" --grpc-port="$RG" --admin-port="$AP" \
  --io-threads="$ROUTER_THREADS" --upstream-threads="$ROUTER_THREADS" --log-level=warning & PIDS+=($!)
ROUTER_PID=$!

NP="$(free_port)"; NG="$(free_port)"
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<CONF
worker_processes $NGINX_WORKERS;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  # Temporary files under the run's folder, not the compiled-in /var/lib/nginx (absent where
  # nginx is not installed, e.g. scripts/device-run.sh router).
  client_body_temp_path $TMP/nginx/body; proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi; uwsgi_temp_path $TMP/nginx/uwsgi; scgi_temp_path $TMP/nginx/scgi;
  # nginx closes a keep-alive connection after 1000 requests by default (client side, upstream
  # side, and HTTP/2 with a GOAWAY that h2load does not reconnect after): lifted, as the router
  # has no such limit.
  keepalive_requests 100000000;
  upstream rest {
    server 127.0.0.1:$R1 weight=7; server 127.0.0.1:$R2 weight=3;
    keepalive 64; keepalive_requests 100000000;
  }
  upstream grpcb {
    server 127.0.0.1:$G1 weight=7; server 127.0.0.1:$G2 weight=3;
    keepalive 64; keepalive_requests 100000000;
  }
  server {
    listen 127.0.0.1:$NP;
    location / { proxy_pass http://rest; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:$NG http2;
    location / { grpc_pass grpc://grpcb; }
  }
}
CONF
taskset -c "$PROXY_CPUS" nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" -e "$TMP/nginx/error.log" & PIDS+=($!)
NGINX_MASTER=$!
for p in "$RP" "$RG" "$NP" "$NG"; do wait_port "$p"; done
NGINX_WORKER_PIDS="$(pgrep -P "$NGINX_MASTER" | tr '\n' ' ')"
[ -n "$NGINX_WORKER_PIDS" ] || { echo "no nginx worker found" >&2; exit 1; }
curl -sf "http://127.0.0.1:$RP/" >/dev/null || { echo "the router does not answer" >&2; exit 1; }
curl -sf "http://127.0.0.1:$NP/" >/dev/null || { echo "nginx does not answer" >&2; exit 1; }

printf '\x00\x00\x00\x00\x10aaaaaaaaaaaaaaaa' >"$TMP/call.bin"  # one uncompressed 16-byte message

cpu_ticks() { local t=0 pid; for pid in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$t"; }
TICK_US="$(echo "1000000 / $(getconf CLK_TCK)" | bc -l)"

# $1: rest|grpc, $2: port, $3...: pids whose CPU to charge -> "requests/s p50-ms p99-ms cpu-us-per-request"
measure() {
  local kind="$1" port="$2"; shift 2
  local before after
  before="$(cpu_ticks "$@")"
  if [ "$kind" = rest ]; then
    local out
    out="$(taskset -c "$CLIENT_CPUS" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/")"
    after="$(cpu_ticks "$@")"
    echo "$out" | awk -v ticks="$((after - before))" -v tick_us="$TICK_US" '
      function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
      /requests in/ {total = $1}
      /Requests\/sec/ {rps = $2}
      $1 == "50%" {p50 = ms($2)}
      $1 == "99%" {p99 = ms($2)}
      END {printf "%.0f %.3f %.3f %.2f\n", rps, p50, p99, ticks * tick_us / total}'
  else
    rm -f "$TMP/h2.log"
    taskset -c "$CLIENT_CPUS" h2load -D "$DURATION" -c "$GRPC_CONNECTIONS" -m "$GRPC_STREAMS" -d "$TMP/call.bin" \
      -H 'content-type: application/grpc' -H 'te: trailers' --log-file="$TMP/h2.log" \
      "http://127.0.0.1:$port/bench.Bench/Call" >/dev/null
    after="$(cpu_ticks "$@")"
    awk '$2 == 200 {print $3}' "$TMP/h2.log" | sort -n | awk -v ticks="$((after - before))" -v tick_us="$TICK_US" \
      -v seconds="$DURATION" -v all="$(wc -l <"$TMP/h2.log")" '
      {v[NR] = $1}
      END {
        if (NR < all) { printf "h2load: %d of %d calls did not answer 200\n", all - NR, all > "/dev/stderr" }
        printf "%.0f %.3f %.3f %.2f\n", NR / seconds, v[int(NR * 0.5)] / 1000, v[int(NR * 0.99)] / 1000,
               ticks * tick_us / NR }'
  fi
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RPS=() P50=() P99=() CPU=()
PATHS=(rest-direct rest-router rest-nginx grpc-direct grpc-router grpc-nginx)
for round in $(seq 1 "$ROUNDS"); do
  for path in "${PATHS[@]}"; do
    case "$path" in
      rest-direct) args=(rest "$R1" "$R1_PID") ;;
      rest-router) args=(rest "$RP" "$ROUTER_PID") ;;
      rest-nginx) args=(rest "$NP" $NGINX_WORKER_PIDS) ;;
      grpc-direct) args=(grpc "$G1" "$G1_PID") ;;
      grpc-router) args=(grpc "$RG" "$ROUTER_PID") ;;
      grpc-nginx) args=(grpc "$NG" $NGINX_WORKER_PIDS) ;;
    esac
    read -r r a b c <<<"$(measure "${args[@]}")"
    RPS[$path]+="$r "; P50[$path]+="$a "; P99[$path]+="$b "; CPU[$path]+="$c "
    echo "round $round: $path $r req/s, p50 $a ms, p99 $b ms, $c us CPU/request" >&2
  done
done
# By code: a call h2load itself cancels as a run ends counts as CANCELLED.
grpc_not_ok="$(curl -s "http://127.0.0.1:$AP/metrics" |
  awk '/^modelfleet_router_requests_total/ && /protocol="grpc"/ && !/code="OK"/ {
         match($0, /code="[^"]*"/); code = substr($0, RSTART + 6, RLENGTH - 7); n[code] += $2; total += $2 }
       END { s = total + 0; for (c in n) s = s " " c "=" n[c]; print s }')"

med_of() { echo "$1" | tr ' ' '\n' | grep . | median; }
echo
echo "$(date -u +%Y-%m-%d) wrk -t$WRK_THREADS -c$CONNECTIONS / h2load -c$GRPC_CONNECTIONS -m$GRPC_STREAMS, ${DURATION}s per run," \
  "median of $ROUNDS rounds; $CORES cores, load $(cut -d' ' -f1-3 /proc/loadavg); cpus: client $CLIENT_CPUS," \
  "proxy $PROXY_CPUS, backends $BACKEND_CPUS; router threads $ROUTER_THREADS+$ROUTER_THREADS, nginx workers $NGINX_WORKERS"
printf '| %-26s | %10s | %8s | %8s | %9s | %9s | %9s | %13s |\n' path "requests/s" "p50 ms" "p99 ms" "added p50" \
  "added p99" "vs direct" "CPU us/req"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' ---------------------------- ------------ ---------- ---------- ----------- \
  ----------- ----------- ---------------
for proto in rest grpc; do
  d_rps="$(med_of "${RPS[$proto-direct]}")"; d50="$(med_of "${P50[$proto-direct]}")"; d99="$(med_of "${P99[$proto-direct]}")"
  for via in direct router nginx; do
    path="$proto-$via"
    rps="$(med_of "${RPS[$path]}")"; p50="$(med_of "${P50[$path]}")"; p99="$(med_of "${P99[$path]}")"
    who=$([ "$via" = direct ] && echo backend || echo "$via")
    printf '| %-26s | %10.0f | %8.3f | %8.3f | %9s | %9s | %9s | %13s |\n' "$proto via $via" "$rps" "$p50" "$p99" \
      "$([ "$via" = direct ] && echo - || printf '%+.3f' "$(echo "$p50 - $d50" | bc -l)")" \
      "$([ "$via" = direct ] && echo - || printf '%+.3f' "$(echo "$p99 - $d99" | bc -l)")" \
      "$(printf '%.0f %%' "$(echo "100 * $rps / $d_rps" | bc -l)")" "$(med_of "${CPU[$path]}") ($who)"
  done
  r_rps="$(med_of "${RPS[$proto-router]}")"; n_rps="$(med_of "${RPS[$proto-nginx]}")"
  echo "$proto: router/nginx requests/s $(printf '%.2f' "$(echo "$r_rps / $n_rps" | bc -l)")," \
    "CPU per request router/nginx $(printf '%.2f' "$(echo "$(med_of "${CPU[$proto-router]}") / $(med_of "${CPU[$proto-nginx]}")" | bc -l)")"
done
echo "gRPC calls the router answered with a status other than OK: $grpc_not_ok"
