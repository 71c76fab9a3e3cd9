//! The relay of a tunnel-mode CONNECT (issue #22): what a faster relay must not change. The
//! bytes go through exactly, both ways, those sent in the same write as the CONNECT head
//! included; one side's end of stream reaches the other while the other direction goes on
//! (half-close); an idle tunnel is closed after `https.tunnel_idle_timeout`, and one in use is
//! not; an allowed tunnel still has its audit record.
//!
//! The client of the plain listener is relayed with `splice(2)` on Linux; a client of the TLS
//! listener by copying. Both are run.
//!
//! The upstream is a TCP server on 127.0.0.1 that serves robots.txt over TLS to the proxy's
//! fetch (a connection starting with a TLS handshake) and, on any other connection, does what
//! the client's first line asks: `echo`, `count` (read to the end, then answer the byte count
//! and SHA-256), `fin` (say `bye`, end its sending half, then read to the end and report
//! the byte count to the test) or `flood` (write until the tunnel is gone, then report).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::tls_support::{client_tls, HttpsProxy, TestCa, H1, WAIT};
use robots_proxy::config::Config;
use robots_proxy::tls::HttpsMode;

/// The upstream server (see the module documentation).
struct Upstream {
    addr: SocketAddr,
    ca: Arc<TestCa>,
    /// What each `fin` connection read after its `bye`.
    fin_counts: Arc<Mutex<Vec<usize>>>,
}

impl Upstream {
    async fn start() -> Upstream {
        let ca = Arc::new(TestCa::new("robots-proxy tests relay upstream CA"));
        let (chain, key) = ca.leaf(&["localhost", "127.0.0.1"]);
        let config = rustls::ServerConfig::builder_with_provider(robots_proxy::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fin_counts: Arc<Mutex<Vec<usize>>> = Arc::default();
        let counts = fin_counts.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (acceptor, counts) = (acceptor.clone(), counts.clone());
                tokio::spawn(async move {
                    let mut first = [0u8; 1];
                    let Ok(Ok(1)) = tokio::time::timeout(WAIT, stream.peek(&mut first)).await
                    else {
                        return;
                    };
                    if first[0] == 0x16 {
                        serve_robots(acceptor, stream).await;
                    } else {
                        serve_command(stream, &counts).await;
                    }
                });
            }
        });
        Upstream { addr, ca, fin_counts }
    }

    fn target(&self) -> String {
        format!("localhost:{}", self.addr.port())
    }
}

/// robots.txt that allows everything, over TLS, for the proxy's fetch.
async fn serve_robots(acceptor: tokio_rustls::TlsAcceptor, stream: TcpStream) {
    let Ok(Ok(tls)) = tokio::time::timeout(WAIT, acceptor.accept(stream)).await else { return };
    let svc = service_fn(|_req: Request<Incoming>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
            b"User-agent: *\nAllow: /\n",
        ))))
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), svc)
        .await;
}

/// The command connections; every step bounded by [`WAIT`].
async fn serve_command(mut stream: TcpStream, fin_counts: &Mutex<Vec<usize>>) {
    let mut line = Vec::new();
    while !line.ends_with(b"\n") && line.len() < 16 {
        match tokio::time::timeout(WAIT, stream.read_u8()).await {
            Ok(Ok(b)) => line.push(b),
            _ => return,
        }
    }
    let (mut read, mut write) = stream.split();
    match &line[..] {
        b"echo\n" => {
            // Longer than a test client waits: an idle tunnel must be closed by the proxy.
            let echo = tokio::io::copy(&mut read, &mut write);
            let _ = tokio::time::timeout(3 * WAIT, echo).await;
            let _ = write.shutdown().await;
        }
        b"count\n" => {
            let Some((count, hash)) = drain(&mut read).await else { return };
            let answer = format!("{count} {hash}");
            let _ = write.write_all(answer.as_bytes()).await;
            let _ = write.shutdown().await;
        }
        b"fin\n" => {
            let _ = write.write_all(b"bye").await;
            let _ = write.shutdown().await;
            let Some((count, _)) = drain(&mut read).await else { return };
            fin_counts.lock().unwrap().push(count);
        }
        b"flood\n" => {
            // Writes until the tunnel is gone (or for longer than a test client waits), then
            // reports how much it wrote.
            let chunk = vec![b'x'; 64 * 1024];
            let mut wrote = 0;
            let started = Instant::now();
            while started.elapsed() < 3 * WAIT {
                match tokio::time::timeout(3 * WAIT, write.write_all(&chunk)).await {
                    Ok(Ok(())) => wrote += chunk.len(),
                    _ => break,
                }
            }
            fin_counts.lock().unwrap().push(wrote);
        }
        _ => {}
    }
}

