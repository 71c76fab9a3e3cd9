//! Refresh ahead (`robots.refresh_ahead`) in the real binary, against an origin whose
//! robots.txt answer can be held by a gate: while the refetch is held, requests in the refresh
//! window are answered with the rules in force; once released, the new rules apply; the origin
//! sees one refetch however many requests came; a 503 keeps the rules until they expire.
//!
//! Lifetimes are real seconds (the binary has the system clock); what is asserted never
//! depends on how fast anything is: the gate, not a sleep, holds the refetch.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::support::{get_json, proxied_client, ProxyProcess};

/// An origin on 127.0.0.1 whose `/robots.txt` answers what [`GatedOrigin::set_robots`] last
/// set, once the gate is open ([`GatedOrigin::hold`], [`GatedOrigin::release`]); anything else
/// answers 200 at once.
pub(crate) struct GatedOrigin {
    pub(crate) addr: SocketAddr,
    robots: Arc<Mutex<(u16, String)>>,
    hits: Arc<AtomicUsize>,
    held: Arc<AtomicUsize>,
    open: watch::Sender<bool>,
}

impl GatedOrigin {
    pub(crate) async fn start(robots: &str) -> GatedOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let robots = Arc::new(Mutex::new((200, robots.to_owned())));
        let (hits, held) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (open, _) = watch::channel(true);
        let state = (robots.clone(), hits.clone(), held.clone(), open.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (robots, hits, held, open) = state.clone();
                        async move {
                            if req.uri().path() != "/robots.txt" {
                                let body = Full::new(Bytes::from_static(b"hello"));
                                return Ok::<_, Infallible>(Response::new(body));
                            }
                            hits.fetch_add(1, Ordering::SeqCst);
                            // The answer as it was when the request came.
                            let (status, body) = robots.lock().unwrap().clone();
                            held.fetch_add(1, Ordering::SeqCst);
                            let _ = open.subscribe().wait_for(|open| *open).await;
                            held.fetch_sub(1, Ordering::SeqCst);
                            let mut resp = Response::new(Full::new(Bytes::from(body)));
                            *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                            Ok(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        GatedOrigin { addr, robots, hits, held, open }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// robots.txt answers `status` with `body` from now on.
    pub(crate) fn set_robots(&self, status: u16, body: &str) {
        *self.robots.lock().unwrap() = (status, body.to_owned());
    }

    /// robots.txt requests wait from now on, until [`GatedOrigin::release`].
    pub(crate) fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Answers the robots.txt requests held, and every later one at once.
    pub(crate) fn release(&self) {
        self.open.send_replace(true);
    }

    /// robots.txt requests received so far.
    pub(crate) fn robots_hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// robots.txt requests being held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

/// Polls `ready` every 10 ms for up to 5 s.
pub(crate) async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    for _ in 0..500 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

/// The statuses of `n` concurrent GETs of `url` through `proxy`; a request that waited for a
/// held refetch would fail the client's timeout (the gate is opened only after they return).
pub(crate) async fn statuses(proxy: SocketAddr, url: &str, n: usize) -> Vec<u16> {
    let client = proxied_client(proxy);
    let asks = (0..n).map(|_| {
        let (client, url) = (client.clone(), url.to_owned());
        tokio::spawn(async move {
            let resp = tokio::time::timeout(Duration::from_secs(10), client.get(url).send()).await;
            resp.expect("a request waited for the held refetch").unwrap().status().as_u16()
        })
    });
    let mut out = Vec::new();
    for ask in asks.collect::<Vec<_>>() {
        out.push(ask.await.unwrap());
    }
    out
}

const OLD: &str = "User-agent: *\nDisallow: /old\n";
const NEW: &str = "User-agent: *\nDisallow: /new\n";

fn refresh_env(max_age: &'static str) -> [(&'static str, &'static str); 3] {
    [
        ("ROBOTS_PROXY_ROBOTS__MAX_AGE", max_age),
        ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__REFRESH_AHEAD", "0.5"),
    ]
}

/// In the last half of a 10 s lifetime, requests start one refetch and go on with the old
/// rules while it is held; released, the new rules apply, and the origin saw one refetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_refresh_keeps_answering_with_the_rules_in_force() {
    let origin = GatedOrigin::start(OLD).await;
    let proxy = ProxyProcess::start(&[], &refresh_env("10s"));
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/old"), 1).await, [403]);
    assert_eq!(origin.robots_hits(), 1);
    origin.set_robots(200, NEW);
    origin.hold();
    // Into the refresh window (from 5 s after the fetch; it expires at 10 s).
    tokio::time::sleep(Duration::from_millis(5500)).await;
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/old"), 1).await, [403]);
    until("the refetch reaches the origin", || origin.held() == 1).await;
    let answers = statuses(proxy.proxy_addr, &origin.url("/old"), 40).await;
    assert!(answers.iter().all(|s| *s == 403), "the old rules while held: {answers:?}");
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/new"), 5).await, [200; 5]);
    assert_eq!((origin.robots_hits(), origin.held()), (2, 1), "one refetch for every request");
    origin.release();
    let client = proxied_client(proxy.proxy_addr);
    let mut renewed = false;
    for _ in 0..300 {
        if client.get(origin.url("/old")).send().await.unwrap().status() == 200 {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(renewed, "the new rules never applied");
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/new"), 5).await, [403; 5]);
    assert_eq!(origin.robots_hits(), 2);
    let metrics = client_metrics(&proxy).await;
    assert_eq!(super::support::sample(&metrics, "robots_proxy_cache_refreshes_total"), 1.0);
    // The archive holds the refreshed version as it holds a fetched one: the old one's window
    // replaced by the new one's.
    let windows = archived_windows(&proxy, &origin, 2).await;
    assert_eq!(windows[0]["sha256"], sha256_hex(OLD), "{windows:?}");
    assert_eq!(windows[1]["sha256"], sha256_hex(NEW), "{windows:?}");
    assert_eq!(
        (windows[1]["status"].as_u64(), windows[1]["state"].as_str()),
        (Some(200), Some("fresh"))
    );
    assert_eq!(windows[0]["replaced_at"], windows[1]["first_fetched"]);
}

/// The windows of the archive (`GET /api/robots/versions`) for `origin`, once there are
/// `count` of them (at most 5 s).
async fn archived_windows(
    proxy: &ProxyProcess,
    origin: &GatedOrigin,
    count: usize,
) -> Vec<serde_json::Value> {
    let authority = format!("http://{}", origin.addr);
    let encoded: String = url::form_urlencoded::byte_serialize(authority.as_bytes()).collect();
    let url = format!("{}/api/robots/versions?authority={encoded}", proxy.admin());
    let mut windows = Vec::new();
    for _ in 0..250 {
        let (status, listed) = get_json(&url).await;
        assert_eq!(status, 200, "{listed}");
        windows = listed["windows"].as_array().cloned().unwrap_or_default();
        if windows.len() >= count {
            return windows;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the archive never held {count} windows: {windows:?}");
}

/// The lowercase hex SHA-256 of `text`, computed here, independently of the proxy.
fn sha256_hex(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A 503 during the refresh keeps the old rules until they expire, with no second refresh;
/// after the expiry, the rules for an unreachable robots.txt: the copy goes on, stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_refresh_keeps_the_rules_until_they_expire() {
    let origin = GatedOrigin::start(OLD).await;
    let proxy = ProxyProcess::start(&[], &refresh_env("6s"));
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/old"), 1).await, [403]);
    origin.set_robots(503, "down");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/old"), 1).await, [403]);
    until("the refresh is answered 503", || origin.robots_hits() == 2 && origin.held() == 0).await;
    let answers = statuses(proxy.proxy_addr, &origin.url("/old"), 20).await;
    assert!(answers.iter().all(|s| *s == 403), "the old rules after a 503: {answers:?}");
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/new"), 3).await, [200; 3]);
    assert_eq!(origin.robots_hits(), 2, "no second refresh before the expiry");
    // The copy stayed in force: the archive has its one window, nothing of the failed refresh.
    let windows = archived_windows(&proxy, &origin, 1).await;
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(windows[0]["sha256"], sha256_hex(OLD));
    assert_eq!(windows[0]["replaced_at"], serde_json::Value::Null);
    // Past the expiry: the copy, stale, while the retry runs.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/old"), 3).await, [403; 3]);
    assert_eq!(statuses(proxy.proxy_addr, &origin.url("/new"), 3).await, [200; 3]);
    until("the retry after the expiry", || origin.robots_hits() == 3).await;
}

async fn client_metrics(proxy: &ProxyProcess) -> String {
    let url = format!("{}/metrics", proxy.admin());
    super::support::direct_client().get(url).send().await.unwrap().text().await.unwrap()
}
