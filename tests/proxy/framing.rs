//! Request smuggling (issue #12): a request with both Content-Length and Transfer-Encoding is
//! answered 400 and never forwarded on every path: after an Upgrade request or a refused
//! CONNECT on the same connection, after a chunk-size line hyper accepts but a naive reader
//! would not, and inside CONNECT tunnels (plain HTTP and intercepted HTTPS/1.1).

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::support::{Origin, TestProxy};
use super::tls_support::{connect, tls_over, HttpsProxy, TestCa, TlsOrigin, H1, WAIT};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

/// A request with both framings, followed by a request only a server reading it by
/// Content-Length would see.
fn cl_te_attack(target_base: &str, host: &str) -> String {
    format!(
        "POST {target_base}/attack HTTP/1.1\r\nHost: {host}\r\nContent-Length: 4\r\n\
         Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
         GET {target_base}/smuggled HTTP/1.1\r\nHost: {host}\r\n\r\n"
    )
}

/// Writes `bytes` and reads until the other side closes; the status codes of the responses,
/// in order.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, bytes: &str) -> Vec<u16> {
    stream.write_all(bytes.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the proxy closes the connection after the 400");
    statuses(&String::from_utf8_lossy(&received))
}

/// The status codes of the responses in `text`, read one after the other by their
/// Content-Length.
fn statuses(mut text: &str) -> Vec<u16> {
    let mut out = Vec::new();
    while let Some((head, rest)) = text.split_once("\r\n\r\n") {
        let resp = super::support::parse_response(head.as_bytes());
        out.push(resp.status);
        let length = resp.headers.get("content-length").and_then(|l| l.parse().ok());
        text = rest.get(length.unwrap_or(rest.len())..).unwrap_or_default();
    }
    out
}

async fn proxy() -> TestProxy {
    TestProxy::start_with(|c| c.upstream.response_timeout = Duration::from_secs(5)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_te_after_upgrade_request_is_refused() {
    let origin = Origin::start(RULES).await;
    let proxy = proxy().await;
    let base = origin.base();
    // The proxy does not upgrade (Upgrade is hop-by-hop); the origin answers normally and the
    // connection stays HTTP/1.1, so the next head must still be judged. Both pipelined, and
    // one after the other.
    let upgrade = format!(
        "GET {base}/ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
    );
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let got = exchange(&mut stream, &format!("{upgrade}{}", cl_te_attack(&base, "x"))).await;
    assert_eq!(got, [200, 400]);

    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    stream.write_all(upgrade.as_bytes()).await.unwrap();
    let mut first = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, stream.read(&mut first)).await.unwrap().unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&first[..n]));
    assert_eq!(exchange(&mut stream, &cl_te_attack(&base, "x")).await, [400]);

    assert_eq!(origin.hits("/ws"), 2, "{:?}", origin.seen());
    assert_eq!(origin.hits("/attack"), 0, "{:?}", origin.seen());
    assert_eq!(origin.hits("/smuggled"), 0, "{:?}", origin.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_te_after_refused_connect_is_refused() {
    let origin = Origin::start(RULES).await;
    let proxy = proxy().await;
    let base = origin.base();
    // Port 1 is not in https.connect_ports: 403, and the connection stays HTTP/1.1.
    let refused = "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n";
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let got = exchange(&mut stream, &format!("{refused}{}", cl_te_attack(&base, "x"))).await;
    assert_eq!(got, [403, 400]);
    assert_eq!(origin.hits("/attack"), 0, "{:?}", origin.seen());
    assert_eq!(origin.hits("/smuggled"), 0, "{:?}", origin.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_te_after_unusual_chunk_size_lines_is_refused() {
    let origin = Origin::start(RULES).await;
    let proxy = proxy().await;
    let base = origin.base();
    // hyper accepts all of these chunk-size lines: leading zeros beyond sixteen digits, and
    // a chunk extension longer than any line buffer.
    let long_extension = format!("5;ext={}", "e".repeat(8000));
    for size_line in ["0000000000000000005", &format!("{}5", "0".repeat(100)), &long_extension] {
        let chunked = format!(
            "POST {base}/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
             {size_line}\r\nhello\r\n0\r\n\r\n"
        );
        let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        let got = exchange(&mut stream, &format!("{chunked}{}", cl_te_attack(&base, "x"))).await;
        assert_eq!(got, [200, 400], "{}", &size_line[..size_line.len().min(24)]);
    }
    assert_eq!(origin.hits("/echo"), 3, "{:?}", origin.seen());
    assert_eq!(origin.hits("/attack"), 0, "{:?}", origin.seen());
    assert_eq!(origin.hits("/smuggled"), 0, "{:?}", origin.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_te_inside_a_plain_http_connect_tunnel_is_refused() {
    let plain = Origin::start(RULES).await;
    let proxy = HttpsProxy::start(&TestCa::new("unused"), &[plain.addr.port()], |_| {}).await;
    let host = plain.addr.to_string();
    let mut tunnel = connect(proxy.addr(), &host, "").await.tunnel();
    let ok = format!("GET /ok HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let got = exchange(&mut tunnel, &format!("{ok}{}", cl_te_attack("", &host))).await;
    assert_eq!(got, [200, 400]);
    assert_eq!(plain.hits("/ok"), 1, "{:?}", plain.seen());
    assert_eq!(plain.hits("/attack"), 0, "{:?}", plain.seen());
    assert_eq!(plain.hits("/smuggled"), 0, "{:?}", plain.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_te_inside_intercepted_https_is_refused() {
    let origin = TlsOrigin::start_with(RULES, std::sync::Arc::new(TestCa::new("h1 CA")), H1).await;
    let proxy = HttpsProxy::start(&origin.ca, &[origin.port()], |_| {}).await;
    let tunnel = connect(proxy.addr(), &origin.host(), "").await.tunnel();
    let mut tls = tls_over(tunnel, proxy.client_tls(H1), "localhost").await.unwrap();
    let host = origin.host();
    let ok = format!("GET /ok HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let got = exchange(&mut tls, &format!("{ok}{}", cl_te_attack("", &host))).await;
    assert_eq!(got, [200, 400]);
    assert_eq!(origin.hits("/ok"), 1, "{:?}", origin.seen());
    assert_eq!(origin.hits("/attack"), 0, "{:?}", origin.seen());
    assert_eq!(origin.hits("/smuggled"), 0, "{:?}", origin.seen());
}
