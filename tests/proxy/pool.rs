//! The pool of connections to `http` origins: reuse by keep-alive clients, origins that close
//! their connections, and idle connections closed after `upstream.pool_idle_timeout`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::TestProxy;
use crate::cache::support::eventually;

/// What an origin has seen of its connections.
#[derive(Default)]
struct Tally {
    accepted: AtomicUsize,
    /// Connections that served something other than robots.txt and have ended.
    content_connections_closed: AtomicUsize,
}

/// An origin (robots.txt allows everything) counting its connections. `idle_close` makes it
/// close a connection that has been idle that long, as many servers do.
async fn counting_origin(idle_close: Option<Duration>) -> (SocketAddr, Arc<Tally>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tally = Arc::new(Tally::default());
    let t = tally.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            t.accepted.fetch_add(1, Ordering::SeqCst);
            let t = t.clone();
            tokio::spawn(async move {
                let served_content = Arc::new(AtomicUsize::new(0));
                let s = served_content.clone();
                let svc = service_fn(move |req: Request<Incoming>| {
                    let body = if req.uri().path() == "/robots.txt" {
                        "User-agent: *\nDisallow:\n".to_owned()
                    } else {
                        s.fetch_add(1, Ordering::SeqCst);
                        format!("content of {}", req.uri().path())
                    };
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                if let Some(idle) = idle_close {
                    builder.timer(TokioTimer::new()).header_read_timeout(idle);
                }
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                if served_content.load(Ordering::SeqCst) > 0 {
                    t.content_connections_closed.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, tally)
}

#[tokio::test]
async fn keep_alive_requests_share_one_origin_connection() {
    let (origin, tally) = counting_origin(None).await;
    let proxy = TestProxy::start().await;
    let client = proxy.client();
    for i in 0..20 {
        let resp = client.get(format!("http://{origin}/page/{i}")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text().await.unwrap(), format!("content of /page/{i}"));
    }
    // One connection for the robots.txt fetch, one for the 20 forwarded requests.
    let accepted = tally.accepted.load(Ordering::SeqCst);
    assert!(accepted <= 2, "the origin accepted {accepted} connections for 20 requests");
}

#[tokio::test]
async fn origins_closing_idle_connections_do_not_fail_requests() {
    // The origin closes connections idle for 50 ms; the client pauses longer between requests,
    // so every pooled connection has been closed by the time it would be reused.
    let (origin, tally) = counting_origin(Some(Duration::from_millis(50))).await;
    let proxy = TestProxy::start().await;
    let client = proxy.client();
    for i in 0..6 {
        let resp = client.get(format!("http://{origin}/p{i}")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "request {i}");
        assert_eq!(resp.text().await.unwrap(), format!("content of /p{i}"));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(tally.accepted.load(Ordering::SeqCst) >= 6, "closed connections were not replaced");
}

#[tokio::test]
async fn an_origin_that_closes_after_each_response_is_still_served() {
    // A bare origin: answers one request per connection (no `Connection: close` header),
    // then closes the socket; the proxy must notice and not reuse it.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            a.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let robots = got.starts_with(b"GET /robots.txt");
                let body: &[u8] = if robots { b"User-agent: *\nDisallow:\n" } else { b"fine" };
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body).await;
                // Closed without saying so.
            });
        }
    });
    let proxy = TestProxy::start().await;
    let client = proxy.client();
    for i in 0..8 {
        let resp = client.get(format!("http://{origin}/x{i}")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "request {i}");
        assert_eq!(resp.text().await.unwrap(), "fine");
    }
    assert!(accepted.load(Ordering::SeqCst) >= 9);
}

#[tokio::test]
async fn idle_origin_connections_are_closed_after_the_pool_idle_timeout() {
    let (origin, tally) = counting_origin(None).await;
    let proxy = TestProxy::start_with(|c| {
        c.upstream.pool_idle_timeout = Duration::from_millis(300);
    })
    .await;
    let resp = proxy.client().get(format!("http://{origin}/once")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "content of /once");
    assert_eq!(tally.content_connections_closed.load(Ordering::SeqCst), 0);
    let closed = eventually(Duration::from_secs(5), || {
        tally.content_connections_closed.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(closed, "the idle origin connection was not closed");
}

/// An origin (robots.txt allows everything) that counts the POSTs it receives and answers each
/// with the number it has seen so far.
async fn post_counting_origin() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let posts = Arc::new(AtomicUsize::new(0));
    let p = posts.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let p = p.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let p = p.clone();
                    async move {
                        let body = if req.method() == http::Method::POST {
                            let n = p.fetch_add(1, Ordering::SeqCst) + 1;
                            format!("post number {n}")
                        } else {
                            "User-agent: *\nDisallow:\n".to_owned()
                        };
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, posts)
}

/// `upstream.pool_max_idle_per_host = 0` means no pooling. It used to panic in the pool after
/// the origin had received the request (issue 26 §7): a POST ran while the client saw a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_max_idle_per_host_zero_turns_pooling_off_and_answers() {
    let (origin, posts) = post_counting_origin().await;
    let state = tempfile::tempdir().unwrap();
    let proxy = crate::ops::support::ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap()),
            ("ROBOTS_PROXY_UPSTREAM__POOL_MAX_IDLE_PER_HOST", "0"),
            ("ROBOTS_PROXY_HTTPS__MODE", "reject"),
        ],
    );
    let client = crate::ops::support::proxied_client(proxy.proxy_addr);
    for i in 1..=3 {
        let resp = client.post(format!("http://{origin}/submit")).body("x").send().await.unwrap();
        assert_eq!(resp.status(), 200, "POST {i}; proxy log:\n{}", proxy.stderr());
        assert_eq!(resp.text().await.unwrap(), format!("post number {i}"));
        assert_eq!(posts.load(Ordering::SeqCst), i, "the origin received POST {i} exactly once");
    }
    assert!(!proxy.stderr().contains("panicked"), "{}", proxy.stderr());
}
