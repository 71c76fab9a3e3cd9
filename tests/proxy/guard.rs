//! The destination guard (SSRF): prohibited addresses are refused after DNS resolution, for the
//! request, its robots.txt fetch and redirects, tunnels, and the proxy itself (issue #6).
//!
//! Only loopback addresses are used as "prohibited" destinations here: should the guard fail,
//! nothing leaves the machine.

use std::sync::Arc;
use std::time::Duration;

use tower_service::Service;

use robots_proxy::guard::{ConnectSettings, DestinationGuard, GuardedConnector};

use super::support::{raw, raw_get, Origin, TestProxy};
use crate::cache::support::{Origin as RawOrigin, Reply};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// A proxy with the default guard: no destination range re-opened.
async fn strict_proxy() -> TestProxy {
    TestProxy::start_with(|c| {
        c.access.allow_destinations = Vec::new();
        c.robots.fetch_timeout = Duration::from_secs(5);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_literal_is_refused_before_anything_is_fetched() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = strict_proxy().await;
    let url = format!("{}/page", origin.base());
    let resp = raw_get(proxy.addr, &url, "x", "User-Agent: ExampleBot/1.0\r\n").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    let status = &resp.headers["proxy-status"];
    assert!(status.contains("error=destination_ip_prohibited"), "{status}");
    assert!(status.contains("127.0.0.1 is a loopback address"), "{status}");
    assert!(resp.body.contains("access.allow_destinations"), "{}", resp.body);
    assert!(origin.seen().is_empty(), "neither robots.txt nor the page was fetched");
    let records = proxy.audit_records().await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r["event.action"], "destination_prohibited");
    assert_eq!(r["event.outcome"], "failure");
    assert_eq!(r["http.response.status_code"], 403);
    assert_eq!(r["url.full"], url);
    assert_eq!(r["robots.product_token"], "ExampleBot");
    assert!(r["event.reason"].as_str().unwrap().contains("loopback"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_loopback_spellings_are_refused_too() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = strict_proxy().await;
    let port = origin.addr.port();
    for host in ["[::1]", "[::ffff:127.0.0.1]", "127.1.2.3", "0.0.0.0"] {
        let resp = raw_get(proxy.addr, &format!("http://{host}:{port}/"), "x", "").await;
        assert_eq!(resp.status, 403, "{host}: {resp:?}");
        assert!(resp.headers["proxy-status"].contains("destination_ip_prohibited"), "{host}");
    }
    assert!(origin.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_checked_after_resolution() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = strict_proxy().await;
    // `localhost` resolves to loopback addresses only (from /etc/hosts).
    let url = format!("http://localhost:{}/page", origin.addr.port());
    let resp = raw_get(proxy.addr, &url, "x", "").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(resp.headers["proxy-status"].contains("destination_ip_prohibited"));
    assert!(resp.body.contains("localhost resolves to"), "{}", resp.body);
    // The client is not told the address a name resolves to (split-horizon DNS would be mapped
    // through the proxy); the audit record has it.
    for told in [&resp.body, &resp.headers["proxy-status"]] {
        assert!(!told.contains("127.0.0.1") && !told.contains("::1"), "{told}");
    }
    assert!(origin.seen().is_empty());
    let records = proxy.audit_records().await;
    assert_eq!(records[0]["event.action"], "destination_prohibited");
    let reason = records[0]["event.reason"].as_str().unwrap();
    assert!(reason.contains("127.0.0.1") || reason.contains("::1"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allow_list_reopens_a_range_for_names_and_literals() {
    let origin = Origin::start(ROBOTS).await;
    // Only 127.0.0.1 itself: `localhost`'s ::1 stays prohibited and is skipped.
    let proxy =
        TestProxy::start_with(|c| c.access.allow_destinations = vec!["127.0.0.1".parse().unwrap()])
            .await;
    let resp =
        raw_get(proxy.addr, &format!("http://localhost:{}/page", origin.addr.port()), "x", "")
            .await;
    assert_eq!(resp.status, 200, "{resp:?}");
    let resp = raw_get(proxy.addr, &format!("{}/private", origin.base()), "x", "").await;
    assert_eq!(resp.status, 403, "robots.txt still applies");
    assert!(resp.headers["proxy-status"].contains("http_request_denied"));
    let resp =
        raw_get(proxy.addr, &format!("http://127.0.0.2:{}/", origin.addr.port()), "x", "").await;
    assert_eq!(resp.status, 403, "127.0.0.2 is not re-opened: {resp:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robots_txt_redirect_to_a_prohibited_address_is_refused() {
    // The origin (127.0.0.1, re-opened) redirects robots.txt to 127.0.0.2 (still prohibited).
    let target = RawOrigin::start().await;
    target.route("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n"));
    let redirect = format!("http://127.0.0.2:{}/robots.txt", target.authority().port());
    let origin = RawOrigin::with_robots(Reply::redirect(302, &redirect)).await;
    origin.route("/page", Reply::ok("page"));
    let proxy =
        TestProxy::start_with(|c| c.access.allow_destinations = vec!["127.0.0.1".parse().unwrap()])
            .await;
    let resp = raw_get(proxy.addr, &format!("{}/page", origin.base_url()), "x", "").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(resp.headers["proxy-status"].contains("destination_ip_prohibited"), "{resp:?}");
    assert!(resp.body.contains(&format!("robots.txt at {redirect}")), "{}", resp.body);
    assert!(resp.body.contains("127.0.0.2 is a loopback address"), "{}", resp.body);
    assert_eq!(origin.robots_hits(), 1);
    assert_eq!(origin.hits("/page"), 0);
    assert_eq!(target.robots_hits(), 0, "the redirect target was never contacted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_to_the_proxy_itself_never_loop() {
    // Even with all of loopback re-opened, the proxy's own listener stays prohibited.
    let proxy = TestProxy::start().await;
    let port = proxy.addr.port();
    let resp = raw_get(proxy.addr, &format!("http://127.0.0.1:{port}/x"), "x", "").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    let status = &resp.headers["proxy-status"];
    assert!(status.contains("destination_ip_prohibited"), "{status}");
    assert!(status.contains("own listener"), "{status}");
    // `localhost` also resolves to ::1, which is not re-opened: either address is refused.
    let resp = raw_get(proxy.addr, &format!("http://localhost:{port}/x"), "x", "").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(resp.headers["proxy-status"].contains("destination_ip_prohibited"), "{resp:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_go_through_the_guard() {
    let origin = Origin::start(ROBOTS).await;
    let port = origin.addr.port();
    let proxy = TestProxy::start_with(|c| {
        c.access.allow_destinations = Vec::new();
        c.https.mode = robots_proxy::tls::HttpsMode::Tunnel;
        c.https.connect_ports = vec![port];
    })
    .await;
    for target in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let resp = raw(
            proxy.addr,
            &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert_eq!(resp.status, 403, "{target}: {resp:?}");
        assert!(resp.headers["proxy-status"].contains("destination_ip_prohibited"), "{target}");
    }
    assert!(origin.seen().is_empty());
    let records = proxy.audit_records().await;
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(records.iter().all(|r| r["event.action"] == "destination_prohibited"));
    assert!(records.iter().all(|r| r["http.request.method"] == "CONNECT"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connector_connects_to_the_checked_address() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let guard = Arc::new(DestinationGuard::new(&["127.0.0.1".parse().unwrap()], &[]));
    let settings = ConnectSettings { connect_timeout: Duration::from_secs(5), keepalive: None };
    let mut connector = GuardedConnector::new(guard, settings);
    let uri: http::Uri = format!("http://localhost:{port}/").parse().unwrap();
    let io = connector.call(uri).await.unwrap();
    let peer = io.inner().peer_addr().unwrap();
    assert_eq!(peer, listener.local_addr().unwrap());
    let refused: http::Uri = format!("http://[::1]:{port}/").parse().unwrap();
    let err = connector.call(refused).await.expect_err("::1 is prohibited");
    let p = robots_proxy::guard::find_prohibited(err.as_ref()).expect("a Prohibited error");
    assert_eq!(p.reason, robots_proxy::guard::Reason::Loopback);
}
