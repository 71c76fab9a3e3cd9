//! Limits and timeouts (issue #6): head size and count, request-target length, slow and idle
//! clients, clients that do not read, the connection limit, and concurrent robots.txt fetches.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use robots_proxy::config::ByteSize;
use robots_proxy::limits::WhenFull;

use super::faults::FaultOrigin;
use super::support::{parse_response, raw, raw_get, until, Origin, TestProxy};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

/// Reads until the proxy closes the connection; what it sent. Bounded, so a connection left
/// open fails the test instead of hanging it.
async fn until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    match tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await {
        Ok(_) => Some(buf),
        Err(_) => None,
    }
}

/// A keep-alive connection that has been served one request (so it surely holds a connection
/// slot) and is left open.
async fn held_connection(proxy: &TestProxy, origin: &Origin) -> TcpStream {
    let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {}/held HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    conn.write_all(request.as_bytes()).await.unwrap();
    let want = "hello from /held";
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&buf).ends_with(want) {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk))
            .await
            .expect("the held connection is served")
            .unwrap();
        assert!(n > 0, "the held connection was closed");
        buf.extend_from_slice(&chunk[..n]);
    }
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_or_too_large_header_fields_get_431() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        c.limits.max_headers = 20;
        c.limits.max_header_bytes = ByteSize(8 * 1024);
        c.limits.max_request_line = ByteSize(1024);
    })
    .await;
    let url = format!("{}/x", origin.base());
    let headers = |n: usize| (0..n).map(|i| format!("X-H{i}: {i}\r\n")).collect::<String>();
    assert_eq!(raw_get(proxy.addr, &url, "x", &headers(10)).await.status, 200);
    let resp = raw_get(proxy.addr, &url, "x", &headers(25)).await;
    assert_eq!(resp.status, 431, "25 header fields: {resp:?}");
    let big = format!("X-Big: {}\r\n", "b".repeat(10 * 1024));
    let resp = raw_get(proxy.addr, &url, "x", &big).await;
    assert_eq!(resp.status, 431, "a 10 KiB header field: {resp:?}");
    assert_eq!(origin.content_hits(), 1, "only the first request got through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_request_target_gets_414() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| c.limits.max_request_line = ByteSize(1024)).await;
    let ok = format!("{}/{}", origin.base(), "a".repeat(500));
    assert_eq!(raw_get(proxy.addr, &ok, "x", "").await.status, 200);
    let long = format!("{}/{}", origin.base(), "a".repeat(2000));
    let resp = raw_get(proxy.addr, &long, "x", "").await;
    assert_eq!(resp.status, 414, "{resp:?}");
    assert!(resp.body.contains("limits.max_request_line"), "{}", resp.body);
    assert_eq!(origin.content_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_its_head_slowly_is_disconnected() {
    let origin = Origin::start(RULES).await;
    let proxy =
        TestProxy::start_with(|c| c.proxy.header_read_timeout = Duration::from_millis(300)).await;
    let mut slow = TcpStream::connect(proxy.addr).await.unwrap();
    let partial = format!("GET {}/x HTTP/1.1\r\nHost: x\r\nX-Slow: 1", origin.base());
    slow.write_all(partial.as_bytes()).await.unwrap();
    let resp = raw_get(proxy.addr, &format!("{}/fine", origin.base()), "x", "").await;
    assert_eq!(resp.status, 200, "served meanwhile: {resp:?}");
    assert!(until_closed(&mut slow).await.is_some(), "the slow client is disconnected");
    assert_eq!(origin.hits("/x"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let origin = Origin::start(RULES).await;
    let proxy =
        TestProxy::start_with(|c| c.proxy.header_read_timeout = Duration::from_millis(300)).await;
    let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
    // The connection is kept alive between requests: a second request, sent after the first
    // answer and well within the idle limit, is answered on it ...
    let request = format!("GET {}/x HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    conn.write_all(request.as_bytes()).await.unwrap();
    let want = "hello from /x";
    let mut first = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&first).contains(want) {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut chunk))
            .await
            .expect("the first answer")
            .unwrap();
        assert!(n > 0, "closed after one request: {}", String::from_utf8_lossy(&first));
        first.extend_from_slice(&chunk[..n]);
    }
    let request = format!("GET {}/y HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    conn.write_all(request.as_bytes()).await.unwrap();
    // ... and then, once idle, it is closed: not before the idle limit has passed.
    let idle_from = std::time::Instant::now();
    let rest = until_closed(&mut conn).await.expect("closed once idle");
    let idle = idle_from.elapsed();
    let resp = parse_response(&rest);
    assert_eq!(resp.status, 200, "the second request was answered first: {resp:?}");
    assert_eq!(resp.body, "hello from /y");
    assert!(idle >= Duration::from_millis(250), "closed {idle:?} after the last request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_limit_refuse_mode_answers_503() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        c.limits.max_connections = 2;
        c.limits.when_full = WhenFull::Refuse;
    })
    .await;
    let held = [held_connection(&proxy, &origin).await, held_connection(&proxy, &origin).await];
    let url = format!("{}/x", origin.base());
    let resp = raw_get(proxy.addr, &url, "x", "").await;
    assert_eq!(resp.status, 503, "{resp:?}");
    assert!(resp.headers["proxy-status"].contains("connection_limit_reached"), "{resp:?}");
    drop(held);
    // The slots come back once the proxy has seen the connections close.
    let mut status = 0;
    for _ in 0..50 {
        status = raw_get(proxy.addr, &url, "x", "").await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_limit_wait_mode_queues() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        c.limits.max_connections = 1;
        c.limits.when_full = WhenFull::Wait;
    })
    .await;
    let held = held_connection(&proxy, &origin).await;
    let mut waiting = TcpStream::connect(proxy.addr).await.unwrap();
    let request =
        format!("GET {}/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", origin.base());
    waiting.write_all(request.as_bytes()).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), waiting.read(&mut byte)).await;
    assert!(early.is_err(), "not served while the only slot is taken: {early:?}");
    drop(held);
    let rest = until_closed(&mut waiting).await.expect("served once the slot is free");
    assert_eq!(parse_response(&rest).status, 200, "{}", String::from_utf8_lossy(&rest));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_disconnected() {
    const TOTAL: u64 = 200 << 20;
    let origin = Origin::start(RULES).await;
    let proxy =
        TestProxy::start_with(|c| c.limits.client_write_timeout = Duration::from_millis(300)).await;
    let mut lazy = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {}/big/{TOTAL} HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    lazy.write_all(request.as_bytes()).await.unwrap();
    // The download has begun: the buffers fill and the client stalls the proxy's writes.
    let big = format!("/big/{TOTAL}");
    until("the origin is asked for the download", || origin.hits(&big) == 1).await;
    let resp = raw_get(proxy.addr, &format!("{}/fine", origin.base()), "x", "").await;
    assert_eq!(resp.status, 200, "served meanwhile: {resp:?}");
    // The 300 ms write timeout passes and the proxy drops the client (no fixed wait).
    until("the proxy drops the client", || proxy.metrics.open_connections() == 0).await;
    // What was buffered before the proxy gave up, then the end of the connection.
    let mut received = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let read = tokio::time::timeout_at(deadline, lazy.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received += n as u64,
            Err(_) => panic!("the connection stayed open ({received} bytes read)"),
        }
    }
    assert!(received < TOTAL, "the proxy gave up before sending everything ({received} bytes)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_robots_txt_fetches_are_capped() {
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut origins = Vec::new();
    for _ in 0..3 {
        let (now, most) = (now.clone(), most.clone());
        origins.push(
            FaultOrigin::start(move |mut socket: TcpStream, path: String| {
                let (now, most) = (now.clone(), most.clone());
                async move {
                    let body = if path == "/robots.txt" {
                        let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(running, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        "User-agent: *\nAllow: /\n"
                    } else {
                        "page"
                    };
                    let resp =
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                    let _ = socket.write_all(resp.as_bytes()).await;
                }
            })
            .await,
        );
    }
    let proxy = TestProxy::start_with(|c| c.robots.max_concurrent_fetches = 1).await;
    let tasks: Vec<_> = origins
        .iter()
        .map(|o| {
            let (addr, url) = (proxy.addr, format!("{}/x", o.base()));
            tokio::spawn(async move {
                raw(addr, &format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
                    .await
            })
        })
        .collect();
    for task in tasks {
        let resp = task.await.unwrap();
        assert_eq!(resp.status, 200, "{resp:?}");
        assert_eq!(resp.body, "page");
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "one robots.txt fetch at a time");
}

/// A client that sends part of its request body and then nothing, to an origin that answers
/// without reading it, gets its response, and then its connection closed once the body has been
/// idle for `limits.client_body_idle_timeout`: it holds no slot, and no origin connection, for
/// ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_the_client_stops_sending_is_failed_when_idle() {
    // An origin that answers at once without reading the body, then keeps reading whatever
    // comes and never closes (as many do for 401s, 413s and redirects).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let robots = String::from_utf8_lossy(&buf[..n]).starts_with("GET /robots.txt");
                let answer = if robots {
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{RULES}", RULES.len())
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned()
                };
                let _ = conn.write_all(answer.as_bytes()).await;
                while conn.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
        }
    });
    let proxy = TestProxy::start_with(|c| {
        c.limits.client_body_idle_timeout = Duration::from_millis(300);
        c.limits.max_connections = 1;
    })
    .await;
    let mut conn = TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!("POST {base}/up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&[b'x'; 10]).await.unwrap();
    let stalled = std::time::Instant::now();
    let rest = until_closed(&mut conn).await.expect("the stalled upload's connection is closed");
    let took = stalled.elapsed();
    assert!(took >= Duration::from_millis(250), "closed before the idle limit: {took:?}");
    let resp = parse_response(&rest);
    assert_eq!(resp.status, 200, "the origin's early answer was forwarded: {resp:?}");
    // The one connection slot is free again: the next client is served.
    let next = raw_get(proxy.addr, &format!("{base}/next"), "x", "").await;
    assert_eq!(next.status, 200, "{next:?}");
}
