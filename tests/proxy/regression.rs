//! Regressions: each test is named after what it stops.
//!
//! Readings of the path (issue #12): what the origin serves is what was checked. The proxy
//! forwards the request-target as received and decides on every reading a common origin
//! applies to it (spec README, "What the proxy decides on").

use std::sync::Arc;

use super::support::{raw_get, Origin, TestProxy};
use super::tls_support::{
    connect, h1_get, h1_over, h2_get, h2_over, tls_over, HttpsProxy, TestCa, TlsOrigin, H1, H2_H1,
};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nAllow: /private/open\n";

/// Paths that read as a disallowed path to nginx, Apache, IIS or a servlet container, with the
/// reading that sees it.
const TRICKS: &[(&str, &str)] = &[
    ("/public/..%2fprivate/secret.html", "decoded"),
    ("/public/..%2Fprivate/secret.html", "decoded"),
    ("/%2fprivate/secret.html", "decoded"),
    ("/public/%2e%2e%2fprivate/secret.html", "decoded"),
    ("/private/open%2f..%2fsecret.html", "decoded"),
    ("/private/open/..%2fsecret.html", "decoded"),
    ("/a/../private/secret.html", "decoded"),
    ("//private/secret.html", "decoded"),
    ("/./private/secret.html", "decoded"),
    ("/public/..;/private/secret.html", "parameters"),
    ("/;x/private/secret.html", "parameters"),
    ("/private;jsessionid=1/secret.html", "as-sent"),
    ("/%5cprivate/secret.html", "backslash"),
    ("/public%5c..%5cprivate/secret.html", "backslash"),
    ("/\\private/secret.html", "backslash"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_separators_dot_segments_and_parameters_cannot_reach_a_disallowed_path() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let (base, host) = (origin.base(), origin.addr.to_string());
    for (trick, reading) in TRICKS {
        let resp = raw_get(proxy.addr, &format!("{base}{trick}"), &host, "").await;
        assert_eq!(resp.status, 403, "{trick} slipped through: {resp:?}");
        assert!(
            resp.body.contains(&format!("Reading:       {reading}")),
            "{trick}: the 403 names the {reading} reading: {}",
            resp.body
        );
        if *reading != "as-sent" {
            let status = &resp.headers["proxy-status"];
            assert!(status.contains("the path read as /private/"), "{trick}: {status}");
        }
    }
    assert_eq!(origin.content_hits(), 0, "{:?}", origin.seen());
    // The audit record of each names the reading that was disallowed and what it read.
    let records = proxy.audit_records().await;
    assert_eq!(records.len(), TRICKS.len(), "{records:?}");
    for ((trick, reading), record) in TRICKS.iter().zip(&records) {
        assert_eq!(record["robots.path"], *trick, "{record}");
        assert_eq!(record["robots.reading"], *reading, "{record}");
        if *reading != "as-sent" {
            let read = record["robots.read_path"].as_str().unwrap_or_default();
            assert!(read.starts_with("/private/"), "{trick}: {record}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_403_names_the_reading() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let host = origin.addr.to_string();
    let url = format!("{}/public/..%2fprivate/x", origin.base());
    let resp = raw_get(proxy.addr, &url, &host, "Accept: application/json\r\n").await;
    assert_eq!(resp.status, 403);
    let body: serde_json::Value = serde_json::from_str(&resp.body).unwrap();
    assert_eq!(body["reading"], "decoded", "{body}");
    assert_eq!(body["read_path"], "/private/x", "{body}");
    assert_eq!(body["url"], url, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_never_rewrites_the_path_it_forwards() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let (base, host) = (origin.base(), origin.addr.to_string());
    // RFC 9110 §7.1: a proxy MUST NOT rewrite the path; `/img//index.html` is another resource
    // than `/img/index.html` (RFC 3986 §6.2.2).
    for target in [
        "/img//index.html",
        "/a/./b/../c",
        "/%7Euser/%2e/x",
        "/p;v=1/q?x=%2F..//&y=a%20b",
        "/file-*.html?x=$1",
        "/public/%2fok",
    ] {
        let resp = raw_get(proxy.addr, &format!("{base}{target}"), &host, "").await;
        assert_eq!(resp.status, 200, "{target}: {resp:?}");
        assert_eq!(
            origin.hits(target),
            1,
            "{target} reached the origin changed: {:?}",
            origin.seen()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_no_longer_empties_the_request_target() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let host = origin.addr.to_string();
    let resp = raw_get(proxy.addr, &format!("http://{host}#frag"), &host, "").await;
    assert_eq!(resp.status, 200, "{resp:?} {:?}", origin.seen());
    let resp = raw_get(proxy.addr, &format!("http://{host}/x?y#frag"), &host, "").await;
    assert_eq!(resp.status, 200, "{resp:?}");
    let targets: Vec<String> = origin.seen().into_iter().map(|s| s.target).collect();
    assert_eq!(targets, ["/robots.txt", "/", "/x?y"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_that_name_double_slashes_are_matched() {
    let origin = Origin::start("User-agent: *\nDisallow: /*//\nDisallow: /img//index.html\n").await;
    let proxy = TestProxy::start().await;
    let (base, host) = (origin.base(), origin.addr.to_string());
    for target in ["/img//index.html", "/a//b", "/x/y//"] {
        let resp = raw_get(proxy.addr, &format!("{base}{target}"), &host, "").await;
        assert_eq!(resp.status, 403, "{target}: {resp:?}");
    }
    let resp = raw_get(proxy.addr, &format!("{base}/img/index.html"), &host, "").await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(origin.content_hits(), 1, "{:?}", origin.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_txt_with_a_query_is_not_exempt() {
    let origin = Origin::start("User-agent: *\nDisallow: /robots\n").await;
    let proxy = TestProxy::start().await;
    let (base, host) = (origin.base(), origin.addr.to_string());
    let resp = raw_get(proxy.addr, &format!("{base}/robots.txt?x=1"), &host, "").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    let resp = raw_get(proxy.addr, &format!("{base}/robots.txt"), &host, "").await;
    assert_eq!(resp.status, 200, "{resp:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_traversal_is_refused_inside_intercepted_https_over_h1_and_h2() {
    // HTTP/2 (`:path`).
    let origin = TlsOrigin::start(ROBOTS).await;
    let proxy = HttpsProxy::start(&origin.ca, &[origin.port()], |_| {}).await;
    // Every trick, the literal backslash included (the `http` crate's path table takes 0x5C),
    // and each refused by the reading the plain listener names.
    for (trick, reading) in TRICKS {
        let tunnel = connect(proxy.addr(), &origin.host(), "").await.tunnel();
        let tls = tls_over(tunnel, proxy.client_tls(H2_H1), "localhost").await.unwrap();
        let answer = h2_get(h2_over(tls).await, &format!("{}{trick}", origin.base())).await;
        assert_eq!(answer.status, 403, "h2 {trick}: {answer:?}");
        assert!(
            answer.body.contains(&format!("Reading:       {reading}")),
            "h2 {trick}: {answer:?}"
        );
    }
    // HTTP/1.1, several requests on one connection.
    let origin1 = TlsOrigin::start_with(ROBOTS, Arc::new(TestCa::new("h1 origin CA")), H1).await;
    let proxy1 = HttpsProxy::start(&origin1.ca, &[origin1.port()], |_| {}).await;
    let tunnel = connect(proxy1.addr(), &origin1.host(), "").await.tunnel();
    let tls = tls_over(tunnel, proxy1.client_tls(H1), "localhost").await.unwrap();
    let mut send = h1_over(tls).await;
    for (trick, reading) in TRICKS {
        let answer = h1_get(&mut send, trick, &origin1.host(), &[]).await;
        assert_eq!(answer.status, 403, "h1 {trick}: {answer:?}");
        assert!(
            answer.body.contains(&format!("Reading:       {reading}")),
            "h1 {trick}: {answer:?}"
        );
    }
    let answer = h1_get(&mut send, "/img//x", &origin1.host(), &[]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(origin.content_hits(), 0, "{:?}", origin.seen());
    assert_eq!(origin1.content_hits(), 1, "{:?}", origin1.seen());
    assert_eq!(origin1.hits("/img//x"), 1, "forwarded as sent: {:?}", origin1.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_traversal_is_refused_in_plain_http_inside_connect() {
    let plain = Origin::start(ROBOTS).await;
    let tls_origin = TlsOrigin::start(ROBOTS).await;
    let proxy = HttpsProxy::start(&tls_origin.ca, &[plain.addr.port()], |_| {}).await;
    let tunnel = connect(proxy.addr(), &plain.addr.to_string(), "").await.tunnel();
    let mut send = h1_over(tunnel).await;
    let host = plain.addr.to_string();
    for (trick, reading) in TRICKS {
        let answer = h1_get(&mut send, trick, &host, &[]).await;
        assert_eq!(answer.status, 403, "{trick}: {answer:?}");
        assert!(answer.body.contains(&format!("Reading:       {reading}")), "{}", answer.body);
    }
    assert_eq!(plain.content_hits(), 0, "{:?}", plain.seen());
}

/// An idle keep-alive client connection kept the User-Agent it sent last as the `HeaderValue`
/// hyper parsed: a slice of the connection's read buffer, which that kept alive beside the one
/// hyper reads into next (issue 22: 46-48 KiB per idle connection at 10,000). The value kept
/// (and the token cache's key) must not share the buffer.
#[test]
fn the_user_agent_kept_for_a_connection_does_not_pin_its_read_buffer() {
    use bytes::Bytes;
    use robots_proxy::policy::{Policy, PolicySection, RecentUserAgent};

    let store = Arc::new(robots_proxy::cache::RobotsCache::new(
        robots_proxy::cache::RobotsSection::default(),
        Arc::new(robots_proxy::clock::SystemClock),
    ));
    let policy = Policy::new(&PolicySection::default(), store);
    // A request head in an 8 KiB read buffer, the value a slice of it, as hyper parses it.
    let mut head = b"GET / HTTP/1.1\r\nUser-Agent: examplebot/1.0\r\n\r\n".to_vec();
    let (start, end) = (28, 43);
    assert_eq!(&head[start..end], b"examplebot/1.0\r");
    head.resize(8192, 0);
    let buffer = Bytes::from(head);
    let mut recent = RecentUserAgent::default();
    for _ in 0..2 {
        let value = http::HeaderValue::from_maybe_shared(buffer.slice(start..end - 1)).unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::USER_AGENT, value);
        let (token, _) = policy.token_for_connection(None, &headers, &mut recent);
        assert_eq!(token.as_ref().map(|t| t.as_str()), Some("examplebot"));
    }
    // Only this handle is left: nothing the policy or the connection keeps points into it.
    assert!(buffer.try_into_mut().is_ok(), "the read buffer is still shared");
}

/// Review-core N12: with two `User-Agent` fields the token came from the first while both were
/// forwarded, so `User-Agent: Mozilla/5.0` + `User-Agent: EvilBot/1.0` passed EvilBot's
/// `Disallow: /`. `User-Agent` is a singleton (RFC 9110 §10.1.5): such a request is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_user_agent_fields_are_refused() {
    let origin = Origin::start("User-agent: EvilBot\nDisallow: /\n").await;
    let proxy = TestProxy::start().await;
    let (base, host) = (origin.base(), origin.addr.to_string());
    let two = "User-Agent: Mozilla/5.0\r\nUser-Agent: EvilBot/1.0\r\n";
    let resp = raw_get(proxy.addr, &format!("{base}/page"), &host, two).await;
    assert_eq!(resp.status, 400, "{resp:?}");
    assert!(resp.body.contains("more than one User-Agent"), "{}", resp.body);
    assert_eq!(origin.hits("/page"), 0);
    // One field, either one: decided as usual.
    let page = format!("{base}/page");
    let evil = raw_get(proxy.addr, &page, &host, "User-Agent: EvilBot/1.0\r\n").await;
    assert_eq!(evil.status, 403);
    let ok = raw_get(proxy.addr, &page, &host, "User-Agent: Mozilla/5.0\r\n").await;
    assert_eq!(ok.status, 200);
}
