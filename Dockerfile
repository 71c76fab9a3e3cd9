# syntax=docker/dockerfile:1
# Build: docker build -t robots-proxy .
# Run:   docker run -p 8080:8080 -v robots-state:/var/lib/robots-proxy robots-proxy
FROM rust:1.88-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin robots-proxy \
    && cp target/release/robots-proxy /robots-proxy

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /robots-proxy /usr/local/bin/robots-proxy
COPY config/robots-proxy.toml /etc/robots-proxy/robots-proxy.toml
ENV ROBOTS_PROXY_STATE_DIR=/var/lib/robots-proxy \
    ROBOTS_PROXY_PROXY__LISTEN=0.0.0.0:8080
VOLUME ["/var/lib/robots-proxy"]
EXPOSE 8080
USER nonroot
ENTRYPOINT ["/usr/local/bin/robots-proxy"]
CMD ["serve", "--config", "/etc/robots-proxy/robots-proxy.toml"]
