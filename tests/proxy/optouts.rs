//! The other machine-readable opt-outs through the proxy (issue 20, part 3): the aipref
//! vocabulary as of draft-ietf-aipref-vocab-07/-08, `X-Robots-Tag: noai`, and TDMRep.

use robots_proxy::usage::{UsageCrawler, UsageMode};

use super::support::{raw_get, TestProxy};
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

/// Issue 42 (M3): an opt-out field with one byte that is not ASCII elsewhere in it (a French
/// date, a quoted note, a policy URL) still reserves the body: every opt-out (X-Robots-Tag,
/// Content-Usage, tdm-reservation, tdm-policy, `<meta>`) is read from its bytes by one reader,
/// never taken for "no opt-out", and the audit record names the field that did not parse as a
/// whole (`robots.usage.unparsed`); a forwarded response with such a field has its own record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_outs_with_bytes_that_are_not_ascii_are_still_read() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    let xrt = "noai, unavailable_after: 1 Janvier 2030 \u{e9}t\u{e9}";
    origin.route("/xrt", Reply::ok("xrt body").header("X-Robots-Tag", xrt));
    let cu = "train-ai=n;note=\"caf\u{e9}\"";
    origin.route("/cu", Reply::ok("cu body").header("Content-Usage", cu));
    // One reserving line and one the proxy cannot read: the reservation holds.
    let tdm = Reply::ok("tdm body")
        .header("tdm-reservation", "\u{e9}t\u{e9}")
        .header("tdm-reservation", "1");
    origin.route("/tdm", tdm);
    let policy = Reply::ok("policy body")
        .header("tdm-reservation", "1")
        .header("tdm-policy", "https://p.example/caf\u{e9}");
    origin.route("/policy", policy);
    let meta = "<meta name=\"robots\" content=\"noai, caf\u{e9}\">";
    origin.route("/meta", html(meta, "meta body"));
    // Nothing readable reserves: forwarded, with a record naming the field.
    origin.route("/garbled", Reply::ok("garbled body").header("X-Robots-Tag", "noindex, \u{e9}"));
    origin.route("/clean", Reply::ok("clean body").header("X-Robots-Tag", "noindex"));
    let proxy = trainer_proxy().await;
    for path in ["/xrt", "/cu", "/tdm", "/policy", "/meta"] {
        let resp = get(&proxy, &origin, path, "AcmeTrainer/1.0").await;
        assert_eq!(resp.status(), 403, "{path}");
        let body = resp.text().await.unwrap();
        assert!(!body.contains(" body"), "{path}: {body}");
    }
    for path in ["/garbled", "/clean"] {
        let resp = get(&proxy, &origin, path, "AcmeTrainer/1.0").await;
        assert_eq!(resp.status(), 200, "{path}");
    }
    let records = proxy.audit_records().await;
    let by_url = |action: &str, path: &str| {
        let url = format!("{}{path}", origin.base_url());
        let found: Vec<_> = actions(&records, action)
            .into_iter()
            .filter(|r| r["url.full"] == url.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{action} {path}: {records:?}");
        found[0].clone()
    };
    for (path, field) in [
        ("/xrt", "X-Robots-Tag"),
        ("/cu", "Content-Usage"),
        ("/tdm", "tdm-reservation"),
        ("/policy", "tdm-policy"),
        ("/meta", "meta robots"),
    ] {
        let r = by_url("usage_withhold", path);
        assert_eq!(r["robots.usage.unparsed"], field, "{path}: {r}");
        assert_eq!(r["robots.usage.value"], "n", "{path}: {r}");
    }
    // The policy URL is kept as far as it reads, not dropped.
    assert_eq!(
        by_url("usage_withhold", "/policy")["robots.usage.tdm_policy"],
        "https://p.example/caf\u{e9}"
    );
    let garbled = by_url("usage_unparsed", "/garbled");
    assert_eq!(garbled["robots.usage.unparsed"], "X-Robots-Tag");
    assert_eq!(garbled["event.outcome"], "success");
    // A field that parses leaves no record (no `audit.all_decisions` here).
    let clean = format!("{}/clean", origin.base_url());
    assert!(!records.iter().any(|r| r["url.full"] == clean.as_str()), "{records:?}");
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

const TDMREP: &str = "/.well-known/tdmrep.json";

/// TDMRep: the first matching rule of `tdmrep.json` reserves (`train-ai=n`), the response's
/// `tdm-reservation` header overrides it for that resource (both ways), a header value other
/// than 0 or 1 is unset (the file stays in force), and the file is fetched once for the
/// authority however many requests ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_file_and_header_with_precedence() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(
        TDMREP,
        Reply::ok(
            r#"[
              {"location": "/free/*.html$", "tdm-reservation": 0},
              {"location": "/", "tdm-reservation": 1, "tdm-policy": "https://pub.example/tdm"}
            ]"#,
        )
        .header("Content-Type", "application/json"),
    );
    origin.route("/article", Reply::ok("reserved body"));
    origin.route("/free/a.html", Reply::ok("free body"));
    origin.route("/lifted", Reply::ok("lifted body").header("tdm-reservation", "0"));
    origin.route("/yes", Reply::ok("yes body").header("tdm-reservation", "yes"));
    origin.route(
        "/free/h.html",
        Reply::ok("h body")
            .header("tdm-reservation", "1")
            .header("tdm-policy", "https://pub.example/header-policy"),
    );
    let proxy = trainer_proxy().await;

    let resp = get(&proxy, &origin, "/article", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 403, "the file reserves /");
    let body = resp.text().await.unwrap();
    assert!(body.contains("tdmrep.json") && !body.contains("reserved body"), "{body}");
    assert_eq!(get(&proxy, &origin, "/free/a.html", "AcmeTrainer/1.0").await.status(), 200);
    // The header overrides the file: 0 lifts the file's reservation, 1 reserves.
    let resp = get(&proxy, &origin, "/lifted", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "lifted body");
    assert_eq!(get(&proxy, &origin, "/free/h.html", "AcmeTrainer/1.0").await.status(), 403);
    // `tdm-reservation: yes` is unset: the file's rule (1) stays in force, never an allow.
    assert_eq!(get(&proxy, &origin, "/yes", "AcmeTrainer/1.0").await.status(), 403);
    // A crawler that does not train neither fetches the file nor is refused.
    assert_eq!(get(&proxy, &origin, "/article", "AcmeSearch/1.0").await.status(), 200);
    assert_eq!(origin.hits(TDMREP), 1, "one fetch for the authority");

    let records = proxy.audit_records().await;
    let withheld = actions(&records, "usage_withhold");
    assert_eq!(withheld.len(), 3, "{records:?}");
    let by_url = |path: &str| {
        let url = format!("{}{path}", origin.base_url());
        withheld.iter().find(|r| r["url.full"] == url.as_str()).cloned().unwrap()
    };
    let file = by_url("/article");
    assert_eq!(file["robots.usage.source"], "tdmrep.json");
    assert_eq!(file["robots.usage.tdm_policy"], "https://pub.example/tdm");
    assert_eq!(file["robots.usage.value"], "n");
    let header = by_url("/free/h.html");
    assert_eq!(header["robots.usage.source"], "tdm-reservation header");
    assert_eq!(header["robots.usage.tdm_policy"], "https://pub.example/header-policy");
    assert_eq!(by_url("/yes")["robots.usage.source"], "tdmrep.json");
}

