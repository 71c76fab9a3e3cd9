//! Issue 38 item 7 (review-tests F7): one generic test reloads every key a reload applies.
//!
//! It iterates the typed list itself (`config::RELOADABLE`; a section stands for each key the
//! shipped `config/robots-proxy.toml` documents in it), so a new reloadable key is covered
//! without editing the test, and fails it until [`another_value`] has a value for it. One real
//! proxy process runs with a configuration file; for each key in turn the file is rewritten
//! with that key, and only that key, at another valid value, SIGHUP is sent, and:
//! - the reload is applied, and its report (the SIGHUP log) names the key as changed;
//! - the proxy then reports the file as in force (`GET /api/reload/preview`: nothing would
//!   change and nothing waits for a restart);
//! - where it is cheap to observe, the behaviour follows, through a real client
//!   ([`probe`]: the token sources, header and default, case folding, the policy mode, the
//!   exceptions, the pace, the allowed clients and destinations, the users file, the HTTPS mode
//!   and ports, the log level, the audit of every decision, the disclosure served), at the
//!   base value before and after, and at the other value.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use robots_proxy::config::{Scope, RELOADABLE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{get_json, run, write_atomically, Origin, ProxyProcess};
use crate::proxy::tls_support::TestCa;

const ROBOTS: &str =
    "User-agent: *\nDisallow: /private\n\nUser-agent: OtherBot\nDisallow: /other\n";
const WAIT: Duration = Duration::from_secs(20);

/// Every key a reload applies, as the typed list names it: a key, a list of tables by its
/// name, a section as each key the shipped file documents in it.
fn reloadable_keys() -> Vec<String> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/robots-proxy.toml");
    let documented = crate::config::shipped::keys(&std::fs::read_to_string(shipped).unwrap(), true);
    let mut out = Vec::new();
    for entry in RELOADABLE {
        match entry.scope {
            Scope::Key | Scope::Tables => out.push(entry.key.to_owned()),
            Scope::Section => {
                let prefix = format!("{}.", entry.key);
                let keys: Vec<&String> = documented
                    .iter()
                    .filter(|k| k.strip_prefix(&prefix).is_some_and(|name| !name.contains('.')))
                    .collect();
                assert!(!keys.is_empty(), "[{}] documents no key", entry.key);
                out.extend(keys.into_iter().cloned());
            }
        }
    }
    out
}

/// The files and the origin the configuration names.
struct Fixture {
    dir: tempfile::TempDir,
    origin: Origin,
}

