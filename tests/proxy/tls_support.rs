//! TLS on 127.0.0.1 for the HTTPS tests: a test CA made with rcgen, an origin that serves
//! HTTP/1.1 and HTTP/2 by ALPN and records what it saw, the proxy set up to trust that CA
//! upstream and to intercept with a CA of its own, and clients that speak through CONNECT.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, Version};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;

use robots_proxy::config::Config;
use robots_proxy::tls::ca::{CaFiles, CertificateAuthority};

use super::support::{parse_response, RawResponse, TestProxy};

/// Bounds every network wait of a test client, so a hang fails the test instead of stalling it.
pub const WAIT: Duration = Duration::from_secs(20);

/// A certificate authority for test origins.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pub der: CertificateDer<'static>,
    pub pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        TestCa { der: cert.der().clone(), pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A server certificate for `names` (DNS names or IP addresses) and its key.
    pub fn leaf(&self, names: &[&str]) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "test origin");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (vec![cert.der().clone()], key)
    }
}

impl TestCa {
    /// A server certificate for `names` and its key, as PEM (certificate, key).
    pub fn leaf_pem(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "test proxy");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate whose subject's common name is `cn` (none when `None`) with the
    /// DNS names `dns`, and its key, as PEM (certificate, key).
    pub fn client_pem(&self, cn: Option<&str>, dns: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = dns.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A request as the TLS origin saw it.
#[derive(Debug, Clone)]
pub struct SeenTls {
    pub method: String,
    /// Path and query.
    pub target: String,
    pub version: Version,
    pub headers: HeaderMap,
    /// `:authority` (HTTP/2) or the `Host` header (HTTP/1.1).
    pub authority: Option<String>,
    /// The TLS server name the proxy sent.
    pub sni: Option<String>,
}

/// An HTTPS origin on 127.0.0.1 with a certificate for `localhost` and `127.0.0.1` from its
/// own [`TestCa`]. `/robots.txt` answers the given rules, anything else
/// `hello from <target> over <version>`.
pub struct TlsOrigin {
    pub addr: SocketAddr,
    pub ca: Arc<TestCa>,
    seen: Arc<Mutex<Vec<SeenTls>>>,
    connections: Arc<AtomicUsize>,
}

/// ALPN for an origin that speaks both HTTP versions.
pub const H2_H1: &[&[u8]] = &[b"h2", b"http/1.1"];
/// ALPN for an HTTP/1.1-only origin or client.
pub const H1: &[&[u8]] = &[b"http/1.1"];

impl TlsOrigin {
    /// An origin offering h2 and http/1.1, with a CA of its own.
    pub async fn start(robots: &str) -> TlsOrigin {
        Self::start_with(robots, Arc::new(TestCa::new("robots-proxy tests origin CA")), H2_H1).await
    }

    pub async fn start_with(robots: &str, ca: Arc<TestCa>, alpn: &[&[u8]]) -> TlsOrigin {
        Self::start_serving(robots, &[], ca, alpn).await
    }

    /// [`TlsOrigin::start_with`] that also answers each `(path, body)` of `files`.
    pub async fn start_serving(
        robots: &str,
        files: &[(&str, &str)],
        ca: Arc<TestCa>,
        alpn: &[&[u8]],
    ) -> TlsOrigin {
        let files: Arc<Vec<(String, String)>> =
            Arc::new(files.iter().map(|(p, b)| ((*p).to_owned(), (*b).to_owned())).collect());
        let (chain, key) = ca.leaf(&["localhost", "127.0.0.1"]);
        let mut config = rustls::ServerConfig::builder_with_provider(robots_proxy::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<SeenTls>>> = Arc::default();
        let connections: Arc<AtomicUsize> = Arc::default();
        let robots: Arc<str> = robots.into();
        let (seen2, connections2) = (seen.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                connections2.fetch_add(1, Ordering::SeqCst);
                let (seen, robots, acceptor) = (seen2.clone(), robots.clone(), acceptor.clone());
                let files = files.clone();
                tokio::spawn(async move {
                    let Ok(Ok(tls)) = tokio::time::timeout(WAIT, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    let sni = tls.get_ref().1.server_name().map(str::to_owned);
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (seen, robots, sni) = (seen.clone(), robots.clone(), sni.clone());
                        let files = files.clone();
                        async move { Ok::<_, Infallible>(serve(req, &seen, &robots, &files, sni)) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        TlsOrigin { addr, ca, seen, connections }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `localhost:PORT`
    pub fn host(&self) -> String {
        format!("localhost:{}", self.port())
    }

    /// `https://localhost:PORT`
    pub fn base(&self) -> String {
        format!("https://localhost:{}", self.port())
    }

    /// `https://127.0.0.1:PORT`
    pub fn ip_base(&self) -> String {
        format!("https://127.0.0.1:{}", self.port())
    }

    pub fn seen(&self) -> Vec<SeenTls> {
        self.seen.lock().unwrap().clone()
    }

    /// What the origin saw for `target`.
    pub fn seen_for(&self, target: &str) -> Vec<SeenTls> {
        self.seen().into_iter().filter(|s| s.target == target).collect()
    }

    pub fn hits(&self, target: &str) -> usize {
        self.seen_for(target).len()
    }

    /// Requests other than for robots.txt.
    pub fn content_hits(&self) -> usize {
        self.seen().iter().filter(|s| s.target != "/robots.txt").count()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn serve(
    req: Request<Incoming>,
    seen: &Mutex<Vec<SeenTls>>,
    robots: &str,
    files: &[(String, String)],
    sni: Option<String>,
) -> Response<Full<Bytes>> {
    let target = req.uri().path_and_query().map_or("/".to_owned(), |p| p.to_string());
    let authority = req.uri().authority().map(|a| a.to_string()).or_else(|| {
        req.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned)
    });
    seen.lock().unwrap().push(SeenTls {
        method: req.method().to_string(),
        target: target.clone(),
        version: req.version(),
        headers: req.headers().clone(),
        authority,
        sni,
    });
    if target == "/robots.txt" {
        return Response::new(Full::new(Bytes::from(robots.to_owned())));
    }
    if let Some((_, body)) = files.iter().find(|(p, _)| *p == target) {
        return Response::new(Full::new(Bytes::from(body.clone())));
    }
    Response::new(Full::new(Bytes::from(format!("hello from {target} over {:?}", req.version()))))
}

/// The proxy with HTTPS set up for tests: its own CA in a temp dir, the origin's CA trusted
/// upstream (`https.upstream_ca_file`), and CONNECT allowed to `ports`.
pub struct HttpsProxy {
    pub proxy: TestProxy,
    pub ca: Arc<CertificateAuthority>,
    pub ca_der: CertificateDer<'static>,
    _dir: tempfile::TempDir,
}

impl HttpsProxy {
    pub async fn start(
        trusted_upstream: &TestCa,
        ports: &[u16],
        edit: impl FnOnce(&mut Config),
    ) -> HttpsProxy {
        let dir = tempfile::tempdir().unwrap();
        let upstream_ca: PathBuf = dir.path().join("origin-ca.pem");
        std::fs::write(&upstream_ca, &trusted_upstream.pem).unwrap();
        let (ca, created) =
            CertificateAuthority::load_or_create(&CaFiles::in_dir(&dir.path().join("ca"))).unwrap();
        assert!(created, "a new CA in a new directory");
        let ca_der = rustls::pki_types::pem::PemObject::from_pem_slice(ca.ca_pem().as_bytes())
            .expect("the CA certificate is PEM");
        let ca = Arc::new(ca);
        let ports = ports.to_vec();
        let proxy = TestProxy::start_full(
            |c| {
                c.https.upstream_ca_file = Some(upstream_ca);
                c.https.connect_ports = ports;
                edit(c);
            },
            Some(ca.clone()),
        )
        .await;
        HttpsProxy { proxy, ca, ca_der, _dir: dir }
    }

    pub fn addr(&self) -> SocketAddr {
        self.proxy.addr
    }

    /// A client TLS config that trusts the proxy's CA only.
    pub fn client_tls(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        client_tls(&[&self.ca_der], alpn)
    }

    /// A reqwest client through this proxy trusting the proxy's CA, offering `alpn`.
    pub fn client(&self, alpn: &[&[u8]]) -> reqwest::Client {
        reqwest_client(self.addr(), self.client_tls(alpn))
    }

    /// A client TLS config that trusts the proxy's CA only and accepts a certificate for
    /// `name` whatever server name it sends: a domain-fronting client that goes on although
    /// the proxy showed it the tunnel host's certificate.
    pub fn fronting_client_tls(&self, name: &str) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let provider = robots_proxy::tls::provider();
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let name = ServerName::try_from(name.to_owned()).unwrap();
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AsIf { inner, name }))
            .with_no_client_auth()
    }
}

/// Verifies a server's certificate as if the client had asked for `name`.
#[derive(Debug)]
struct AsIf {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl rustls::client::danger::ServerCertVerifier for AsIf {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _asked: &ServerName<'_>,
        ocsp: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.inner.verify_server_cert(end_entity, intermediates, &self.name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A rustls client config trusting `roots` only, offering `alpn`.
pub fn client_tls(roots: &[&CertificateDer<'static>], alpn: &[&[u8]]) -> rustls::ClientConfig {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add((*root).clone()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(robots_proxy::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// A reqwest client that sends everything through `proxy` with the given TLS config.
pub fn reqwest_client(proxy: SocketAddr, tls: rustls::ClientConfig) -> reqwest::Client {
    reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(format!("http://{proxy}")).unwrap())
        .use_preconfigured_tls(tls)
        .timeout(WAIT)
        .build()
        .unwrap()
}

/// What a raw CONNECT got: the open tunnel after a 2xx, or the proxy's answer.
pub enum Connected {
    Tunnel(TcpStream),
    Refused(RawResponse),
}

impl Connected {
    pub fn tunnel(self) -> TcpStream {
        match self {
            Connected::Tunnel(s) => s,
            Connected::Refused(r) => panic!("CONNECT refused: {r:?}"),
        }
    }

    pub fn refused(self) -> RawResponse {
        match self {
            Connected::Tunnel(_) => panic!("CONNECT was accepted"),
            Connected::Refused(r) => r,
        }
    }
}

/// Sends `CONNECT target` with extra header lines (each ending in `\r\n`) and reads the
/// answer's head byte by byte, so that nothing after it is consumed.
pub async fn connect(proxy: SocketAddr, target: &str, extra: &str) -> Connected {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = tokio::time::timeout(WAIT, stream.read_u8())
            .await
            .expect("the proxy answers CONNECT")
            .expect("the proxy answers CONNECT before closing");
        head.push(byte);
        assert!(head.len() < 64 * 1024, "CONNECT answer head too long");
    }
    let answer = parse_response(&head);
    if (200..300).contains(&answer.status) {
        return Connected::Tunnel(stream);
    }
    let length: usize =
        answer.headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    tokio::time::timeout(WAIT, stream.read_exact(&mut body)).await.unwrap().unwrap();
    let mut full = head;
    full.extend_from_slice(&body);
    Connected::Refused(parse_response(&full))
}

/// TLS over an open tunnel, verifying `server_name` (a DNS name or an IP address; for an IP
/// address no SNI is sent).
pub async fn tls_over(
    tunnel: TcpStream,
    config: rustls::ClientConfig,
    server_name: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let name = ServerName::try_from(server_name.to_owned()).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    tokio::time::timeout(WAIT, connector.connect(name, tunnel)).await.expect("TLS handshake hung")
}

/// An HTTP/1.1 client connection over a tunnel (TLS inside it, or plain).
pub async fn h1_over<IO>(io: IO) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.unwrap();
    tokio::spawn(conn);
    send
}

/// An HTTP/2 client connection over an intercepted tunnel.
pub async fn h2_over(
    tls: TlsStream<TcpStream>,
) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    send
}

/// A response read in full.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> String {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
    }
}

/// Reads a hyper response in full.
pub async fn read_answer(resp: Response<Incoming>) -> Answer {
    let (parts, body) = resp.into_parts();
    let body = tokio::time::timeout(WAIT, body.collect()).await.unwrap().unwrap().to_bytes();
    Answer {
        status: parts.status.as_u16(),
        version: parts.version,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// `GET` on an HTTP/1.1 connection with the given `Host`.
pub async fn h1_get(
    send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut req = Request::get(path).header("host", host);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Empty::new()).unwrap();
    tokio::time::timeout(WAIT, send.ready()).await.unwrap().unwrap();
    let resp = tokio::time::timeout(WAIT, send.send_request(req)).await.unwrap().unwrap();
    read_answer(resp).await
}

/// `GET url` (absolute, giving `:authority`) on an HTTP/2 connection.
pub async fn h2_get(
    mut send: hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    url: &str,
) -> Answer {
    let req = Request::get(url).version(Version::HTTP_2).body(Empty::new()).unwrap();
    tokio::time::timeout(WAIT, send.ready()).await.unwrap().unwrap();
    let resp = tokio::time::timeout(WAIT, send.send_request(req)).await.unwrap().unwrap();
    read_answer(resp).await
}

/// The whole error chain of `e`, for assertions on what it says.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Whether the other end closes `stream` within `within`: reads (and drops) whatever it
/// sends until the end or an error (a TLS stream cut without close_notify).
pub async fn closed_within<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    within: Duration,
) -> bool {
    let mut buf = [0u8; 4096];
    let reading = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, reading).await.is_ok()
}
