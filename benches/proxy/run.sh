#!/usr/bin/env bash
# The proxy benchmark (issue #22): robots-proxy side by side with a bare hyper proxy (the
# yardstick: the same hyper and tokio, no robots.txt logic, benches/proxy/bare_proxy.rs) and,
# when they are installed, Squid and tinyproxy, in one run, through one nginx origin, with
# ratios. Everything listens on 127.0.0.1 (the `wide` origin on the port of every 127.0.0.0/8
# address; nginx refuses any other source); every load run is bounded by wrk's -d and timeout;
# every process started is stopped by its PID on exit.
#
#   benches/proxy/run.sh                                  # single many deny, 3 rounds x 6 s
#   VARIANTS="single many deny wide" benches/proxy/run.sh
#   VARIANTS=wide WIDE=10000 benches/proxy/run.sh
#   VARIANTS=tunnel SYSTEMS="bare squid" benches/proxy/run.sh   # CONNECT tunnels (needs oha)
#   VARIANTS="tunnel intercept" SYSTEMS=bare benches/proxy/run.sh  # and TLS interception
#   CANDIDATES="before=/tmp/old/robots-proxy after=target/release/robots-proxy" benches/proxy/run.sh
#   SKIP_BUILD=1 SYSTEMS=bare benches/proxy/run.sh        # no rebuild; only the bare proxy beside
#
# Variants (VARIANTS, default "single many deny"):
#   single  GET /index.html (1 KiB) on one authority, 127.0.0.1:18170
#   many    GET /index.html over 8 authorities, 127.0.0.1:18171-18178, in turn
#   deny    GET /private/x, disallowed for every crawler: the robots proxy answers 403 itself,
#           the others forward it (200)
#   tunnel  GET https://127.0.0.1:18169/index.html (TLS, nginx) through a CONNECT tunnel, with oha
#           (keep-alive, CONNS connections, each its own tunnel; the client verifies the origin's
#           certificate, from a test CA made here with openssl): the candidates run with
#           https.mode = "tunnel", the bare proxy relays with tokio's copy_bidirectional, Squid
#           and tinyproxy with their own tunnels. Skipped, saying so, when oha is not installed
#           (cargo install oha --locked).
#   intercept the same load, with each candidate started again as NAME-intercept in
#           https.mode = "intercept" (a test interception CA made here, which oha trusts): the
#           candidate terminates TLS, decides the request inside and forwards it over TLS of its
#           own; the anchors relay the same load as tunnels, so NAME-intercept/bare is
#           interception against the bare proxy's tunnel. Needs oha, like tunnel.
#   wide    WIDE (10,000) authorities 127.0.X.Y:18180, each with a robots.txt of its own,
#           for the candidates and the bare proxy (each started fresh):
#             first contact  each authority requested once (wrk stops after WIDE answers):
#                            req/s, p99, and robots.txt fetches per authority (must be 1)
#             steady         ROUNDS runs of DURATION s: median req/s and p99
#             RSS            after steady state; beyond the bare proxy's, per authority; and
#                            after each round (every system, the bare proxy too, steps up once
#                            its pooled origin connections have carried ~32 requests each; see
#                            docs/benchmarks.md, "Memory per site")
#             tenth          the candidate again with robots.cache_memory at a tenth of what
#                            the WIDE entries weighed: RSS after each of WIDE_PASSES runs,
#                            robots.txt fetches (evicted entries are fetched again)
#
# Knobs (environment): ROUNDS=3 DURATION=6 WARMUP=1 CONNS=64 THREADS=1 (wrk)
#   SYSTEMS="bare squid tinyproxy" (what runs beside the candidates; missing ones are skipped)
#   CANDIDATES="name=binary ..." (default robots-proxy=target/release/robots-proxy)
#   CANDIDATE_ENV="KEY=VALUE ..." (extra environment for every candidate)
#   CANDIDATE_ENV_<name>="KEY=VALUE ...", CANDIDATE_ARGS_<name>="--config FILE ..." (for one
#     candidate: the same binary with and without a setting, side by side)
#   WIDE=10000 WIDE_PASSES=4 FIRST_SECONDS=20 (bound of the first-contact run) RUN_DIR=/tmp/robots-proxy-bench SKIP_BUILD=0 BENCH_UA=benchbot/1.0
#   RESULTS_OUT=path (a copy of the per-run TSV)
#   KEEP_STATE=1 (keep each candidate's state directory, audit log included, after it stops;
#     by default it is removed: a `deny` run writes about 1 GB of audit records per candidate)
#   OHA=path/to/oha (tunnel; default: oha on PATH or in ~/.cargo/bin)
#   PIN=1 (taskset: every system measured on CPU 1, nginx and the load generator on CPU 0, so
#     a proxy never shares its core with the load; on a small shared machine its CPU per
#     request then moves far less from round to round. Needs two CPUs)
# Needs nginx and wrk (apt-get install -y nginx wrk; squid and tinyproxy optional), python3,
# and cargo unless SKIP_BUILD=1. Runtime: about (variants x systems x rounds x (DURATION +
# WARMUP + 1)) s, plus ~2 min for `wide`.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/../.." && pwd)
source "$REPO_DIR/benches/soak/common.sh"
log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }

