//! A client that stalls, in any state of its connection, is let go within the bound that
//! `server::ConnectionTimeouts` gives that state (docs/architecture.md, "What bounds a
//! connection"), and its connection slot is given back: with `limits.max_connections = 1` in
//! `refuse` mode, a request meanwhile is refused with `503`, and one after is served. The
//! bounds are 2 s; the tests allow 8 s (a loaded machine), far below "never".
//!
//! Also here: a request in progress at shutdown is dropped after `proxy.shutdown_grace`, and
//! `robots_proxy_open_connections` counts an intercepted tunnel for as long as it holds its
//! slot (review-house D3). The other states have their tests beside their feature: a request
//! body (`limits::a_request_body_the_client_stops_sending_is_failed_when_idle`), a client that
//! reads nothing (`limits::a_client_that_never_reads_is_disconnected`), an idle tunnel
//! (`tunnel_relay::an_idle_tunnel_gives_its_slot_back`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use robots_proxy::config::Config;
use robots_proxy::limits::WhenFull;

use super::support::{raw_get, until, Origin, TestProxy};
use super::tls_listener::{tls_to, Pki};
use super::tls_support::{closed_within, connect, tls_over, Connected, HttpsProxy, TlsOrigin, H1};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

/// The bound under test, for every state: long enough that the request sent "meanwhile" comes
/// while the stalled connection still holds its slot, on a loaded machine too (at 500 ms, one
/// CI run under a release build saw the slot already given back).
const BOUND: Duration = Duration::from_secs(2);

/// How long a stalled client may stay connected before the test fails: well above [`BOUND`],
/// far below "never".
const LET_GO_WITHIN: Duration = Duration::from_secs(8);

/// One connection slot, refused past it, and every bound [`BOUND`].
fn one_slot(c: &mut Config) {
    c.limits.max_connections = 1;
    c.limits.when_full = WhenFull::Refuse;
    c.proxy.header_read_timeout = BOUND;
    c.limits.client_body_idle_timeout = BOUND;
    c.proxy.shutdown_grace = BOUND;
}

/// The one slot is held: a request through the plain listener is refused with 503.
async fn slot_is_held(proxy: SocketAddr, origin: &Origin, what: &str) {
    let resp = raw_get(proxy, &format!("{}/meanwhile", origin.base()), "x", "").await;
    assert_eq!(resp.status, 503, "{what}: the stalled connection holds the slot: {resp:?}");
}

