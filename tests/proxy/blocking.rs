//! Blocking: disallowed requests get 403 without reaching the origin, whatever the path trick,
//! and each block has exactly one audit record.

use super::support::{raw_get, Origin, TestProxy};

const ROBOTS: &str = "# test robots\nUser-agent: *\nDisallow: /private\n\nUser-agent: ExampleBot\nDisallow: /\nAllow: /public\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disallowed_request_never_reaches_origin() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let resp = proxy.client().get(format!("{}/private/x", origin.base())).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let status = resp.headers()["proxy-status"].to_str().unwrap().to_owned();
    assert!(status.contains("error=http_request_denied"), "{status}");
    assert!(status.contains("line 3"), "{status}");
    let body = resp.text().await.unwrap();
    assert!(body.contains(&format!("{}/private/x", origin.base())), "{body}");
    assert!(body.contains(&format!("{}/robots.txt", origin.base())), "{body}");
    assert!(body.contains("line 3: disallow: /private"), "{body}");
    // The origin saw only its robots.txt fetch.
    assert_eq!(origin.hits("/robots.txt"), 1);
    assert_eq!(origin.content_hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn product_token_from_user_agent_and_header() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let client = proxy.client();
    let ua = "Mozilla/5.0 (compatible; ExampleBot/0.1; +https://www.example.com/bot.html)";
    let get = |path: &str| client.get(format!("{}{path}", origin.base()));
    assert_eq!(get("/other").header("user-agent", ua).send().await.unwrap().status(), 403);
    assert_eq!(get("/public/x").header("user-agent", ua).send().await.unwrap().status(), 200);
    // A browser User-Agent has no token: the `*` group applies.
    let browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36";
    assert_eq!(get("/other").header("user-agent", browser).send().await.unwrap().status(), 200);
    // The explicit header wins over the User-Agent, and is not forwarded.
    let resp = get("/other")
        .header("user-agent", "curl/8.5.0")
        .header("x-robots-product-token", "ExampleBot")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    // /robots.txt itself always passes.
    let resp = get("/robots.txt").header("user-agent", ua).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), ROBOTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_tricks_are_caught() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let base = origin.base();
    let host = origin.addr.to_string();
    let tricks = [
        "/a/../private",
        "/a/%2e%2e/private",
        "/%2E%2E/private",
        "/./private",
        "//private",
        "/%70rivate",
        "/%70%72%69%76%61%74%65/x",
        "/public/../private/x",
        "/private?x=1",
        "/private#frag",
    ];
    for trick in tricks {
        let resp = raw_get(proxy.addr, &format!("{base}{trick}"), &host, "").await;
        assert_eq!(resp.status, 403, "{trick} slipped through: {resp:?}");
    }
    assert_eq!(origin.content_hits(), 0, "{:?}", origin.seen());
    // Rules are case-sensitive: /PRIVATE is another path.
    let resp = raw_get(proxy.addr, &format!("{base}/PRIVATE"), &host, "").await;
    assert_eq!(resp.status, 200);
    // What is sent is what was received (RFC 9110 §7.1), octet for octet; every reading of it
    // was checked.
    let resp = raw_get(proxy.addr, &format!("{base}/x/../%7Epublic/./y"), &host, "").await;
    assert_eq!(resp.status, 200);
    assert_eq!(origin.hits("/x/../%7Epublic/./y"), 1, "{:?}", origin.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_403_and_audit_record() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let ua = "Scrapy/2.11 (+https://scrapy.org)";
    let resp = proxy
        .client()
        .get(format!("{}/private/report?id=7", origin.base()))
        .header("accept", "application/json")
        .header("user-agent", ua)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["product_token"], "Scrapy");
    assert_eq!(body["line"], 3);
    assert_eq!(body["rule"], "disallow: /private");
    assert_eq!(body["robots_state"], "fresh");
    let records = proxy.audit_records().await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r["event.action"], "robots_disallow");
    assert_eq!(r["http.request.method"], "GET");
    assert_eq!(r["url.full"], format!("{}/private/report?id=7", origin.base()));
    assert_eq!(r["user_agent.original"], ua);
    assert_eq!(r["robots.product_token"], "Scrapy");
    assert_eq!(r["robots.token_source"], "user-agent", "the facts say where the token came from");
    assert_eq!(r["robots.reading"], "as-sent");
    assert_eq!(r["robots.line"], 3);
    assert_eq!(r["robots.rule"], "disallow: /private");
    assert_eq!(r["robots.url"], format!("{}/robots.txt", origin.base()));
    assert_eq!(r["robots.state"], "fresh");
    assert!(r["client.address"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(r["@timestamp"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_concurrent_block_is_audited_once() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    let client = proxy.client();
    const N: usize = 300;
    let mut tasks = Vec::new();
    for i in 0..N {
        let client = client.clone();
        let url = format!("{}/private/{i}", origin.base());
        tasks.push(tokio::spawn(async move { client.get(url).send().await.unwrap().status() }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 403);
    }
    let records = proxy.audit_records().await;
    assert_eq!(records.len(), N);
    let mut urls: Vec<String> =
        records.iter().map(|r| r["url.full"].as_str().unwrap().to_owned()).collect();
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len(), N, "each block recorded exactly once");
    assert_eq!(origin.hits("/robots.txt"), 1, "one robots.txt fetch for all");
    assert_eq!(origin.content_hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_robots_blocks_with_the_fetch_state() {
    // An origin that answers 503 to everything.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    let proxy = TestProxy::start().await;
    let resp = raw_get(proxy.addr, &format!("http://{addr}/page"), &addr.to_string(), "").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(
        resp.body.contains(
            "robots.txt unreachable (HTTP 503): all paths disallowed until it can be fetched"
        ),
        "{}",
        resp.body
    );
    let records = proxy.audit_records().await;
    assert_eq!(records[0]["robots.state"], "unreachable");
}

/// A keep-alive connection remembers its last User-Agent's token; a client that changes its
/// User-Agent on the same connection is decided by the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_user_agent_on_one_connection_changes_the_token() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start().await;
    // One connection: reqwest keeps it alive, and at most one is idle per host.
    let client = super::support::reqwest_builder()
        .proxy(reqwest::Proxy::all(format!("http://{}", proxy.addr)).unwrap())
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let url = format!("{}/page", origin.base());
    for (agent, status) in [
        ("ExampleBot/1.0", 403),
        ("OtherBot/2.0", 200),
        ("ExampleBot/3.0 (+https://example.com)", 403),
        ("OtherBot/2.0", 200),
    ] {
        let resp = client.get(&url).header("user-agent", agent).send().await.unwrap();
        assert_eq!(resp.status(), status, "{agent}");
        let _ = resp.bytes().await;
    }
}