case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-6}; WARMUP=${WARMUP:-1}
CONNS=${CONNS:-64}; THREADS=${THREADS:-1}
VARIANTS=${VARIANTS:-single many deny}
SYSTEMS=${SYSTEMS-bare squid tinyproxy}
CANDIDATES=${CANDIDATES:-robots-proxy=$TARGET_DIR/release/robots-proxy}
CANDIDATE_ENV=${CANDIDATE_ENV:-}
WIDE=${WIDE:-10000}; WIDE_PASSES=${WIDE_PASSES:-4}; FIRST_SECONDS=${FIRST_SECONDS:-20}
RUN_DIR=${RUN_DIR:-/tmp/robots-proxy-bench}
BENCH_UA=${BENCH_UA:-benchbot/1.0}
BARE_BIN=$TARGET_DIR/release/examples/bare-proxy

ORIGIN_PORT=18170; WIDE_PORT=18180; STATUS_PORT=18189; TLS_PORT=18169
BARE_PORT=18151; SQUID_PORT=18152; TINY_PORT=18153
CANDIDATE_PORT=18160; CANDIDATE_ADMIN_PORT=18190     # + the candidate's index

need nginx; need wrk; need python3; need curl
PIN_SYSTEM=(); PIN_LOAD=()
if [[ ${PIN:-0} == 1 ]]; then
  need taskset
  (( $(nproc) >= 2 )) || die "PIN=1 needs two CPUs (nproc says $(nproc))"
  PIN_SYSTEM=(taskset -c 1); PIN_LOAD=(taskset -c 0)
fi
for v in $VARIANTS; do
  case $v in single|many|deny|wide|tunnel|intercept) ;; *) die "unknown variant '$v' (want single many deny wide tunnel intercept)" ;; esac
done
if [[ " $VARIANTS " == *" tunnel "* || " $VARIANTS " == *" intercept "* ]]; then
  OHA=${OHA:-$(command -v oha || echo "${CARGO_HOME:-$HOME/.cargo}/bin/oha")}
  if [[ ! -x $OHA ]]; then
    log "oha is not installed (cargo install oha --locked, or OHA=path): the tunnel and intercept variants are skipped"
    VARIANTS=$(tr ' ' '\n' <<<"$VARIANTS" | grep -vx 'tunnel\|intercept' | tr '\n' ' ')
  else
    need openssl
  fi
fi
TUNNEL=0; [[ " $VARIANTS " == *" tunnel "* || " $VARIANTS " == *" intercept "* ]] && TUNNEL=1
INTERCEPT=0; [[ " $VARIANTS " == *" intercept "* ]] && INTERCEPT=1
(( WIDE >= 1 && WIDE <= 60000 )) || die "WIDE must be between 1 and 60000"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  log "building: cargo build --release --bin robots-proxy --example bare-proxy"
  (cd "$REPO_DIR" && cargo build --release --bin robots-proxy --example bare-proxy) || die "build failed"
fi
[[ -x $BARE_BIN ]] || die "missing $BARE_BIN (cargo build --release --example bare-proxy)"

rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR/www/private"
chmod 755 "$RUN_DIR" "$RUN_DIR/www" "$RUN_DIR/www/private"
trap stop_all EXIT

