#!/usr/bin/env bash
# Fleet soak (issue 23): three robots-proxy instances sharing one redis-server (a fleet, docs/fleet.md
# "Fleet"), each loaded by its own load client, with Redis stopped halfway through and started
# again REDIS_DOWN seconds later (empty: no persistence, as after a crash). The origins, the
# robots.txt faults and the load are those of soak.sh. Then PASS/FAIL lines:
#   - every instance is still alive (no panic in its log) and stops cleanly on SIGTERM;
#   - every request got a response, no transport errors; no 5xx with fleet.on_redis_error =
#     "local" (the default: an instance goes on alone while Redis is away); with
#     ON_REDIS_ERROR=refuse, 503s only, each audited as fleet_unavailable and all while Redis
#     was away (from its stop to REJOIN_WITHIN seconds after its start): the documented
#     behaviour of "refuse";
#   - every 403 the clients saw is in the audit logs exactly once, across the three logs
#     (each request has a unique id=C-S query: the load clients number their connections in
#     disjoint ranges), and the instances' disallow counters add up to it;
#   - origins without faults: allowed paths 200, disallowed paths 403, nothing else;
#   - each instance's RSS is flat within each half, as soak.sh measures it: after warm-up
#     against just before the Redis restart, and from a minute after the restart against the
#     last minute (at most RSS_TOL_KIB or RSS_TOL_PCT % more); the step across the restart
#     (threads added while Redis was away, say) is printed, not judged;
#   - the fleet rejoined: each instance was in the fleet before (robots_proxy_fleet_up 1), saw
#     Redis go (0), and within REJOIN_WITHIN seconds of Redis being back was up again and saw
#     all three instances in its fleet view (/api/summary), and stayed so; the rejoin time of
#     each is printed.
# Exit status 0 when every check passes.
#
# TOPOLOGY=cluster runs the fleet on a Redis Cluster instead (fleet.topology = "cluster"): three
# primaries and three replicas (REDIS_PORT..REDIS_PORT+5, cluster-node-timeout 2 s), and halfway
# the primary serving the fleet-wide slot ({fleet}: the heartbeat, the view) is killed (-9) and
# its replica promoted: the checks are the same, "stopped" being the kill and "started" the
# first write the new primary answers.
#   TOPOLOGY=cluster benches/soak/fleet_soak.sh       # the 10-minute run with a failover
#
#   benches/soak/fleet_soak.sh                         # the full run: 600 s
#   DURATION=60 benches/soak/fleet_soak.sh             # the short run (CI-sized, ~2 min in all)
#   SKIP_BUILD=1 RATE=0 DURATION=120 benches/soak/fleet_soak.sh
#   ON_REDIS_ERROR=refuse DURATION=60 benches/soak/fleet_soak.sh
#
# Everything listens on 127.0.0.1: origins ORIGIN_PORT.. (18200-18219), the fault server
# FAULT_PORT (18220), the instances PROXY_PORT.. (18231-18233), redis-server REDIS_PORT (18240),
# the admin listeners on free ports; so it does not collide with soak.sh's ports. Files go to
# RUN_DIR (default /tmp/robots-proxy-fleet-soak/<date-time>), each instance's in a directory of
# its name (a, b, c). Processes started are stopped by PID on exit. Needs nginx, redis-server,
# curl, jq and python3.
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"

