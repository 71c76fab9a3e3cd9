//! The docs are true of the binary: the metrics table (docs/metrics.md) against a running proxy's
//! `/metrics`, in both of its formats (the classic one checked by `promtool` when it is there).

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

use super::support::ProxyProcess;

/// The metric names in the metrics table of docs/metrics.md (`| \`robots_proxy_…\` | type | …`).
fn documented_metrics() -> BTreeSet<String> {
    let page = include_str!("../../docs/metrics.md");
    page.lines()
        .filter_map(|l| l.strip_prefix("| `robots_proxy_"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| format!("robots_proxy_{name}"))
        .collect()
}

async fn scrape(p: &ProxyProcess, accept: Option<&str>) -> (String, String) {
    let client = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    let mut req = client.get(format!("{}/metrics", p.admin()));
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let media = resp.headers()["content-type"].to_str().unwrap().to_owned();
    (media, resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_metrics_table_is_what_metrics_exposes_in_both_formats() {
    let state = tempfile::tempdir().unwrap();
    let p = ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap()),
            ("ROBOTS_PROXY_PACING__ENABLED", "true"),
        ],
    );
    // Classic text format: what `curl` and `promtool` get.
    let (media, text) = scrape(&p, None).await;
    assert!(media.starts_with("text/plain; version=0.0.4"), "{media}");
    assert!(!text.contains("# EOF"), "{text}");
    let exposed: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    let documented = documented_metrics();
    let undocumented: Vec<_> = exposed.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "exposed but not in docs/metrics.md's table: {undocumented:?}"
    );
    // Fleet metrics appear only with a fleet (`fleet.redis`), the would-block counter's series
    // (one per token and action) only once a request was reported in report-only mode
    // (`tests/proxy/report.rs` checks it), the exception expiry only with `[[exceptions]]`
    // (tests/ops/exceptions.rs), the witnesses' pushes only with `audit.witnesses`
    // (tests/ops/audit_witness.rs); every other documented metric is exposed by this proxy.
    let missing: Vec<_> = documented
        .difference(&exposed)
        .filter(|name| !name.starts_with("robots_proxy_fleet_"))
        .filter(|name| *name != "robots_proxy_would_block_total")
        .filter(|name| *name != "robots_proxy_exception_expiry_seconds")
        .filter(|name| *name != "robots_proxy_audit_witness_pushes_total")
        .collect();
    assert!(missing.is_empty(), "in docs/metrics.md's table but not exposed: {missing:?}");
    promtool_accepts(&text);

    // OpenMetrics for a scraper that asks for it, as Prometheus does.
    let prometheus_accept = "application/openmetrics-text;version=1.0.0;q=0.5,\
                             text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
    let (media, open) = scrape(&p, Some(prometheus_accept)).await;
    assert!(media.starts_with("application/openmetrics-text"), "{media}");
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(open.contains("# TYPE robots_proxy_build info"), "{open}");
    assert!(open.contains("robots_proxy_pacing_delay_seconds_total 0"), "{open}");
    assert!(open.contains("le=\"2.5\""), "a bucket between 1 s and 5 s: {open}");
}

/// `promtool check metrics` on the classic format (CI installs Debian's `prometheus`).
fn promtool_accepts(text: &str) {
    let spawned = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = spawned else {
        crate::skip::missing("promtool", "apt-get install prometheus");
        return;
    };
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every field of a real audit record is in docs/audit.md's field tables (as a row
/// `| \`name\` |`), for records of several kinds: allowed, disallowed, throttled, and a refused
/// CONNECT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_audit_field_is_documented() {
    use crate::proxy::support::{raw, raw_get, Origin, TestProxy};
    let docs = include_str!("../../docs/audit.md");
    let origin = Origin::start("User-agent: *\nCrawl-delay: 5\nDisallow: /private\n").await;
    // A user tied to ExampleBot: an allow exception for a token is granted only to one
    // (controls 1), and its records name the user (`user.name`).
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let hash = robots_proxy::access::hash_password("pw", &argon2::Params::default()).unwrap();
    std::fs::write(&users, format!("example:{hash}:ExampleBot\n")).unwrap();
    let proxy = TestProxy::start_with(move |c| {
        c.access.users_file = Some(users);
        c.pacing.enabled = true;
        c.pacing.max_wait = std::time::Duration::from_millis(500);
        c.audit.all_decisions = true;
        // An allow and a disallow exception (`[[exceptions]]`), for their records' fields.
        let entry = |id: &str, effect, path: &str| robots_proxy::policy::ExceptionEntry {
            id: id.into(),
            authorities: vec!["127.0.0.1".into()],
            tokens: vec!["ExampleBot".into()],
            users: vec![],
            paths: vec![path.into()],
            effect,
            reference: Some("https://legal.example/1".into()),
            granted_by: Some("legal@example.com".into()),
            expires: Some("2099-01-01T00:00:00Z".into()),
            usage: vec![],
        };
        use robots_proxy::policy::exceptions::Effect;
        c.exceptions =
            vec![entry("a", Effect::Allow, "/private/ok"), entry("d", Effect::Disallow, "/c")];
    })
    .await;
    let base = origin.base();
    // `example:pw`
    let auth = "Proxy-Authorization: Basic ZXhhbXBsZTpwdw==\r\n";
    let ua = &format!("{auth}User-Agent: ExampleBot/1.0 caf\u{e9}\r\n");
    // The exception allow first: the pace lets only the first request through at once.
    for path in ["/private/ok", "/a?q=1", "/private/x", "/b", "/c"] {
        raw_get(proxy.addr, &format!("{base}{path}"), "x", ua).await;
    }
    let connect = format!(
        "CONNECT 127.0.0.1:{} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n",
        origin.addr.port()
    );
    raw(proxy.addr, &connect).await;
    let records = proxy.audit_lines().await;
    let actions: BTreeSet<_> = records.iter().map(|r| r["event.action"].to_string()).collect();
    assert!(actions.len() >= 4, "{actions:?}");
    assert!(actions.contains("\"robots_version\""), "{actions:?}");
    assert!(actions.contains("\"exception_allow\""), "{actions:?}");
    assert!(actions.contains("\"exception_disallow\""), "{actions:?}");
    let mut undocumented = BTreeSet::new();
    for record in &records {
        for field in record.as_object().unwrap().keys() {
            if !docs.contains(&format!("| `{field}` |")) {
                undocumented.insert(field.clone());
            }
        }
    }
    assert!(undocumented.is_empty(), "fields not in docs/audit.md: {undocumented:?}");
}
