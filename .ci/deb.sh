#!/usr/bin/env bash
# The Debian package (docs/deployment.md, "Installing"): builds it with cargo-deb from the DEBUG binary that
# .ci/run has built (no release build in CI), installs it with dpkg -i, checks what it installed
# (`robots-proxy config check` on /etc/robots-proxy/robots-proxy.toml, as the service's user
# with the unit's environment; the service started and `robots-proxy health` against it), then
# removes it (dpkg --purge) and what the run left. Needs root. Without systemd as PID 1 (CI
# containers), the service is started as a background process under the system user the
# package made, and stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null || cargo install cargo-deb --locked
[ -x target/debug/robots-proxy ] || cargo build --locked --bin robots-proxy
deb=target/debian/robots-proxy.deb
rm -f "$deb"
# Stripped (a debug binary is ~300 MB with its symbols) and --fast (lighter compression): this
# checks the package, it is not a release.
cargo deb --no-build --profile dev --fast --output "$deb" 2>&1 | grep -v 'dev profile\|debug symbols' || true
[ -s "$deb" ] || { echo "cargo deb made no package"; exit 1; }
info=$(dpkg-deb --info "$deb")
grep -q 'Package: robots-proxy' <<<"$info"
listing=$(dpkg-deb --contents "$deb")
for path in ./usr/bin/robots-proxy ./etc/robots-proxy/robots-proxy.toml \
  ./lib/systemd/system/robots-proxy.service ./lib/systemd/system/robots-proxy.service.d/debian.conf; do
  grep -q " $path\$" <<<"$listing" || { echo "$deb lacks $path"; exit 1; }
done
conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
grep -qx /etc/robots-proxy/robots-proxy.toml <<<"$conffiles"

log=$(mktemp)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  dpkg --purge robots-proxy >/dev/null 2>&1 || true
  # What the package keeps on purge (the audit log, the state, their user) is this run's only.
  rm -rf /var/lib/robots-proxy /var/log/robots-proxy "$log"
  if getent passwd robots-proxy >/dev/null; then deluser --system robots-proxy >/dev/null 2>&1 || true; fi
  if getent group robots-proxy >/dev/null; then delgroup --system robots-proxy >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
dpkg -i "$deb" >/dev/null
getent passwd robots-proxy >/dev/null || { echo "the package made no robots-proxy user"; exit 1; }
[ "$(stat -c %U /var/lib/robots-proxy)" = robots-proxy ] || { echo "/var/lib/robots-proxy is not the user's"; exit 1; }

# The unit's environment, as the service has it.
unit_env=(ROBOTS_PROXY_STATE_DIR=/var/lib/robots-proxy
  ROBOTS_PROXY_AUDIT__PATH=/var/log/robots-proxy/audit.jsonl)
as_service() { runuser -u robots-proxy -- env -i PATH=/usr/bin:/bin "${unit_env[@]}" "$@"; }
as_service /usr/bin/robots-proxy config check --config /etc/robots-proxy/robots-proxy.toml >/dev/null
echo "deb: robots-proxy config check on the installed configuration: ok"

if [ -d /run/systemd/system ]; then
  systemctl start robots-proxy
  as_service /usr/bin/robots-proxy health --config /etc/robots-proxy/robots-proxy.toml
  systemctl stop robots-proxy
else
  # Free ports, not the configuration's 8080/9090 (other services on a CI machine).
  # setpriv execs (no fork, unlike runuser): $! is the proxy itself, stopped by that PID.
  setpriv --reuid robots-proxy --regid robots-proxy --init-groups \
    env -i PATH=/usr/bin:/bin "${unit_env[@]}" \
    /usr/bin/robots-proxy serve --config /etc/robots-proxy/robots-proxy.toml \
    --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 2>"$log" &
  pid=$!
  admin=
  for _ in $(seq 1 100); do
    admin=$(sed -n 's/^robots-proxy admin listening on //p' "$log" | head -n 1)
    [ -n "$admin" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "the installed proxy did not start"; exit 1; }
    sleep 0.1
  done
  [ -n "$admin" ] || { cat "$log"; echo "the installed proxy did not start"; exit 1; }
  as_service /usr/bin/robots-proxy health --url "http://$admin/healthz"
  as_service /usr/bin/robots-proxy health --url "http://$admin/readyz"
  # The service runs as the package's user.
  [ "$(ps -o user= -p "$pid" | tr -d ' ')" = robots-proxy ] || { echo "not run as robots-proxy"; exit 1; }
  kill -TERM "$pid"
  wait "$pid" || { cat "$log"; echo "the installed proxy did not stop cleanly"; exit 1; }
  pid=
fi
echo "deb: robots-proxy health against the installed service: ok"
dpkg --purge robots-proxy >/dev/null
[ ! -e /usr/bin/robots-proxy ] || { echo "dpkg --purge left /usr/bin/robots-proxy"; exit 1; }
echo "deb: installed, checked and removed: ok"