DURATION=${DURATION:-600}               # seconds of load
CONNS=${CONNS:-32}                      # client connections per instance
RATE=${RATE:-6000}                      # total requests/s over the three; 0 = unlimited
DISALLOW_FRACTION=${DISALLOW_FRACTION:-0.10}
THREADS=${THREADS:-1}                   # each load client's runtime threads
ORIGINS=${ORIGINS:-20}
FAULTS=${FAULTS:-3}                     # of which the last FAULTS have a failing robots.txt
ORIGIN_PORT=${ORIGIN_PORT:-18200}
FAULT_PORT=${FAULT_PORT:-18220}
PROXY_PORT=${PROXY_PORT:-18231}         # first instance; the others follow
REDIS_PORT=${REDIS_PORT:-18240}
REDIS_DOWN=${REDIS_DOWN:-10}            # seconds Redis stays stopped, halfway through
ON_REDIS_ERROR=${ON_REDIS_ERROR:-local} # fleet.on_redis_error
TOPOLOGY=${TOPOLOGY:-server}            # server (one redis-server) or cluster (see above)
REJOIN_WITHIN=${REJOIN_WITHIN:-30}      # seconds after Redis is back to be in the fleet again
PHASE_SECONDS=${PHASE_SECONDS:-15}
HANG_SECONDS=${HANG_SECONDS:-10}
MAX_AGE=${MAX_AGE:-20s}
MIN_AGE=${MIN_AGE:-5s}
FETCH_TIMEOUT=${FETCH_TIMEOUT:-3s}
LOG_LEVEL=${LOG_LEVEL:-warn}            # log.level (info logs a line per block, three times)
RSS_INTERVAL=${RSS_INTERVAL:-10}
if (( DURATION >= 240 )); then WARMUP=${WARMUP:-60}; else WARMUP=${WARMUP:-$(( DURATION / 4 ))}; fi
RSS_TOL_KIB=${RSS_TOL_KIB:-8192}
RSS_TOL_PCT=${RSS_TOL_PCT:-10}
RUN_DIR=${RUN_DIR:-/tmp/robots-proxy-fleet-soak/$(date +%Y%m%d-%H%M%S)}
NAMES=(a b c)

(( FAULTS <= ORIGINS )) || die "FAULTS ($FAULTS) is more than ORIGINS ($ORIGINS)"
(( DURATION >= 4 * REDIS_DOWN )) || die "DURATION ($DURATION) must be at least 4 x REDIS_DOWN ($REDIS_DOWN)"
[[ $ON_REDIS_ERROR == local || $ON_REDIS_ERROR == refuse ]] || die "ON_REDIS_ERROR is local or refuse"
[[ $TOPOLOGY == server || $TOPOLOGY == cluster ]] || die "TOPOLOGY is server or cluster"
need python3; need curl; need jq; need redis-server
[[ $TOPOLOGY == cluster ]] && need redis-cli
trap stop_all EXIT
mkdir -p "$RUN_DIR"
log "run directory: $RUN_DIR"
build

last_port=$(( ORIGIN_PORT + ORIGINS - 1 ))
specs=() ports=() fault_ports=() proxy_ports=()
for (( p = ORIGIN_PORT; p <= last_port; p++ )); do
  ports+=("$p")
  if (( p > last_port - FAULTS )); then specs+=("fault:$p"); fault_ports+=("$p"); else specs+=("$p"); fi
done
for i in "${!NAMES[@]}"; do proxy_ports+=("$(( PROXY_PORT + i ))"); done
redis_ports=("$REDIS_PORT")
[[ $TOPOLOGY == cluster ]] && redis_ports=($(seq "$REDIS_PORT" $(( REDIS_PORT + 5 ))))
ports_free "${ports[@]}" "$FAULT_PORT" "${proxy_ports[@]}" "${redis_ports[@]}"

# forget NAME:PID: drops a process stopped here from the list stop_all goes through.
forget() {
  local keep=() e
  for e in "${PIDS[@]}"; do [[ $e == "$1" ]] || keep+=("$e"); done
  PIDS=("${keep[@]}")
}

