//! One test per row of the spec's fetch table, through the proxy with a real client: what the
//! origin's robots.txt answers decides whether `/private` gets through.

use std::time::Duration;

use super::support::{raw_get, RawResponse, TestProxy};
use crate::cache::support::{Origin, Reply};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

async fn origin(robots: Reply) -> Origin {
    let origin = Origin::with_robots(robots).await;
    origin.route("/private", Reply::ok("private content"));
    origin.route("/ok", Reply::ok("ok content"));
    origin
}

async fn get(proxy: &TestProxy, origin: &Origin, path: &str) -> RawResponse {
    let host = origin.base_url().trim_start_matches("http://").to_owned();
    raw_get(proxy.addr, &format!("{}{path}", origin.base_url()), &host, "").await
}

async fn short_proxy() -> TestProxy {
    TestProxy::start_with(|c| c.robots.fetch_timeout = Duration::from_millis(400)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_200_rules_are_obeyed() {
    let origin = origin(Reply::ok(RULES)).await;
    let proxy = short_proxy().await;
    assert_eq!(get(&proxy, &origin, "/private").await.status, 403);
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 200);
    assert_eq!(origin.hits("/private"), 0);
    assert_eq!(origin.robots_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_chain_across_origins_applies_to_the_original() {
    let other = Origin::start().await;
    other.route("/r2", Reply::redirect(302, "/rules.txt"));
    other.route("/rules.txt", Reply::ok(RULES));
    let origin = origin(Reply::redirect(301, &format!("{}/r2", other.base_url()))).await;
    let proxy = short_proxy().await;
    let resp = get(&proxy, &origin, "/private").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(resp.body.contains(&format!("{}/robots.txt", origin.base_url())), "{}", resp.body);
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 200);
    assert_eq!(other.hits("/rules.txt"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_redirects_count_as_unavailable() {
    let origin = origin(Reply::redirect(302, "/r1")).await;
    for i in 1..=6 {
        origin.route(&format!("/r{i}"), Reply::redirect(302, &format!("/r{}", i + 1)));
    }
    origin.route("/r7", Reply::ok("User-agent: *\nDisallow: /\n"));
    let proxy = short_proxy().await;
    let resp = get(&proxy, &origin, "/private").await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.body, "private content");
    assert_eq!(origin.hits("/r7"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_errors_allow_everything() {
    for status in [404, 410, 401, 403] {
        let origin = origin(Reply::status(status)).await;
        let proxy = short_proxy().await;
        let resp = get(&proxy, &origin, "/private").await;
        assert_eq!(resp.status, 200, "robots.txt {status}: {resp:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_disallows_everything() {
    let cases = [
        (Reply::status(429), "HTTP 429"),
        (Reply::status(500), "HTTP 500"),
        (Reply::status(503), "HTTP 503"),
        (Reply::Hang, "robots.txt unreachable"),
        (Reply::ResetAfter(b"HTTP/1.1 200 OK\r\n".to_vec()), "robots.txt unreachable"),
        (Reply::Raw(b"SPDY/9 banana\r\n\r\n".to_vec()), "robots.txt unreachable"),
    ];
    for (reply, says) in cases {
        let label = format!("{reply:?}");
        let origin = origin(reply).await;
        let proxy = short_proxy().await;
        let resp = get(&proxy, &origin, "/ok").await;
        assert_eq!(resp.status, 403, "{label}: {resp:?}");
        assert!(resp.body.contains(says), "{label}: {}", resp.body);
        assert!(
            resp.body.contains("all paths disallowed until it can be fetched"),
            "{}",
            resp.body
        );
        assert_eq!(origin.hits("/ok"), 0, "{label}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_error_after_a_cached_copy_uses_it_stale() {
    let origin = origin(Reply::ok(RULES)).await;
    let proxy = short_proxy().await;
    assert_eq!(get(&proxy, &origin, "/private").await.status, 403);
    origin.route("/robots.txt", Reply::status(503));
    proxy.clock.advance(Duration::from_secs(25 * 3600));
    let resp = get(&proxy, &origin, "/private").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(resp.body.contains("stale"), "{}", resp.body);
    assert!(resp.body.contains("line 2: disallow: /private"), "{}", resp.body);
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 200);
    assert_eq!(origin.robots_hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_age_shorter_than_default_is_refetched_after_it() {
    let origin = origin(Reply::ok(RULES).header("Cache-Control", "max-age=300")).await;
    let proxy = short_proxy().await;
    assert_eq!(get(&proxy, &origin, "/private").await.status, 403);
    origin.route("/robots.txt", Reply::ok("User-agent: *\nDisallow: /ok\n"));
    proxy.clock.advance(Duration::from_secs(200));
    assert_eq!(get(&proxy, &origin, "/private").await.status, 403, "still fresh");
    assert_eq!(origin.robots_hits(), 1);
    proxy.clock.advance(Duration::from_secs(101));
    assert_eq!(get(&proxy, &origin, "/private").await.status, 200, "refetched");
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 403);
    assert_eq!(origin.robots_hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_first_requests_fetch_once() {
    let origin = origin(Reply::ok(RULES).delayed(Duration::from_millis(200))).await;
    // A generous fetch timeout: on a loaded machine a thousand connections take a while.
    let proxy = TestProxy::start_with(|c| c.robots.fetch_timeout = Duration::from_secs(20)).await;
    let client = proxy.client();
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let client = client.clone();
        let path = if i % 2 == 0 { "/private" } else { "/ok" };
        let url = format!("{}{path}", origin.base_url());
        tasks.push(tokio::spawn(
            async move { (i, client.get(url).send().await.map(|r| r.status())) },
        ));
    }
    for t in tasks {
        let (i, status) = t.await.unwrap();
        let want = if i % 2 == 0 { 403 } else { 200 };
        assert_eq!(status.unwrap().as_u16(), want);
    }
    assert_eq!(origin.robots_hits(), 1);
    assert_eq!(origin.hits("/private"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_past_the_size_limit_are_ignored() {
    let mut body = String::from("User-agent: *\nDisallow: /private\n");
    while body.len() < 600 * 1024 {
        body.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    body.push_str("Disallow: /ok\n");
    let origin = origin(Reply::ok(body)).await;
    let proxy = short_proxy().await;
    assert_eq!(get(&proxy, &origin, "/private").await.status, 403);
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 200);
}
