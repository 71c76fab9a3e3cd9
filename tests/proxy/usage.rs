//! AI usage preferences through the proxy: enforce and annotate, from robots.txt and from the
//! `Content-Usage` response header, with audit records.

use robots_proxy::usage::{UnknownPreference, UsageCrawler, UsageMode};

use super::support::TestProxy;
use crate::cache::support::{Origin, Reply};

const SIGNALS: &str = "User-Agent: *\n\
                       Content-Signal: search=yes, ai-train=no\n\
                       Allow: /\n\
                       Disallow: /private/\n";

fn crawler(token: &str, purposes: &[&str]) -> UsageCrawler {
    UsageCrawler {
        token: Some(token.to_owned()),
        user: None,
        purposes: purposes.iter().map(|p| (*p).to_owned()).collect(),
    }
}

async fn proxy_with(modes: (UsageMode, UsageMode)) -> TestProxy {
    TestProxy::start_with(move |c| {
        c.usage.train_ai = modes.0;
        c.usage.search = modes.1;
        c.usage.crawlers =
            vec![crawler("AcmeTrainer", &["train-ai"]), crawler("AcmeSearch", &["search"])];
    })
    .await
}

async fn get(proxy: &TestProxy, origin: &Origin, path: &str, ua: &str) -> reqwest::Response {
    proxy
        .client()
        .get(format!("{}{path}", origin.base_url()))
        .header("user-agent", ua)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_blocks_a_trainer_on_an_ai_train_no_site_but_not_a_search_crawler() {
    let origin = Origin::with_robots(Reply::ok(SIGNALS)).await;
    origin.route("/article", Reply::ok("article text"));
    let proxy = proxy_with((UsageMode::Enforce, UsageMode::Enforce)).await;

    let resp = get(&proxy, &origin, "/article", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 403);
    let status = resp.headers()["proxy-status"].to_str().unwrap().to_owned();
    assert!(status.contains("train-ai=n"), "{status}");
    let body = resp.text().await.unwrap();
    assert!(body.contains("train-ai=n (robots.txt line 2)"), "{body}");
    assert_eq!(origin.hits("/article"), 0, "the request never left");

    let resp = get(&proxy, &origin, "/article", "AcmeSearch/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "article text");
    // A crawler without purposes is not concerned.
    assert_eq!(get(&proxy, &origin, "/article", "OtherBot/1.0").await.status(), 200);

    let records = proxy.audit_records().await;
    let usage: Vec<_> = records.iter().filter(|r| r["event.action"] == "usage_disallow").collect();
    assert_eq!(usage.len(), 1, "{records:?}");
    let r = usage[0];
    assert_eq!(r["robots.usage.category"], "train-ai");
    assert_eq!(r["robots.usage.value"], "n");
    assert_eq!(r["robots.usage.source"], "robots.txt line 2");
    assert_eq!(r["robots.usage.purpose"], "train-ai");
    assert_eq!(r["robots.product_token"], "AcmeTrainer");
    assert_eq!(r["http.response.status_code"], 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disallowing_response_header_withholds_the_body() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route("/page", Reply::ok("secret body").header("Content-Usage", "train-ai=n"));
    origin.route("/open", Reply::ok("open body").header("Content-Usage", "train-ai=y"));
    let proxy = proxy_with((UsageMode::Enforce, UsageMode::Enforce)).await;

    let resp = get(&proxy, &origin, "/page", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 403);
    let body = resp.text().await.unwrap();
    assert!(!body.contains("secret body"));
    assert!(body.contains("response header"), "{body}");
    assert_eq!(origin.hits("/page"), 1, "the request went out; the response was withheld");

    let resp = get(&proxy, &origin, "/open", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "open body");

    let records = proxy.audit_records().await;
    let withheld: Vec<_> =
        records.iter().filter(|r| r["event.action"] == "usage_withhold").collect();
    assert_eq!(withheld.len(), 1, "{records:?}");
    assert_eq!(withheld[0]["robots.usage.source"], "response header");
    assert_eq!(withheld[0]["url.full"], format!("{}/page", origin.base_url()));
    // Each request is counted once, by what was finally done with it: the withheld one as
    // disallowed (not also as allowed), the other as allowed.
    use robots_proxy::authority::Scheme;
    use robots_proxy::metrics::Decision;
    assert_eq!(proxy.metrics.requests(Decision::Disallow, Scheme::Http), 1);
    assert_eq!(proxy.metrics.requests(Decision::Allow, Scheme::Http), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotate_passes_and_adds_the_merged_header() {
    let origin = Origin::with_robots(Reply::ok(SIGNALS)).await;
    origin.route("/article", Reply::ok("article text").header("Content-Usage", "ai-use=n"));
    origin.route("/plain", Reply::ok("plain"));
    let proxy = proxy_with((UsageMode::Annotate, UsageMode::Annotate)).await;

    let resp = get(&proxy, &origin, "/article", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    let header = resp.headers()["content-usage"].to_str().unwrap().to_owned();
    assert_eq!(header, "train-ai=n, ai-use=n, search=y");
    assert_eq!(resp.text().await.unwrap(), "article text");

    // A disallowed path is still refused by robots.txt itself.
    assert_eq!(get(&proxy, &origin, "/private/x", "AcmeTrainer/1.0").await.status(), 403);

    let records = proxy.audit_records().await;
    let annotated: Vec<_> =
        records.iter().filter(|r| r["event.action"] == "usage_annotate").collect();
    assert_eq!(annotated.len(), 1, "{records:?}");
    let r = annotated[0];
    assert_eq!(r["robots.usage.category"], "train-ai");
    assert_eq!(r["robots.usage.value"], "n");
    assert_eq!(r["robots.usage.source"], "robots.txt line 2");
    assert_eq!(r["robots.usage.preferences"], "train-ai=n, ai-use=n, search=y");
    assert_eq!(r["event.outcome"], "success");
}

/// `usage.unknown = "disallow"`: robots.txt says nothing, so the origin is asked, and its
/// `Content-Usage` header settles it: `y` lets the response through, silence withholds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_preference_is_settled_by_the_response_header() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route("/cu-y", Reply::ok("allowed body").header("Content-Usage", "train-ai=y"));
    origin.route("/silent", Reply::ok("silent body"));
    let proxy = TestProxy::start_with(|c| {
        c.usage.train_ai = UsageMode::Enforce;
        c.usage.unknown = UnknownPreference::Disallow;
        c.usage.crawlers = vec![crawler("AcmeTrainer", &["train-ai"])];
    })
    .await;

    let resp = get(&proxy, &origin, "/cu-y", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "allowed body");

    let resp = get(&proxy, &origin, "/silent", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 403);
    let body = resp.text().await.unwrap();
    assert!(!body.contains("silent body"), "{body}");
    assert!(body.contains("usage.unknown"), "{body}");
    let records = proxy.audit_records().await;
    let withheld: Vec<_> =
        records.iter().filter(|r| r["event.action"] == "usage_withhold").collect();
    assert_eq!(withheld.len(), 1, "{records:?}");
    assert_eq!(withheld[0]["robots.usage.value"], "unknown");
    assert_eq!(withheld[0]["url.full"], format!("{}/silent", origin.base_url()));
}

/// Annotating rewrites only the members the proxy understands: an origin's members of another
/// vocabulary reach the crawler as they were sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotate_keeps_members_it_does_not_know() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route("/genai", Reply::ok("g").header("Content-Usage", "train-genai=n, bots=n"));
    origin.route("/mixed", Reply::ok("m").header("Content-Usage", "train-genai=n, train-ai=n"));
    let proxy = proxy_with((UsageMode::Annotate, UsageMode::Annotate)).await;

    let resp = get(&proxy, &origin, "/genai", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-usage"], "train-genai=n, bots=n");
    let resp = get(&proxy, &origin, "/mixed", "AcmeTrainer/1.0").await;
    assert_eq!(resp.headers()["content-usage"], "train-ai=n, train-genai=n");
}

/// A member under a known label whose value the proxy does not read (`train-ai="n"`, a
/// string, which the vocabulary counts as unknown) is not a preference, but it is what the
/// origin sent: annotating passes it on as written rather than dropping it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotate_keeps_a_quoted_member_under_a_known_label() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    let quoted = "train-ai=\"n\", search=y";
    origin.route("/quoted", Reply::ok("q").header("Content-Usage", quoted));
    let proxy = proxy_with((UsageMode::Annotate, UsageMode::Annotate)).await;

    let resp = get(&proxy, &origin, "/quoted", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-usage"], "search=y, train-ai=\"n\"");
}

/// Controls 5: what draft-ietf-aipref-vocab reads as unknown (a later value that is not the
/// token `y`/`n`, the draft's own example, upper-case keys, `yes`, a Content Signals label in
/// `Content-Usage`, a dictionary that does not parse) is unknown, never allow: under
/// `usage.unknown = "disallow"` each is withheld, and only `train-ai=y` goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_vocabulary_calls_unknown_is_never_read_as_allow() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    let unknown = [
        "train-ai=y, train-ai=\"n\"",
        "train-ai=y, train-ai",
        "train-ai=y, train-ai, search=n, search=\"n\"",
        "TRAIN-AI=Y",
        "train-ai=yes",
        "ai-train=yes",
        "train-ai=y, %%%",
    ];
    for (i, value) in unknown.iter().enumerate() {
        origin.route(&format!("/u{i}"), Reply::ok("body").header("Content-Usage", value));
    }
    origin.route("/y", Reply::ok("allowed").header("Content-Usage", "train-ai=y"));
    let proxy = TestProxy::start_with(|c| {
        c.usage.train_ai = UsageMode::Enforce;
        c.usage.unknown = UnknownPreference::Disallow;
        c.usage.crawlers = vec![crawler("AcmeTrainer", &["train-ai"])];
    })
    .await;
    for (i, value) in unknown.iter().enumerate() {
        let resp = get(&proxy, &origin, &format!("/u{i}"), "AcmeTrainer/1.0").await;
        assert_eq!(resp.status(), 403, "Content-Usage: {value}");
    }
    assert_eq!(get(&proxy, &origin, "/y", "AcmeTrainer/1.0").await.status(), 200);
}
