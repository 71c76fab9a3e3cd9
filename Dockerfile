# syntax=docker/dockerfile:1
# robots-proxy in a small, non-root runtime image.
#
# Build: docker build -t robots-proxy .
# Run:   docker run -d --name robots-proxy -p 127.0.0.1:8080:8080 -p 127.0.0.1:9090:9090 \
#          -v robots-state:/var/lib/robots-proxy -v "$PWD/config:/etc/robots-proxy:ro" robots-proxy
# Reload the configuration: docker kill --signal HUP robots-proxy
# Stop (in-flight requests get proxy.shutdown_grace): docker stop -t 45 robots-proxy
#
# No CA is baked into the image: in intercept mode the proxy creates one on first start under
# the state volume (or mount your own and set https.ca_cert / https.ca_key).

FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY benches ./benches
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin robots-proxy \
    && cp target/release/robots-proxy /robots-proxy
# The state directory, owned by the runtime user, so that a new volume mounted there is
# writable (the runtime image has no shell to create it).
RUN mkdir -p /state && chown 65532:65532 /state

# distroless/cc: glibc and CA certificates, no shell; runs as uid 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /robots-proxy /usr/local/bin/robots-proxy
COPY --from=build --chown=65532:65532 /state /var/lib/robots-proxy
COPY config/robots-proxy.toml /etc/robots-proxy/robots-proxy.toml
# Listen on every interface inside the container; publish the ports to choose who can reach
# them. The admin port has no authentication: publish it on loopback or a private network.
ENV ROBOTS_PROXY_CONFIG=/etc/robots-proxy/robots-proxy.toml \
    ROBOTS_PROXY_STATE_DIR=/var/lib/robots-proxy \
    ROBOTS_PROXY_PROXY__LISTEN=0.0.0.0:8080 \
    ROBOTS_PROXY_ADMIN__LISTEN=0.0.0.0:9090
# Clients reach a container through the container network (a private address), never through
# its loopback: allow the private ranges; publishing the port decides who gets there.
# The admin listener too: a published port (docker run -p, compose) arrives from the bridge's
# gateway, a private address. Its Host rule (DNS rebinding) answers "localhost" and the
# container's address on port 9090, and the loopback addresses named here (an IP literal cannot
# be rebound): `-p 127.0.0.1:9090:9090` works as it is. A port published as another number
# (`-p 127.0.0.1:9091:9090`) is named with it: -e ROBOTS_PROXY_ADMIN__HOSTS=localhost:9091,...
ENV ROBOTS_PROXY_ACCESS__ALLOW_CLIENTS=127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7 \
    ROBOTS_PROXY_ADMIN__ALLOW_CLIENTS=127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7 \
    ROBOTS_PROXY_ADMIN__HOSTS=127.0.0.1,::1
# State: the audit log and the interception CA. Configuration: robots-proxy.toml.
VOLUME ["/var/lib/robots-proxy", "/etc/robots-proxy"]
# 8080: the proxy (HTTP_PROXY / HTTPS_PROXY); 9090: metrics, health and the status page.
EXPOSE 8080 9090
# The distroless image's "nonroot" user, by number, so that a cluster can check runAsNonRoot.
USER 65532:65532
# No shell or curl in the image: the binary probes its own /healthz (on admin.listen).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/robots-proxy", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/robots-proxy"]
CMD ["serve"]
