#!/usr/bin/env bash
# Requests/s of mf::http (bench/http/http_bench_server) against nginx (1 worker, access log off,
# the same 13-byte body) for a small fixed response, measured with wrk in the same run.
# Rounds alternate between the peers and the median of each is reported, since the machine is
# shared. Usage: bench/http/run.sh [seconds per run (10)] [connections (64)] [rounds (3)]
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
PIDS+=($!)
wait_port "$NGINX_PORT"

start_ours() {  # $1: io threads; sets OURS_PORT
  OURS_PORT="$(free_port)"
  "$SERVER" --port "$OURS_PORT" --threads "$1" --log_level warning >/dev/null &
  PIDS+=($!)
  wait_port "$OURS_PORT"
}
start_ours 1; PORT_1="$OURS_PORT"
start_ours 2; PORT_2="$OURS_PORT"

# Same bytes check: both bodies must be identical.
[ "$(curl -s "http://127.0.0.1:$NGINX_PORT/")" = "$(curl -s "http://127.0.0.1:$PORT_1/")" ] ||
  { echo "nginx and our server answer different bodies" >&2; exit 1; }

rps() {  # $1: port -> requests/s
  wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$1/" |
    awk '/Requests\/sec/ {print $2}'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RESULTS=()
for round in $(seq 1 "$ROUNDS"); do
  for peer in nginx ours1 ours2; do
    case $peer in nginx) port=$NGINX_PORT ;; ours1) port=$PORT_1 ;; ours2) port=$PORT_2 ;; esac
    r="$(rps "$port")"
    RESULTS[$peer]+="$r "
    echo "round $round: $peer $r req/s" >&2
  done
done

NGINX_RPS="$(echo "${RESULTS[nginx]}" | tr ' ' '\n' | grep . | median)"
printf '\n%-36s %14s %10s\n' "server (wrk -t$WRK_THREADS -c$CONNECTIONS, ${DURATION}s, median of $ROUNDS)" "requests/s" "vs nginx"
for peer in nginx ours1 ours2; do
  case $peer in
    nginx) label="nginx $(nginx -v 2>&1 | sed 's|.*/||'), 1 worker" ;;
    ours1) label="mf::http, 1 io thread" ;;
    ours2) label="mf::http, 2 io threads" ;;
  esac
  med="$(echo "${RESULTS[$peer]}" | tr ' ' '\n' | grep . | median)"
  printf '%-36s %14.0f %9.2fx\n' "$label" "$med" "$(echo "$med / $NGINX_RPS" | bc -l)"
done
