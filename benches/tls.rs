//! TLS interception costs: making a leaf certificate versus finding it cached, and whole
//! in-memory handshakes (no I/O) with each.
//!
//! `cargo bench --profile release --bench tls` (the release profile avoids a second build of
//! every dependency for the bench profile). Handshakes per second = 1 / time per iteration.
//! The "client+server" figures run both sides in one thread (the client verifies the chain);
//! the "server side" figures time only the proxy's side, including getting the config.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

use robots_proxy::tls::ca::{CaFiles, CertificateAuthority};

/// One complete handshake between fresh client and server connections, in memory. Returns
/// the time spent on the server's side (making its connection, reading, processing and
/// writing records), which is what the proxy pays per intercepted connection.
fn handshake(
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    name: &ServerName<'static>,
) -> Duration {
    let mut c = ClientConnection::new(client, name.clone()).unwrap();
    let started = Instant::now();
    let mut s = ServerConnection::new(server).unwrap();
    let mut server_time = started.elapsed();
    let mut buf = Vec::new();
    for _ in 0..16 {
        if !c.is_handshaking() && !s.is_handshaking() {
            return server_time;
        }
        buf.clear();
        while c.wants_write() && c.write_tls(&mut buf).unwrap() > 0 {}
        let started = Instant::now();
        let mut bytes = &buf[..];
        while !bytes.is_empty() {
            s.read_tls(&mut bytes).unwrap();
            s.process_new_packets().unwrap();
        }
        let mut out = Vec::new();
        while s.wants_write() && s.write_tls(&mut out).unwrap() > 0 {}
        server_time += started.elapsed();
        let mut bytes = &out[..];
        while !bytes.is_empty() {
            c.read_tls(&mut bytes).unwrap();
            c.process_new_packets().unwrap();
        }
    }
    panic!("handshake did not finish");
}

/// Criterion's `iter_custom` timing of the server's side of `iters` handshakes, plus what
/// `config` costs to get each time.
fn server_side(
    iters: u64,
    config: impl Fn() -> Arc<ServerConfig>,
    client: &Arc<ClientConfig>,
    name: &ServerName<'static>,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let started = Instant::now();
        let server = config();
        total += started.elapsed() + handshake(server, client.clone(), name);
    }
    total
}

fn client_config(ca: &CertificateAuthority, resumption: bool) -> Arc<ClientConfig> {
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(ca.ca_pem().as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let mut config = ClientConfig::builder_with_provider(robots_proxy::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    if !resumption {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Arc::new(config)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, _) = CertificateAuthority::load_or_create(&CaFiles::in_dir(dir.path())).unwrap();
    let host = "bench.example.test";
    let name = ServerName::try_from(host).unwrap();
    let full = client_config(&ca, false);
    let resuming = client_config(&ca, true);
    let cached = ca.server_config(host).unwrap();

    c.bench_function("leaf/fresh make_config", |b| b.iter(|| ca.make_config(host).unwrap()));
    c.bench_function("leaf/cached server_config", |b| b.iter(|| ca.server_config(host).unwrap()));
    // Both sides of the handshake, in one thread.
    c.bench_function("handshake/cached leaf, full, client+server", |b| {
        b.iter(|| handshake(ca.server_config(host).unwrap(), full.clone(), &name))
    });
    c.bench_function("handshake/fresh leaf, full, client+server", |b| {
        b.iter(|| handshake(ca.make_config(host).unwrap(), full.clone(), &name))
    });
    // The server's side only: the proxy's cost per intercepted connection.
    c.bench_function("handshake/cached leaf, full, server side", |b| {
        b.iter_custom(|iters| server_side(iters, || ca.server_config(host).unwrap(), &full, &name))
    });
    c.bench_function("handshake/fresh leaf, full, server side", |b| {
        b.iter_custom(|iters| server_side(iters, || ca.make_config(host).unwrap(), &full, &name))
    });
    // A client that resumes its session (TLS 1.3 ticket or session ID) against the cached
    // config: what a keep-alive-less client with a session cache pays.
    handshake(cached.clone(), resuming.clone(), &name);
    c.bench_function("handshake/cached leaf, resumed, server side", |b| {
        b.iter_custom(|iters| server_side(iters, || cached.clone(), &resuming, &name))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
