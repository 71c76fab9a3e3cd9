//! Report-only mode (issue 20, part 2): what enforcement refuses is forwarded and written as
//! `would_block`, gateway-wide, per token and per user; the response says so in `Proxy-Status`;
//! `robots_proxy_would_block_total` counts it; pacing still applies.

use std::time::Duration;

use robots_proxy::config::Config;
use robots_proxy::metrics::Decision;
use robots_proxy::policy::PolicyMode;
use robots_proxy::usage::{UsageCrawler, UsageMode};

use super::support::{raw_get, TestProxy};
use crate::cache::support::{Origin, Reply};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const TOKEN: &str = "x-robots-product-token";

fn report(c: &mut Config) {
    c.policy.mode = PolicyMode::Report;
}

async fn get(proxy: &TestProxy, url: String, token: &str) -> reqwest::Response {
    proxy.client().get(url).header(TOKEN, token).send().await.unwrap()
}

fn would_blocks(records: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    records.iter().filter(|r| r["event.action"] == "would_block").collect()
}

fn proxy_status(resp: &reqwest::Response) -> String {
    let all: Vec<_> =
        resp.headers().get_all("proxy-status").iter().map(|v| v.to_str().unwrap()).collect();
    all.join(", ")
}

/// The same request, refused under enforce, forwarded and recorded under report, with the
/// refusal's explanation, the `Proxy-Status` member after the origin's and the metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_forwards_and_records_what_enforce_refuses() {
    let origin = Origin::with_robots(Reply::ok(ROBOTS)).await;
    origin.route("/private/a", Reply::ok("private a"));
    origin.route("/private/b", Reply::ok("private b").header("Proxy-Status", "origin-lb"));
    let url = |p: &str| format!("{}{p}", origin.base_url());

    let enforcing = TestProxy::start().await;
    let resp = get(&enforcing, url("/private/a"), "ExampleBot").await;
    assert_eq!(resp.status(), 403);
    assert_eq!(origin.hits("/private/a"), 0);

    let proxy = TestProxy::start_with(report).await;
    let resp = get(&proxy, url("/private/a"), "ExampleBot").await;
    assert_eq!(resp.status(), 200);
    let status = proxy_status(&resp);
    assert!(
        status.starts_with(
            "robots-proxy;details=\"report only: would be refused (robots_disallow): disallowed \
             by robots.txt line 2: disallow: /private"
        ),
        "{status}"
    );
    assert_eq!(resp.text().await.unwrap(), "private a");
    assert_eq!(origin.hits("/private/a"), 1);

    // The origin's own Proxy-Status member stays first; the proxy's is its own member.
    let resp = get(&proxy, url("/private/b"), "ExampleBot").await;
    assert_eq!(resp.status(), 200);
    let status = proxy_status(&resp);
    assert!(status.starts_with("origin-lb, robots-proxy;details=\"report only: "), "{status}");
    // Allowed requests are not touched.
    let resp = get(&proxy, url("/public"), "ExampleBot").await;
    assert!(resp.headers().get("proxy-status").is_none());

    let records = proxy.audit_records().await;
    let reported = would_blocks(&records);
    assert_eq!(reported.len(), 2, "{records:?}");
    let r = reported[0];
    assert_eq!(r["robots.would_action"], "robots_disallow");
    assert_eq!(r["event.outcome"], "success");
    assert!(r.get("http.response.status_code").is_none(), "{r}");
    assert_eq!(r["robots.rule"], "disallow: /private");
    assert_eq!(r["robots.line"], 2);
    assert_eq!(r["robots.group"], "* (line 1)");
    assert_eq!(r["robots.reading"], "as-sent");
    assert_eq!(r["robots.product_token"], "ExampleBot");
    assert_eq!(r["robots.sha256"].as_str().unwrap().len(), 64, "{r}");
    assert!(r["event.reason"].as_str().unwrap().contains("disallowed by robots.txt line 2"));
    assert!(records.iter().all(|r| r["event.action"] != "robots_disallow"), "{records:?}");

    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains(
            "robots_proxy_would_block_total{token=\"ExampleBot\",action=\"robots_disallow\"} 2"
        ),
        "{metrics}"
    );
    let requests = |d| proxy.metrics.requests(d, robots_proxy::authority::Scheme::Http);
    assert_eq!(requests(Decision::Disallow), 0);
    assert_eq!(requests(Decision::Allow), 3);
}

