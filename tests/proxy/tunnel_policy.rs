//! Tunnel mode (`https.mode = "tunnel"`) and issue 20's controls, against real TLS origins: a
//! CONNECT is decided before any path is seen, so `[[exceptions]]` decide it only when their
//! paths cover every path of the site (as robots.txt refuses it only when it disallows every
//! path), report-only mode reports what they would refuse, and TDMRep applies only a
//! `tdmrep.json` that reserves every path.

use std::sync::Arc;

use robots_proxy::config::Config;
use robots_proxy::policy::exceptions::Effect;
use robots_proxy::policy::ExceptionEntry;
use robots_proxy::tls::HttpsMode;
use robots_proxy::usage::{UsageCrawler, UsageMode};

use super::tls_support::{client_tls, connect, h1_get, h1_over, tls_over, HttpsProxy, TlsOrigin};
use super::tls_support::{TestCa, H1, H2_H1};

fn exception(
    id: &str,
    effect: Effect,
    site: &str,
    tokens: &[&str],
    paths: &[&str],
) -> ExceptionEntry {
    ExceptionEntry {
        id: id.to_owned(),
        authorities: vec![site.to_owned()],
        tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
        users: vec![],
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        effect,
        reference: Some(format!("https://legal.example/{id}")),
        granted_by: Some("legal@example.com".to_owned()),
        expires: Some("2099-01-01T00:00:00Z".to_owned()),
        usage: vec![],
    }
}

/// The crawlers of these tests, each a proxy user tied to its token (`acmebot:…:AcmeBot`,
/// password `pw`): an allow exception, a usage lift and report-only mode for a token apply
/// only to a user tied to it (controls 1), so each authenticates as its own.
const CRAWLERS: &[&str] =
    &["AcmeBot", "OtherBot", "HoldBot", "ReportBot", "NewsBot", "AcmeTrainer", "LicensedTrainer"];

/// The users file of [`CRAWLERS`], written once for the test binary.
fn users_file() -> std::path::PathBuf {
    static FILE: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> =
        std::sync::OnceLock::new();
    let (_, path) = FILE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cost = argon2::Params::default();
        let hash = robots_proxy::access::hash_password("pw", &cost).unwrap();
        let mut lines: String =
            CRAWLERS.iter().map(|t| format!("{}:{hash}:{t}\n", t.to_lowercase())).collect();
        // A user tied to no token: its requests name one in the User-Agent, a mere claim.
        lines.push_str(&format!("anon:{hash}\n"));
        let path = dir.path().join("users");
        std::fs::write(&path, lines).unwrap();
        (dir, path)
    });
    path.clone()
}

/// The head lines of a CONNECT from `agent`: its User-Agent, and the credentials of the user
/// tied to its token.
fn ua(agent: &str) -> String {
    use base64ct::Encoding;
    let basic = base64ct::Base64::encode_string(format!("{}:pw", agent.to_lowercase()).as_bytes());
    format!("User-Agent: {agent}/1.0\r\nProxy-Authorization: Basic {basic}\r\n")
}

fn with_action<'a>(records: &'a [serde_json::Value], action: &str) -> Vec<&'a serde_json::Value> {
    records.iter().filter(|r| r["event.action"] == action).collect()
}

