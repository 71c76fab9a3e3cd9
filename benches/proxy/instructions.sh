#!/usr/bin/env bash
# Instructions per request (issue #38): each candidate under callgrind (valgrind), a fixed number
# of requests through it, and the instructions its threads executed for them. A second measure of
# CPU per request beside run.sh's: it counts work, not time, so it does not move with what else
# the machine runs (two runs of one binary agree within 0.1 %), where run.sh's CPU time on a
# small shared machine moves by 10 % from run to run. It does not see the kernel (sockets,
# writes), caches or the SHA-NI instructions valgrind lacks: SHA-256 (the audit chain) runs in
# software under it, so its share is shown apart, and is several times what it costs natively.
#
#   CANDIDATES="before=/tmp/old/robots-proxy after=target/release/robots-proxy" \
#     benches/proxy/instructions.sh
#   VARIANTS=deny N=5000 CANDIDATES=... benches/proxy/instructions.sh
#
# Variants (VARIANTS, default "single deny"):
#   single  GET /index.html (a ~1 KiB page) through the proxy from an nginx origin on 127.0.0.1
#   deny    GET /private/x, disallowed by the origin's robots.txt: the proxy answers 403 and
#           writes the audit record (its chain and Merkle tree included)
# Each candidate starts fresh (an empty state directory), takes WARM requests (robots.txt
# fetched, connections made), has its counters zeroed (callgrind_control -z), takes N requests
# from oha over CONNS connections, and is dumped (callgrind_control -d).
# Knobs: N=2000 WARM=300 CONNS=8 RUN_DIR=/tmp/robots-proxy-instructions BENCH_UA=benchbot/1.0
# Needs valgrind, nginx, oha, python3 (apt-get install -y valgrind nginx; cargo install oha --locked).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/../.." && pwd)
source "$REPO_DIR/benches/soak/common.sh"
log() { printf '[instructions %s] %s\n' "$(date +%T)" "$*" >&2; }

case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

VARIANTS=${VARIANTS:-single deny}
N=${N:-2000}; WARM=${WARM:-300}; CONNS=${CONNS:-8}
RUN_DIR=${RUN_DIR:-/tmp/robots-proxy-instructions}
BENCH_UA=${BENCH_UA:-benchbot/1.0}
CANDIDATES=${CANDIDATES:-robots-proxy=$TARGET_DIR/release/robots-proxy}
ORIGIN_PORT=18370; PROXY_PORT=18371; ADMIN_PORT=18372
OHA=${OHA:-$(command -v oha || echo "${CARGO_HOME:-$HOME/.cargo}/bin/oha")}
need valgrind; need callgrind_control; need callgrind_annotate; need nginx; need python3
[[ -x $OHA ]] || die "oha is not installed (cargo install oha --locked, or OHA=path)"
for v in $VARIANTS; do
  case $v in single|deny) ;; *) die "unknown variant '$v' (want single deny)" ;; esac
done
(( N >= 100 )) || die "N must be at least 100"

rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR"
trap stop_all EXIT
ports_free $ORIGIN_PORT $PROXY_PORT $ADMIN_PORT
# The soak's origin (benches/soak/common.sh): robots.txt `Disallow: /private/`, a ~1 KiB page
# for every other path.
write_nginx_conf "$RUN_DIR" - "$ORIGIN_PORT"
start_nginx "$RUN_DIR" "$ORIGIN_PORT"

load() {  # load URL COUNT OUT: COUNT requests through the proxy
  "$OHA" --no-tui --output-format json -n "$2" -c "$CONNS" -x "http://127.0.0.1:$PROXY_PORT" \
    -H "User-Agent: $BENCH_UA" "$1" >"$3" 2>"$3.err" || die "oha failed: $(cat "$3.err")"
}
answered() {  # answered OUT STATUS: how many answers had STATUS
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("statusCodeDistribution", {}).get(sys.argv[2], 0))' "$1" "$2"
}

printf 'variant\tcandidate\trequests\tinstructions_per_request\tsha256_per_request\tother_per_request\n' >"$RUN_DIR/results.tsv"
for v in $VARIANTS; do
  case $v in
    single) path=/index.html; status=200 ;;
    deny) path=/private/x; status=403 ;;
  esac
  url="http://127.0.0.1:$ORIGIN_PORT$path"
  for pair in $CANDIDATES; do
    name=${pair%%=*}; bin=${pair#*=}
    [[ -x $bin ]] || die "candidate $name: $bin is not an executable"
    dir="$RUN_DIR/$v-$name"; mkdir -p "$dir/state"
    env ROBOTS_PROXY_STATE_DIR="$dir/state" ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS=127.0.0.0/8 \
        ROBOTS_PROXY_ADMIN__LISTEN="127.0.0.1:$ADMIN_PORT" ROBOTS_PROXY_LOG__LEVEL=warn \
        valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out.%p" \
        "$bin" serve --listen "127.0.0.1:$PROXY_PORT" >"$dir/log" 2>&1 &
    pid=$!; remember "$name" "$pid"
    wait_port $ADMIN_PORT "$pid" 120 || die "$name did not start under valgrind: $(tail -5 "$dir/log")"
    load "$url" "$WARM" "$dir/warm.json"
    callgrind_control -z "$pid" >/dev/null
    load "$url" "$N" "$dir/load.json"
    callgrind_control -d "$pid" >/dev/null
    stop_pid "$name" "$pid"
    got=$(answered "$dir/load.json" "$status")
    (( got == N )) || die "$name answered $got of $N requests $v with $status"
    dump=$(ls "$dir"/callgrind.out."$pid".* | head -1)
    callgrind_annotate --inclusive=yes --threshold=100 "$dump" >"$dir/annotate.txt" 2>/dev/null
    total=$(awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' "$dir/annotate.txt")
    sha=$(awk '/sha2::sha256::compress256 \[/ {gsub(",", "", $1); if ($1 > m) m = $1} END {print m + 0}' "$dir/annotate.txt")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$v" "$name" "$N" $((total / N)) $((sha / N)) $(((total - sha) / N)) >>"$RUN_DIR/results.tsv"
    log "$v $name: $((total / N)) instructions per request ($((sha / N)) in SHA-256)"
  done
done
python3 - "$RUN_DIR/results.tsv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("variant    candidate          instr/req   SHA-256/req   other/req   vs first: total, other")
first = {}
for r in rows:
    t, s, o = (int(r[k]) for k in ("instructions_per_request", "sha256_per_request", "other_per_request"))
    base = first.setdefault(r["variant"], (t, o))
    print(f"{r['variant']:10s} {r['candidate']:18s} {t:9d}   {s:11d}   {o:9d}   "
          f"{(t / base[0] - 1) * 100:+.1f} %, {(o / base[1] - 1) * 100:+.1f} %")
EOF
log "raw results: $RUN_DIR/results.tsv (callgrind dumps under $RUN_DIR/<variant>-<candidate>/)"