impl Fixture {
    fn at(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `at(name)` as a TOML string.
    fn path(&self, name: &str) -> String {
        format!("{:?}", self.at(name))
    }

    async fn new() -> Fixture {
        let fx = Fixture { dir: tempfile::tempdir().unwrap(), origin: Origin::start(ROBOTS).await };
        let state = fx.at("state");
        for name in ["k1", "k2"] {
            let made = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
                .args(["keys", "new", name])
                .env_clear()
                .env("ROBOTS_PROXY_STATE_DIR", &state)
                .output()
                .unwrap();
            assert!(made.status.success(), "{made:?}");
        }
        // keys_dir's other value: a directory holding the same keys.
        std::fs::create_dir(state.join("keys2")).unwrap();
        for entry in std::fs::read_dir(state.join("keys")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), state.join("keys2").join(entry.file_name())).unwrap();
        }
        let listener = TestCa::new("listener CA");
        let (cert, key) = listener.leaf_pem(&["127.0.0.1", "localhost"]);
        let clients = TestCa::new("clients CA");
        // Each file twice: a key's other value is the same contents at another path.
        for copy in ["", "2"] {
            write_atomically(&fx.at(&format!("proxy{copy}.pem")), &cert);
            write_atomically(&fx.at(&format!("proxy-key{copy}.pem")), &key);
            write_atomically(&fx.at(&format!("clients-ca{copy}.pem")), &clients.pem);
        }
        let made = run(&["ca", "init", "--dir", fx.at("ca").to_str().unwrap()], &[]);
        assert!(made.status.success(), "{made:?}");
        for file in ["ca.pem", "ca-key.pem"] {
            std::fs::copy(fx.at("ca").join(file), fx.at(&format!("ca2-{file}"))).unwrap();
        }
        let cost = argon2::Params::default();
        let hash = robots_proxy::access::hash_password("pw", &cost).unwrap();
        write_atomically(&fx.at("users"), &format!("alice:{hash}\n"));
        fx
    }

    /// The configuration the proxy starts with, by dotted key (TOML values); every other key
    /// is at its default.
    fn base(&self) -> BTreeMap<String, String> {
        [
            ("state_dir", self.path("state")),
            ("proxy.tls_listen", "\"127.0.0.1:0\"".into()),
            ("proxy.tls_certificate", self.path("proxy.pem")),
            ("proxy.tls_key", self.path("proxy-key.pem")),
            ("access.client_ca", self.path("clients-ca.pem")),
            ("access.allow_clients", "[\"127.0.0.0/8\"]".into()),
            ("access.allow_destinations", "[\"127.0.0.0/8\"]".into()),
            ("https.mode", "\"intercept\"".into()),
            ("https.ca_cert", format!("{:?}", self.at("ca").join("ca.pem"))),
            ("https.ca_key", format!("{:?}", self.at("ca").join("ca-key.pem"))),
            ("signing.directory_listen", "\"127.0.0.1:0\"".into()),
            ("signing.keys", "[{ name = \"k1\" }]".into()),
            ("policy.default_token", "\"BaseBot\"".into()),
            ("pacing.enabled", "true".into()),
            ("pacing.max_wait", "\"50ms\"".into()),
            ("disclosure.enabled", "true".into()),
            ("disclosure.crawlers", "[{ token = \"OtherBot\", name = \"Other\" }]".into()),
            ("disclosure.operator", "\"Example Org\"".into()),
            ("disclosure.contact", "\"mailto:bots@example.com\"".into()),
            ("disclosure.public_url", "\"https://bots.example.com\"".into()),
            ("robots.max_age", "\"1h\"".into()),
            ("usage.train_ai", "\"enforce\"".into()),
            ("exceptions", "[]".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// Another valid value for `key` (TOML), different from the one [`Fixture::base`] (or the
/// default) gives it. `None`: the table has no value for a reloadable key, which fails the
/// test, naming it.
fn another_value(key: &str, fx: &Fixture) -> Option<String> {
    let port = fx.origin.addr.port();
    let value = match key {
        "policy.token_sources" => "[\"header\", \"default\"]".to_owned(),
        "policy.token_header" => "\"X-Crawler-Token\"".to_owned(),
        "policy.default_token" => "\"OtherBot\"".to_owned(),
        "policy.fold_case" => "\"all\"".to_owned(),
        "policy.fold_case_sites" => "[\"127.0.0.1\"]".to_owned(),
        "policy.mode" => "\"report\"".to_owned(),
        "policy.report_tokens" => "[\"test\"]".to_owned(),
        "policy.report_users" => "[\"alice\"]".to_owned(),
        "usage.train_ai" => "\"off\"".to_owned(),
        "usage.ai_use" => "\"annotate\"".to_owned(),
        "usage.search" => "\"off\"".to_owned(),
        "usage.unknown" => "\"disallow\"".to_owned(),
        "usage.x_robots_tag" => "false".to_owned(),
        "usage.tdmrep" => "false".to_owned(),
        "usage.crawlers" => "[{ token = \"test\", purposes = [\"search\"] }]".to_owned(),
        "audit.all_decisions" => "true".to_owned(),
        "audit.fsync" => "\"always\"".to_owned(),
        "audit.fsync_interval" => "\"2s\"".to_owned(),
        "log.level" => "\"debug\"".to_owned(),
        "upstream.response_timeout" => "\"30s\"".to_owned(),
        "upstream.body_idle_timeout" => "\"30s\"".to_owned(),
        "exceptions" => format!(
            "[{{ id = \"every-key\", authorities = [\"127.0.0.1:{port}\"], tokens = [\"test\"], \
             paths = [\"/held\"], effect = \"disallow\", reference = \"r\", granted_by = \"g\", \
             expires = \"2099-01-01T00:00:00Z\" }}]"
        ),
        "access.users_file" => fx.path("users"),
        "access.allow_clients" => "[\"10.0.0.0/8\"]".to_owned(),
        "access.allow_destinations" => "[]".to_owned(),
        "access.client_ca" => fx.path("clients-ca2.pem"),
        "access.client_certificate" => "\"required\"".to_owned(),
        "proxy.tls_certificate" => fx.path("proxy2.pem"),
        "proxy.tls_key" => fx.path("proxy-key2.pem"),
        "pacing.enabled" => "false".to_owned(),
        "pacing.obey_crawl_delay" => "false".to_owned(),
        "pacing.max_crawl_delay" => "\"30s\"".to_owned(),
        "pacing.default_rps" => "5.0".to_owned(),
        "pacing.default_concurrency" => "4".to_owned(),
        "pacing.queue_limit" => "32".to_owned(),
        "pacing.max_wait" => "\"10s\"".to_owned(),
        "pacing.sites" => format!("[{{ authority = \"http://127.0.0.1:{port}\", rps = 0.01 }}]"),
        "robots.max_age" => "\"2h\"".to_owned(),
        "robots.min_age" => "\"30s\"".to_owned(),
        "robots.give_up_after" => "\"10days\"".to_owned(),
        "robots.retry_initial" => "\"5s\"".to_owned(),
        "robots.retry_max" => "\"30min\"".to_owned(),
        "robots.refresh_ahead" => "0.5".to_owned(),
        "https.mode" => "\"reject\"".to_owned(),
        "https.connect_ports" => "[443, 8443]".to_owned(),
        "https.audit_tunnels" => "true".to_owned(),
        "https.tunnel_idle_timeout" => "\"1m\"".to_owned(),
        "https.ca_cert" => fx.path("ca2-ca.pem"),
        "https.ca_key" => fx.path("ca2-ca-key.pem"),
        "signing.lifetime" => "\"120s\"".to_owned(),
        "signing.components" => "[\"@method\", \"@authority\"]".to_owned(),
        "signing.reuse" => "\"10s\"".to_owned(),
        "signing.keep_client_signatures" => "true".to_owned(),
        "signing.client_signatures" => "\"replace\"".to_owned(),
        "signing.keys_dir" => "\"keys2\"".to_owned(),
        "signing.directory_lifetime" => "\"2h\"".to_owned(),
        "signing.keys" => "[{ name = \"k1\" }, { name = \"k2\" }]".to_owned(),
        "signing.identities" => {
            "[{ token = \"OtherBot\", keys = [\"k1\"], agent = \"https://bots.example.com\" }]"
                .to_owned()
        }
        "disclosure.enabled" => "false".to_owned(),
        "disclosure.operator" => "\"Another Org\"".to_owned(),
        "disclosure.operator_url" => "\"https://example.com/\"".to_owned(),
        "disclosure.contact" => "\"mailto:crawling@example.com\"".to_owned(),
        "disclosure.public_url" => "\"https://crawlers.example.com\"".to_owned(),
        "disclosure.feed_entries" => "20".to_owned(),
        "disclosure.crawlers" => "[{ token = \"OtherBot\", name = \"Another\" }]".to_owned(),
        _ => return None,
    };
    Some(value)
}

/// The configuration file for `values`: the top-level keys, then one table per section.
fn render(values: &BTreeMap<String, String>) -> String {
    let mut top = String::new();
    let mut sections: BTreeMap<&str, String> = BTreeMap::new();
    for (key, value) in values {
        match key.split_once('.') {
            None => top.push_str(&format!("{key} = {value}\n")),
            Some((section, name)) => {
                sections.entry(section).or_default().push_str(&format!("{name} = {value}\n"));
            }
        }
    }
    for (section, lines) in sections {
        top.push_str(&format!("[{section}]\n{lines}"));
    }
    top
}

/// The status of a new connection's `GET url` with `headers` (0: closed without an answer).
pub(super) async fn status(proxy: SocketAddr, url: &str, headers: &str) -> u16 {
    let Ok(mut s) = tokio::net::TcpStream::connect(proxy).await else { return 0 };
    let head = format!("GET {url} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n");
    if s.write_all(head.as_bytes()).await.is_err() {
        return 0;
    }
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The status line of a new CONNECT to `target`.
pub(super) async fn connect(proxy: SocketAddr, target: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 256];
    let n = tokio::time::timeout(WAIT, s.read(&mut buf)).await.unwrap().unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or_default().to_owned()
}

const UA: &str = "User-Agent: test/1.0\r\n";

/// What a client sees of `key` at its base value (`changed: false`) or at its other value,
/// for the keys whose behaviour is cheap to observe: `None` for the others. Both sides are
/// checked, so a probe that cannot tell them apart fails.
async fn probe(key: &str, changed: bool, fx: &Fixture, p: &ProxyProcess) -> Option<String> {
    let base = fx.origin.base();
    let proxy = p.proxy_addr;
    let seen = match key {
        // No token header, no User-Agent: the default token decides.
        "policy.default_token" => status(proxy, &format!("{base}/other/1"), "").await.to_string(),
        // The User-Agent names OtherBot, which the token sources then no longer read.
        "policy.token_sources" => {
            status(proxy, &format!("{base}/other/1"), "User-Agent: OtherBot/1.0\r\n")
                .await
                .to_string()
        }
        "policy.token_header" => {
            status(proxy, &format!("{base}/other/1"), "X-Crawler-Token: OtherBot\r\n")
                .await
                .to_string()
        }
        // /PRIVATE/1 read as /private/1 (robots.txt disallows it) where the case is folded.
        "policy.fold_case" | "policy.fold_case_sites" => {
            status(proxy, &format!("{base}/PRIVATE/1"), UA).await.to_string()
        }
        // A disallow robots.txt says as report-only is forwarded.
        "policy.mode" => status(proxy, &format!("{base}/private/1"), UA).await.to_string(),
        "exceptions" => status(proxy, &format!("{base}/held/1"), UA).await.to_string(),
        "access.users_file" => status(proxy, &format!("{base}/page"), UA).await.to_string(),
        "access.allow_clients" => status(proxy, &format!("{base}/page"), UA).await.to_string(),
        "access.allow_destinations" => status(proxy, &format!("{base}/page"), UA).await.to_string(),
        // One request per 100 s to the origin, and none may wait 50 ms.
        "pacing.sites" => {
            let url = format!("{base}/page");
            format!("{} {}", status(proxy, &url, UA).await, status(proxy, &url, UA).await)
        }
        "https.mode" => connect(proxy, "127.0.0.1:443").await,
        "https.connect_ports" => connect(proxy, "127.0.0.1:8443").await,
        // Whether an allowed request gets a record: its record comes before the refusal's.
        "audit.all_decisions" => {
            let audit = fx.at("state").join("audit.jsonl");
            let count = |action: &str| {
                let text = std::fs::read_to_string(&audit).unwrap_or_default();
                text.lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .filter(|r| r["event.action"] == action)
                    .count()
            };
            let (allowed, refused) = (count("robots_allow"), count("robots_disallow"));
            status(proxy, &format!("{base}/page"), UA).await;
            status(proxy, &format!("{base}/private/2"), UA).await;
            super::support::wait_until("the refusal's record", || {
                count("robots_disallow") > refused
            })
            .await;
            (count("robots_allow") > allowed).to_string()
        }
        // The disclosure the key directory listener serves.
        "disclosure.enabled" => {
            super::support::get(&format!("http://{}/crawlers.json", directory(p)))
                .await
                .0
                .to_string()
        }
        "disclosure.operator" | "disclosure.contact" | "disclosure.crawlers" => {
            let url = format!("http://{}/crawlers.json", directory(p));
            let (code, json) = get_json(&url).await;
            assert_eq!(code, 200, "{json:#}");
            match key {
                "disclosure.operator" => json["operator"]["name"].to_string(),
                "disclosure.contact" => json["operator"]["contact"].to_string(),
                _ => json["crawlers"][0]["name"].to_string(),
            }
        }
        // A new origin's robots.txt fetch is logged at debug.
        "log.level" => {
            let before = p.stderr().len();
            let fresh = Origin::start(ROBOTS).await;
            status(proxy, &format!("{}/page", fresh.base()), UA).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            (p.stderr()[before..].contains(" DEBUG ")).to_string()
        }
        _ => return None,
    };
    let want = match (key, changed) {
        ("policy.default_token", false) => "200",
        ("policy.default_token", true) => "403",
        ("policy.token_sources", false) => "403",
        ("policy.token_sources", true) => "200",
        ("policy.token_header", false) => "200",
        ("policy.token_header", true) => "403",
        ("policy.fold_case" | "policy.fold_case_sites", false) => "200",
        ("policy.fold_case" | "policy.fold_case_sites", true) => "403",
        ("policy.mode", false) => "403",
        ("policy.mode", true) => "200",
        ("exceptions", false) => "200",
        ("exceptions", true) => "403",
        ("access.users_file", false) => "200",
        ("access.users_file", true) => "407",
        ("access.allow_clients", false) => "200",
        ("access.allow_clients", true) => "0",
        ("access.allow_destinations", false) => "200",
        ("access.allow_destinations", true) => "403",
        ("pacing.sites", false) => "200 200",
        ("pacing.sites", true) => "200 429",
        ("https.mode", false) => "HTTP/1.1 200",
        ("https.mode", true) => "HTTP/1.1 403",
        ("https.connect_ports", false) => "HTTP/1.1 403",
        ("https.connect_ports", true) => "HTTP/1.1 200",
        ("audit.all_decisions", false) => "false",
        ("audit.all_decisions", true) => "true",
        ("disclosure.enabled", false) => "200",
        ("disclosure.enabled", true) => "404",
        ("disclosure.operator", false) => "\"Example Org\"",
        ("disclosure.operator", true) => "\"Another Org\"",
        ("disclosure.contact", false) => "\"mailto:bots@example.com\"",
        ("disclosure.contact", true) => "\"mailto:crawling@example.com\"",
        ("disclosure.crawlers", false) => "\"Other\"",
        ("disclosure.crawlers", true) => "\"Another\"",
        ("log.level", false) => "false",
        ("log.level", true) => "true",
        _ => unreachable!("every probe has both sides"),
    };
    assert!(
        seen.starts_with(want),
        "{key} {}: a client sees {seen:?}, not {want:?}",
        if changed { "at its other value" } else { "at its base value" }
    );
    Some(seen)
}

/// The key directory listener's address, as the process printed it.
fn directory(p: &ProxyProcess) -> String {
    let log = p.stderr();
    let line = log.lines().find_map(|l| l.strip_prefix("robots-proxy key directory listening on "));
    line.expect("the key directory listens").trim().to_owned()
}

/// Sends SIGHUP and waits for reload number `n` to be applied; panics with the errors when it
/// is refused. What the process logged for it.
async fn sighup(p: &ProxyProcess, n: usize, key: &str) -> String {
    let before = p.stderr().len();
    p.signal("HUP");
    for _ in 0..500 {
        let log = p.stderr();
        if log.contains("SIGHUP: the new configuration is refused") {
            panic!("changing {key} is refused:\n{}", &log[before..]);
        }
        if log.matches("SIGHUP: configuration reloaded").count() >= n {
            return log[before..].to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("reload {n} ({key}) never applied:\n{}", &p.stderr()[before..]);
}

/// `GET /api/reload/preview`: the configuration on disk against the one in force.
async fn in_force(p: &ProxyProcess, key: &str) {
    let (code, preview) = get_json(&format!("{}/api/reload/preview", p.admin())).await;
    assert_eq!(code, 200, "{key}: {preview:#}");
    let empty = |part: &str| preview[part].as_array().is_some_and(Vec::is_empty);
    assert!(
        empty("changed") && empty("restart_required"),
        "{key}: after the reload the proxy does not report the file as in force: {preview:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_every_reloadable_key() {
    let started = std::time::Instant::now();
    let fx = Fixture::new().await;
    let keys = reloadable_keys();
    let missing: Vec<&String> = keys.iter().filter(|k| another_value(k, &fx).is_none()).collect();
    assert!(missing.is_empty(), "reloadable keys with no other value in the table: {missing:?}");
    let base = fx.base();
    let file = fx.at("robots-proxy.toml");
    write_atomically(&file, &render(&base));
    // The harness's ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS would win over the file.
    let p = ProxyProcess::start_under(
        "unset ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS",
        &["--config", file.to_str().unwrap()],
        &[],
    );
    let mut probed = Vec::new();
    for key in &keys {
        probe(key, false, &fx, &p).await;
    }
    for (n, key) in keys.iter().enumerate() {
        let mut values = base.clone();
        let value = another_value(key, &fx).unwrap();
        assert_ne!(base.get(key), Some(&value), "{key}: the other value is the base one");
        values.insert(key.clone(), value);
        write_atomically(&file, &render(&values));
        let log = sighup(&p, n + 1, key).await;
        assert!(
            log.lines()
                .any(|l| l.contains("SIGHUP: changed") && l.contains(&format!("key={key} "))),
            "the reload does not report {key} as changed:\n{log}"
        );
        in_force(&p, key).await;
        if probe(key, true, &fx, &p).await.is_some() {
            probed.push(key.as_str());
        }
    }
    // The last key back at its base value: what it changed is undone.
    write_atomically(&file, &render(&base));
    sighup(&p, keys.len() + 1, "the base").await;
    in_force(&p, "the base").await;
    for key in &probed {
        probe(key, false, &fx, &p).await;
    }
    assert!(probed.len() >= 19, "{probed:?}");

    // Every key of [signing] at once taken away, with the key directory listening: `serve`
    // refuses to start so (the directory would publish no key), so a reload refuses it too,
    // rather than report it applied while the directory goes on publishing the old keys.
    let mut values = base.clone();
    values.insert("signing.keys".into(), "[]".into());
    write_atomically(&file, &render(&values));
    let (code, report) = super::support::post_json(&format!("{}/api/reload", p.admin())).await;
    assert_eq!(code, 422, "{report:#}");
    let errors = report["errors"].as_array().unwrap();
    assert!(errors.iter().any(|e| e["key"] == "signing.keys"), "{report:#}");
    eprintln!("{} keys reloaded, {} probed, in {:?}", keys.len(), probed.len(), started.elapsed());
}
