#!/usr/bin/env bash
# Soak run (issue #6): CONNS client connections through robots-proxy to ORIGINS nginx origins on
# loopback for DURATION seconds, DISALLOW_FRACTION of the requests to a disallowed path, the
# robots.txt of FAULTS origins failing now and then (fault_server.py), robots.txt refetched
# every few seconds. Then PASS/FAIL lines:
#   - the proxy is still alive (and no panic in its log), and stops cleanly on SIGTERM;
#   - every request got a response, no transport errors, no 5xx;
#   - every 403 the client saw is in the audit log exactly once (matched by each request's
#     unique id=C-S query), and the proxy's disallow counter agrees;
#   - origins without faults: allowed paths 200, disallowed paths 403, nothing else;
#   - RSS after warm-up is flat: median of the first window after WARMUP vs median of the last
#     window, growth at most max(RSS_TOL_KIB, RSS_TOL_PCT %).
# Exit status 0 when every check passes.
#
#   benches/soak/soak.sh                          # the full run: 600 s, 256 connections
#   DURATION=60 benches/soak/soak.sh              # a short one
#   SKIP_BUILD=1 RATE=5000 DURATION=120 benches/soak/soak.sh
#
# Everything listens on 127.0.0.1: origins ORIGIN_PORT.. (18100-18119), the fault server
# FAULT_PORT (18120), the proxy PROXY_PORT (18130), its admin listener on a free port. Files go to
# RUN_DIR (default /tmp/robots-proxy-soak/<date-time>); a full run's audit log is large (~0.8 KiB
# per blocked request, 1-2 GB), and so is the proxy's log at LOG_LEVEL=info (a line per blocked
# request, ~0.4 GB). Processes started are stopped by PID on exit.
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"

DURATION=${DURATION:-600}               # seconds of load
CONNS=${CONNS:-256}                     # client connections
DISALLOW_FRACTION=${DISALLOW_FRACTION:-0.10}
RATE=${RATE:-0}                         # total requests/s; 0 = as fast as the proxy answers
THREADS=${THREADS:-1}                   # loadgen runtime threads
ORDER=${ORDER:-shuffle}                 # loadgen --order: shuffle or rotate
ORIGINS=${ORIGINS:-20}                  # origin authorities
FAULTS=${FAULTS:-3}                     # of which the last FAULTS have a failing robots.txt
ORIGIN_PORT=${ORIGIN_PORT:-18100}       # first origin port
FAULT_PORT=${FAULT_PORT:-18120}
PROXY_PORT=${PROXY_PORT:-18130}
PHASE_SECONDS=${PHASE_SECONDS:-15}      # fault server: seconds per phase
HANG_SECONDS=${HANG_SECONDS:-10}        # fault server: a hanging answer (> FETCH_TIMEOUT)
MAX_AGE=${MAX_AGE:-20s}                 # robots.max_age: robots.txt refetched this often
MIN_AGE=${MIN_AGE:-5s}
RETRY_INITIAL=${RETRY_INITIAL:-2s}
RETRY_MAX=${RETRY_MAX:-10s}
FETCH_TIMEOUT=${FETCH_TIMEOUT:-3s}
LOG_LEVEL=${LOG_LEVEL:-info}            # log.level; at info the proxy logs a line per block
RSS_INTERVAL=${RSS_INTERVAL:-10}        # seconds between RSS samples
if (( DURATION >= 240 )); then WARMUP=${WARMUP:-60}; else WARMUP=${WARMUP:-$(( DURATION / 4 ))}; fi
RSS_TOL_KIB=${RSS_TOL_KIB:-8192}
RSS_TOL_PCT=${RSS_TOL_PCT:-10}
RUN_DIR=${RUN_DIR:-/tmp/robots-proxy-soak/$(date +%Y%m%d-%H%M%S)}

(( FAULTS <= ORIGINS )) || die "FAULTS ($FAULTS) is more than ORIGINS ($ORIGINS)"
need python3; need curl
trap stop_all EXIT
mkdir -p "$RUN_DIR"
log "run directory: $RUN_DIR"
build

last_port=$(( ORIGIN_PORT + ORIGINS - 1 ))
specs=() ports=() fault_ports=()
for (( p = ORIGIN_PORT; p <= last_port; p++ )); do
  ports+=("$p")
  if (( p > last_port - FAULTS )); then specs+=("fault:$p"); fault_ports+=("$p"); else specs+=("$p"); fi
done
ports_free "${ports[@]}" "$FAULT_PORT" "$PROXY_PORT"

