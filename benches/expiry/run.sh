#!/usr/bin/env bash
# The `expiry` measurement (issue 22): 100 authorities whose robots.txt lives 2 s, under steady
# load, through the proxy in three configurations, rounds interleaved:
#
#   refresh  robots.max_age = 2s, robots.refresh_ahead = 0.2 (the last 0.4 s of each lifetime)
#   expire   robots.max_age = 2s, robots.refresh_ahead = 0   (an expired copy is refetched
#            while the request that found it waits)
#   never    robots.min_age = robots.max_age = 24h           (robots.txt never expires here)
#
# The load is steady: RATE requests per second in all (loadgen's --rate; every request issued is
# accounted for as one response or one error, and its latency recorded), over CONNS keep-alive
# connections, each request to a random authority, an allowed path. For each run: p50, p99 and
# p99.9 (one JSON line), and from the proxy's /metrics how many lookups waited for a fetch
# (robots_proxy_cache_misses_total) during the measured part, how many robots.txt fetches
# completed and how many refreshes ahead started. Then the medians per configuration and the
# ratios of p99 to `never`'s.
#
#   cargo build --release --bin robots-proxy --example loadgen
#   benches/expiry/run.sh                         # 3 rounds x 15 s at 2000 requests/s
#   PROXY_BIN=... LOADGEN=... ROUNDS=5 DURATION=20 RATE=4000 CONNS=32 benches/expiry/run.sh
#
# Needs nginx. The origin is one nginx listening on 127.0.0.2-127.0.0.101 (port
# ORIGIN_PORT), each address an authority with its own robots.txt answered with
# `Cache-Control: max-age=2`; everything listens on loopback only; every run is bounded
# (warm-up + DURATION seconds, the load client's request timeout); every process started here is stopped by its
# PID on exit.
set -u
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROXY_BIN=${PROXY_BIN:-$REPO_DIR/target/release/robots-proxy}
LOADGEN=${LOADGEN:-$REPO_DIR/target/release/examples/loadgen}
ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-15}; WARMUP=${WARMUP:-3}
CONNS=${CONNS:-32}; RATE=${RATE:-2000}; AUTHORITIES=${AUTHORITIES:-100}
ORIGIN_PORT=${ORIGIN_PORT:-18581}; PROXY_PORT=${PROXY_PORT:-18582}; ADMIN_PORT=${ADMIN_PORT:-18583}
D=${RUN_DIR:-$(mktemp -d /tmp/robots-proxy-expiry.XXXXXX)}
command -v nginx >/dev/null || { echo "needs nginx" >&2; exit 2; }
[ -x "$LOADGEN" ] || { echo "no load client at $LOADGEN (cargo build --release --example loadgen)" >&2; exit 2; }
[ -x "$PROXY_BIN" ] || { echo "no proxy binary at $PROXY_BIN (cargo build --release)" >&2; exit 2; }
(( AUTHORITIES >= 1 && AUTHORITIES <= 250 )) || { echo "AUTHORITIES: 1 to 250" >&2; exit 2; }

pids=()
stop() { # stop PID: TERM, then KILL after 5 s; only processes started here
  local pid=$1 tries=50
  kill -TERM "$pid" 2>/dev/null || return 0
  while (( tries-- > 0 )) && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
cleanup() { local p; for p in "${pids[@]}"; do stop "$p"; done; }
trap cleanup EXIT
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
wait_port() { # HOST PORT PID
  local tries=100
  while (( tries-- > 0 )); do
    port_open "$1" "$2" && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# The origin.
mkdir -p "$D/tmp"
{
  cat <<CONF
daemon off;
worker_processes 1;
pid $D/nginx.pid;
error_log $D/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $D/tmp/body; proxy_temp_path $D/tmp/proxy; fastcgi_temp_path $D/tmp/fcgi;
  uwsgi_temp_path $D/tmp/uwsgi; scgi_temp_path $D/tmp/scgi;
  keepalive_requests 100000;
  server {
CONF
  for i in $(seq 2 $(( AUTHORITIES + 1 ))); do printf '    listen 127.0.0.%d:%d;\n' "$i" "$ORIGIN_PORT"; done
  cat <<'CONF'
    location = /robots.txt {
      default_type text/plain;
      add_header Cache-Control "max-age=2";
      return 200 "User-agent: *\nDisallow: /private/\n";
    }
    location / { return 200 "hello\n"; }
  }
}
CONF
} > "$D/nginx.conf"
nginx -c "$D/nginx.conf" -p "$D" & pids+=($!)
wait_port 127.0.0.2 "$ORIGIN_PORT" "${pids[-1]}" || { echo "nginx did not start" >&2; exit 1; }

# The load: every request to a random one of the authorities (loadgen's shuffle order).
ORIGINS=$(for i in $(seq 2 $(( AUTHORITIES + 1 ))); do printf '127.0.0.%d:%d,' "$i" "$ORIGIN_PORT"; done)
ORIGINS=${ORIGINS%,}
load() { # SECONDS
  timeout $(( $1 + 60 )) "$LOADGEN" --proxy "127.0.0.1:$PROXY_PORT" --threads 1 --request-timeout 10 \
    soak --origins "$ORIGINS" --conns "$CONNS" --duration "$1" --rate "$RATE" \
    --disallow-fraction 0 --progress 0 2>>"$D/loadgen.log"
}

metric() { # NAME: its value (summed over its series) on the proxy's /metrics
  curl -s --noproxy '*' "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d", s }'
}

