//! Real servers on 127.0.0.1 for the proxy tests: an origin with its own robots.txt, the proxy
//! itself, and raw and reqwest clients that go through it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use robots_proxy::audit::AuditLog;
use robots_proxy::cache::RobotsCache;
use robots_proxy::clock::{Clock, ManualClock};
use robots_proxy::config::Config;
use robots_proxy::pacing::Pacer;
use robots_proxy::proxy::Proxy;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Polls `ready` every 10 ms for up to 5 s; panics naming `what` if it never holds.
pub async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    for _ in 0..500 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

/// A request as the origin saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: HeaderMap,
}

/// An origin server with a robots.txt and a few useful paths:
/// `/big/N` streams N bytes, `/slow` never answers, anything else answers
/// `hello from <target>`.
pub struct Origin {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Origin {
    pub async fn start(robots: &str) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let robots: Arc<str> = robots.into();
        let seen2 = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let seen = seen2.clone();
                let robots = robots.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let seen = seen.clone();
                        let robots = robots.clone();
                        async move { Ok::<_, Infallible>(serve_origin(req, &seen, &robots).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Origin { addr, seen }
    }

    /// `http://127.0.0.1:PORT`
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests the origin saw for `target`.
    pub fn hits(&self, target: &str) -> usize {
        self.seen().iter().filter(|s| s.target == target).count()
    }

    /// How many requests the origin saw other than for robots.txt.
    pub fn content_hits(&self) -> usize {
        self.seen().iter().filter(|s| s.target != "/robots.txt").count()
    }
}

async fn serve_origin(
    req: Request<Incoming>,
    seen: &Mutex<Vec<Seen>>,
    robots: &str,
) -> Response<Body> {
    let target = req.uri().path_and_query().map_or("/".to_owned(), |p| p.to_string());
    seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        target: target.clone(),
        headers: req.headers().clone(),
    });
    if target == "/robots.txt" {
        return Response::new(Full::new(Bytes::from(robots.to_owned())).boxed_unsync());
    }
    if target == "/slow" {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if target == "/stream-echo" {
        // Each piece of the request body goes back as soon as it arrives.
        use futures_util::StreamExt;
        let frames = http_body_util::BodyStream::new(req.into_body())
            .take_while(|frame| std::future::ready(frame.is_ok()))
            .filter_map(|frame| std::future::ready(frame.ok().map(Ok::<_, Infallible>)));
        return Response::new(StreamBody::new(frames).boxed_unsync());
    }
    if target == "/echo" {
        let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        return Response::new(Full::new(body).boxed_unsync());
    }
    if let Some(n) = target.strip_prefix("/big/") {
        let total: u64 = n.parse().unwrap_or(0);
        let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
        let stream = futures_stream(total, chunk);
        let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
        resp.headers_mut().insert("content-length", total.to_string().parse().unwrap());
        return resp;
    }
    let mut resp =
        Response::new(Full::new(Bytes::from(format!("hello from {target}"))).boxed_unsync());
    resp.headers_mut().insert("connection", "x-origin-hop".parse().unwrap());
    resp.headers_mut().insert("x-origin-hop", "1".parse().unwrap());
    resp.headers_mut().insert("keep-alive", "timeout=5".parse().unwrap());
    *resp.status_mut() = StatusCode::OK;
    resp
}

/// A stream of `total` bytes in `chunk`-sized frames, produced lazily.
fn futures_stream(
    total: u64,
    chunk: Bytes,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send {
    let mut left = total;
    futures_util::stream::poll_fn(move |_| {
        if left == 0 {
            return std::task::Poll::Ready(None);
        }
        let n = left.min(chunk.len() as u64) as usize;
        left -= n as u64;
        std::task::Poll::Ready(Some(Ok(Frame::data(chunk.slice(..n)))))
    })
}

/// The proxy, in this process, on an ephemeral port.
pub struct TestProxy {
    pub addr: SocketAddr,
    /// The TLS listener's address, when `proxy.tls_listen` was set (bound to a free port).
    pub tls_addr: Option<SocketAddr>,
    pub clock: Arc<ManualClock>,
    pub audit_path: PathBuf,
    pub audit: AuditLog,
    /// The proxy's pacer, for its statistics.
    pub pacer: Arc<Pacer>,
    /// The proxy's metrics.
    pub metrics: Arc<robots_proxy::metrics::Metrics>,
    /// The proxy's signer (`[signing]`), when keys are configured.
    pub signer: Option<Arc<robots_proxy::signing::Signer>>,
    /// The running proxy and the configuration it started with, for [`TestProxy::reload_with`].
    handle: Proxy,
    config: Config,
    ca: Option<Arc<robots_proxy::tls::ca::CertificateAuthority>>,
    _state: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestProxy {
    pub async fn start() -> TestProxy {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(edit: impl FnOnce(&mut Config)) -> TestProxy {
        Self::start_full(edit, None).await
    }

    pub async fn start_full(
        edit: impl FnOnce(&mut Config),
        ca: Option<Arc<robots_proxy::tls::ca::CertificateAuthority>>,
    ) -> TestProxy {
        let state = tempfile::tempdir().unwrap();
        let mut config = Config { state_dir: state.path().to_owned(), ..Config::default() };
        config.robots.retry_initial = Duration::from_secs(3600);
        // The test origins run on 127.0.0.1, which the destination guard prohibits by default.
        config.access.allow_destinations = vec!["127.0.0.0/8".parse().unwrap()];
        edit(&mut config);
        let clock = Arc::new(ManualClock::default());
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        // One guard and one TLS configuration, shared by the robots.txt fetcher and the proxy,
        // as `main` does.
        let tls = Arc::new(
            robots_proxy::tls::client_config(config.https.upstream_ca_file.as_deref()).unwrap(),
        );
        let guard = Arc::new(config.destination_guard());
        let connector = robots_proxy::tls::https_connector(
            (*tls).clone(),
            config.robots.connect_timeout,
            guard.clone(),
        );
        let cache = Arc::new(RobotsCache::with_connector(
            config.robots.clone(),
            dyn_clock.clone(),
            connector,
        ));
        let audit_path = config.audit_path();
        let audit = AuditLog::open(audit_path.clone(), config.audit.clone()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        config.proxy.listen = addr;
        let pacer = Arc::new(robots_proxy::pacing::Pacer::new(&config.pacing).unwrap());
        // As `main` does: keys from `signing.keys_dir` (tests give an absolute one).
        let signer = robots_proxy::signing::Signer::new(&config.signing, &config.state_dir)
            .unwrap()
            .map(Arc::new);
        let parts = robots_proxy::proxy::ProxyParts {
            store: cache,
            audit: audit.clone(),
            clock: dyn_clock,
            ca: ca.clone(),
            guard,
            tls,
            pacer,
            fleet: None,
            signer: signer.clone(),
        };
        let proxy = Proxy::new(&config, parts).unwrap();
        let handle = proxy.clone();
        let pacer = proxy.pacer();
        let metrics = proxy.metrics().clone();
        // The TLS listener (`proxy.tls_listen`), on a free port of 127.0.0.1 whatever the
        // configured address, set up from the configured files as `main` does.
        let tls = if let Some(files) = robots_proxy::preflight::listener_files(&config) {
            let tls = robots_proxy::tls::listener::listener_config(files).unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let config = std::sync::Arc::new(arc_swap::ArcSwap::new(tls));
            Some(robots_proxy::proxy::TlsListener { listener, config })
        } else {
            None
        };
        let tls_addr = tls.as_ref().map(|t| t.listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(proxy.serve_with_tls(
            listener,
            tls,
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
        ));
        TestProxy {
            addr,
            tls_addr,
            clock,
            audit_path,
            audit,
            pacer,
            metrics,
            signer: signer.clone(),
            handle,
            config,
            ca,
            _state: state,
            stop: Some(stop),
        }
    }

    /// Reloads the proxy (as SIGHUP does, [`Proxy::reload`]) with the configuration it started
    /// with, changed by `edit`.
    pub fn reload_with(&self, edit: impl FnOnce(&mut Config)) {
        let mut config = self.config.clone();
        edit(&mut config);
        let parts =
            robots_proxy::proxy::LiveParts { ca: self.ca.clone(), signer: self.signer.clone() };
        self.handle.reload(&config, parts).unwrap();
    }

    /// A reqwest client that sends everything through this proxy.
    pub fn client(&self) -> reqwest::Client {
        reqwest_builder()
            .proxy(reqwest::Proxy::all(format!("http://{}", self.addr)).unwrap())
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap()
    }

    /// The audit records of requests written so far (after a flush).
    pub async fn audit_records(&self) -> Vec<serde_json::Value> {
        let mut lines = self.audit_lines().await;
        lines.retain(|r| r["event.action"] != "robots_version");
        lines
    }

    /// Every line of the audit log, `robots_version` records included ([`Self::audit_records`]
    /// leaves them out: they are about robots.txt, not a request).
    pub async fn audit_lines(&self) -> Vec<serde_json::Value> {
        self.audit.flush().await.unwrap();
        let text = std::fs::read_to_string(&self.audit_path).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).expect("audit line is JSON")).collect()
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A reqwest client builder with a TLS configuration from the crate's one crypto provider.
/// reqwest is built with rustls but no provider of its own (no aws-lc-rs), so a client built
/// without a preconfigured TLS config panics with "No provider set", even for plain HTTP.
pub fn reqwest_builder() -> reqwest::ClientBuilder {
    let tls = robots_proxy::tls::client_config(None).expect("web PKI roots");
    reqwest::Client::builder().use_preconfigured_tls(tls)
}

/// A response read off the wire.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// Sends `request` bytes as they are to `addr` and reads the response until the connection
/// closes (the request should say `Connection: close`).
pub async fn raw(addr: SocketAddr, request: &str) -> RawResponse {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut buf)).await;
    parse_response(&buf)
}

pub fn parse_response(buf: &[u8]) -> RawResponse {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    RawResponse { status, headers, body: body.to_owned() }
}

/// `GET <url>` through the proxy with extra header lines, connection closed after.
pub async fn raw_get(proxy: SocketAddr, url: &str, host: &str, extra: &str) -> RawResponse {
    raw(proxy, &format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"))
        .await
}

/// A loopback port that refuses every connection for as long as the returned socket lives:
/// bound, never listening, so no other test (or process) can take it meanwhile, as it could a
/// port whose listener was dropped.
pub fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}