/// The one slot is free again: a request through the plain listener is served (tried for a
/// while: the client may see its connection end a moment before the slot is given back).
async fn slot_is_freed(proxy: SocketAddr, origin: &Origin, what: &str) {
    let started = Instant::now();
    loop {
        let resp = raw_get(proxy, &format!("{}/after", origin.base()), "x", "").await;
        if resp.status == 200 {
            return;
        }
        assert!(started.elapsed() < LET_GO_WITHIN, "{what}: the slot is never freed: {resp:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts the proxy closes `stream` after about [`BOUND`] (not before) and within
/// [`LET_GO_WITHIN`]; `since` is when the client went silent.
async fn let_go<S: AsyncRead + Unpin>(stream: &mut S, since: Instant, what: &str) {
    assert!(
        closed_within(stream, LET_GO_WITHIN).await,
        "{what}: still open after {LET_GO_WITHIN:?}"
    );
    let took = since.elapsed();
    assert!(took >= BOUND - Duration::from_millis(100), "{what}: closed after only {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_never_finished_is_let_go_and_gives_its_slot_back() {
    let pki = Pki::new();
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        pki.configure(c, None);
        one_slot(c);
    })
    .await;
    // Nothing at all; the first bytes of a TLS record and no more.
    for sent in [&b""[..], b"\x16\x03\x01\x02"] {
        let what = format!("TLS handshake after {} bytes", sent.len());
        let mut tcp = TcpStream::connect(proxy.tls_addr.unwrap()).await.unwrap();
        tcp.write_all(sent).await.unwrap();
        let since = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        slot_is_held(proxy.addr, &origin, &what).await;
        let_go(&mut tcp, since, &what).await;
        slot_is_freed(proxy.addr, &origin, &what).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_half_sent_is_let_go_and_gives_its_slot_back() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(one_slot).await;
    let mut slow = TcpStream::connect(proxy.addr).await.unwrap();
    let partial = format!("GET {}/x HTTP/1.1\r\nHost: x\r\nX-Slow: 1", origin.base());
    slow.write_all(partial.as_bytes()).await.unwrap();
    let since = Instant::now();
    slot_is_held(proxy.addr, &origin, "half a head").await;
    let_go(&mut slow, since, "half a head").await;
    slot_is_freed(proxy.addr, &origin, "half a head").await;
    assert_eq!(origin.hits("/x"), 0);
}

/// Sends one request on `conn` and reads its whole answer (`Content-Length`), leaving the
/// connection open and idle.
async fn one_request<S: AsyncRead + tokio::io::AsyncWrite + Unpin>(conn: &mut S, origin: &Origin) {
    let request = format!("GET {}/first HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    conn.write_all(request.as_bytes()).await.unwrap();
    conn.flush().await.unwrap();
    let want = "hello from /first";
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&buf).ends_with(want) {
        let n = tokio::time::timeout(LET_GO_WITHIN, conn.read(&mut chunk))
            .await
            .expect("the first request is answered")
            .unwrap();
        assert!(n > 0, "closed after one request: {}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_let_go_on_both_listeners_and_gives_its_slot_back() {
    let pki = Pki::new();
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        pki.configure(c, None);
        one_slot(c);
    })
    .await;
    let mut plain = TcpStream::connect(proxy.addr).await.unwrap();
    one_request(&mut plain, &origin).await;
    let since = Instant::now();
    slot_is_held(proxy.addr, &origin, "plain, idle").await;
    let_go(&mut plain, since, "plain, idle").await;
    slot_is_freed(proxy.addr, &origin, "plain, idle").await;

    let mut tls = tls_to(proxy.tls_addr.unwrap(), &pki, H1, None).await.unwrap();
    one_request(&mut tls, &origin).await;
    let since = Instant::now();
    slot_is_held(proxy.addr, &origin, "TLS, idle").await;
    let_go(&mut tls, since, "TLS, idle").await;
    slot_is_freed(proxy.addr, &origin, "TLS, idle").await;
}

/// An HTTP/2 client that sends its preface and SETTINGS, and then nothing: no ack of the
/// proxy's SETTINGS, of the PING after `GOAWAY`, of the keep-alive PINGs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_ignores_goaway_is_let_go_and_gives_its_slot_back() {
    let pki = Pki::new();
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        pki.configure(c, None);
        one_slot(c);
    })
    .await;
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
    let mut tls = tls_to(proxy.tls_addr.unwrap(), &pki, &[b"h2"], None).await.unwrap();
    tls.write_all(&[PREFACE, SETTINGS].concat()).await.unwrap();
    tls.flush().await.unwrap();
    let since = Instant::now();
    slot_is_held(proxy.addr, &origin, "HTTP/2, no acks").await;
    let_go(&mut tls, since, "HTTP/2, no acks").await;
    slot_is_freed(proxy.addr, &origin, "HTTP/2, no acks").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intercepted_connection_stalled_in_any_state_is_let_go_and_gives_its_slot_back() {
    let plain = Origin::start(RULES).await;
    let origin = TlsOrigin::start(RULES).await;
    let proxy = HttpsProxy::start(&origin.ca, &[origin.port()], one_slot).await;
    let addr = proxy.addr();
    // After the 200: nothing at all (the first byte is awaited), half a ClientHello, the inner
    // handshake done and then silence (HTTP/1.1 and HTTP/2 by ALPN).
    let tunnel = tunnel_when_free(addr, &origin.host()).await;
    stalled_inner(tunnel, addr, &plain, "no first byte").await;
    let mut tunnel = tunnel_when_free(addr, &origin.host()).await;
    tunnel.write_all(b"\x16\x03\x01").await.unwrap();
    stalled_inner(tunnel, addr, &plain, "half a ClientHello").await;
    for alpn in [H1, &[b"h2" as &[u8]][..]] {
        let tunnel = tunnel_when_free(addr, &origin.host()).await;
        let tls = tls_over(tunnel, proxy.client_tls(alpn), "localhost").await.unwrap();
        stalled_inner(tls, addr, &plain, &format!("silent after TLS, ALPN {alpn:?}")).await;
    }
    // Plain HTTP inside the tunnel: half a request head.
    let mut tunnel = tunnel_when_free(addr, &origin.host()).await;
    tunnel.write_all(b"GET /a HTTP/1.1\r\nHost: loc").await.unwrap();
    stalled_inner(tunnel, addr, &plain, "plain HTTP inside, half a head").await;
    assert_eq!(origin.content_hits(), 0);
}

/// A tunnel through the proxy's one slot, once the slot is free: the plain request that showed
/// it free (`slot_is_freed`) holds it itself until the proxy has seen that connection end, a
/// moment after its client read the answer, so a CONNECT right after may still find it taken
/// (503) for a short while, never for long.
async fn tunnel_when_free(addr: SocketAddr, host: &str) -> TcpStream {
    let started = Instant::now();
    loop {
        match connect(addr, host, "").await {
            Connected::Tunnel(s) => return s,
            Connected::Refused(r) if r.status == 503 && started.elapsed() < SLOT_BACK_WITHIN => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Connected::Refused(r) => panic!("CONNECT refused: {r:?}"),
        }
    }
}

/// How soon a connection's slot is back after its client closed it.
const SLOT_BACK_WITHIN: Duration = Duration::from_secs(2);

/// An intercepted connection that went silent: it holds the one slot, is let go after
/// [`BOUND`], and gives the slot back.
async fn stalled_inner<S: AsyncRead + Unpin>(
    mut s: S,
    addr: SocketAddr,
    plain: &Origin,
    what: &str,
) {
    let since = Instant::now();
    slot_is_held(addr, plain, what).await;
    let_go(&mut s, since, what).await;
    slot_is_freed(addr, plain, what).await;
}

/// At shutdown a request still in progress (its origin never answers) is dropped after
/// `proxy.shutdown_grace`, not left for `upstream.response_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_progress_at_shutdown_is_dropped_after_the_grace() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        one_slot(c);
        c.upstream.response_timeout = Duration::from_secs(60);
    })
    .await;
    let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {}/slow HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    conn.write_all(request.as_bytes()).await.unwrap();
    until("the origin has the request", || origin.hits("/slow") == 1).await;
    let since = Instant::now();
    drop(proxy);
    let_go(&mut conn, since, "in progress at shutdown").await;
}

/// Review-house D3: the gauge counts an intercepted tunnel for as long as it holds its slot
/// (after the CONNECT's own connection task has ended), and no longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_connections_gauge_counts_intercepted_tunnels() {
    let origin = TlsOrigin::start(RULES).await;
    let proxy = HttpsProxy::start(&origin.ca, &[origin.port()], |c| {
        c.proxy.header_read_timeout = Duration::from_secs(2);
    })
    .await;
    let metrics = proxy.proxy.metrics.clone();
    let tunnel = connect(proxy.addr(), &origin.host(), "").await.tunnel();
    let mut tls = tls_over(tunnel, proxy.client_tls(H1), "localhost").await.unwrap();
    // The handshake inside is done: the CONNECT's connection task gave the socket over.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metrics.open_connections(), 1, "the intercepted tunnel is an open connection");
    assert!(closed_within(&mut tls, LET_GO_WITHIN).await, "the silent tunnel is let go");
    until("the gauge is back to 0", || metrics.open_connections() == 0).await;
}