/// Reads to the end: the byte count and the SHA-256 (hex) of what was read.
async fn drain<R: AsyncRead + Unpin>(read: &mut R) -> Option<(usize, String)> {
    let mut hasher = Sha256::new();
    let mut count = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::time::timeout(WAIT, read.read(&mut buf)).await.ok()?.ok()?;
        if n == 0 {
            return Some((count, hex(&hasher.finalize())));
        }
        hasher.update(&buf[..n]);
        count += n;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `len` bytes that look random (xorshift), the same for the same seed.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Which listener the client goes through: the plain one (relayed with `splice(2)` on Linux)
/// or the TLS one (copied).
#[derive(Clone, Copy, Debug)]
enum Via {
    Plain,
    Tls,
}

/// A tunnel-mode proxy trusting the upstream's CA, with a TLS listener (its certificate from
/// a CA of the test's own, in `dir`).
async fn proxy(
    upstream: &Upstream,
    listener_ca: &TestCa,
    dir: &std::path::Path,
    edit: impl FnOnce(&mut Config),
) -> HttpsProxy {
    let (cert, key) = listener_ca.leaf_pem(&["127.0.0.1", "localhost"]);
    let (cert_path, key_path) = (dir.join("proxy.pem"), dir.join("proxy-key.pem"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    HttpsProxy::start(&upstream.ca, &[upstream.addr.port()], |c| {
        c.https.mode = HttpsMode::Tunnel;
        c.proxy.tls_listen = Some("127.0.0.1:0".parse().unwrap());
        c.proxy.tls_certificate = Some(cert_path);
        c.proxy.tls_key = Some(key_path);
        edit(c);
    })
    .await
}

/// A client connection to the proxy, through `via`.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

async fn connect_to(proxy: &HttpsProxy, listener_ca: &TestCa, via: Via) -> Box<dyn Stream> {
    match via {
        Via::Plain => Box::new(TcpStream::connect(proxy.addr()).await.unwrap()),
        Via::Tls => {
            let tcp = TcpStream::connect(proxy.proxy.tls_addr.unwrap()).await.unwrap();
            let config = client_tls(&[&listener_ca.der], H1);
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let name = ServerName::try_from("localhost").unwrap();
            let tls = tokio::time::timeout(WAIT, connector.connect(name, tcp)).await;
            Box::new(tls.expect("TLS handshake with the proxy hung").unwrap())
        }
    }
}

/// Sends the CONNECT head and `first` in one write, then reads the answer's head byte by byte
/// (nothing after it) and checks it is a 200.
async fn open(mut stream: Box<dyn Stream>, target: &str, first: &[u8]) -> Box<dyn Stream> {
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").into_bytes();
    request.extend_from_slice(first);
    stream.write_all(&request).await.unwrap();
    stream.flush().await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = tokio::time::timeout(WAIT, stream.read_u8()).await.unwrap().unwrap();
        head.push(byte);
        assert!(head.len() < 4096, "CONNECT answer head too long");
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    stream
}

/// Reads to the end of `stream`, bounded by [`WAIT`].
async fn read_all<R: AsyncRead + Unpin>(stream: &mut R) -> Vec<u8> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut received)).await;
    read.expect("the tunnel ends").expect("the tunnel ends cleanly");
    received
}