/// A malformed `tdmrep.json` (not JSON, wrong types, over the cap) is ignored: no reservation
/// from it, and the header still applies; a 404 means no reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_bad_files_are_ignored() {
    let big = format!("[{}]", vec![r#"{"location": "/", "tdm-reservation": 1}"#; 2000].join(","));
    for file in [
        Reply::ok("<html>not json</html>"),
        Reply::ok(r#"[{"location": "/", "tdm-reservation": [1]}]"#),
        Reply::ok(big.clone()),
        Reply::status(404),
    ] {
        let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
        origin.route(TDMREP, file);
        origin.route("/page", Reply::ok("page body"));
        origin.route("/h", Reply::ok("h body").header("tdm-reservation", "1"));
        let proxy = trainer_proxy().await;
        assert_eq!(get(&proxy, &origin, "/page", "AcmeTrainer/1.0").await.status(), 200);
        assert_eq!(get(&proxy, &origin, "/h", "AcmeTrainer/1.0").await.status(), 403);
        assert_eq!(origin.hits(TDMREP), 1);
    }
}

/// With no crawler in `[usage]`, nothing of TDMRep runs: the file is never fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_is_not_fetched_when_usage_names_no_crawler() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::ok(r#"[{"location": "/", "tdm-reservation": 1}]"#));
    origin.route("/page", Reply::ok("page body").header("tdm-reservation", "1"));
    let proxy = TestProxy::start().await;
    assert_eq!(get(&proxy, &origin, "/page", "AcmeTrainer/1.0").await.status(), 200);
    assert_eq!(origin.hits(TDMREP), 0);
}

fn html(head: &str, body: &str) -> Reply {
    Reply::ok(format!(
        "<!doctype html><html><head><title>t</title>{head}</head><body>{body}</body></html>"
    ))
    .header("Content-Type", "text/html; charset=utf-8")
}

/// `<meta name="tdm-reservation">` in the head overrides the header and the file; `<meta
/// name="robots" content="noai">` (or the crawler's own name) counts as train-ai=n; a meta
/// after the head does not count; a body that was read in part arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_meta_overrides_header_and_file_and_meta_robots_noai() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::ok(r#"[{"location": "/", "tdm-reservation": 1}]"#));
    let long = "x".repeat(40_000);
    origin.route("/meta0", html(r#"<meta name="tdm-reservation" content="0">"#, &long));
    origin.route(
        "/meta1",
        html(
            r#"<meta name="tdm-reservation" content="1"><meta name="tdm-policy" content="https://pub.example/meta">"#,
            "meta1 body",
        )
        .header("tdm-reservation", "0"),
    );
    origin.route(
        "/late",
        html("", r#"<meta name="tdm-reservation" content="0">late body"#)
            .header("tdm-reservation", "1"),
    );
    origin.route(
        "/noai",
        html(
            r#"<meta name="tdm-reservation" content="0"><meta name="robots" content="noai">"#,
            "b",
        ),
    );
    origin.route(
        "/other",
        html(
            r#"<meta name="tdm-reservation" content="0"><meta name="otherbot" content="noai">"#,
            "o",
        ),
    );
    let proxy = trainer_proxy().await;

    let resp = get(&proxy, &origin, "/meta0", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200, "the meta tag lifts the file's reservation");
    let body = resp.text().await.unwrap();
    assert!(body.ends_with(&format!("{long}</body></html>")), "the whole body arrives");
    assert_eq!(get(&proxy, &origin, "/meta1", "AcmeTrainer/1.0").await.status(), 403);
    assert_eq!(get(&proxy, &origin, "/late", "AcmeTrainer/1.0").await.status(), 403);
    assert_eq!(get(&proxy, &origin, "/noai", "AcmeTrainer/1.0").await.status(), 403);
    let resp = get(&proxy, &origin, "/other", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("<body>o</body>"));

    let records = proxy.audit_records().await;
    let withheld = actions(&records, "usage_withhold");
    assert_eq!(withheld.len(), 3, "{records:?}");
    let by_url = |path: &str| {
        let url = format!("{}{path}", origin.base_url());
        withheld.iter().find(|r| r["url.full"] == url.as_str()).cloned().unwrap()
    };
    assert_eq!(by_url("/meta1")["robots.usage.source"], "meta");
    assert_eq!(by_url("/meta1")["robots.usage.tdm_policy"], "https://pub.example/meta");
    assert_eq!(by_url("/late")["robots.usage.source"], "tdm-reservation header");
    assert_eq!(by_url("/noai")["robots.usage.source"], "meta robots");
}

/// Requests that ask at the same time share one `tdmrep.json` fetch; a 5xx file gives no
/// reservation (the header still does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_fetches_are_coalesced_and_a_5xx_reserves_nothing() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(
        TDMREP,
        Reply::ok(r#"[{"location": "/", "tdm-reservation": 1}]"#)
            .delayed(std::time::Duration::from_millis(300)),
    );
    origin.route("/page", Reply::ok("page body"));
    let proxy = trainer_proxy().await;
    // Robots.txt first, so that the requests below all wait on tdmrep.json.
    assert_eq!(get(&proxy, &origin, "/robots-warm", "AcmeSearch/1.0").await.status(), 404);
    let asks = (0..5).map(|_| get(&proxy, &origin, "/page", "AcmeTrainer/1.0"));
    for resp in futures_util::future::join_all(asks).await {
        assert_eq!(resp.status(), 403);
    }
    assert_eq!(origin.hits(TDMREP), 1, "one fetch for five requests");

    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::status(503));
    origin.route("/page", Reply::ok("page body"));
    origin.route("/h", Reply::ok("h body").header("tdm-reservation", "1"));
    assert_eq!(get(&proxy, &origin, "/page", "AcmeTrainer/1.0").await.status(), 200);
    assert_eq!(get(&proxy, &origin, "/h", "AcmeTrainer/1.0").await.status(), 403);
    assert_eq!(origin.hits(TDMREP), 1);
}

/// Under `annotate`, a TDM reservation passes the response and tells the crawler
/// `train-ai=n`, audited with its source and policy URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_annotates_under_annotate() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(
        TDMREP,
        Reply::ok(
            r#"[{"location": "/", "tdm-reservation": 1, "tdm-policy": "https://p.example/t"}]"#,
        ),
    );
    origin.route("/page", Reply::ok("page body"));
    let proxy = TestProxy::start_with(|c| {
        c.usage.train_ai = UsageMode::Annotate;
        c.usage.crawlers = vec![crawler("AcmeTrainer", &["train-ai"])];
    })
    .await;
    let resp = get(&proxy, &origin, "/page", "AcmeTrainer/1.0").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-usage"], "train-ai=n");
    assert_eq!(resp.text().await.unwrap(), "page body");
    let records = proxy.audit_records().await;
    let annotated = actions(&records, "usage_annotate");
    assert_eq!(annotated.len(), 1, "{records:?}");
    assert_eq!(annotated[0]["robots.usage.source"], "tdmrep.json");
    assert_eq!(annotated[0]["robots.usage.tdm_policy"], "https://p.example/t");
}