# ---- the origin ----------------------------------------------------------------------------
python3 -c 'import sys; sys.stdout.write(("<p>" + "x" * 60 + "</p>\n") * 15)' >"$RUN_DIR/www/index.html"
echo denied >"$RUN_DIR/www/private/x"
printf 'User-agent: *\nDisallow: /private/\n' >"$RUN_DIR/www/robots.txt"
chmod 644 "$RUN_DIR"/www/*.* "$RUN_DIR/www/private/x"
tls_server=""
if (( TUNNEL )); then
  # tunnel: a test CA and the origin's certificate for 127.0.0.1, made here.
  mkdir -p "$RUN_DIR/tls"
  (
    cd "$RUN_DIR/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=robots-proxy bench CA" -keyout ca.key -out ca.pem
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/CN=127.0.0.1" -keyout origin.key -out origin.csr
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >origin.ext
    openssl x509 -req -in origin.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile origin.ext -out origin.pem
    # intercept: the CA the NAME-intercept candidates sign with; the client trusts both.
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=robots-proxy bench interception CA" -keyout intercept-ca.key -out intercept-ca.pem
    cat ca.pem intercept-ca.pem >client-roots.pem
  ) >"$RUN_DIR/tls/openssl.out" 2>&1 || die "making the test certificates failed: $(cat "$RUN_DIR/tls/openssl.out")"
  chmod 644 "$RUN_DIR"/tls/*
  chmod 600 "$RUN_DIR/tls/intercept-ca.key"   # the proxy refuses a CA key others can read
  tls_server="  server {
    listen 127.0.0.1:$TLS_PORT ssl;
    ssl_certificate $RUN_DIR/tls/origin.pem;
    ssl_certificate_key $RUN_DIR/tls/origin.key;
    root $RUN_DIR/www;
  }"
  # The candidates relay CONNECT tunnels to the origin; their robots.txt fetch trusts its CA.
  CANDIDATE_ENV="ROBOTS_PROXY_HTTPS__MODE=tunnel ROBOTS_PROXY_HTTPS__CONNECT_PORTS=[$TLS_PORT] ROBOTS_PROXY_HTTPS__UPSTREAM_CA_FILE=$RUN_DIR/tls/ca.pem $CANDIDATE_ENV"
fi
many_listen=""
for p in $(seq $((ORIGIN_PORT + 1)) $((ORIGIN_PORT + 8))); do many_listen+="    listen 127.0.0.1:$p;"$'\n'; done
cat >"$RUN_DIR/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 65536;
pid $RUN_DIR/nginx.pid;
error_log $RUN_DIR/nginx-error.log warn;
daemon off;
events { worker_connections 32768; }
http {
  access_log off;
  log_format robots '\$server_addr';
  client_body_temp_path $RUN_DIR/tmp-body; proxy_temp_path $RUN_DIR/tmp-proxy;
  fastcgi_temp_path $RUN_DIR/tmp-fcgi; uwsgi_temp_path $RUN_DIR/tmp-uwsgi; scgi_temp_path $RUN_DIR/tmp-scgi;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  default_type text/html;
  server {
    listen 127.0.0.1:$ORIGIN_PORT;
$many_listen    root $RUN_DIR/www;
    location = /robots.txt { default_type text/plain; access_log $RUN_DIR/robots.log robots; }
  }
  server {
    # wide: every 127.0.0.0/8 address on one port; nothing else may connect.
    listen $WIDE_PORT;
    allow 127.0.0.0/8;
    deny all;
    root $RUN_DIR/www;
    location = /robots.txt {
      default_type text/plain;
      access_log $RUN_DIR/robots-wide.log robots;
      return 200 "User-agent: *\nDisallow: /private/\nDisallow: /only-\$server_addr/\n";
    }
  }
$tls_server
  server {
    listen 127.0.0.1:$STATUS_PORT;
    location / { stub_status; }
  }
}
EOF
ports_free $ORIGIN_PORT $WIDE_PORT $STATUS_PORT $TLS_PORT $BARE_PORT $SQUID_PORT $TINY_PORT
"${PIN_LOAD[@]}" nginx -c "$RUN_DIR/nginx.conf" >"$RUN_DIR/nginx.out" 2>&1 &
remember nginx $!
wait_port $ORIGIN_PORT $! || die "nginx did not start: $(cat "$RUN_DIR/nginx-error.log" "$RUN_DIR/nginx.out")"
origin_requests() { curl -fsS "http://127.0.0.1:$STATUS_PORT/" | awk 'NR==3 {print $3}'; }

# ---- the systems ---------------------------------------------------------------------------
declare -A PORT=() PID=() KIND=()
ORDER=()

start_bare() {
  "${PIN_SYSTEM[@]}" "$BARE_BIN" "127.0.0.1:$BARE_PORT" >"$RUN_DIR/bare.log" 2>&1 &
  PID[bare]=$!; remember bare $!
  wait_port $BARE_PORT $! || die "bare-proxy did not start: $(cat "$RUN_DIR/bare.log")"
}

start_squid() {
  mkdir -p "$RUN_DIR/squid"; chmod 777 "$RUN_DIR/squid"
  cat >"$RUN_DIR/squid.conf" <<EOF
http_port 127.0.0.1:$SQUID_PORT
acl localnet src 127.0.0.0/8
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log $RUN_DIR/squid/cache.log
pid_filename $RUN_DIR/squid/squid.pid
coredump_dir $RUN_DIR/squid
workers 1
shutdown_lifetime 1 seconds
max_filedescriptors 65536
EOF
  "${PIN_SYSTEM[@]}" squid -N -f "$RUN_DIR/squid.conf" >"$RUN_DIR/squid.out" 2>&1 &
  PID[squid]=$!; remember squid $!
  wait_port $SQUID_PORT $! 20 || die "squid did not start: $(tail -5 "$RUN_DIR/squid/cache.log" "$RUN_DIR/squid.out")"
}

start_tinyproxy() {
  cat >"$RUN_DIR/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port $TINY_PORT
Listen 127.0.0.1
Timeout 600
MaxClients 1024
LogLevel Error
Allow 127.0.0.1
EOF
  "${PIN_SYSTEM[@]}" tinyproxy -d -c "$RUN_DIR/tinyproxy.conf" >"$RUN_DIR/tinyproxy.out" 2>&1 &
  PID[tinyproxy]=$!; remember tinyproxy $!
  wait_port $TINY_PORT $! || die "tinyproxy did not start: $(cat "$RUN_DIR/tinyproxy.out")"
}

# start_candidate NAME [KEY=VALUE...]: a fresh state directory and audit log each time.
start_candidate() {
  local name=$1; shift
  local bin=${BIN[$name]} port=${PORT[$name]} admin=${ADMIN[$name]}
  # Per candidate: CANDIDATE_ENV_<name> (more environment), CANDIDATE_ARGS_<name> (more
  # arguments to `serve`), the name's characters other than letters, digits and _ written _.
  local key=${name//[^A-Za-z0-9_]/_}
  local env_var="CANDIDATE_ENV_$key" args_var="CANDIDATE_ARGS_$key"
  rm -rf "$RUN_DIR/state-$name"; mkdir -p "$RUN_DIR/state-$name"
  # shellcheck disable=SC2086
  env ROBOTS_PROXY_STATE_DIR="$RUN_DIR/state-$name" \
      ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS=127.0.0.0/8 \
      ROBOTS_PROXY_ADMIN__LISTEN="127.0.0.1:$admin" \
      ROBOTS_PROXY_LOG__LEVEL=warn \
      $CANDIDATE_ENV ${!env_var:-} ${MODE_ENV[$name]:-} "$@" \
      "${PIN_SYSTEM[@]}" "$bin" serve --listen "127.0.0.1:$port" ${!args_var:-} >"$RUN_DIR/$name.log" 2>&1 &
  PID[$name]=$!; remember "$name" $!
  wait_port "$port" $! 20 || die "$name did not start: $(tail -20 "$RUN_DIR/$name.log")"
  wait_port "$admin" "${PID[$name]}" 5 || die "$name's admin listener did not start"
}

# stop_system NAME: stops it; a candidate's state directory (its audit log) goes too, unless
# KEEP_STATE=1.
stop_system() {
  stop_pid "$1" "${PID[$1]}"
  if [[ ${KIND[$1]} == candidate && ${KEEP_STATE:-0} != 1 ]]; then rm -rf "$RUN_DIR/state-$1"; fi
}

metric() {  # metric NAME PROMQL-ISH-PREFIX: sums the samples whose line starts with PREFIX
  curl -fsS "http://127.0.0.1:${ADMIN[$1]}/metrics" | awk -v p="$2" 'index($0, p) == 1 {s += $NF} END {printf "%d\n", s}'
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/${PID[$1]}/status"; }
# cpu_ticks NAME: user + system CPU time of the process so far, in clock ticks (getconf CLK_TCK).
cpu_ticks() { awk '{print $14 + $15}' "/proc/${PID[$1]}/stat" 2>/dev/null || echo 0; }
CLK_TCK=$(getconf CLK_TCK)

declare -A BIN=() ADMIN=() MODE_ENV=()
i=0
add_candidate() {  # add_candidate NAME BINARY [MODE-ENVIRONMENT]
  BIN[$1]=$2; PORT[$1]=$((CANDIDATE_PORT + i)); ADMIN[$1]=$((CANDIDATE_ADMIN_PORT + i))
  KIND[$1]=candidate; MODE_ENV[$1]=${3:-}; ORDER+=("$1"); i=$((i + 1))
  ports_free "${PORT[$1]}" "${ADMIN[$1]}"
}
for spec in $CANDIDATES; do
  name=${spec%%=*}; bin=${spec#*=}
  [[ $name != "$spec" && -x $bin ]] || die "CANDIDATES: '$spec' is not NAME=EXECUTABLE"
  add_candidate "$name" "$bin"
  if (( INTERCEPT )); then
    add_candidate "$name-intercept" "$bin" "ROBOTS_PROXY_HTTPS__MODE=intercept ROBOTS_PROXY_HTTPS__CA_CERT=$RUN_DIR/tls/intercept-ca.pem ROBOTS_PROXY_HTTPS__CA_KEY=$RUN_DIR/tls/intercept-ca.key"
  fi
done
# runs VARIANT SYSTEM: whether SYSTEM takes part in VARIANT (NAME-intercept only in intercept,
# where the candidates in tunnel mode sit out; wide is for the candidates and the bare proxy).
runs() {
  if [[ ${MODE_ENV[$2]:-} == *intercept* ]]; then [[ $1 == intercept ]]; return; fi
  case $1 in
    intercept) [[ ${KIND[$2]} != candidate ]] ;;
    wide) [[ ${KIND[$2]} == candidate || $2 == bare ]] ;;
    *) true ;;
  esac
}
for s in $SYSTEMS; do
  case $s in
    bare) PORT[bare]=$BARE_PORT; KIND[bare]=anchor; ORDER+=(bare) ;;
    squid) if command -v squid >/dev/null; then PORT[squid]=$SQUID_PORT; KIND[squid]=anchor; ORDER+=(squid); else log "squid is not installed: skipped"; fi ;;
    tinyproxy) if command -v tinyproxy >/dev/null; then PORT[tinyproxy]=$TINY_PORT; KIND[tinyproxy]=anchor; ORDER+=(tinyproxy); else log "tinyproxy is not installed: skipped"; fi ;;
    *) die "unknown system '$s' (want bare squid tinyproxy)" ;;
  esac
done
start_system() { case $1 in bare) start_bare ;; squid) start_squid ;; tinyproxy) start_tinyproxy ;; *) start_candidate "$1" ;; esac; }

RESULTS=$RUN_DIR/results.tsv
printf 'variant\tsystem\tround\trps\tp50_us\tp99_us\trequests\terrors\tnon2xx\torigin_per_request\tcpu_us_per_request\n' >"$RESULTS"

# wrk_run SYSTEM SECONDS [KEY=VALUE...]: one bounded wrk run through SYSTEM; prints its RESULT line.
wrk_run() {
  local system=$1 seconds=$2; shift 2
  env BENCH_UA="$BENCH_UA" "$@" timeout $((seconds + 30)) \
    "${PIN_LOAD[@]}" wrk -t "$THREADS" -c "$CONNS" -d "${seconds}s" --timeout 10s -s "$BENCH_DIR/load.lua" \
    "http://127.0.0.1:${PORT[$system]}" 2>&1 | grep '^RESULT' || echo "RESULT requests=0 duration_us=1 p50_us=0 p99_us=0 errors=-1 non2xx=0"
}
field() { sed -n "s/.* $1=\([-0-9]*\).*/\1/p" <<<" $2"; }
# oha_run SYSTEM SECONDS: one bounded oha run over CONNECT tunnels through SYSTEM (tunnel);
# prints a RESULT line as load.lua does.
oha_run() {
  local system=$1 seconds=$2 out=$RUN_DIR/oha.json
  timeout $((seconds + 30)) "${PIN_LOAD[@]}" "$OHA" --no-tui --output-format json -z "${seconds}s" -c "$CONNS" \
    --worker-threads "$THREADS" -w \
    -t 10s --cacert "$RUN_DIR/tls/client-roots.pem" -x "http://127.0.0.1:${PORT[$system]}" \
    -H "User-Agent: $BENCH_UA" "https://127.0.0.1:$TLS_PORT/index.html" >"$out" 2>"$out.err" || true
  python3 - "$out" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("RESULT requests=0 duration_us=1 p50_us=0 p99_us=0 errors=-1 non2xx=0")
    sys.exit()
codes = d.get("statusCodeDistribution") or {}
answered = sum(codes.values())
non2xx = sum(n for code, n in codes.items() if not code.startswith("2"))
errors = sum((d.get("errorDistribution") or {}).values())
p = d.get("latencyPercentiles") or {}
us = lambda s: int((s or 0) * 1e6)
print(f"RESULT requests={answered} duration_us={us(d['summary']['total'])} p50_us={us(p.get('p50'))}"
      f" p99_us={us(p.get('p99'))} errors={errors} non2xx={non2xx}")
EOF
}
load_run() {  # load_run VARIANT SYSTEM SECONDS [KEY=VALUE...]
  local v=$1; shift
  if [[ $v == tunnel || $v == intercept ]]; then oha_run "$1" "$2"; else wrk_run "$@"; fi
}
rps_of() { awk -v r="$(field requests "$1")" -v d="$(field duration_us "$1")" 'BEGIN { printf "%.0f\n", (d > 0 ? r / d * 1e6 : 0) }'; }