/// Opens a tunnel as `agent` and fetches `/a` through it, end to end.
async fn fetch_through(proxy: &HttpsProxy, origin: &TlsOrigin, agent: &str) -> u16 {
    let tunnel = connect(proxy.addr(), &origin.host(), &ua(agent)).await.tunnel();
    let tls = tls_over(tunnel, client_tls(&[&origin.ca.der], H1), "localhost").await.unwrap();
    h1_get(&mut h1_over(tls).await, "/a", &origin.host(), &[]).await.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_mode_applies_exceptions_that_cover_every_path() {
    let ca = Arc::new(TestCa::new("tunnel exceptions CA"));
    let closed = TlsOrigin::start_with("User-agent: *\nDisallow: /\n", ca.clone(), H2_H1).await;
    let open = TlsOrigin::start_with("User-agent: *\nAllow: /\n", ca.clone(), H2_H1).await;
    let (closed_site, open_site) = (closed.host(), open.host());
    let exceptions = vec![
        exception("partner", Effect::Allow, &closed_site, &["AcmeBot"], &["/"]),
        exception("archive-only", Effect::Allow, &closed_site, &["OtherBot"], &["/archive/"]),
        exception("legal-hold", Effect::Disallow, &open_site, &["HoldBot", "ReportBot"], &["/"]),
        exception("news-hold", Effect::Disallow, &open_site, &["NewsBot"], &["/news/"]),
    ];
    let proxy = HttpsProxy::start(&ca, &[closed.port(), open.port()], move |c: &mut Config| {
        c.https.mode = HttpsMode::Tunnel;
        c.access.users_file = Some(users_file());
        c.exceptions = exceptions;
        c.policy.report_tokens = vec!["ReportBot".to_owned()];
    })
    .await;

    // An allow for every path opens what robots.txt refuses; one for some paths does not.
    assert_eq!(fetch_through(&proxy, &closed, "AcmeBot").await, 200);
    let refused = connect(proxy.addr(), &closed_site, &ua("OtherBot")).await.refused();
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("disallows every path"), "{}", refused.body);
    // A disallow for every path refuses what robots.txt allows, naming itself; one for some
    // paths does not refuse the tunnel (paths cannot be seen).
    let refused = connect(proxy.addr(), &open_site, &ua("HoldBot")).await.refused();
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("exception legal-hold"), "{}", refused.body);
    assert!(refused.body.contains("https://legal.example/legal-hold"), "{}", refused.body);
    assert_eq!(fetch_through(&proxy, &open, "NewsBot").await, 200);
    // Report-only mode: forwarded, reported with the same explanation.
    assert_eq!(fetch_through(&proxy, &open, "ReportBot").await, 200);

    let records = proxy.proxy.audit_records().await;
    let allows = with_action(&records, "exception_allow");
    assert_eq!(allows.len(), 1, "{records:?}");
    assert_eq!(allows[0]["robots.exception.id"], "partner");
    assert_eq!(allows[0]["robots.exception.reference"], "https://legal.example/partner");
    assert_eq!(allows[0]["robots.exception.robots_verdict"], "disallow");
    assert_eq!(allows[0]["robots.rule"], "disallow: /");
    assert_eq!(allows[0]["http.request.method"], "CONNECT");
    let refusals = with_action(&records, "exception_disallow");
    assert_eq!(refusals.len(), 1, "{records:?}");
    assert_eq!(refusals[0]["robots.exception.id"], "legal-hold");
    assert_eq!(refusals[0]["robots.exception.robots_verdict"], "allow");
    assert_eq!(refusals[0]["http.response.status_code"], 403);
    let would = with_action(&records, "would_block");
    assert_eq!(would.len(), 1, "{records:?}");
    assert_eq!(would[0]["robots.would_action"], "exception_disallow");
    assert_eq!(would[0]["robots.exception.id"], "legal-hold");
    assert_eq!(would[0]["event.reason"], refusals[0]["event.reason"]);
    assert_eq!(closed.content_hits(), 1);
}