# start_redis: a redis-server without persistence; sets REDIS_PID.
start_redis() {
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$RUN_DIR" \
    --maxmemory 256mb --maxmemory-policy noeviction \
    >>"$RUN_DIR/redis.log" 2>&1 </dev/null &
  REDIS_PID=$!
  remember redis-server "$REDIS_PID"
  wait_port "$REDIS_PORT" "$REDIS_PID" 10 || die "redis-server did not start"
}
# start_cluster: six cluster nodes made into three primaries with a replica each; sets
# CLUSTER_PIDS (port -> pid).
declare -A CLUSTER_PIDS
start_cluster() {
  local port
  for port in "${redis_ports[@]}"; do
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --cluster-enabled yes --cluster-config-file "$RUN_DIR/nodes-$port.conf" \
      --dir "$RUN_DIR" --dbfilename "dump-$port.rdb" \
      --cluster-node-timeout 2000 --maxmemory 256mb --maxmemory-policy noeviction \
      >>"$RUN_DIR/redis-$port.log" 2>&1 </dev/null &
    CLUSTER_PIDS[$port]=$!
    remember "redis-$port" "$!"
    wait_port "$port" "$!" 10 || die "redis-server on $port did not start"
  done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${redis_ports[@]}") \
    --cluster-replicas 1 --cluster-yes >"$RUN_DIR/cluster-create.log" 2>&1 ||
    die "redis-cli --cluster create failed (see $RUN_DIR/cluster-create.log)"
  for _ in $(seq 100); do
    ok=0
    for port in "${redis_ports[@]}"; do
      redis-cli -p "$port" cluster info | grep -q '^cluster_state:ok' && ok=$(( ok + 1 ))
    done
    (( ok == ${#redis_ports[@]} )) && return 0
    sleep 0.2
  done
  die "the cluster never said cluster_state:ok"
}

# fleet_primary: the port of the primary serving the fleet-wide slot ({fleet}).
fleet_primary() {
  local slot
  slot=$(redis-cli -p "$REDIS_PORT" cluster keyslot fleet)
  redis-cli -p "$REDIS_PORT" cluster nodes | awk -v s="$slot" '$3 ~ /master/ && $3 !~ /fail/ {
    for (i = 9; i <= NF; i++) {
      n = split($i, r, "-"); lo = r[1]; hi = (n == 2 ? r[2] : r[1]);
      if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { split($2, a, "@"); split(a[1], b, ":"); print b[2] }
    }
  }'
}

if [[ $TOPOLOGY == cluster ]]; then
  start_cluster
  REDIS_URLS=$(printf 'redis://127.0.0.1:%s,' "${redis_ports[@]}"); REDIS_URLS=${REDIS_URLS%,}
else
  start_redis
  REDIS_URLS="redis://127.0.0.1:$REDIS_PORT"
fi

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

proxy_pids=() admins=()
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]}
  start_proxy "$RUN_DIR/$name" "${proxy_ports[$i]}" \
    ROBOTS_PROXY_FLEET__REDIS="$REDIS_URLS" \
    ROBOTS_PROXY_FLEET__TOPOLOGY="$TOPOLOGY" \
    ROBOTS_PROXY_FLEET__INSTANCE="$name" \
    ROBOTS_PROXY_FLEET__KEY_PREFIX="fleet-soak-$$:" \
    ROBOTS_PROXY_FLEET__ON_REDIS_ERROR="$ON_REDIS_ERROR" \
    ROBOTS_PROXY_ROBOTS__MAX_AGE="$MAX_AGE" \
    ROBOTS_PROXY_ROBOTS__MIN_AGE="$MIN_AGE" \
    ROBOTS_PROXY_ROBOTS__RETRY_INITIAL=2s \
    ROBOTS_PROXY_ROBOTS__RETRY_MAX=10s \
    ROBOTS_PROXY_ROBOTS__CONNECT_TIMEOUT=2s \
    ROBOTS_PROXY_ROBOTS__FETCH_TIMEOUT="$FETCH_TIMEOUT" \
    ROBOTS_PROXY_LOG__LEVEL="$LOG_LEVEL" \
    ROBOTS_PROXY_LIMITS__MAX_CONNECTIONS=$(( CONNS * 2 + 1024 )) \
    ROBOTS_PROXY_LIMITS__MAX_CONNECTIONS_PER_CLIENT=0
  proxy_pids+=("$PROXY_PID") admins+=("$ADMIN")
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:${proxy_ports[$i]}" \
    "http://127.0.0.1:$ORIGIN_PORT/page/smoke") || true
  [[ $code == 200 ]] || die "smoke request through instance $name answered '$code', not 200"