# The fault origins start in different phases (ok, 429, close, ...), so at any time some fail.
offsets=() i=0
for p in "${fault_ports[@]}"; do offsets+=("$p=$(( (2 * i) % 6 ))"); i=$(( i + 1 )); done
python3 "$SOAK_DIR/fault_server.py" --listen "127.0.0.1:$FAULT_PORT" \
  --phase-seconds "$PHASE_SECONDS" --hang-seconds "$HANG_SECONDS" \
  --offsets "$(IFS=,; echo "${offsets[*]}")" --log "$RUN_DIR/fault.log" \
  >"$RUN_DIR/fault_server.out" 2>&1 </dev/null &
remember fault-server $!
wait_port "$FAULT_PORT" "$!" 10 || die "the fault server did not start"

write_nginx_conf "$RUN_DIR" "127.0.0.1:$FAULT_PORT" "${specs[@]}"
start_nginx "$RUN_DIR" "${ports[@]}"

start_proxy "$RUN_DIR" "$PROXY_PORT" \
  ROBOTS_PROXY_ROBOTS__MAX_AGE="$MAX_AGE" \
  ROBOTS_PROXY_ROBOTS__MIN_AGE="$MIN_AGE" \
  ROBOTS_PROXY_ROBOTS__RETRY_INITIAL="$RETRY_INITIAL" \
  ROBOTS_PROXY_ROBOTS__RETRY_MAX="$RETRY_MAX" \
  ROBOTS_PROXY_ROBOTS__CONNECT_TIMEOUT=2s \
  ROBOTS_PROXY_ROBOTS__FETCH_TIMEOUT="$FETCH_TIMEOUT" \
  ROBOTS_PROXY_LOG__LEVEL="$LOG_LEVEL" \
  ROBOTS_PROXY_LIMITS__MAX_CONNECTIONS=$(( CONNS * 2 + 1024 )) \
  ROBOTS_PROXY_LIMITS__MAX_CONNECTIONS_PER_CLIENT=0

# One allowed request (not audited) to check the path end to end before the load.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:$PROXY_PORT" \
  "http://127.0.0.1:$ORIGIN_PORT/page/smoke") || true
[[ $code == 200 ]] || die "smoke request through the proxy answered '$code', not 200"

start_sampler "$PROXY_PID" "$ADMIN" "$RSS_INTERVAL" "$RUN_DIR/rss.tsv" "$ORIGIN_PORT-$last_port"
sampler=$SAMPLER_PID
log "load: $CONNS connections for ${DURATION}s (rate ${RATE}/s, 0 = unlimited)"
overflows_before=$(listen_overflows)
loadgen_rc=0
timeout --signal=INT $(( DURATION + 120 )) "$LOADGEN_BIN" --proxy "127.0.0.1:$PROXY_PORT" \
  --threads "$THREADS" soak \
  --origins "127.0.0.1:$ORIGIN_PORT-$last_port" --conns "$CONNS" --duration "$DURATION" \
  --disallow-fraction "$DISALLOW_FRACTION" --rate "$RATE" --order "$ORDER" \
  --blocked-ids "$RUN_DIR/blocked-ids.txt" >"$RUN_DIR/loadgen.json" || loadgen_rc=$?
overflows=$(( $(listen_overflows) - overflows_before ))
sleep 1
stop_pid sampler "$sampler"

echo
echo "== soak: $CONNS connections, ${DURATION}s, $ORIGINS origins ($FAULTS with robots.txt faults), run dir $RUN_DIR"
alive=0
if kill -0 "$PROXY_PID" 2>/dev/null; then alive=1; pass "proxy alive after the load (pid $PROXY_PID)"
else fail "proxy died during the load (see $RUN_DIR/proxy.log)"; fi
(( loadgen_rc == 0 )) || fail "loadgen exited with status $loadgen_rc"
echo "INFO  listen-queue overflows (TcpExt ListenOverflows, all listeners) during the load: $overflows"

if (( alive )); then
  settle_and_stop proxy "$PROXY_PID" "$ADMIN" "$RUN_DIR/metrics.txt"
fi

python3 "$SOAK_DIR/check_soak.py" --run "$RUN_DIR" --duration "$DURATION" --warmup "$WARMUP" \
  --rss-tol-kib "$RSS_TOL_KIB" --rss-tol-pct "$RSS_TOL_PCT" \
  --fault-origins "$(printf '127.0.0.1:%s,' "${fault_ports[@]}")" || FAILURES=$(( FAILURES + $? ))

echo
if (( FAILURES == 0 )); then echo "soak: all checks passed"; else echo "soak: $FAILURES check(s) failed"; fi
(( FAILURES == 0 ))