/// Per token: only the listed token is reported, for a user tied to it (report-only mode is a
/// loosening, granted only on a token from credentials: controls 1); another token is still
/// refused, and so is a user who merely sends the listed token in `X-Robots-Product-Token` or
/// its User-Agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_tokens_reports_only_that_token() {
    use base64ct::Encoding;
    let dir = tempfile::tempdir().unwrap();
    let cost = argon2::Params::default();
    let hash = robots_proxy::access::hash_password("pw", &cost).unwrap();
    let users = dir.path().join("users");
    let lines = format!("acme:{hash}:AcmeBot\nother:{hash}:OtherBot\nmallory:{hash}\n");
    std::fs::write(&users, lines).unwrap();
    let origin = Origin::with_robots(Reply::ok(ROBOTS)).await;
    origin.route("/private/a", Reply::ok("private a"));
    let url = format!("{}/private/a", origin.base_url());
    let proxy = TestProxy::start_with(move |c| {
        c.access.users_file = Some(users);
        c.policy.report_tokens = vec!["acmebot".into()];
    })
    .await;
    let as_user = |user: &str, claim: &str| {
        let basic = base64ct::Base64::encode_string(format!("{user}:pw").as_bytes());
        format!("Proxy-Authorization: Basic {basic}\r\n{claim}")
    };

    let resp = raw_get(proxy.addr, &url, "x", &as_user("acme", "")).await;
    assert_eq!(resp.status, 200, "listed tokens compare without case: {resp:?}");
    assert!(resp.headers["proxy-status"].contains("report only: would be refused"), "{resp:?}");
    let resp = raw_get(proxy.addr, &url, "x", &as_user("other", "")).await;
    assert_eq!(resp.status, 403);
    assert!(resp.headers["proxy-status"].contains("error=http_request_denied"));
    // A claim is not enough: the header, or the User-Agent, of an untied user.
    for claim in ["X-Robots-Product-Token: AcmeBot\r\n", "User-Agent: AcmeBot/1.0\r\n"] {
        let resp = raw_get(proxy.addr, &url, "x", &as_user("mallory", claim)).await;
        assert_eq!(resp.status, 403, "{claim}: {resp:?}");
    }
    assert_eq!(origin.hits("/private/a"), 1);

    let records = proxy.audit_records().await;
    let reported = would_blocks(&records);
    assert_eq!(reported.len(), 1, "{records:?}");
    assert_eq!(reported[0]["robots.product_token"], "AcmeBot");
    assert_eq!(reported[0]["user.name"], "acme");
    let refused: Vec<_> =
        records.iter().filter(|r| r["event.action"] == "robots_disallow").collect();
    assert_eq!(refused.len(), 3, "{records:?}");
    assert_eq!(refused[0]["robots.product_token"], "OtherBot");
    assert_eq!(refused[1]["robots.product_token"], "AcmeBot");
    assert_eq!(refused[1]["robots.token_source"], "header");
    assert_eq!(refused[1]["user.name"], "mallory");
}

/// Per user (`access.users_file`): only the listed user is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_users_reports_only_that_user() {
    use base64ct::Encoding;
    let dir = tempfile::tempdir().unwrap();
    let cost = argon2::Params::default();
    let hash = |pw: &str| robots_proxy::access::hash_password(pw, &cost).unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, format!("alice:{}\nbob:{}\n", hash("a-pw"), hash("b-pw"))).unwrap();
    let origin = Origin::with_robots(Reply::ok(ROBOTS)).await;
    origin.route("/private/a", Reply::ok("private a"));
    let proxy = TestProxy::start_with(move |c| {
        c.access.users_file = Some(users);
        c.policy.report_users = vec!["alice".into()];
    })
    .await;
    let basic = |user: &str, pw: &str| {
        let token = base64ct::Base64::encode_string(format!("{user}:{pw}").as_bytes());
        format!("Proxy-Authorization: Basic {token}\r\nUser-Agent: ExampleBot/1.0\r\n")
    };
    let url = format!("{}/private/a", origin.base_url());
    let alice = raw_get(proxy.addr, &url, "x", &basic("alice", "a-pw")).await;
    assert_eq!(alice.status, 200, "{alice:?}");
    assert!(alice.headers["proxy-status"].contains("report only: would be refused"), "{alice:?}");
    let bob = raw_get(proxy.addr, &url, "x", &basic("bob", "b-pw")).await;
    assert_eq!(bob.status, 403, "{bob:?}");
    let records = proxy.audit_records().await;
    assert_eq!(would_blocks(&records).len(), 1, "{records:?}");
}