fn trainer(token: &str) -> UsageCrawler {
    UsageCrawler { token: Some(token.to_owned()), user: None, purposes: vec!["train-ai".into()] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_mode_applies_a_tdmrep_reservation_for_every_path_only() {
    let ca = Arc::new(TestCa::new("tunnel tdmrep CA"));
    let everywhere =
        r#"[{"location": "/", "tdm-reservation": 1, "tdm-policy": "https://p.example/t"}]"#;
    let some = r#"[{"location": "/news/", "tdm-reservation": 1}]"#;
    let robots = "User-agent: *\nAllow: /\n";
    let file = "/.well-known/tdmrep.json";
    let reserved = TlsOrigin::start_serving(robots, &[(file, everywhere)], ca.clone(), H2_H1).await;
    let partly = TlsOrigin::start_serving(robots, &[(file, some)], ca.clone(), H2_H1).await;
    let lifted_site = reserved.host();
    let proxy = HttpsProxy::start(&ca, &[reserved.port(), partly.port()], move |c: &mut Config| {
        c.https.mode = HttpsMode::Tunnel;
        c.access.users_file = Some(users_file());
        c.usage.train_ai = UsageMode::Enforce;
        c.usage.crawlers = vec![trainer("AcmeTrainer"), trainer("LicensedTrainer")];
        let mut licence =
            exception("licence", Effect::Allow, &lifted_site, &["LicensedTrainer"], &["/"]);
        licence.usage = vec!["train-ai".to_owned()];
        c.exceptions = vec![licence];
    })
    .await;

    let refused = connect(proxy.addr(), &reserved.host(), &ua("AcmeTrainer")).await.refused();
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(refused.body.contains("tdmrep.json"), "{}", refused.body);
    // Not a training crawler; a file that reserves some paths only; a licence that lifts it.
    assert_eq!(fetch_through(&proxy, &reserved, "OtherBot").await, 200);
    assert_eq!(fetch_through(&proxy, &partly, "AcmeTrainer").await, 200);
    assert_eq!(fetch_through(&proxy, &reserved, "LicensedTrainer").await, 200);

    let records = proxy.proxy.audit_records().await;
    let refusals = with_action(&records, "usage_disallow");
    assert_eq!(refusals.len(), 1, "{records:?}");
    assert_eq!(refusals[0]["robots.usage.source"], "tdmrep.json");
    assert_eq!(refusals[0]["robots.usage.tdm_policy"], "https://p.example/t");
    let lifts = with_action(&records, "exception_allow");
    assert_eq!(lifts.len(), 1, "{records:?}");
    assert_eq!(lifts[0]["robots.exception.id"], "licence");
    assert!(lifts[0]["event.reason"].as_str().unwrap().contains("train-ai"), "{}", lifts[0]);
    // One fetch of the file per site.
    assert_eq!(reserved.hits(file), 1);
}

/// Controls 1 in tunnel mode: an allow exception opens a tunnel only for a user tied to its
/// token; a user who merely names the token is refused as robots.txt refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_is_opened_by_an_allow_exception_only_for_a_tied_user() {
    use base64ct::Encoding;
    let ca = Arc::new(TestCa::new("tunnel claims CA"));
    let closed = TlsOrigin::start_with("User-agent: *\nDisallow: /\n", ca.clone(), H2_H1).await;
    let site = closed.host();
    let partner = exception("partner", Effect::Allow, &site, &["AcmeBot"], &["/"]);
    let proxy = HttpsProxy::start(&ca, &[closed.port()], move |c: &mut Config| {
        c.https.mode = HttpsMode::Tunnel;
        c.access.users_file = Some(users_file());
        c.exceptions = vec![partner];
        c.policy.report_tokens = vec!["ReportBot".to_owned()];
    })
    .await;
    let anon = base64ct::Base64::encode_string(b"anon:pw");
    for claim in ["X-Robots-Product-Token: AcmeBot", "User-Agent: AcmeBot/1.0"] {
        let head = format!("{claim}\r\nProxy-Authorization: Basic {anon}\r\n");
        let refused = connect(proxy.addr(), &site, &head).await.refused();
        assert_eq!(refused.status, 403, "{claim}: {refused:?}");
        assert!(refused.body.contains("disallows every path"), "{}", refused.body);
    }
    // Nor is report-only mode granted on a claim.
    let head = format!("User-Agent: ReportBot/1.0\r\nProxy-Authorization: Basic {anon}\r\n");
    assert_eq!(connect(proxy.addr(), &site, &head).await.refused().status, 403);
    assert_eq!(fetch_through(&proxy, &closed, "AcmeBot").await, 200);
    assert_eq!(fetch_through(&proxy, &closed, "ReportBot").await, 200);
    let records = proxy.proxy.audit_records().await;
    let allows = with_action(&records, "exception_allow");
    assert_eq!(allows.len(), 1, "{records:?}");
    assert_eq!(allows[0]["user.name"], "acmebot", "{}", allows[0]);
    let refusals = with_action(&records, "connect_refuse");
    assert_eq!(refusals.len(), 3, "{records:?}");
    assert_eq!(refusals[0]["user.name"], "anon", "{}", refusals[0]);
    // A tunnel's records are the exchange's, made from its facts as a request's are: they say
    // where the token came from, and that no path could be seen.
    assert_eq!(allows[0]["robots.token_source"], "credentials", "{}", allows[0]);
    assert_eq!(refusals[0]["robots.token_source"], "header", "{}", refusals[0]);
    assert_eq!(refusals[1]["robots.token_source"], "user-agent", "{}", refusals[1]);
    assert_eq!(refusals[0]["url.path"], "(not visible in a tunnel)", "{}", refusals[0]);
    assert_eq!(refusals[0]["url.full"], format!("https://{site}"), "{}", refusals[0]);
}

/// Controls 7: a tunnel an allow exception opened ends at the exception's `expires`, however
/// busy it is: requests stop flowing on it, and a new CONNECT is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_opened_by_an_exception_closes_when_it_expires() {
    let ca = Arc::new(TestCa::new("tunnel expiry CA"));
    let closed = TlsOrigin::start_with("User-agent: *\nDisallow: /\n", ca.clone(), H2_H1).await;
    let site = closed.host();
    let expires = std::time::SystemTime::now() + std::time::Duration::from_secs(3);
    let mut partner = exception("partner", Effect::Allow, &site, &["AcmeBot"], &["/"]);
    partner.expires = Some(humantime::format_rfc3339_seconds(expires).to_string());
    let proxy = HttpsProxy::start(&ca, &[closed.port()], move |c: &mut Config| {
        c.https.mode = HttpsMode::Tunnel;
        c.access.users_file = Some(users_file());
        c.exceptions = vec![partner];
    })
    .await;
    let tunnel = connect(proxy.addr(), &site, &ua("AcmeBot")).await.tunnel();
    let tls = tls_over(tunnel, client_tls(&[&closed.ca.der], H1), "localhost").await.unwrap();
    let mut send = h1_over(tls).await;
    assert_eq!(h1_get(&mut send, "/a", &site, &[]).await.status, 200);
    // The second the exception's expiry is written to, plus a margin: the relay has ended.
    let after = expires + std::time::Duration::from_millis(1500);
    while std::time::SystemTime::now() < after {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let req = http::Request::get("/a")
        .header("host", &site)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let wait = std::time::Duration::from_secs(5);
    let late = tokio::time::timeout(wait, async {
        send.ready().await?;
        send.send_request(req).await
    })
    .await
    .expect("the closed tunnel answers at once");
    assert!(late.is_err(), "a request went through the tunnel after the exception expired");
    // The proxy's (manual) clock reaches the expiry too: a new CONNECT is refused.
    proxy.proxy.clock.set(std::time::SystemTime::now());
    assert_eq!(connect(proxy.addr(), &site, &ua("AcmeBot")).await.refused().status, 403);
}

/// Review-controls 7 (issue 37): a reload that removes the allow exception a tunnel rests on
/// closes that tunnel at once (requests stop flowing on it), while a reload that keeps it
/// leaves it open, and a tunnel that rests on no exception (robots.txt allows the site) is
/// left open by both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_removes_its_exception_closes_a_tunnel_and_leaves_others_open() {
    let ca = Arc::new(TestCa::new("tunnel reload CA"));
    let closed = TlsOrigin::start_with("User-agent: *\nDisallow: /\n", ca.clone(), H2_H1).await;
    let open = TlsOrigin::start_with("User-agent: *\nAllow: /\n", ca.clone(), H2_H1).await;
    let (closed_site, open_site) = (closed.host(), open.host());
    let partner = exception("partner", Effect::Allow, &closed_site, &["AcmeBot"], &["/"]);
    let kept = vec![partner];
    let first = kept.clone();
    let proxy = HttpsProxy::start(&ca, &[closed.port(), open.port()], move |c: &mut Config| {
        c.https.mode = HttpsMode::Tunnel;
        c.access.users_file = Some(users_file());
        c.exceptions = first;
    })
    .await;
    let mut resting = {
        let tunnel = connect(proxy.addr(), &closed_site, &ua("AcmeBot")).await.tunnel();
        let tls = tls_over(tunnel, client_tls(&[&closed.ca.der], H1), "localhost").await.unwrap();
        h1_over(tls).await
    };
    let mut plain = {
        let tunnel = connect(proxy.addr(), &open_site, &ua("OtherBot")).await.tunnel();
        let tls = tls_over(tunnel, client_tls(&[&open.ca.der], H1), "localhost").await.unwrap();
        h1_over(tls).await
    };
    assert_eq!(h1_get(&mut resting, "/a", &closed_site, &[]).await.status, 200);
    assert_eq!(h1_get(&mut plain, "/a", &open_site, &[]).await.status, 200);

    // A reload that keeps the exception: both stay open.
    proxy.proxy.reload_with(|c| c.exceptions = kept);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(h1_get(&mut resting, "/b", &closed_site, &[]).await.status, 200);
    assert_eq!(h1_get(&mut plain, "/b", &open_site, &[]).await.status, 200);

    // A reload that removes it: the tunnel resting on it ends, the other goes on.
    proxy.proxy.reload_with(|c| c.exceptions = vec![]);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let req = http::Request::get("/c")
        .header("host", &closed_site)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let late = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        resting.ready().await?;
        resting.send_request(req).await
    })
    .await
    .expect("the closed tunnel answers at once");
    assert!(late.is_err(), "a request went through the tunnel after its exception was removed");
    assert_eq!(h1_get(&mut plain, "/c", &open_site, &[]).await.status, 200);
    // And a new CONNECT to the closed site is refused.
    assert_eq!(connect(proxy.addr(), &closed_site, &ua("AcmeBot")).await.refused().status, 403);
    assert_eq!(closed.content_hits(), 2);
}
