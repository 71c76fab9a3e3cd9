//! Recorded, expiring exceptions (`[[exceptions]]`, issue 20 part 1) against a real origin and
//! the real binary: an allow lets through exactly its scope until its expiry passes in the
//! running proxy, a disallow refuses an allowed path naming itself, both are audited with their
//! id and reference, config errors name the key, and a reload adds, changes and removes them.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::support::{get_json, run, write_atomically, Origin, ProxyProcess};
use crate::proxy::support::{raw_get, RawResponse};

fn expires_in(d: Duration) -> String {
    humantime::format_rfc3339_seconds(SystemTime::now() + d).to_string()
}

fn config(state: &Path, exceptions: &str) -> String {
    format!(
        "state_dir = {state:?}\n\n[audit]\nfsync = \"always\"\n\n[access]\n\
         allow_destinations = [\"127.0.0.0/8\"]\n\n{exceptions}"
    )
}

fn exception(id: &str, effect: &str, authority: &str, paths: &str, expires: &str) -> String {
    format!(
        "[[exceptions]]\nid = \"{id}\"\nauthorities = [\"{authority}\"]\ntokens = [\"AcmeBot\"]\n\
         paths = {paths}\neffect = \"{effect}\"\nreference = \"https://legal.example/{id}\"\n\
         granted_by = \"legal@example.com\"\nexpires = \"{expires}\"\n\n"
    )
}

async fn get(p: &ProxyProcess, url: &str, token: &str) -> RawResponse {
    raw_get(p.proxy_addr, url, "x", &format!("User-Agent: {token}/1.0\r\n")).await
}

