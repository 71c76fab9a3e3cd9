//! TLS interception costs: making a leaf certificate versus finding it cached, and whole
//! in-memory handshakes (client and server in one thread, no I/O) with each.
//!
//! `cargo bench --bench tls` (release profile). Handshakes per second = 1 / time per
//! iteration; the client side (certificate chain verification) is included, so the server's
//! share is smaller than the figure.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

use robots_proxy::tls::ca::{CaFiles, CertificateAuthority};

/// Moves every pending TLS record from one side to the other.
fn pump(from: &mut dyn FnMut(&mut Vec<u8>), to: &mut dyn FnMut(&[u8])) {
    let mut buf = Vec::new();
    from(&mut buf);
    if !buf.is_empty() {
        to(&buf);
    }
}

/// One complete handshake between fresh client and server connections.
fn handshake(server: Arc<ServerConfig>, client: Arc<ClientConfig>, name: &ServerName<'static>) {
    let mut c = ClientConnection::new(client, name.clone()).unwrap();
    let mut s = ServerConnection::new(server).unwrap();
    for _ in 0..16 {
        if !c.is_handshaking() && !s.is_handshaking() {
            return;
        }
        pump(
            &mut |buf| while c.wants_write() && c.write_tls(buf).unwrap() > 0 {},
            &mut |mut bytes| {
                while !bytes.is_empty() {
                    s.read_tls(&mut bytes).unwrap();
                    s.process_new_packets().unwrap();
                }
            },
        );
        pump(
            &mut |buf| while s.wants_write() && s.write_tls(buf).unwrap() > 0 {},
            &mut |mut bytes| {
                while !bytes.is_empty() {
                    c.read_tls(&mut bytes).unwrap();
                    c.process_new_packets().unwrap();
                }
            },
        );
    }
    panic!("handshake did not finish");
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
    c.bench_function("handshake/cached leaf, full", |b| {
        b.iter(|| handshake(ca.server_config(host).unwrap(), full.clone(), &name))
    });
    c.bench_function("handshake/fresh leaf, full", |b| {
        b.iter(|| handshake(ca.make_config(host).unwrap(), full.clone(), &name))
    });
    // A client that resumes its session (TLS 1.3 ticket or session ID) against the cached
    // config: what a keep-alive-less client with a session cache pays.
    handshake(cached.clone(), resuming.clone(), &name);
    c.bench_function("handshake/cached leaf, resumed", |b| {
        b.iter(|| handshake(cached.clone(), resuming.clone(), &name))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