/// Everything sent comes back exactly, in order: 8 MiB of random bytes to an echo server, the
/// first 64 KiB of them in the same write as the CONNECT head (so the proxy has read some with
/// it, and must send those first), the rest while the echo is read. The client then ends its
/// sending half; the echo server ends after echoing everything, and the tunnel with it.
async fn exact_both_ways(via: Via) {
    let upstream = Upstream::start().await;
    let listener_ca = TestCa::new("robots-proxy tests listener CA");
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(&upstream, &listener_ca, dir.path(), |c| c.https.audit_tunnels = true).await;
    let data = payload(8 * 1024 * 1024, 22);
    let mut first = b"echo\n".to_vec();
    first.extend_from_slice(&data[..64 * 1024]);
    let stream = connect_to(&proxy, &listener_ca, via).await;
    let stream = open(stream, &upstream.target(), &first).await;
    let (mut read, mut write) = tokio::io::split(stream);
    let rest = data[64 * 1024..].to_vec();
    let writer = tokio::spawn(async move {
        write.write_all(&rest).await.unwrap();
        write.shutdown().await.unwrap();
    });
    let echoed = read_all(&mut read).await;
    tokio::time::timeout(WAIT, writer).await.unwrap().unwrap();
    assert_eq!(echoed.len(), data.len(), "{via:?}: every byte comes back");
    assert_eq!(
        hex(&Sha256::digest(&echoed)),
        hex(&Sha256::digest(&data)),
        "{via:?}: the same bytes, in order"
    );
    // The allowed tunnel's audit record is written (`https.audit_tunnels`).
    let records = proxy.proxy.audit_records().await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["event.action"], "tunnel_allow", "{records:?}");
    assert_eq!(records[0]["http.request.method"], "CONNECT");
    assert_eq!(records[0]["url.full"], format!("https://{}", upstream.target()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_relays_every_byte_in_order_both_ways_and_is_audited() {
    exact_both_ways(Via::Plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_over_the_tls_listener_relays_every_byte_in_order_both_ways() {
    exact_both_ways(Via::Tls).await;
}

/// The client ends its sending half first: the upstream sees the end of what the client sent
/// (all of it), and its answer, written after that, still reaches the client.
async fn client_half_close(via: Via) {
    let upstream = Upstream::start().await;
    let listener_ca = TestCa::new("robots-proxy tests listener CA");
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(&upstream, &listener_ca, dir.path(), |_| {}).await;
    let data = payload(1024 * 1024, 7);
    let stream = connect_to(&proxy, &listener_ca, via).await;
    let mut stream = open(stream, &upstream.target(), b"count\n").await;
    stream.write_all(&data).await.unwrap();
    stream.shutdown().await.unwrap();
    let answer = String::from_utf8(read_all(&mut stream).await).unwrap();
    assert_eq!(answer, format!("{} {}", data.len(), hex(&Sha256::digest(&data))), "{via:?}");
}

/// The upstream ends its sending half first: the client reads to the end, and what it sends
/// afterwards still reaches the upstream, all of it.
async fn upstream_half_close(via: Via) {
    let upstream = Upstream::start().await;
    let listener_ca = TestCa::new("robots-proxy tests listener CA");
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(&upstream, &listener_ca, dir.path(), |_| {}).await;
    let stream = connect_to(&proxy, &listener_ca, via).await;
    let mut stream = open(stream, &upstream.target(), b"fin\n").await;
    assert_eq!(read_all(&mut stream).await, b"bye", "{via:?}");
    let data = payload(1024 * 1024, 9);
    stream.write_all(&data).await.unwrap();
    stream.shutdown().await.unwrap();
    let started = Instant::now();
    while upstream.fin_counts.lock().unwrap().is_empty() && started.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*upstream.fin_counts.lock().unwrap(), [data.len()], "{via:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_half_closed_by_the_client_still_brings_the_answer() {
    client_half_close(Via::Plain).await;
    client_half_close(Via::Tls).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_half_closed_by_the_upstream_still_takes_the_client_bytes() {
    upstream_half_close(Via::Plain).await;
    upstream_half_close(Via::Tls).await;
}

/// A tunnel in use stays open past the idle limit; one where nothing moves is closed once the
/// limit has passed since the last byte, not before.
async fn idle_tunnel_closed(via: Via) {
    let idle = Duration::from_millis(800);
    let upstream = Upstream::start().await;
    let listener_ca = TestCa::new("robots-proxy tests listener CA");
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(&upstream, &listener_ca, dir.path(), |c| {
        c.https.tunnel_idle_timeout = idle;
    })
    .await;
    let stream = connect_to(&proxy, &listener_ca, via).await;
    let mut stream = open(stream, &upstream.target(), b"echo\n").await;
    // A byte every 300 ms for about twice the limit: the tunnel stays open.
    let mut sent = Instant::now();
    for i in 0..6u8 {
        sent = Instant::now();
        stream.write_all(&[i]).await.unwrap();
        stream.flush().await.unwrap();
        let echoed = tokio::time::timeout(WAIT, stream.read_u8()).await;
        let echoed = echoed.unwrap_or_else(|_| panic!("{via:?}: byte {i} not echoed"));
        assert_eq!(echoed.unwrap(), i, "{via:?}: the tunnel in use is open");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Closed: over the TLS listener without TLS's close_notify (the connection is dropped).
    let mut rest = Vec::new();
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut rest)).await;
    match read.expect("the idle tunnel is closed") {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{via:?}: {e}"),
    }
    assert!(rest.is_empty(), "{via:?}: {rest:?}");
    // The last byte moved after `sent`.
    assert!(sent.elapsed() >= idle, "{via:?}: closed {:?} after the last byte", sent.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tunnel_is_closed_after_the_idle_limit_and_a_busy_one_is_not() {
    idle_tunnel_closed(Via::Plain).await;
    idle_tunnel_closed(Via::Tls).await;
}

/// A client that reads nothing while the upstream sends is disconnected after
/// `limits.client_write_timeout`, as on every client connection (long before the idle limit:
/// bytes still move toward the proxy), and the upstream connection with it.
async fn stalled_client_let_go(via: Via) {
    let upstream = Upstream::start().await;
    let listener_ca = TestCa::new("robots-proxy tests listener CA");
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(&upstream, &listener_ca, dir.path(), |c| {
        c.limits.client_write_timeout = Duration::from_secs(1);
    })
    .await;
    let stream = connect_to(&proxy, &listener_ca, via).await;
    let opened = Instant::now();
    let _stream = open(stream, &upstream.target(), b"flood\n").await;
    while upstream.fin_counts.lock().unwrap().is_empty() && opened.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ended = upstream.fin_counts.lock().unwrap().clone();
    assert_eq!(ended.len(), 1, "{via:?}: the upstream connection is closed");
    assert!(opened.elapsed() >= Duration::from_secs(1), "{via:?}: {:?}", opened.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_client_that_reads_nothing_is_let_go_after_the_write_timeout() {
    stalled_client_let_go(Via::Plain).await;
    stalled_client_let_go(Via::Tls).await;
}

/// The status of a `CONNECT target` sent on a new connection to `proxy`'s plain listener, and
/// the connection.
async fn connect_status(proxy: &HttpsProxy, target: &str) -> (u16, TcpStream) {
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(WAIT, stream.read_u8()).await.expect("an answer") {
            Ok(byte) => head.push(byte),
            Err(_) => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, stream)
}

/// A tunnel where nothing moves holds its connection slot (`limits.max_connections = 1`: a
/// second CONNECT meanwhile is refused with 503) until `https.tunnel_idle_timeout`, then gives
/// it back (the next CONNECT opens).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tunnel_gives_its_slot_back() {
    let idle = Duration::from_millis(500);
    let upstream = Upstream::start().await;
    let listener_ca = TestCa::new("robots-proxy tests listener CA");
    let dir = tempfile::tempdir().unwrap();
    let proxy = proxy(&upstream, &listener_ca, dir.path(), |c| {
        c.https.tunnel_idle_timeout = idle;
        c.limits.max_connections = 1;
        c.limits.when_full = robots_proxy::limits::WhenFull::Refuse;
    })
    .await;
    let stream = connect_to(&proxy, &listener_ca, Via::Plain).await;
    let mut stream = open(stream, &upstream.target(), b"echo\n").await;
    let since = Instant::now();
    let (held, _) = connect_status(&proxy, &upstream.target()).await;
    assert_eq!(held, 503, "the idle tunnel holds the one slot");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(8), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the idle tunnel is still open after 8 s");
    assert!(since.elapsed() >= idle - Duration::from_millis(100), "{:?}", since.elapsed());
    loop {
        let (status, _) = connect_status(&proxy, &upstream.target()).await;
        if status == 200 {
            break;
        }
        assert!(since.elapsed() < Duration::from_secs(8), "the slot is never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