run() { # CASE ROUND
  local case=$1 round=$2 env=(env -i PATH="$PATH" ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS=127.0.0.0/8
    ROBOTS_PROXY_STATE_DIR="$D/state-$1-$2" ROBOTS_PROXY_LOG__LEVEL=warn)
  case $case in
    refresh) env+=(ROBOTS_PROXY_ROBOTS__MAX_AGE=2s ROBOTS_PROXY_ROBOTS__MIN_AGE=1s ROBOTS_PROXY_ROBOTS__REFRESH_AHEAD=0.2) ;;
    expire) env+=(ROBOTS_PROXY_ROBOTS__MAX_AGE=2s ROBOTS_PROXY_ROBOTS__MIN_AGE=1s ROBOTS_PROXY_ROBOTS__REFRESH_AHEAD=0) ;;
    never) env+=(ROBOTS_PROXY_ROBOTS__MAX_AGE=24h ROBOTS_PROXY_ROBOTS__MIN_AGE=24h) ;;
  esac
  mkdir -p "$D/state-$case-$round"
  "${env[@]}" "$PROXY_BIN" serve --listen "127.0.0.1:$PROXY_PORT" \
    --admin-listen "127.0.0.1:$ADMIN_PORT" 2>"$D/proxy-$case-$round.log" &
  local pid=$!
  pids+=($pid)
  wait_port 127.0.0.1 "$ADMIN_PORT" "$pid" || { echo "the proxy did not start" >&2; exit 1; }
  # First contact with every authority (one fetch each), then the measured part.
  load "$WARMUP" > /dev/null
  local misses0 fetches0 refreshes0
  misses0=$(metric robots_proxy_cache_misses_total)
  fetches0=$(metric robots_proxy_robots_fetches_total)
  refreshes0=$(metric robots_proxy_cache_refreshes_total)
  local out
  out=$(load "$DURATION" | tail -n 1 | python3 -c '
import json, sys
r = json.load(sys.stdin)
l = r["latency_ms"]
print(json.dumps({"responses": r["responses"], "errors": r["errors_total"],
  "accounted": r["accounted"], "statuses": r["statuses"], "rps": r["rps"],
  "p50_ms": l["p50"], "p99_ms": l["p99"], "p999_ms": l["p999"], "max_ms": l["max"]}))')
  local waited fetched refreshed
  waited=$(( $(metric robots_proxy_cache_misses_total) - misses0 ))
  fetched=$(( $(metric robots_proxy_robots_fetches_total) - fetches0 ))
  refreshed=$(( $(metric robots_proxy_cache_refreshes_total) - refreshes0 ))
  stop "$pid"
  printf '{"case":"%s","round":%d,"waited_for_fetch":%d,"robots_fetches":%d,"refreshes":%d,"load":%s}\n' \
    "$case" "$round" "$waited" "$fetched" "$refreshed" "$out" | tee -a "$D/results.jsonl"
}

: > "$D/results.jsonl"
echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $AUTHORITIES authorities, $RATE req/s over $CONNS connections, $ROUNDS x ${DURATION}s; $PROXY_BIN" >&2
for round in $(seq 1 "$ROUNDS"); do
  for case in refresh expire never; do run "$case" "$round"; done
done
python3 - "$D/results.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = {}
for case in ("refresh", "expire", "never"):
    rs = [r for r in runs if r["case"] == case]
    med[case] = {k: statistics.median(r["load"][k] for r in rs) for k in ("p50_ms", "p99_ms", "p999_ms")}
    med[case]["req_s"] = statistics.median(r["load"]["rps"] for r in rs)
    med[case]["waited_for_fetch"] = [r["waited_for_fetch"] for r in rs]
    med[case]["robots_fetches"] = [r["robots_fetches"] for r in rs]
    med[case]["errors"] = sum(r["load"]["errors"] + sum(n for s, n in r["load"]["statuses"].items() if s != "200") for r in rs)
    print(f"{case:8} p50 {med[case]['p50_ms']:.3f} ms  p99 {med[case]['p99_ms']:.3f} ms  "
          f"p99.9 {med[case]['p999_ms']:.3f} ms  ~{med[case]['req_s']:.0f} req/s  "
          f"waited for a fetch {med[case]['waited_for_fetch']}  robots.txt fetches {med[case]['robots_fetches']}  "
          f"errors {med[case]['errors']}")
n = med["never"]["p99_ms"]
if n > 0:
    print(f"p99 refresh / never: {med['refresh']['p99_ms'] / n:.2f}x (goal <= 1.2x); "
          f"expire / never: {med['expire']['p99_ms'] / n:.2f}x")
PY
