#!/usr/bin/env bash
# The fleet's pace against one instance alone (issue 24, Speed): pacing on at a rate that never
# throttles (default_rps 100000, default_concurrency 10000), the same load through a single
# instance and through a one-instance fleet (a real redis-server), for two builds ("before" and
# "after" a change) in the same run, rounds interleaved. Prints one JSON line per run
# (loadgen's summary) prefixed with the round and the system, then the medians and ratios.
#
#   BEFORE=/tmp/rp-before AFTER=target/release/robots-proxy benches/soak/fleet_pace.sh
#   ROUNDS=5 DURATION=5 CONNS=32 ...
#
# Needs nginx, redis-server and the loadgen example (cargo build --example loadgen, in the
# profile of LOADGEN). Listens on 127.0.0.1 ports 18461-18574 only; every run is bounded
# (DURATION s, timeout); every process it starts is stopped by PID on exit.
set -u
BEFORE=${BEFORE:?the binary before the change}; AFTER=${AFTER:?the binary after it}
DURATION=${DURATION:-5}; ROUNDS=${ROUNDS:-5}; CONNS=${CONNS:-32}
LOADGEN=${LOADGEN:-target/debug/examples/loadgen}
D=${RUN_DIR:-/tmp/robots-proxy-fleet-pace}
mkdir -p "$D"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
cat > "$D/nginx.conf" <<CONF
worker_processes 1;
pid $D/nginx.pid;
error_log $D/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $D/body; proxy_temp_path $D/proxy; fastcgi_temp_path $D/fcgi;
  uwsgi_temp_path $D/uwsgi; scgi_temp_path $D/scgi;
  server {
    listen 127.0.0.1:18461;
    location = /robots.txt { return 200 "User-agent: *\nDisallow: /private\n"; }
    location / { return 200 "hello\n"; }
  }
}
CONF
nginx -c "$D/nginx.conf" -g 'daemon off;' & pids+=($!)
redis-server --port 18462 --bind 127.0.0.1 --save '' --appendonly no >/dev/null & pids+=($!)
sleep 1
start() { # name binary port single|fleet
  local env=(env -i PATH="$PATH" ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS=127.0.0.0/8
    ROBOTS_PROXY_STATE_DIR="$D/state-$1" ROBOTS_PROXY_PACING__ENABLED=true
    ROBOTS_PROXY_PACING__DEFAULT_RPS=100000 ROBOTS_PROXY_PACING__DEFAULT_CONCURRENCY=10000
    ROBOTS_PROXY_LOG__LEVEL=warn)
  if [ "$4" = fleet ]; then
    env+=(ROBOTS_PROXY_FLEET__REDIS=redis://127.0.0.1:18462
      ROBOTS_PROXY_FLEET__KEY_PREFIX="bench-$1:" ROBOTS_PROXY_FLEET__INSTANCE="$1")
  fi
  mkdir -p "$D/state-$1"
  "${env[@]}" "$2" serve --listen "127.0.0.1:$3" --admin-listen "127.0.0.1:$(($3 + 100))" \
    2>"$D/$1.log" & pids+=($!)
}
start single-before "$BEFORE" 18471 single
start fleet-before "$BEFORE" 18472 fleet
start single-after "$AFTER" 18473 single
start fleet-after "$AFTER" 18474 fleet
sleep 3
: > "$D/results.txt"
for r in $(seq 1 "$ROUNDS"); do
  for c in single-before:18471 fleet-before:18472 single-after:18473 fleet-after:18474; do
    name=${c%%:*}; port=${c##*:}
    out=$(timeout $((${DURATION%.*} + 30)) "$LOADGEN" --proxy "127.0.0.1:$port" soak \
      --origins 127.0.0.1:18461 --conns "$CONNS" --duration "$DURATION" --disallow-fraction 0 \
      --progress 0 2>/dev/null)
    echo "$r $name $out" | tee -a "$D/results.txt"
  done
done
python3 - "$D/results.txt" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, name, out = line.split(" ", 2)
    if not out.startswith("{"):
        continue
    j = json.loads(out)
    runs.setdefault(name, []).append(sum(j["allowed_path"].values()) / j["elapsed_s"])
med = {n: statistics.median(v) for n, v in runs.items()}
for n, v in runs.items():
    print(f"{n:14s} median {med[n]:8.0f} req/s   runs {[round(x) for x in v]}")
print("fleet/single: before %.2f, after %.2f" % (
    med["fleet-before"] / med["single-before"], med["fleet-after"] / med["single-after"]))
PY
