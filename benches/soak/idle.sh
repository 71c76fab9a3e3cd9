#!/usr/bin/env bash
# Idle connections (issue #6): open CONNS keep-alive client connections to robots-proxy, one
# allowed request on each, hold them idle for HOLD seconds, then one more request on each. Prints
# the proxy's RSS before, after opening and after holding, KiB per connection
# ((RSS_after - RSS_before) / connections), and how many connections were still usable; PASS when
# every connection opened and was still usable.
#
#   benches/soak/idle.sh                          # 10 000 connections held 60 s
#   CONNS=2000 HOLD=20 benches/soak/idle.sh
#
# The proxy runs with proxy.header_read_timeout = HOLD + 300 s (hyper's header read timeout also
# closes idle keep-alive connections), limits.max_connections = CONNS + 1000 and no cap per
# client (limits.max_connections_per_client = 0: every connection comes from 127.0.0.1). Needs an
# open-files limit above CONNS for both the proxy and the client: the script raises it with
# `ulimit -n $NOFILE`. One nginx origin on ORIGIN_PORT (18140), the proxy on PROXY_PORT (18141),
# files in RUN_DIR (default /tmp/robots-proxy-idle/<date-time>).
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"

CONNS=${CONNS:-10000}
HOLD=${HOLD:-60}
CONNECT_CONCURRENCY=${CONNECT_CONCURRENCY:-100}  # connections opened at once (the proxy's
                                                 # listen backlog: limits.max_connections, <= 4096)
REQUEST_CONCURRENCY=${REQUEST_CONCURRENCY:-16}   # requests in flight
SAMPLE_EVERY=${SAMPLE_EVERY:-10}
NOFILE=${NOFILE:-65536}
ORIGIN_PORT=${ORIGIN_PORT:-18140}
PROXY_PORT=${PROXY_PORT:-18141}
RUN_DIR=${RUN_DIR:-/tmp/robots-proxy-idle/$(date +%Y%m%d-%H%M%S)}

need python3; need curl
ulimit -n "$NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)" ||
  die "cannot raise the open-files limit (ulimit -n)"
(( $(ulimit -n) > CONNS + 100 )) ||
  die "the open-files limit is $(ulimit -n); $CONNS connections need more (run as a user allowed to raise it)"
trap stop_all EXIT
mkdir -p "$RUN_DIR"
log "run directory: $RUN_DIR (open-files limit $(ulimit -n))"
build
ports_free "$ORIGIN_PORT" "$PROXY_PORT"

write_nginx_conf "$RUN_DIR" - "$ORIGIN_PORT"
start_nginx "$RUN_DIR" "$ORIGIN_PORT"
start_proxy "$RUN_DIR" "$PROXY_PORT" \
  ROBOTS_PROXY_PROXY__HEADER_READ_TIMEOUT="$(( ${HOLD%.*} + 300 ))s" \
  ROBOTS_PROXY_LIMITS__MAX_CONNECTIONS=$(( CONNS + 1000 )) \
  ROBOTS_PROXY_LIMITS__MAX_CONNECTIONS_PER_CLIENT=0
rss_start=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PROXY_PID/status")
log "proxy RSS at start: $rss_start KiB"

start_sampler "$PROXY_PID" "$ADMIN" "$SAMPLE_EVERY" "$RUN_DIR/rss.tsv" "$ORIGIN_PORT-$ORIGIN_PORT"
overflows_before=$(listen_overflows)
loadgen_rc=0
timeout --signal=INT $(( ${HOLD%.*} + 300 )) "$LOADGEN_BIN" --proxy "127.0.0.1:$PROXY_PORT" idle \
  --origins "127.0.0.1:$ORIGIN_PORT" --conns "$CONNS" --hold "$HOLD" \
  --connect-concurrency "$CONNECT_CONCURRENCY" --request-concurrency "$REQUEST_CONCURRENCY" \
  --sample-every "$SAMPLE_EVERY" \
  --rss-pid "$PROXY_PID" >"$RUN_DIR/loadgen.json" || loadgen_rc=$?

echo
echo "== idle: $CONNS connections held ${HOLD}s, run dir $RUN_DIR"
FAILURES=0
echo "INFO  listen-queue overflows (TcpExt ListenOverflows, all listeners) during the run: $(( $(listen_overflows) - overflows_before ))"
(( loadgen_rc == 0 )) || fail "loadgen exited with status $loadgen_rc"
if kill -0 "$PROXY_PID" 2>/dev/null; then pass "proxy alive (pid $PROXY_PID)"
else fail "proxy died (see $RUN_DIR/proxy.log)"; fi
python3 - "$RUN_DIR/loadgen.json" "$RUN_DIR/rss.tsv" "$CONNS" "$rss_start" <<'EOF' || FAILURES=$(( FAILURES + $? ))
import json, sys
summary, rss_path, conns, rss_start = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
try:
    s = json.load(open(summary))
except (OSError, ValueError) as e:
    print(f"FAIL  loadgen summary readable ({e})")
    sys.exit(1)
mib = lambda kib: "?" if kib is None else f"{kib / 1024:.1f} MiB"
print(f"      proxy RSS: at start {mib(rss_start)}, after warm-up {mib(s['rss_before_kib'])}, "
      f"{s['opened']} open {mib(s['rss_open_kib'])}, after {s['hold_s']:.0f} s idle "
      f"{mib(s['rss_held_kib'])}, after the second requests {mib(s['rss_end_kib'])}")
print(f"      KiB per connection: {s['kib_per_conn_open']} just opened, "
      f"{s['kib_per_conn_held']} after holding")
print(f"      opening took {s['open_seconds']} s; first requests {s['first_request']}; "
      f"second requests {s['second_request']}; loadgen's own RSS {mib(s['loadgen_rss_kib'])}")
opens, ups = [], []
for line in open(rss_path):
    p = line.split()
    if not line.startswith("#") and len(p) >= 6:
        opens.append(p[4])
        ups.append(p[5])
print(f"      the proxy's open_connections gauge over time: {' '.join(opens)}")
print(f"      its connections to the origin over time: {' '.join(ups)}")
failed = 0
def check(ok, text):
    global failed
    print(("PASS  " if ok else "FAIL  ") + text)
    failed += not ok
check(s["opened"] == conns, f"{s['opened']} of {conns} connections opened and answered 200")
check(s["usable_after_hold"] == conns,
      f"{s['usable_after_hold']} of {conns} still usable after {s['hold_s']:.0f} s idle "
      f"({s['closed_during_hold']} closed while idle)")
sys.exit(failed)
EOF
echo
if (( FAILURES == 0 )); then echo "idle: all checks passed"; else echo "idle: $FAILURES check(s) failed"; fi
(( FAILURES == 0 ))