fn records(state: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(state.join("audit.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn with_action(state: &Path, action: &str) -> Vec<serde_json::Value> {
    records(state).into_iter().filter(|r| r["event.action"] == action).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_exception_lets_through_exactly_its_scope_until_it_expires() {
    let origin = Origin::start("User-agent: *\nDisallow: /\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let expires = expires_in(Duration::from_secs(6));
    let ex = exception("partner", "allow", "127.0.0.1", "[\"/archive/\"]", &expires);
    write_atomically(&file, &config(&state, &ex));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let base = origin.base();
    let allowed = get(&p, &format!("{base}/archive/1"), "AcmeBot").await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    // Outside its scope robots.txt still decides: another token, path or authority.
    assert_eq!(get(&p, &format!("{base}/archive/1"), "OtherBot").await.status, 403);
    assert_eq!(get(&p, &format!("{base}/private"), "AcmeBot").await.status, 403);
    // A reading of the path outside the scope is not covered either.
    assert_eq!(get(&p, &format!("{base}/archive/%2e%2e/private"), "AcmeBot").await.status, 403);
    let other = format!("http://localhost:{}/archive/1", origin.addr.port());
    assert_eq!(get(&p, &other, "AcmeBot").await.status, 403);

    // Audited although audit.all_decisions is off, next to the robots.txt verdict.
    let allows = with_action(&state, "exception_allow");
    assert_eq!(allows.len(), 1, "{:?}", records(&state));
    let r = &allows[0];
    assert_eq!(r["robots.exception.id"], "partner");
    assert_eq!(r["robots.exception.reference"], "https://legal.example/partner");
    assert_eq!(r["robots.exception.robots_verdict"], "disallow");
    assert_eq!(r["robots.rule"], "disallow: /", "{r}");
    assert_eq!(r["event.outcome"], "success");

    // Its expiry passes in the running proxy, with no reload: robots.txt decides again.
    let until = humantime::parse_rfc3339(&expires).unwrap();
    let limit = Instant::now() + Duration::from_secs(30);
    while SystemTime::now() < until + Duration::from_millis(200) && Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = get(&p, &format!("{base}/archive/1"), "AcmeBot").await;
    assert_eq!(after.status, 403, "{after:?}");
    assert!(after.body.contains("robots.txt"), "{}", after.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disallow_exception_refuses_an_allowed_path_naming_itself() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let ex =
        exception("legal-hold", "disallow", "127.0.0.1", "[\"/news/\"]", "2099-01-01T00:00:00Z");
    write_atomically(&file, &config(&state, &ex));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let base = origin.base();
    let refused = get(&p, &format!("{base}/news/today"), "AcmeBot").await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(refused.body.contains("exception legal-hold"), "{}", refused.body);
    assert!(refused.body.contains("https://legal.example/legal-hold"), "{}", refused.body);
    let status = &refused.headers["proxy-status"];
    assert!(status.contains("exception legal-hold"), "{status}");
    // Any reading in scope refuses: `/%6Eews/` reads as `/news/` decoded.
    assert_eq!(get(&p, &format!("{base}/%6Eews/x"), "AcmeBot").await.status, 403);
    // Others, and other paths, are not concerned.
    assert_eq!(get(&p, &format!("{base}/news/today"), "OtherBot").await.status, 200);
    assert_eq!(get(&p, &format!("{base}/sport"), "AcmeBot").await.status, 200);

    let refusals = with_action(&state, "exception_disallow");
    assert_eq!(refusals.len(), 2, "{:?}", records(&state));
    let r = &refusals[0];
    assert_eq!(r["robots.exception.id"], "legal-hold");
    assert_eq!(r["robots.exception.reference"], "https://legal.example/legal-hold");
    assert_eq!(r["robots.exception.robots_verdict"], "allow");
    assert_eq!(r["event.outcome"], "failure");
    assert_eq!(r["http.response.status_code"], 403);
}

/// Report-only mode covers a disallow exception like every other refusal: forwarded, and
/// written as `would_block` naming the exception.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_reports_a_disallow_exception() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let ex =
        exception("legal-hold", "disallow", "127.0.0.1", "[\"/news/\"]", "2099-01-01T00:00:00Z");
    write_atomically(&file, &config(&state, &ex));
    let p = ProxyProcess::start(
        &["--config", file.to_str().unwrap()],
        &[("ROBOTS_PROXY_POLICY__REPORT_TOKENS", "[\"AcmeBot\"]")],
    );
    let base = origin.base();
    let reported = get(&p, &format!("{base}/news/today"), "AcmeBot").await;
    assert_eq!(reported.status, 200, "{reported:?}");
    let status = &reported.headers["proxy-status"];
    assert!(status.contains("report only"), "{status}");
    assert!(status.contains("exception legal-hold"), "{status}");
    let would = with_action(&state, "would_block");
    assert_eq!(would.len(), 1, "{:?}", records(&state));
    assert_eq!(would[0]["robots.would_action"], "exception_disallow");
    assert_eq!(would[0]["robots.exception.id"], "legal-hold");
    assert!(with_action(&state, "exception_disallow").is_empty());
}

#[test]
fn config_errors_name_the_entry_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let past = exception("old", "allow", "news.example", "[\"/\"]", "2020-01-01T00:00:00Z");
    let star = exception("star", "allow", "news.example", "[\"archive\"]", "2099-01-01T00:00:00Z")
        .replace("\"AcmeBot\"", "\"*\"");
    let bare = "[[exceptions]]\nid = \"bare\"\nauthorities = [\"news.example\"]\n\
                tokens = [\"AcmeBot\"]\neffect = \"allow\"\n\n";
    let dup = exception("old", "disallow", "news.example", "[\"/\"]", "2099-01-01T00:00:00Z");
    write_atomically(&file, &config(&state, &format!("{past}{star}{bare}{dup}")));
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for key in [
        "exceptions[1].expires",
        "exceptions[2].tokens",
        "exceptions[2].paths",
        "exceptions[3].reference",
        "exceptions[3].granted_by",
        "exceptions[3].expires",
        "exceptions[4].id",
    ] {
        assert!(err.contains(&format!("{key} (from file")), "{key} not named:\n{err}");
    }
    // An unknown key is named too.
    let typo = exception("t", "allow", "news.example", "[\"/\"]", "2099-01-01T00:00:00Z")
        .replace("granted_by", "granted");
    write_atomically(&file, &config(&state, &typo));
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exceptions.granted") && err.contains("unknown key"), "{err}");

    // A good file: `config check` lists what each covers and notes the overlap.
    let allow = exception("a", "allow", "news.example", "[\"/\"]", "2099-01-01T00:00:00Z");
    let disallow = exception("d", "disallow", "*.example", "[\"/x\"]", "2099-01-01T00:00:00Z");
    write_atomically(&file, &config(&state, &format!("{allow}{disallow}")));
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("# exception a: allow token AcmeBot on news.example paths /"), "{text}");
    assert!(text.contains("a (allow) and d (disallow) overlap: the disallow wins"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_changes_and_removes_exceptions_and_the_admin_lists_them() {
    let origin = Origin::start("User-agent: *\nDisallow: /archive/\nDisallow: /other/\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let later = "2099-01-01T00:00:00Z";
    let partner = |paths: &str| exception("partner", "allow", "127.0.0.1", paths, later);
    let first = format!(
        "{}{}",
        partner("[\"/archive/\"]"),
        exception("gone", "disallow", "127.0.0.1", "[\"/news/\"]", later)
    );
    write_atomically(&file, &config(&state, &first));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let base = origin.base();
    assert_eq!(get(&p, &format!("{base}/archive/1"), "AcmeBot").await.status, 200);
    assert_eq!(get(&p, &format!("{base}/news/1"), "AcmeBot").await.status, 403);

    let (status, listed) = get_json(&format!("{}/api/exceptions", p.admin())).await;
    assert_eq!(status, 200);
    let ids: Vec<_> =
        listed["exceptions"].as_array().unwrap().iter().map(|e| e["id"].clone()).collect();
    assert_eq!(ids, ["partner", "gone"], "{listed}");
    assert_eq!(listed["exceptions"][0]["uses"], 1, "{listed}");
    assert_eq!(listed["exceptions"][0]["reference"], "https://legal.example/partner");
    assert_eq!(listed["exceptions"][0]["active"], true);
    let (_, metrics) = super::support::get(&format!("{}/metrics", p.admin())).await;
    assert!(metrics.contains("robots_proxy_exception_expiry_seconds{id=\"partner\"}"), "{metrics}");
    let explain = format!("{}/robots?url={base}/archive/1&agent=AcmeBot", p.admin());
    let (_, explained) = get_json(&explain).await;
    assert_eq!(explained["exception"]["id"], "partner", "{explained}");
    assert_eq!(explained["decision"]["allowed"], false, "{explained}");

    // Changed (another path), removed (gone) and added (new).
    let second = format!(
        "{}{}",
        partner("[\"/other/\"]"),
        exception("new", "disallow", "127.0.0.1", "[\"/sport\"]", later)
    );
    write_atomically(&file, &config(&state, &second));
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: configuration reloaded", 1).await;
    assert!(!p.stderr().contains("only after a restart"), "{}", p.stderr());
    assert_eq!(get(&p, &format!("{base}/archive/1"), "AcmeBot").await.status, 403);
    assert_eq!(get(&p, &format!("{base}/other/1"), "AcmeBot").await.status, 200);
    assert_eq!(get(&p, &format!("{base}/news/1"), "AcmeBot").await.status, 200);
    let sport = get(&p, &format!("{base}/sport"), "AcmeBot").await;
    assert_eq!(sport.status, 403);
    assert!(sport.body.contains("exception new"), "{}", sport.body);
    let (_, listed) = get_json(&format!("{}/api/exceptions", p.admin())).await;
    let ids: Vec<_> =
        listed["exceptions"].as_array().unwrap().iter().map(|e| e["id"].clone()).collect();
    assert_eq!(ids, ["partner", "new"], "{listed}");
    // Use counts are kept across the reload for the same id.
    assert_eq!(listed["exceptions"][0]["uses"], 2, "{listed}");
    let (_, metrics) = super::support::get(&format!("{}/metrics", p.admin())).await;
    assert!(!metrics.contains("id=\"gone\""), "{metrics}");

    // A bad file keeps the running set.
    let bad = exception("late", "allow", "127.0.0.1", "[\"/\"]", "2020-01-01T00:00:00Z");
    write_atomically(&file, &config(&state, &format!("{second}{bad}")));
    p.signal("HUP");
    p.wait_for_stderr("the running configuration stays", 1).await;
    assert!(p.stderr().contains("exceptions[3].expires"), "{}", p.stderr());
    assert_eq!(get(&p, &format!("{base}/sport"), "AcmeBot").await.status, 403);
    assert_eq!(get(&p, &format!("{base}/other/1"), "AcmeBot").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_exception_with_usage_lifts_the_preference_for_its_scope() {
    let origin = Origin::start("User-agent: *\nAllow: /\nContent-Usage: train-ai=n\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let ex = exception("licence", "allow", "127.0.0.1", "[\"/open/\"]", "2099-01-01T00:00:00Z")
        + "usage = [\"train-ai\"]\n\n";
    let crawlers = "[[usage.crawlers]]\ntoken = \"AcmeBot\"\npurposes = [\"train-ai\"]\n\n";
    write_atomically(&file, &config(&state, &format!("{crawlers}{ex}")));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let base = origin.base();
    let open = get(&p, &format!("{base}/open/1"), "AcmeBot").await;
    assert_eq!(open.status, 200, "{open:?}");
    // Outside its paths the preference still refuses.
    assert_eq!(get(&p, &format!("{base}/closed"), "AcmeBot").await.status, 403);
    let allows = with_action(&state, "exception_allow");
    assert_eq!(allows.len(), 1, "{:?}", records(&state));
    assert_eq!(allows[0]["robots.exception.id"], "licence");
    assert!(allows[0]["event.reason"].as_str().unwrap().contains("train-ai"), "{}", allows[0]);
    assert_eq!(with_action(&state, "usage_disallow").len(), 1);
}

/// A request an allow exception let through and pacing then held back (429) is still a request
/// the exception decided: its `throttled` record names the exception.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_request_an_exception_decided_names_the_exception() {
    let origin = Origin::start("User-agent: *\nDisallow: /\nCrawl-delay: 60\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let ex = exception("partner", "allow", "127.0.0.1", "[\"/archive/\"]", "2099-01-01T00:00:00Z");
    let pacing = "[pacing]\nenabled = true\nmax_wait = \"1s\"\n\n";
    write_atomically(&file, &config(&state, &format!("{pacing}{ex}")));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let base = origin.base();
    assert_eq!(get(&p, &format!("{base}/archive/1"), "AcmeBot").await.status, 200);
    let held = get(&p, &format!("{base}/archive/2"), "AcmeBot").await;
    assert_eq!(held.status, 429, "{held:?}");
    let throttled = with_action(&state, "throttled");
    assert_eq!(throttled.len(), 1, "{:?}", records(&state));
    assert_eq!(throttled[0]["robots.exception.id"], "partner", "{}", throttled[0]);
    assert_eq!(throttled[0]["robots.exception.reference"], "https://legal.example/partner");
}

/// With `audit.all_decisions`, a request whose usage preference an exception lifted has one
/// record, the exception's, not one for the lift and another for the decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usage_lift_under_all_decisions_writes_one_record() {
    let origin = Origin::start("User-agent: *\nAllow: /\nContent-Usage: train-ai=n\n").await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("robots-proxy.toml");
    let ex = exception("licence", "allow", "127.0.0.1", "[\"/open/\"]", "2099-01-01T00:00:00Z")
        + "usage = [\"train-ai\"]\n\n";
    let crawlers = "[[usage.crawlers]]\ntoken = \"AcmeBot\"\npurposes = [\"train-ai\"]\n\n";
    let text = config(&state, &format!("{crawlers}{ex}"))
        .replace("fsync = \"always\"\n", "fsync = \"always\"\nall_decisions = true\n");
    write_atomically(&file, &text);
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let base = origin.base();
    let url = format!("{base}/open/1");
    assert_eq!(get(&p, &url, "AcmeBot").await.status, 200);
    let mine: Vec<_> = records(&state).into_iter().filter(|r| r["url.full"] == url).collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0]["event.action"], "exception_allow");
    assert_eq!(mine[0]["robots.exception.id"], "licence");
    assert!(mine[0]["event.reason"].as_str().unwrap().contains("train-ai"), "{}", mine[0]);
}
