# Shell functions shared by soak.sh and idle.sh. Sourced, not run.
#
# Every process started here is recorded in the PIDS array and stopped by that PID (never by
# name) when the script exits.

SOAK_DIR=${SOAK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
REPO_DIR=${REPO_DIR:-$(cd "$SOAK_DIR/../.." && pwd)}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_DIR/target}
# PROFILE=debug (with SKIP_BUILD=1) runs the debug binaries: a quick trial of a script, not a
# measurement. PROXY_BIN and LOADGEN_BIN name other binaries (say, a debug load client against a
# release proxy).
PROFILE=${PROFILE:-release}
PROXY_BIN=${PROXY_BIN:-$TARGET_DIR/$PROFILE/robots-proxy}
LOADGEN_BIN=${LOADGEN_BIN:-$TARGET_DIR/$PROFILE/examples/loadgen}

PIDS=()        # "name:pid", in start order
FAILURES=0

log() { printf '[soak %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "missing '$1'"; }

pass() { printf 'PASS  %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; FAILURES=$((FAILURES + 1)); }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT PID [SECONDS]: until PORT accepts connections; fails early if PID is gone.
wait_port() {
  local port=$1 pid=$2 tries=$(( ${3:-10} * 10 ))
  while (( tries-- > 0 )); do
    port_open "$port" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# ports_free PORT...: dies naming the first port something already listens on.
ports_free() {
  local p
  for p in "$@"; do
    port_open "$p" && die "port $p is already in use (another run? change the *_PORT settings)"
  done
  return 0
}

remember() { PIDS+=("$1:$2"); }

# stop_pid NAME PID [SECONDS]: TERM, wait, then KILL. Only for processes this script started.
stop_pid() {
  local name=$1 pid=$2 tries=$(( ${3:-5} * 10 ))
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while (( tries-- > 0 )) && kill -0 "$pid" 2>/dev/null; do
    [[ $(ps -o stat= -p "$pid" 2>/dev/null) == Z* ]] && break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null && [[ $(ps -o stat= -p "$pid" 2>/dev/null) != Z* ]]; then
    log "$name (pid $pid) ignored TERM, sending KILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# stop_all: everything recorded, newest first. Installed as the EXIT trap.
stop_all() {
  local i entry
  for (( i = ${#PIDS[@]} - 1; i >= 0; i-- )); do
    entry=${PIDS[$i]}
    stop_pid "${entry%%:*}" "${entry#*:}"
  done
  PIDS=()
}

build() {
  if [[ ${SKIP_BUILD:-0} == 1 ]]; then
    log "SKIP_BUILD=1: using the binaries in $TARGET_DIR/$PROFILE"
  else
    log "building: cargo build --release --bin robots-proxy --example loadgen"
    (cd "$REPO_DIR" && cargo build --release --bin robots-proxy --example loadgen) ||
      die "build failed"
  fi
  [[ -x $PROXY_BIN && -x $LOADGEN_BIN ]] || die "missing $PROXY_BIN or $LOADGEN_BIN"
}

# write_nginx_conf RUN FAULT_LISTEN PORT... : one server block per port. A port written as
# "fault:PORT" proxies its /robots.txt to the fault server at FAULT_LISTEN (its X-Fault-Origin
# header names the port); when that server closes without an answer (nginx's 502), nginx closes
# the client connection without one too (444). Every other path is a ~1 KiB page, /robots.txt of
# the other ports a file with `Disallow: /private/`.
write_nginx_conf() {
  local run=$1 fault_listen=$2 spec port; shift 2
  mkdir -p "$run/www" "$run/nginx-tmp"
  printf 'User-agent: *\nDisallow: /private/\n' >"$run/www/robots.txt"
  { printf '<!doctype html>\n<html><head><title>soak origin</title></head><body>\n'
    for i in $(seq 14); do printf '<p>Paragraph %02d of the soak origin page, about one KiB in all.</p>\n' "$i"; done
    printf '</body></html>\n'; } >"$run/www/page.html"
  {
    cat <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $run/nginx.pid;
error_log $run/nginx-error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path $run/nginx-tmp/body;
    proxy_temp_path $run/nginx-tmp/proxy;
    fastcgi_temp_path $run/nginx-tmp/fastcgi;
    uwsgi_temp_path $run/nginx-tmp/uwsgi;
    scgi_temp_path $run/nginx-tmp/scgi;
    types { text/html html; text/plain txt; }
    default_type text/html;
    keepalive_timeout 65;
    keepalive_requests 1000;
    server_tokens off;
    root $run/www;
EOF
    for spec in "$@"; do
      port=${spec#fault:}
      printf '    server {\n        listen 127.0.0.1:%s;\n' "$port"
      if [[ $spec == fault:* ]]; then
        cat <<EOF
        location = /robots.txt {
            proxy_pass http://$fault_listen;
            proxy_set_header X-Fault-Origin \$server_port;
            proxy_read_timeout 30s;
            error_page 502 = @drop;
        }
        location @drop { return 444; }
EOF
      else
        printf '        location = /robots.txt { default_type text/plain; }\n'
      fi
      printf '        location / { try_files /page.html =404; }\n    }\n'
    done
    printf '}\n'
  } >"$run/nginx.conf"
}

# start_nginx RUN PORT...: starts nginx on the rendered config, waits for every port.
start_nginx() {
  local run=$1 p; shift
  need nginx
  nginx -t -q -e "$run/nginx-error.log" -c "$run/nginx.conf" -p "$run" || die "nginx config test failed"
  nginx -e "$run/nginx-error.log" -c "$run/nginx.conf" -p "$run" >"$run/nginx.out" 2>&1 </dev/null &
  NGINX_PID=$!
  remember nginx "$NGINX_PID"
  for p in "$@"; do wait_port "$p" "$NGINX_PID" 10 || die "nginx is not listening on $p"; done
  log "nginx (pid $NGINX_PID) on ${#@} port(s)"
}

# start_proxy RUN PORT [VAR=VALUE...]: starts robots-proxy with its state, audit log and admin
# listener (a free loopback port) under RUN; sets PROXY_PID and ADMIN (host:port).
start_proxy() {
  local run=$1 port=$2 v tries=100; shift 2
  # Only the settings given here apply: no ROBOTS_PROXY_* from the caller's environment.
  for v in $(compgen -e | grep '^ROBOTS_PROXY_' || true); do unset "$v"; done
  mkdir -p "$run/state"
  : >"$run/proxy.log"
  env ROBOTS_PROXY_STATE_DIR="$run/state" \
      ROBOTS_PROXY_AUDIT__PATH="$run/audit.jsonl" \
      ROBOTS_PROXY_ADMIN__LISTEN=127.0.0.1:0 \
      ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS=127.0.0.0/8 \
      ROBOTS_PROXY_PROXY__SHUTDOWN_GRACE=5s \
      "$@" \
      "$PROXY_BIN" serve --listen "127.0.0.1:$port" >"$run/proxy.log" 2>&1 </dev/null &
  PROXY_PID=$!
  remember robots-proxy "$PROXY_PID"
  ADMIN=
  while (( tries-- > 0 )); do
    ADMIN=$(sed -n 's/^robots-proxy admin listening on //p' "$run/proxy.log" 2>/dev/null | head -n 1) || true
    [[ -n $ADMIN ]] && break
    kill -0 "$PROXY_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $ADMIN ]] || ! wait_port "$port" "$PROXY_PID" 10; then
    tail -n 20 "$run/proxy.log" >&2
    die "robots-proxy did not start"
  fi
  log "robots-proxy (pid $PROXY_PID) on 127.0.0.1:$port, admin on $ADMIN"
}

# listen_overflows: the kernel's count of connections dropped because a listen queue was full
# (TcpExt ListenOverflows; it covers every listener in this network namespace).
listen_overflows() {
  awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "ListenOverflows") c = i; h = 1 }
                    else print $c }' /proc/net/netstat 2>/dev/null || echo 0
}

# metric NAME_WITH_LABELS FILE: the value of one sample line of a /metrics scrape (0 if absent).
metric() {
  awk -v name="$1" '$1 == name { print $2; found = 1; exit } END { if (!found) print 0 }' "$2"
}

# settle_and_stop LABEL PID ADMIN METRICS_FILE: waits until the audit writer's counter stops
# moving (it drains its queue asynchronously; bounded: 20 s), keeping the last scrape in
# METRICS_FILE, then sends SIGTERM (the proxy flushes and syncs the audit log) and passes if
# the process exits 0 within 20 s.
settle_and_stop() {
  local label=$1 pid=$2 admin=$3 out=$4 prev=-1 cur rc=0
  for _ in $(seq 20); do
    curl -s --max-time 5 "http://$admin/metrics" >"$out" || true
    cur=$(metric robots_proxy_audit_records_written_total "$out")
    [[ $cur == "$prev" ]] && break
    prev=$cur; sleep 1
  done
  kill -TERM "$pid"
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$label still running 20 s after SIGTERM"; stop_pid robots-proxy "$pid"
  else
    wait "$pid" || rc=$?
    if (( rc == 0 )); then pass "$label stopped on SIGTERM with status 0"
    else fail "$label exited with status $rc on SIGTERM"; fi
  fi
}

# start_sampler PID ADMIN INTERVAL OUT [FIRST-LAST]: every INTERVAL seconds one line
# "seconds rss_kib fds threads open_connections upstream" about the proxy, until it exits or is
# stopped; upstream counts established connections to the origin ports FIRST-LAST.
start_sampler() {
  local pid=$1 admin=$2 every=$3 out=$4 range=${5:-0-0}
  (
    t0=$(date +%s.%N)
    echo "# t rss_kib fds threads open_connections upstream" >"$out"
    while kill -0 "$pid" 2>/dev/null; do
      now=$(date +%s.%N)
      status=$(cat "/proc/$pid/status" 2>/dev/null) || break
      rss=$(awk '/^VmRSS:/ { print $2 }' <<<"$status")
      threads=$(awk '/^Threads:/ { print $2 }' <<<"$status")
      fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
      open=$(curl -s --max-time 2 "http://$admin/metrics" |
             awk '$1 == "robots_proxy_open_connections" { print $2 }')
      upstream=$(ss -Htn state established "( dport >= :${range%-*} and dport <= :${range#*-} )" 2>/dev/null | wc -l)
      awk -v now="$now" -v t0="$t0" -v rest="$rss $fds $threads ${open:-?} $upstream" \
        'BEGIN { printf "%.0f %s\n", now - t0, rest }' >>"$out"
      sleep "$every"
    done
  ) &
  SAMPLER_PID=$!
  remember sampler "$SAMPLER_PID"
}
