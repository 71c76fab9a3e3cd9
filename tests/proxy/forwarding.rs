//! Forwarding: what reaches the origin, what comes back, and the proxy's own answers.

use std::time::Duration;

use super::support::{raw, raw_get, Origin, TestProxy};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_request_reaches_origin_rewritten() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let resp = proxy
        .client()
        .get(format!("{}/hello?x=1", origin.base()))
        .header("Proxy-Connection", "keep-alive")
        .header("X-Robots-Product-Token", "ExampleBot")
        .header("Connection", "x-client-hop")
        .header("X-Client-Hop", "1")
        .header("TE", "trailers")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Hop-by-hop headers from the origin are gone, Via is added.
    assert!(resp.headers().get("x-origin-hop").is_none());
    assert!(resp.headers().get("keep-alive").is_none());
    assert!(resp.headers()["via"].to_str().unwrap().contains("robots-proxy"));
    assert_eq!(resp.text().await.unwrap(), "hello from /hello?x=1");
    let seen = origin.seen().into_iter().find(|s| s.target == "/hello?x=1").unwrap();
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.headers["host"], origin.addr.to_string());
    assert!(seen.headers["via"].to_str().unwrap().ends_with("robots-proxy"));
    for h in ["proxy-connection", "x-client-hop", "te", "x-robots-product-token", "x-forwarded-for"]
    {
        assert!(seen.headers.get(h).is_none(), "{h} was forwarded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_header_cannot_redirect_the_request() {
    let allowed = Origin::start("User-agent: *\nAllow: /\n").await;
    let proxy = TestProxy::start().await;
    let resp = raw_get(proxy.addr, &format!("{}/x", allowed.base()), "other.test", "").await;
    assert_eq!(resp.status, 200, "{resp:?}");
    let seen = allowed.seen().into_iter().find(|s| s.target == "/x").unwrap();
    assert_eq!(seen.headers["host"], allowed.addr.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_form_request_gets_usage_400() {
    let proxy = TestProxy::start().await;
    let resp =
        raw(proxy.addr, "GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert_eq!(resp.status, 400);
    assert!(resp.body.contains("HTTP_PROXY"), "{}", resp.body);
    assert!(resp.headers["proxy-status"].contains("robots-proxy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_targets_get_400() {
    let proxy = TestProxy::start().await;
    for target in ["http://127.0.0.1:0/", "ftp://example.test/", "http://a.test:99999/"] {
        let resp = raw_get(proxy.addr, target, "x", "").await;
        assert_eq!(resp.status, 400, "{target}: {resp:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_body_is_streamed_upstream() {
    let origin = Origin::start("").await;
    let proxy = TestProxy::start().await;
    let payload = vec![b'a'; 3 * 1024 * 1024];
    let resp = proxy
        .client()
        .post(format!("{}/echo", origin.base()))
        .body(payload.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.bytes().await.unwrap().len(), payload.len());
}

/// An upload is streamed, not buffered: the origin has the first half (and echoes it back
/// through the proxy) while the client still holds the second half.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_reaches_the_origin_before_the_client_has_sent_it_all() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::start("").await;
    let proxy = TestProxy::start().await;
    let half = 256 * 1024;
    let mut conn = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST {}/stream-echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        origin.base(),
        2 * half
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&vec![b'a'; half]).await.unwrap();
    // Read until the echo holds a good part of the first half: it went through the proxy to the
    // origin and back while the second half is still with the client.
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while got.iter().filter(|&&b| b == b'a').count() < half / 2 {
        let read = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk)).await;
        let n = read.expect("the origin echoed nothing of the first half: buffered?").unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    conn.write_all(&vec![b'b'; half]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    let body_start = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..body_start]).to_ascii_lowercase();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let body = dechunk(&got[body_start..]);
    assert_eq!(body.len(), 2 * half);
    assert!(body[..half].iter().all(|&b| b == b'a') && body[half..].iter().all(|&b| b == b'b'));
}

/// The payload of a chunked body (RFC 9112 §7.1), without extensions or trailers.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").expect("a chunk-size line");
        let size_text = String::from_utf8_lossy(&raw[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_is_502_with_proxy_status() {
    use std::io::{Read, Write};
    // The origin serves robots.txt on its one connection, and before it answers, stops
    // listening and keeps the port bound without listening: every later connection, the
    // forward's, is refused, and no other test can take the port meanwhile.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let origin = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).unwrap();
        drop(listener);
        let refusing = tokio::net::TcpSocket::new_v4().unwrap();
        // The accepted connection still uses the port: SO_REUSEADDR lets a socket that will
        // never listen share it.
        refusing.set_reuseaddr(true).unwrap();
        refusing.bind(format!("127.0.0.1:{port}").parse().unwrap()).expect("port taken meanwhile");
        let robots = "User-agent: *\nAllow: /\n";
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            robots.len()
        );
        conn.write_all(format!("{head}{robots}").as_bytes()).unwrap();
        (String::from_utf8_lossy(&buf[..n]).into_owned(), refusing)
    });
    let proxy = TestProxy::start().await;
    let resp = raw_get(proxy.addr, &format!("http://127.0.0.1:{port}/x"), "x", "").await;
    let (robots_request, _refusing) = origin.join().unwrap();
    assert!(robots_request.starts_with("GET /robots.txt "), "{robots_request}");
    assert_eq!(resp.status, 502, "{resp:?}");
    let status = &resp.headers["proxy-status"];
    assert!(status.contains("error=connection_refused"), "{status}");
    assert!(resp.body.contains("refused the connection"), "{}", resp.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_origin_is_504() {
    let origin = Origin::start("").await;
    let proxy =
        TestProxy::start_with(|c| c.upstream.response_timeout = Duration::from_millis(300)).await;
    let resp = raw_get(proxy.addr, &format!("{}/slow", origin.base()), "x", "").await;
    assert_eq!(resp.status, 504, "{resp:?}");
    assert!(resp.headers["proxy-status"].contains("http_response_timeout"));
    assert!(resp.body.contains("did not answer"));
}