done

# Every instance must be in the fleet, seeing the other two, before the load starts.
for _ in $(seq 100); do
  seen=0
  for admin in "${admins[@]}"; do
    n=$(curl -s --max-time 2 "http://$admin/api/summary" | jq -r '.fleet.instances | length' 2>/dev/null) || n=0
    (( ${n:-0} >= ${#NAMES[@]} )) && seen=$(( seen + 1 ))
  done
  (( seen == ${#NAMES[@]} )) && break
  sleep 0.2
done
(( seen == ${#NAMES[@]} )) || die "the instances do not see each other in the fleet"

T0=$(date +%s.%N)
echo "$T0 t0_epoch" >"$RUN_DIR/events.tsv"
since() { awk -v now="$(date +%s.%N)" -v t0="$T0" 'BEGIN { printf "%.1f", now - t0 }'; }

# The fleet as each instance sees it, every second: "seconds instance fleet_up instances".
(
  echo "# t instance fleet_up instances_seen" >"$RUN_DIR/fleet.tsv"
  while :; do
    for i in "${!NAMES[@]}"; do
      up=$(curl -s --max-time 2 "http://${admins[$i]}/metrics" |
           awk '$1 == "robots_proxy_fleet_up" { print $2 }')
      n=$(curl -s --max-time 2 "http://${admins[$i]}/api/summary" |
          jq -r '.fleet.instances | length' 2>/dev/null) || n=
      echo "$(since) ${NAMES[$i]} ${up:-?} ${n:-?}" >>"$RUN_DIR/fleet.tsv"
    done
    sleep 1
  done
) &
remember fleet-poller $!

for i in "${!NAMES[@]}"; do
  start_sampler "${proxy_pids[$i]}" "${admins[$i]}" "$RSS_INTERVAL" "$RUN_DIR/${NAMES[$i]}/rss.tsv" \
    "$ORIGIN_PORT-$last_port"
done

per_rate=0
(( RATE > 0 )) && per_rate=$(( (RATE + ${#NAMES[@]} - 1) / ${#NAMES[@]} ))
if [[ $TOPOLOGY == cluster ]]; then
  log "load: ${#NAMES[@]} instances x $CONNS connections for ${DURATION}s (rate ${RATE}/s in all, 0 = unlimited); a cluster primary killed at $(( DURATION / 2 ))s"
else
  log "load: ${#NAMES[@]} instances x $CONNS connections for ${DURATION}s (rate ${RATE}/s in all, 0 = unlimited); Redis stopped at $(( DURATION / 2 ))s for ${REDIS_DOWN}s"
fi
overflows_before=$(listen_overflows)
loadgens=()
for i in "${!NAMES[@]}"; do
  timeout --signal=INT $(( DURATION + 120 )) "$LOADGEN_BIN" --proxy "127.0.0.1:${proxy_ports[$i]}" \
    --threads "$THREADS" soak --first-conn $(( i * CONNS )) \
    --origins "127.0.0.1:$ORIGIN_PORT-$last_port" --conns "$CONNS" --duration "$DURATION" \
    --disallow-fraction "$DISALLOW_FRACTION" --rate "$per_rate" --seed $(( i + 1 )) \
    --blocked-ids "$RUN_DIR/${NAMES[$i]}/blocked-ids.txt" \
    >"$RUN_DIR/${NAMES[$i]}/loadgen.json" 2>"$RUN_DIR/${NAMES[$i]}/loadgen.err" &
  loadgens+=("$!")
done

# Halfway: Redis goes away, then comes back empty; or a cluster primary dies and its replica
# takes over.
sleep $(( DURATION / 2 ))
if [[ $TOPOLOGY == cluster ]]; then
  victim=$(fleet_primary)
  [[ -n $victim ]] || die "no primary serves the fleet-wide slot"
  live=$REDIS_PORT
  for port in "${redis_ports[@]}"; do [[ $port != "$victim" ]] && { live=$port; break; }; done
  kill -KILL "${CLUSTER_PIDS[$victim]}"
  forget "redis-$victim:${CLUSTER_PIDS[$victim]}"
  echo "$(since) redis_stopped" >>"$RUN_DIR/events.tsv"
  log "cluster primary on $victim killed"
  failed_over=0
  for _ in $(seq 300); do
    if [[ $(redis-cli -c -p "$live" set "fleet-soak-probe-{fleet}" 1 2>/dev/null) == OK ]]; then
      failed_over=1; break
    fi
    sleep 0.1
  done
  (( failed_over )) || die "the cluster never promoted a replica for the fleet-wide slot"
  echo "$(since) redis_started" >>"$RUN_DIR/events.tsv"
  log "failover done: the fleet-wide slot is served by $(fleet_primary)"
else
  stop_pid redis-server "$REDIS_PID"
  forget "redis-server:$REDIS_PID"
  echo "$(since) redis_stopped" >>"$RUN_DIR/events.tsv"
  log "redis-server stopped"
  sleep "$REDIS_DOWN"
  start_redis
  echo "$(since) redis_started" >>"$RUN_DIR/events.tsv"
  log "redis-server (pid $REDIS_PID) started again"
fi

loadgen_rc=0
for pid in "${loadgens[@]}"; do wait "$pid" || loadgen_rc=$?; done
overflows=$(( $(listen_overflows) - overflows_before ))
sleep 2
for entry in "${PIDS[@]}"; do
  [[ $entry == sampler:* || $entry == fleet-poller:* ]] && stop_pid "${entry%%:*}" "${entry#*:}"
done

echo
echo "== fleet soak ($TOPOLOGY): ${#NAMES[@]} instances x $CONNS connections, ${DURATION}s, Redis down ${REDIS_DOWN}s halfway (on_redis_error $ON_REDIS_ERROR), $ORIGINS origins ($FAULTS with robots.txt faults), run dir $RUN_DIR"
(( loadgen_rc == 0 )) || fail "a load client exited with status $loadgen_rc"
echo "INFO  listen-queue overflows (TcpExt ListenOverflows, all listeners) during the load: $overflows"
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]} pid=${proxy_pids[$i]} admin=${admins[$i]}
  if ! kill -0 "$pid" 2>/dev/null; then
    fail "instance $name died during the load (see $RUN_DIR/$name/proxy.log)"; continue
  fi
  pass "instance $name alive after the load (pid $pid)"
  settle_and_stop "instance $name" "$pid" "$admin" "$RUN_DIR/$name/metrics.txt"
done

allowed_503=0
[[ $ON_REDIS_ERROR == refuse ]] && allowed_503=1000000000
python3 "$SOAK_DIR/check_soak.py" --run "$RUN_DIR" --duration "$DURATION" --warmup "$WARMUP" \
  --rss-tol-kib "$RSS_TOL_KIB" --rss-tol-pct "$RSS_TOL_PCT" \
  --fault-origins "$(printf '127.0.0.1:%s,' "${fault_ports[@]}")" \
  --instances "$(IFS=,; echo "${NAMES[*]}")" --fleet --rejoin-within "$REJOIN_WITHIN" \
  --allowed-503 "$allowed_503" || FAILURES=$(( FAILURES + $? ))

echo
if (( FAILURES == 0 )); then echo "fleet soak: all checks passed"; else echo "fleet soak: $FAILURES check(s) failed"; fi
(( FAILURES == 0 ))
