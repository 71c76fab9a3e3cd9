#!/usr/bin/env bash
# Smoke test of the container image, for a machine with a container engine and access to the
# registries the base images come from (docker.io's rust, gcr.io's distroless): the CI machines
# have neither, so .ci/run does not run it. It builds the image, starts it, waits for its own
# HEALTHCHECK command (`robots-proxy health`), checks /readyz and sends one request through the
# proxy (to URL, by default http://example.com/, so the container needs internet).
#
# Usage: .ci/image-smoke.sh [URL]     ENGINE=podman .ci/image-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-docker}
url=${1:-http://example.com/}
tag=robots-proxy:smoke
name=robots-proxy-smoke-$$

"$engine" build -t "$tag" .
# The admin port is published under another number, as compose does: the Host rule answers
# it because ROBOTS_PROXY_ADMIN__HOSTS names it with that port (docs/deployment.md, "Running in Docker").
admin_port=${ADMIN_PORT:-19090}
"$engine" run -d --name "$name" -p 127.0.0.1::8080 -p "127.0.0.1:$admin_port:9090" \
  -e "ROBOTS_PROXY_ADMIN__HOSTS=localhost:$admin_port,127.0.0.1:$admin_port" "$tag" >/dev/null
trap '"$engine" logs "$name" 2>&1 | tail -n 20; "$engine" rm -f "$name" >/dev/null' EXIT

healthy=
for _ in $(seq 1 30); do
  if "$engine" exec "$name" /usr/local/bin/robots-proxy health; then healthy=1; break; fi
  sleep 1
done
[ -n "$healthy" ] || { echo "robots-proxy health never succeeded in the container"; exit 1; }

proxy=$("$engine" port "$name" 8080/tcp | head -n 1)
admin=localhost:$admin_port
curl -fsS "http://$admin/readyz"; echo
status=$(curl -sS -o /dev/null -w '%{http_code}' -x "http://$proxy" "$url")
echo "GET $url through the image's proxy: $status"
case "$status" in
  2??|3??|403) ;;  # forwarded, or refused by the site's robots.txt: both are decisions
  *) echo "unexpected status $status"; exit 1 ;;
esac
curl -fsS "http://$admin/metrics" | grep '^robots_proxy_requests_total'
echo "image smoke test: ok"
