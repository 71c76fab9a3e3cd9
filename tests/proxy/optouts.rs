//! The other machine-readable opt-outs through the proxy (issue 20, part 3): the aipref
//! vocabulary as of draft-ietf-aipref-vocab-07/-08, `X-Robots-Tag: noai`, and TDMRep.

use robots_proxy::usage::{UsageCrawler, UsageMode};

use super::support::TestProxy;
use crate::cache::support::{Origin, Reply};

fn crawler(token: &str, purposes: &[&str]) -> UsageCrawler {
    UsageCrawler {
        token: Some(token.to_owned()),
        user: None,
        purposes: purposes.iter().map(|p| (*p).to_owned()).collect(),
    }
}

async fn trainer_proxy() -> TestProxy {
    TestProxy::start_with(|c| {
        c.usage.train_ai = UsageMode::Enforce;
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

fn actions(records: &[serde_json::Value], action: &str) -> Vec<serde_json::Value> {
    records.iter().filter(|r| r["event.action"] == action).cloned().collect()
}

/// A member whose value is a string, not a token, is unknown (the vocabulary draft); an unknown
/// label is ignored; `ai-use` (draft -02) is still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vocabulary_reads_only_tokens_and_known_labels() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route("/quoted", Reply::ok("quoted body").header("Content-Usage", "train-ai=\"n\""));
    origin.route("/foreign", Reply::ok("foreign body").header("Content-Usage", "train-genai=n"));
    origin.route("/token", Reply::ok("token body").header("Content-Usage", "train-ai=n"));
    let proxy = trainer_proxy().await;

    let resp = get(&proxy, &origin, "/quoted", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200, "train-ai=\"n\" is not the token n");
    assert_eq!(resp.text().await.unwrap(), "quoted body");
    let resp = get(&proxy, &origin, "/foreign", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200, "an unknown label is ignored");
    let resp = get(&proxy, &origin, "/token", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 403);
    assert!(!resp.text().await.unwrap().contains("token body"));
    let records = proxy.audit_records().await;
    assert_eq!(actions(&records, "usage_withhold").len(), 1, "{records:?}");
}

/// `X-Robots-Tag: noai` (unscoped) withholds the response from a training crawler; the scoped
/// form applies only to the named token; `noimageai` and `noml` count too; a search crawler
/// is not concerned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_robots_tag_noai_scoped_and_unscoped() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route("/all", Reply::ok("all body").header("X-Robots-Tag", "noindex, noai"));
    origin.route("/img", Reply::ok("img body").header("X-Robots-Tag", "noimageai"));
    origin.route("/ml", Reply::ok("ml body").header("X-Robots-Tag", "NoML"));
    origin.route("/mine", Reply::ok("mine body").header("X-Robots-Tag", "acmetrainer: noai"));
    origin.route("/theirs", Reply::ok("theirs body").header("X-Robots-Tag", "otherbot: noai"));
    origin.route("/plain", Reply::ok("plain body").header("X-Robots-Tag", "noindex"));
    let proxy = trainer_proxy().await;

    for path in ["/all", "/img", "/ml", "/mine"] {
        let resp = get(&proxy, &origin, path, "AcmeTrainer/1.0").await;
        assert_eq!(resp.status(), 403, "{path}");
        let body = resp.text().await.unwrap();
        assert!(!body.contains("body"), "{path}: {body}");
        assert!(body.contains("X-Robots-Tag"), "{path}: {body}");
    }
    for path in ["/theirs", "/plain"] {
        let resp = get(&proxy, &origin, path, "AcmeTrainer/1.0").await;
        assert_eq!(resp.status(), 200, "{path}");
    }
    // A crawler that does not train is not concerned, scoped or not.
    assert_eq!(get(&proxy, &origin, "/all", "AcmeSearch/1.0").await.status(), 200);

    let records = proxy.audit_records().await;
    let withheld = actions(&records, "usage_withhold");
    assert_eq!(withheld.len(), 4, "{records:?}");
    for r in &withheld {
        assert_eq!(r["robots.usage.source"], "X-Robots-Tag");
        assert_eq!(r["robots.usage.category"], "train-ai");
        assert_eq!(r["robots.usage.value"], "n");
    }
}

/// `usage.x_robots_tag = false` turns the signal off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_robots_tag_can_be_turned_off() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route("/all", Reply::ok("all body").header("X-Robots-Tag", "noai"));
    let proxy = TestProxy::start_with(|c| {
        c.usage.x_robots_tag = false;
        c.usage.crawlers = vec![crawler("AcmeTrainer", &["train-ai"])];
    })
    .await;
    assert_eq!(get(&proxy, &origin, "/all", "AcmeTrainer/1.0").await.status(), 200);
}