/// A usage preference in robots.txt (enforce mode of `[usage]`) and one in the response's
/// `Content-Usage` header are both reported and forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_forwards_what_a_usage_preference_refuses() {
    let robots = "User-Agent: *\nContent-Usage: /article train-ai=n\nAllow: /\n";
    let origin = Origin::with_robots(Reply::ok(robots)).await;
    origin.route("/article", Reply::ok("article text"));
    origin.route("/page", Reply::ok("page text").header("Content-Usage", "train-ai=n"));
    let proxy = TestProxy::start_with(|c| {
        report(c);
        c.usage.train_ai = UsageMode::Enforce;
        c.usage.crawlers = vec![UsageCrawler {
            token: Some("AcmeTrainer".into()),
            user: None,
            purposes: vec!["train-ai".into()],
        }];
    })
    .await;
    for (path, body, action) in
        [("/article", "article text", "usage_disallow"), ("/page", "page text", "usage_withhold")]
    {
        let resp = get(&proxy, format!("{}{path}", origin.base_url()), "AcmeTrainer").await;
        assert_eq!(resp.status(), 200, "{path}");
        let status = proxy_status(&resp);
        assert!(status.contains(&format!("would be refused ({action})")), "{status}");
        assert_eq!(resp.text().await.unwrap(), body);
    }
    let records = proxy.audit_records().await;
    let reported = would_blocks(&records);
    assert_eq!(reported.len(), 2, "{records:?}");
    assert_eq!(reported[0]["robots.would_action"], "usage_disallow");
    assert_eq!(reported[0]["robots.usage.category"], "train-ai");
    assert_eq!(reported[0]["robots.usage.value"], "n");
    assert_eq!(reported[0]["robots.usage.source"], "robots.txt line 2");
    assert_eq!(reported[1]["robots.would_action"], "usage_withhold");
    assert_eq!(reported[1]["robots.usage.source"], "response header");
    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains(
            "robots_proxy_would_block_total{token=\"AcmeTrainer\",action=\"usage_withhold\"} 1"
        ),
        "{metrics}"
    );
}

/// Politeness is never report-only: a Crawl-delay longer than `pacing.max_wait` still answers
/// 429 to a request that robots.txt would refuse and report mode lets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_still_applies_in_report_mode() {
    let robots = "User-agent: *\nCrawl-delay: 60\nDisallow: /private\n";
    let origin = Origin::with_robots(Reply::ok(robots)).await;
    origin.route("/private/a", Reply::ok("private a"));
    let proxy = TestProxy::start_with(|c| {
        report(c);
        c.pacing.enabled = true;
        c.pacing.max_wait = Duration::from_secs(1);
    })
    .await;
    let url = format!("{}/private/a", origin.base_url());
    assert_eq!(get(&proxy, url.clone(), "ExampleBot").await.status(), 200);
    let resp = get(&proxy, url, "ExampleBot").await;
    assert_eq!(resp.status(), 429, "the site's pace holds in report mode");
    assert_eq!(origin.hits("/private/a"), 1);
    let records = proxy.audit_records().await;
    assert!(records.iter().any(|r| r["event.action"] == "throttled"), "{records:?}");
}

/// Tunnel mode: a CONNECT to a site whose robots.txt disallows every path is refused under
/// enforce; under report it opens, its 200 says what enforcement would have done, and the
/// `would_block` record names `connect_refuse` with the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_opens_a_tunnel_that_enforce_refuses() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::tls_support::{
        client_tls, connect, h1_get, h1_over, tls_over, HttpsProxy, TlsOrigin, H1, WAIT,
    };
    let origin = TlsOrigin::start("User-agent: *\nDisallow: /\n").await;
    let tunnel = |c: &mut Config| c.https.mode = robots_proxy::tls::HttpsMode::Tunnel;
    let enforcing = HttpsProxy::start(&origin.ca, &[origin.port()], tunnel).await;
    let answer = connect(enforcing.addr(), &origin.host(), "User-Agent: ExampleBot/1.0\r\n").await;
    assert_eq!(answer.refused().status, 403);

    let proxy = HttpsProxy::start(&origin.ca, &[origin.port()], |c| {
        tunnel(c);
        report(c);
    })
    .await;
    // The CONNECT's answer head, read byte by byte so that the tunnel's bytes stay unread.
    let mut stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let host = origin.host();
    let request =
        format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ExampleBot/1.0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        head.push(tokio::time::timeout(WAIT, stream.read_u8()).await.unwrap().unwrap());
    }
    let opened = super::support::parse_response(&head);
    assert_eq!(opened.status, 200, "{opened:?}");
    let status = &opened.headers["proxy-status"];
    assert!(
        status.starts_with("robots-proxy;details=\"report only: would be refused (connect_refuse)"),
        "{status}"
    );
    let tls = tls_over(stream, client_tls(&[&origin.ca.der], H1), "localhost").await.unwrap();
    let answer = h1_get(&mut h1_over(tls).await, "/a", &origin.host(), &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(origin.content_hits(), 1);

    let records = proxy.proxy.audit_records().await;
    let reported = would_blocks(&records);
    assert_eq!(reported.len(), 1, "{records:?}");
    let r = reported[0];
    assert_eq!(r["robots.would_action"], "connect_refuse");
    assert_eq!(r["http.request.method"], "CONNECT");
    assert_eq!(r["robots.rule"], "disallow: /");
    assert!(r["event.reason"].as_str().unwrap().contains("disallows every path"), "{r}");
    let metrics = proxy.proxy.metrics.encode();
    assert!(
        metrics.contains(
            "robots_proxy_would_block_total{token=\"ExampleBot\",action=\"connect_refuse\"} 1"
        ),
        "{metrics}"
    );
}

