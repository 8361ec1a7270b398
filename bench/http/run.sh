#!/usr/bin/env bash
# Requests/s of mf::http (bench/http/http_bench_server) against nginx (1 worker, access log off,
# the same 13-byte body) for a small fixed response, measured with wrk in the same run.
# Rounds alternate between the peers and the median of each is reported, since the machine is
# shared. Besides requests/s the table shows each server's CPU time per request (user + system,
# from /proc), which stays meaningful when other load competes for the cores. Usage: bench/http/run.sh [seconds per run (10)] [connections (64)] [rounds (3)]
# Env: WRK_THREADS (1), MODELFLEET_BUILD_DIR (build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/lib.sh"
DURATION="${1:-10}"
CONNECTIONS="${2:-64}"
ROUNDS="${3:-3}"
WRK_THREADS="${WRK_THREADS:-1}"

for tool in nginx wrk; do
  command -v "$tool" >/dev/null || { echo "run.sh needs $tool on PATH" >&2; exit 1; }
done
build_tree http_bench_server >/dev/null
SERVER="$BUILD_DIR/bench/http/http_bench_server"

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

NGINX_PORT="$(free_port)"
mkdir -p "$TMP/nginx/logs"
cat >"$TMP/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location = / { default_type "text/plain; charset=utf-8"; return 200 "hello, world\n"; }
  }
}
CONF
nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' &
NGINX_MASTER=$!
PIDS+=($NGINX_MASTER)
wait_port "$NGINX_PORT"
NGINX_WORKER="$(pgrep -P "$NGINX_MASTER" | head -1)"

start_ours() {  # $1: io threads; sets OURS_PORT
  OURS_PORT="$(free_port)"
  "$SERVER" --port "$OURS_PORT" --threads "$1" --log_level warning >/dev/null &
  OURS_PID=$!
  PIDS+=($OURS_PID)
  wait_port "$OURS_PORT"
}
start_ours 1; PORT_1="$OURS_PORT"; PID_1="$OURS_PID"
start_ours 2; PORT_2="$OURS_PORT"; PID_2="$OURS_PID"

# Same bytes check: both bodies must be identical.
[ "$(curl -s "http://127.0.0.1:$NGINX_PORT/")" = "$(curl -s "http://127.0.0.1:$PORT_1/")" ] ||
  { echo "nginx and our server answer different bodies" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # user + system, in clock ticks
TICK_US="$(echo "1000000 / $(getconf CLK_TCK)" | bc -l)"

measure() {  # $1: port, $2: server pid -> "requests/s cpu-microseconds-per-request"
  local before after out
  before="$(cpu_ticks "$2")"
  out="$(wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" "http://127.0.0.1:$1/")"
  after="$(cpu_ticks "$2")"
  echo "$out" | awk -v ticks="$((after - before))" -v tick_us="$TICK_US" '
    /requests in/ {total = $1}
    /Requests\/sec/ {rps = $2}
    END {printf "%s %.2f\n", rps, ticks * tick_us / total}'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RPS=() CPU=()
for round in $(seq 1 "$ROUNDS"); do
  for peer in nginx ours1 ours2; do
    case $peer in
      nginx) port=$NGINX_PORT pid=$NGINX_WORKER ;;
      ours1) port=$PORT_1 pid=$PID_1 ;;
      ours2) port=$PORT_2 pid=$PID_2 ;;
    esac
    read -r r c <<<"$(measure "$port" "$pid")"
    RPS[$peer]+="$r "
    CPU[$peer]+="$c "
    echo "round $round: $peer $r req/s, $c us CPU/request" >&2
  done
done

med_of() { echo "$1" | tr ' ' '\n' | grep . | median; }
NGINX_RPS="$(med_of "${RPS[nginx]}")"
NGINX_CPU="$(med_of "${CPU[nginx]}")"
echo
echo "wrk -t$WRK_THREADS -c$CONNECTIONS, ${DURATION}s per run, median of $ROUNDS rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-32s %12s %9s %16s %9s\n' "server" "requests/s" "vs nginx" "CPU us/request" "vs nginx"
for peer in nginx ours1 ours2; do
  case $peer in
    nginx) label="nginx $(nginx -v 2>&1 | sed 's|.*/||'), 1 worker" ;;
    ours1) label="mf::http, 1 io thread" ;;
    ours2) label="mf::http, 2 io threads" ;;
  esac
  rps="$(med_of "${RPS[$peer]}")"
  cpu="$(med_of "${CPU[$peer]}")"
  # CPU ratio as nginx/ours, so that above 1.00x means cheaper than nginx, like the rps column.
  printf '%-32s %12.0f %8.2fx %16.2f %8.2fx\n' "$label" "$rps" "$(echo "$rps / $NGINX_RPS" | bc -l)" \
    "$cpu" "$(echo "$NGINX_CPU / $cpu" | bc -l)"
done