/// A purge (`POST /cache/purge`) drops the authority's `tdmrep.json` with its robots.txt: a
/// publisher who lifts a reservation is read again at once, not a day later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_drops_the_cached_tdmrep_json_too() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::ok(r#"[{"location": "/", "tdm-reservation": 1}]"#));
    origin.route("/article", Reply::ok("article body"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    let usage = "[usage]\ntrain_ai = \"enforce\"\n\n[[usage.crawlers]]\ntoken = \"AcmeTrainer\"\n\
                 purposes = [\"train-ai\"]\n";
    std::fs::write(&file, usage).unwrap();
    let proxy =
        crate::ops::support::ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let client = crate::ops::support::proxied_client(proxy.proxy_addr);
    let url = format!("{}/article", origin.base_url());
    let status = |resp: reqwest::Response| resp.status().as_u16();
    let get = || client.get(&url).header("user-agent", "AcmeTrainer/1.0").send();
    assert_eq!(status(get().await.unwrap()), 403, "reserved by the file");
    // The publisher lifts the reservation; the cached file still reserves.
    origin.route(TDMREP, Reply::ok(r#"[{"location": "/", "tdm-reservation": 0}]"#));
    assert_eq!(status(get().await.unwrap()), 403);
    assert_eq!(origin.hits(TDMREP), 1);
    let purge = format!("{}/cache/purge?authority={}", proxy.admin(), origin.base_url());
    let (code, body) = crate::ops::support::post_json(&purge).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(status(get().await.unwrap()), 200, "read again after the purge");
    assert_eq!(origin.hits(TDMREP), 2);
}

/// Controls 9: `tdmrep.json` leniency never allows by error. A rule without the mandatory
/// `tdm-reservation`, or with an empty `location`, is skipped (matched first it unreserved what
/// a later rule reserves), and a UTF-8 byte-order mark does not void the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_file_leniency_never_allows_by_error() {
    for (file, path) in [
        (
            r#"[{"location":"/news/","tdm-policy":"https://p.example/x"},{"location":"/","tdm-reservation":1}]"#,
            "/news/x",
        ),
        ("\u{feff}[{\"location\":\"/\",\"tdm-reservation\":1}]", "/page"),
        (r#"[{"location":"","tdm-reservation":0},{"location":"/","tdm-reservation":1}]"#, "/page"),
    ] {
        let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
        origin.route(TDMREP, Reply::ok(file));
        origin.route(path, Reply::ok("reserved body"));
        let proxy = trainer_proxy().await;
        let resp = get(&proxy, &origin, path, "AcmeTrainer/1.0").await;
        assert_eq!(resp.status(), 403, "{file} {path}");
    }
}

/// Controls 10: two `tdm-reservation` header lines are read together and the reserving one
/// wins whatever their order; a `<meta>` reservation without `tdm-policy` keeps the header's
/// policy URL in the record (TDMRep: absence does not reset the current value).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_headers_read_together_and_policies_kept() {
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::status(404));
    for (path, first, second) in [("/two-a", "0", "1"), ("/two-b", "1", "0")] {
        let reply =
            Reply::ok("b").header("tdm-reservation", first).header("tdm-reservation", second);
        origin.route(path, reply);
    }
    let page = html(r#"<meta name="tdm-reservation" content="1">"#, "x")
        .header("tdm-reservation", "1")
        .header("tdm-policy", "https://p.example/from-header");
    origin.route("/meta-hdr", page);
    let proxy = trainer_proxy().await;
    for path in ["/two-a", "/two-b", "/meta-hdr"] {
        assert_eq!(get(&proxy, &origin, path, "AcmeTrainer/1.0").await.status(), 403, "{path}");
    }
    let records = proxy.audit_records().await;
    let meta: Vec<_> =
        records.iter().filter(|r| r["url.full"].as_str().unwrap().ends_with("/meta-hdr")).collect();
    assert_eq!(meta.len(), 1, "{records:?}");
    assert_eq!(meta[0]["robots.usage.tdm_policy"], "https://p.example/from-header", "{}", meta[0]);
}

/// Controls 8: a page's `<meta>` opt-outs are read through its content coding: a crawler that
/// sends `Accept-Encoding: gzip` (as almost all do) gets a gzip- or deflate-coded page, and a
/// `tdm-reservation` or `noai` in its head still withholds it. The coded bytes reach the
/// crawler unchanged when nothing withholds the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_opt_outs_are_read_in_a_coded_page() {
    use std::io::Write;
    let page = |meta: &str| {
        format!("<!doctype html><html><head><title>t</title>{meta}</head><body>x</body></html>")
    };
    let gzip = |text: &str| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let zlib = |text: &str| {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let coded = |body: Vec<u8>, coding: &str| {
        Reply::ok(body)
            .header("Content-Type", "text/html; charset=utf-8")
            .header("Content-Encoding", coding)
    };
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::status(404));
    let reserved = page(r#"<meta name="tdm-reservation" content="1">"#);
    let noai = page(r#"<meta name="robots" content="noindex, noai">"#);
    origin.route("/gz-tdm", coded(gzip(&reserved), "gzip"));
    origin.route("/gz-noai", coded(gzip(&noai), "gzip"));
    origin.route("/zlib-tdm", coded(zlib(&reserved), "deflate"));
    let free = gzip(&page(""));
    origin.route("/gz-free", coded(free.clone(), "gzip"));
    let proxy = trainer_proxy().await;
    for path in ["/gz-tdm", "/gz-noai", "/zlib-tdm"] {
        let resp = raw_get(proxy.addr, &format!("{}{path}", origin.base_url()), "x", UA).await;
        assert_eq!(resp.status, 403, "{path}: {resp:?}");
    }
    let resp = raw_get(proxy.addr, &format!("{}/gz-free", origin.base_url()), "x", UA).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    // Forwarded as it came, still coded.
    assert_eq!(resp.headers["content-encoding"], "gzip", "{resp:?}");
    assert_eq!(resp.body.len(), String::from_utf8_lossy(&free).len(), "{resp:?}");
}

/// Issue 38 (the conformance kit, `policy::conformance`): a page in UTF-16 with its
/// byte-order mark (which a browser reads before any charset) says in its head what it would
/// say in UTF-8: its `noai` and `tdm-reservation` withhold it, plain or gzip-coded; the same
/// page without them goes through unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_opt_outs_are_read_in_a_utf16_page() {
    use std::io::Write;
    let page = |meta: &str| {
        format!("<!doctype html><html><head><title>t</title>{meta}</head><body>x</body></html>")
    };
    let utf16 = |text: &str, little: bool| -> Vec<u8> {
        let bom: [u8; 2] = if little { [0xFF, 0xFE] } else { [0xFE, 0xFF] };
        let units =
            text.encode_utf16()
                .flat_map(|u| if little { u.to_le_bytes() } else { u.to_be_bytes() });
        bom.into_iter().chain(units).collect()
    };
    let gzip = |bytes: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    };
    let html = |body: Vec<u8>| Reply::ok(body).header("Content-Type", "text/html; charset=utf-16");
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nAllow: /\n")).await;
    origin.route(TDMREP, Reply::status(404));
    let noai = page(r#"<meta name="robots" content="noai">"#);
    let reserved = page(r#"<meta name="tdm-reservation" content="1">"#);
    origin.route("/le-noai", html(utf16(&noai, true)));
    origin.route("/be-tdm", html(utf16(&reserved, false)));
    origin.route(
        "/gz-le-tdm",
        html(gzip(&utf16(&reserved, true))).header("Content-Encoding", "gzip"),
    );
    let free = utf16(&page(""), true);
    origin.route("/le-free", html(free.clone()));
    let proxy = trainer_proxy().await;
    for path in ["/le-noai", "/be-tdm", "/gz-le-tdm"] {
        let resp = raw_get(proxy.addr, &format!("{}{path}", origin.base_url()), "x", UA).await;
        assert_eq!(resp.status, 403, "{path}: {resp:?}");
    }
    let resp = raw_get(proxy.addr, &format!("{}/le-free", origin.base_url()), "x", UA).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.body.len(), String::from_utf8_lossy(&free).len(), "{resp:?}");
}

const UA: &str = "User-Agent: AcmeTrainer/1.0\r\nAccept-Encoding: gzip, deflate\r\n";