variant_env() {
  case $1 in
    single) echo "BENCH_AUTHORITIES=127.0.0.1:$ORIGIN_PORT BENCH_PATH=/index.html" ;;
    many) local list="" p; for p in $(seq $((ORIGIN_PORT + 1)) $((ORIGIN_PORT + 8))); do list+="${list:+,}127.0.0.1:$p"; done
          echo "BENCH_AUTHORITIES=$list BENCH_PATH=/index.html" ;;
    deny) echo "BENCH_AUTHORITIES=127.0.0.1:$ORIGIN_PORT BENCH_PATH=/private/x" ;;
  esac
}

# ---- single, many, deny: every system side by side, interleaved round by round ---------------
plain=()
for v in $VARIANTS; do [[ $v == wide ]] || plain+=("$v"); done
if (( ${#plain[@]} )); then
  for s in "${ORDER[@]}"; do start_system "$s"; done
  for s in "${ORDER[@]}"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:${PORT[$s]}" -A "$BENCH_UA" "http://127.0.0.1:$ORIGIN_PORT/index.html" || true)
    deny=$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:${PORT[$s]}" -A "$BENCH_UA" "http://127.0.0.1:$ORIGIN_PORT/private/x" || true)
    log "probe $s: /index.html $code, /private/x $deny"
    [[ $code == 200 ]] || die "$s does not forward /index.html (answered $code)"
    if (( TUNNEL )); then
      code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$RUN_DIR/tls/client-roots.pem" -x "http://127.0.0.1:${PORT[$s]}" "https://127.0.0.1:$TLS_PORT/index.html" || true)
      log "probe $s: https://127.0.0.1:$TLS_PORT/index.html through CONNECT $code"
      [[ $code == 200 ]] || die "$s does not carry a CONNECT to the TLS origin (answered $code): $(tail -5 "$RUN_DIR/$s.log" 2>/dev/null)"
    fi
  done
  log "load: rounds=$ROUNDS variants='${plain[*]}' duration=${DURATION}s conns=$CONNS wrk-threads=$THREADS systems='${ORDER[*]}'"
  for round in $(seq 1 "$ROUNDS"); do
    for v in "${plain[@]}"; do
      # Rotate the order each round, so no system always runs right after the same one.
      n=${#ORDER[@]}
      for k in $(seq 0 $((n - 1))); do
        s=${ORDER[$(((k + round) % n))]}
        runs "$v" "$s" || continue
        read -r -a venv <<<"$(variant_env "$v")"
        (( WARMUP > 0 )) && load_run "$v" "$s" "$WARMUP" "${venv[@]}" >/dev/null
        before=$(origin_requests); cpu_before=$(cpu_ticks "$s")
        line=$(load_run "$v" "$s" "$DURATION" "${venv[@]}")
        after=$(origin_requests); cpu_after=$(cpu_ticks "$s")
        req=$(field requests "$line"); dur=$(field duration_us "$line")
        python3 - "$v" "$s" "$round" "$req" "$dur" "$(field p50_us "$line")" "$(field p99_us "$line")" \
          "$(field errors "$line")" "$(field non2xx "$line")" "$((after - before - 1))" \
          "$(( (cpu_after - cpu_before) * 1000000 / CLK_TCK ))" >>"$RESULTS" <<'EOF'
import sys
v, s, r, req, dur, p50, p99, err, non2xx, origin, cpu_us = sys.argv[1:]
req, dur = int(req), max(int(dur), 1)
print("\t".join([v, s, r, "%.0f" % (req / dur * 1e6), p50, p99, str(req), err, non2xx,
                 "%.2f" % (int(origin) / req if req else 0), "%.1f" % (int(cpu_us) / req if req else 0)]))
EOF
        log "$v $s round $round: $(tail -1 "$RESULTS" | cut -f4) req/s"
      done
    done
  done
  for s in "${ORDER[@]}"; do stop_system "$s"; done
fi

# ---- wide ------------------------------------------------------------------------------------
WIDE_OUT=$RUN_DIR/wide.tsv
printf 'system\tphase\tvalue\n' >"$WIDE_OUT"
wide_row() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$WIDE_OUT"; log "wide $1 $2: $3"; }
wide_system() {  # wide_system NAME [KEY=VALUE...]: first contact, steady state, RSS
  local s=$1; shift
  : >"$RUN_DIR/robots-wide.log"
  start_system "$s" "$@"
  wide_row "$s" rss_start_kib "$(rss_kib "$s")"
  # wrk waits out its -d even when the thread stopped early; FIRST_SECONDS bounds first contact.
  local line; line=$(THREADS=1 wrk_run "$s" "$FIRST_SECONDS" BENCH_WIDE="$WIDE" BENCH_WIDE_PORT=$WIDE_PORT BENCH_STOP_AFTER="$WIDE")
  (( $(field requests "$line") >= WIDE )) || log "WARNING: first contact did not finish in ${FIRST_SECONDS}s (raise FIRST_SECONDS)"
  wide_row "$s" first_rps "$(rps_of "$line")"
  wide_row "$s" first_p99_us "$(field p99_us "$line")"
  wide_row "$s" first_non2xx "$(field non2xx "$line")"
  wide_row "$s" first_errors "$(field errors "$line")"
  if [[ ${KIND[$s]} == candidate ]]; then
    wide_row "$s" first_robots_fetches "$(wc -l <"$RUN_DIR/robots-wide.log")"
    wide_row "$s" first_robots_fetched_twice "$(sort "$RUN_DIR/robots-wide.log" | uniq -d | wc -l)"
  fi
  local r
  for r in $(seq 1 "$ROUNDS"); do
    local cpu_before; cpu_before=$(cpu_ticks "$s")
    line=$(wrk_run "$s" "$DURATION" BENCH_WIDE="$WIDE" BENCH_WIDE_PORT=$WIDE_PORT)
    wide_row "$s" steady_rps "$(rps_of "$line")"
    wide_row "$s" steady_p99_us "$(field p99_us "$line")"
    wide_row "$s" steady_cpu_us_per_request \
      "$(( ($(cpu_ticks "$s") - cpu_before) * 1000000 / CLK_TCK / ($(field requests "$line") + 1) ))"
    wide_row "$s" steady_round_rss_kib "$(rss_kib "$s")"
  done
  wide_row "$s" rss_steady_kib "$(rss_kib "$s")"
  if [[ ${KIND[$s]} == candidate ]]; then
    wide_row "$s" cache_entries "$(metric "$s" robots_proxy_cache_entries)"
    wide_row "$s" cache_memory_bytes "$(metric "$s" robots_proxy_cache_memory_bytes)"
    wide_row "$s" robots_fetches "$(wc -l <"$RUN_DIR/robots-wide.log")"
  fi
}
if [[ " $VARIANTS " == *" wide "* ]]; then
  log "wide: $WIDE authorities 127.0.X.Y:$WIDE_PORT, conns=$CONNS"
  for s in "${ORDER[@]}"; do
    runs wide "$s" || continue
    wide_system "$s"
    if [[ ${KIND[$s]} == candidate ]]; then
      need_bytes=$(awk -v s="$s" -F'\t' '$1 == s && $2 == "cache_memory_bytes" {print $3}' "$WIDE_OUT")
      stop_system "$s"
      # robots.cache_memory must hold at least one robots.txt of robots.max_body (500 KiB).
      tenth=$(( need_bytes / 10 > 512000 ? need_bytes / 10 : 512000 ))
      log "wide $s: again with robots.cache_memory = ${tenth}B (a tenth of ${need_bytes}B, at least 500 KiB)"
      : >"$RUN_DIR/robots-wide.log"
      start_candidate "$s" ROBOTS_PROXY_ROBOTS__CACHE_MEMORY="${tenth}B"
      for r in $(seq 1 "$WIDE_PASSES"); do
        line=$(wrk_run "$s" "$DURATION" BENCH_WIDE="$WIDE" BENCH_WIDE_PORT=$WIDE_PORT)
        wide_row "$s" tenth_rps "$(rps_of "$line")"
        wide_row "$s" tenth_rss_kib "$(rss_kib "$s")"
      done
      wide_row "$s" tenth_cache_entries "$(metric "$s" robots_proxy_cache_entries)"
      wide_row "$s" tenth_cache_memory_bytes "$(metric "$s" robots_proxy_cache_memory_bytes)"
      wide_row "$s" tenth_robots_fetches "$(wc -l <"$RUN_DIR/robots-wide.log")"
    fi
    stop_system "$s"
  done
fi

[[ -n ${RESULTS_OUT:-} ]] && cp "$RESULTS" "$RESULTS_OUT" && cp "$WIDE_OUT" "${RESULTS_OUT%.tsv}-wide.tsv"

# ---- the summary -----------------------------------------------------------------------------
python3 - "$RESULTS" "$WIDE_OUT" "$WIDE" "${ORDER[@]}" <<'EOF'
import csv, statistics, sys
results, wide_out, wide_n, order = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
rows = list(csv.DictReader(open(results), delimiter="\t"))
anchors = [s for s in ("bare", "squid", "tinyproxy") if s in order]
candidates = [s for s in order if s not in anchors]
def med(values):
    return statistics.median(values) if values else float("nan")
for v in dict.fromkeys(r["variant"] for r in rows):
    print(f"\n== {v}: median over rounds (req/s, spread = (max-min)/median; p50/p99 ms; origin requests per answered request; CPU/req: the process's own user + system CPU time per answered request, which on a machine shared with the client and the origin is what decides req/s)")
    rps = {}
    for s in order:
        rs = [r for r in rows if r["variant"] == v and r["system"] == s]
        if not rs:
            continue
        values = [float(r["rps"]) for r in rs]
        rps[s] = med(values)
        spread = (max(values) - min(values)) / rps[s] if rps[s] else 0
        print(f"  {s:<14} {rps[s]:>9.0f} req/s  spread {spread:4.0%}  p50 {med([int(r['p50_us']) for r in rs])/1000:6.2f}"
              f"  p99 {med([int(r['p99_us']) for r in rs])/1000:6.2f}  errors {sum(int(r['errors']) for r in rs)}"
              f"  non2xx {sum(int(r['non2xx']) for r in rs)}  origin/req {med([float(r['origin_per_request']) for r in rs]):.2f}"
              f"  CPU/req {med([float(r['cpu_us_per_request']) for r in rs]):.1f} us")
    for c in candidates:
        for a in anchors:
            if c in rps and a in rps and rps[a]:
                print(f"  {c}/{a}: {rps[c] / rps[a]:.2f}x")
        for other in candidates:
            if other != c and c in rps and other in rps and rps[other]:
                print(f"  {c}/{other}: {rps[c] / rps[other]:.2f}x")
wide = {}
for r in csv.DictReader(open(wide_out), delimiter="\t"):
    wide.setdefault(r["system"], {}).setdefault(r["phase"], []).append(float(r["value"]))
if wide:
    print(f"\n== wide: {wide_n} authorities")
    for s, d in wide.items():
        g = lambda k: med(d.get(k, []))
        print(f"  {s:<14} first contact {g('first_rps'):>8.0f} req/s p99 {g('first_p99_us')/1000:.1f} ms"
              f" | steady {g('steady_rps'):>8.0f} req/s p99 {g('steady_p99_us')/1000:.1f} ms"
              f" CPU/req {g('steady_cpu_us_per_request'):.0f} us | RSS {g('rss_steady_kib')/1024:.0f} MiB")
        if len(d.get("steady_round_rss_kib", [])) > 1:
            series = ", ".join(f"{v/1024:.0f}" for v in d["steady_round_rss_kib"])
            print(f"  {'':<14} RSS after each steady round {series} MiB")
        if "first_robots_fetches" in d:
            print(f"  {'':<14} robots.txt fetches at first contact {g('first_robots_fetches'):.0f},"
                  f" authorities fetched twice {g('first_robots_fetched_twice'):.0f};"
                  f" cache {g('cache_entries'):.0f} entries, {g('cache_memory_bytes')/wide_n:.0f} B each")
        if "tenth_rss_kib" in d:
            series = ", ".join(f"{v/1024:.0f}" for v in d["tenth_rss_kib"])
            print(f"  {'':<14} cache at a tenth: RSS per pass {series} MiB; req/s {med(d['tenth_rps']):.0f};"
                  f" {g('tenth_cache_entries'):.0f} entries; robots.txt fetches {g('tenth_robots_fetches'):.0f}")
    if "bare" in wide:
        b = wide["bare"]
        for c in candidates:
            if c in wide:
                d = wide[c]
                print(f"  {c}/bare steady: {med(d['steady_rps']) / med(b['steady_rps']):.2f}x;"
                      f" RSS beyond bare: {(med(d['rss_steady_kib']) - med(b['rss_steady_kib'])) * 1024 / wide_n / 1024:.1f} KiB per authority")
EOF
log "raw results: $RESULTS $WIDE_OUT"