/// Controls 12: one request is one `would_block` (record and count), as enforcement would have
/// refused it once: a path robots.txt disallows whose response also carries `train-ai=n` is
/// reported as `robots_disallow` only. And one token is one series however it is spelt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_is_one_would_block_and_one_token_one_series() {
    let robots = "User-Agent: *\nDisallow: /private\n";
    let origin = Origin::with_robots(Reply::ok(robots)).await;
    origin.route("/private/rr", Reply::ok("rr").header("Content-Usage", "train-ai=n"));
    let proxy = TestProxy::start_with(|c| {
        report(c);
        c.usage.train_ai = UsageMode::Enforce;
        c.usage.crawlers = vec![UsageCrawler {
            token: Some("ReportTrainer".into()),
            user: None,
            purposes: vec!["train-ai".into()],
        }];
    })
    .await;
    let url = format!("{}/private/rr", origin.base_url());
    for spelling in ["ReportTrainer", "REPORTTRAINER", "reporttrainer"] {
        let resp = get(&proxy, url.clone(), spelling).await;
        assert_eq!(resp.status(), 200, "{spelling}");
        let status = proxy_status(&resp);
        assert!(status.contains("would be refused (robots_disallow)"), "{status}");
        assert!(!status.contains("usage_withhold"), "{status}");
    }
    let records = proxy.audit_records().await;
    let reported = would_blocks(&records);
    assert_eq!(reported.len(), 3, "one record per request: {records:?}");
    assert!(reported.iter().all(|r| r["robots.would_action"] == "robots_disallow"), "{records:?}");
    let metrics = proxy.metrics.encode();
    assert!(
        metrics.contains(
            "robots_proxy_would_block_total{token=\"ReportTrainer\",action=\"robots_disallow\"} 3"
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains("REPORTTRAINER") && !metrics.contains("\"reporttrainer\""),
        "{metrics}"
    );
    assert!(!metrics.contains("action=\"usage_withhold\""), "{metrics}");
}

/// A request whose refusal was only reported keeps its `would_block` record on its exchange
/// until it leaves; a client that hangs up before (here while the request waits for its site's
/// pace) has it written all the same, once: the exchange's ledger writes what it kept when it
/// is dropped (issue 38 item 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_request_whose_client_hangs_up_while_paced_keeps_its_record() {
    use tokio::io::AsyncWriteExt;
    let robots = "User-agent: *\nCrawl-delay: 30\nDisallow: /private\n";
    let origin = Origin::with_robots(Reply::ok(robots)).await;
    origin.route("/first", Reply::ok("first"));
    let proxy = TestProxy::start_with(|c| {
        report(c);
        c.pacing.enabled = true;
        c.pacing.max_wait = Duration::from_secs(60);
    })
    .await;
    // The first request takes the site's turn; the next one waits 30 s for its own.
    let first = raw_get(proxy.addr, &format!("{}/first", origin.base_url()), "x", "").await;
    assert_eq!(first.status, 200);
    let mut client = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let url = format!("{}/private/w", origin.base_url());
    let head = format!("GET {url} HTTP/1.1\r\nHost: x\r\nUser-Agent: x\r\n\r\n");
    client.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(client);
    let of_w = |records: &[serde_json::Value]| -> Vec<String> {
        let mine = records.iter().filter(|r| r["url.path"] == "/private/w");
        mine.map(|r| r["event.action"].as_str().unwrap_or("?").to_owned()).collect()
    };
    let mut records = proxy.audit_records().await;
    for _ in 0..200 {
        if !of_w(&records).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        records = proxy.audit_records().await;
    }
    assert_eq!(of_w(&records), ["would_block"], "{records:?}");
    assert_eq!(origin.hits("/private/w"), 0, "the request never left");
}
