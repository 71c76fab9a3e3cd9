//! The public disclosure of the crawlers (issue 21, part 2) on the key directory listener of
//! the real binary: `/crawlers`, `/crawlers.json`, `/crawlers.atom` and the Signature Agent
//! Cards list every identity with the rules generated from the running configuration; a reload
//! that adds an identity adds a feed entry, a restart with the same configuration does not;
//! nothing private (users, exceptions' ids and references, allow_destinations, the users
//! file) appears anywhere; config errors name the key.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use super::support::{get, get_json, run, write_atomically, ProxyProcess};

/// Strings of the configuration that must never be disclosed.
const PRIVATE: &[&str] = &[
    "secretuser7",
    "teamuser9",
    "exc-secret-id",
    "legal.internal.example",
    "contract-4711",
    "grantor-secret",
    "partner-secret.example",
    "10.99.77.0",
    "users.txt",
    "argon2",
];

/// A users file line for `name` made by `user hash`, as an operator makes it.
fn users_line(name: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["user", "hash", name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"pw\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The configuration: `ExampleBot` signed (and `extra` identities), with users, exceptions and
/// destinations that are private.
fn config(state: &Path, extra: &str) -> String {
    format!(
        r#"state_dir = {state:?}

[robots]
max_age = "12h"

[policy]
report_users = ["teamuser9"]

[pacing]
enabled = true
default_rps = 2.0
sites = [{{ authority = "https://partner-secret.example", rps = 9.0 }}]

[usage]
crawlers = [{{ token = "ExampleBot", purposes = ["train-ai"] }}, {{ user = "teamuser9", purposes = ["search"] }}]

[access]
users_file = {users:?}
allow_destinations = ["10.99.77.0/24"]

[signing]
directory_listen = "127.0.0.1:0"
keys = [{{ name = "k1" }}]
identities = [
  {{ token = "ExampleBot", users = ["secretuser7"], keys = ["k1"], agent = "https://bots.example.com" }},
  {{ user = "teamuser9", keys = ["k1"], agent = "https://bots.example.com" }},
{extra}]

[disclosure]
enabled = true
operator = "Example Org"
contact = "mailto:crawlers@example.com"
public_url = "https://bots.example.com"
crawlers = [{{ token = "ExampleBot", name = "Example Bot", description = "Indexes cat pictures.", trigger = "crawler", ip_ranges = ["192.0.2.0/24"] }}]

[[exceptions]]
id = "exc-secret-id"
authorities = ["partner-secret.example"]
tokens = ["ExampleBot"]
users = ["secretuser7"]
effect = "allow"
reference = "https://legal.internal.example/contract-4711"
granted_by = "grantor-secret@example.com"
expires = "2099-01-01T00:00:00Z"
"#,
        users = state.join("users.txt"),
    )
}

/// Starts the binary on `file`: the process and the directory listener's address.
fn start(file: &Path) -> (ProxyProcess, SocketAddr) {
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let line = p
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix("robots-proxy key directory listening on ").map(str::to_owned))
        .unwrap_or_else(|| panic!("no directory line:\n{}", p.stderr()));
    (p, line.trim().parse().unwrap())
}

/// Every disclosed document: the three and each crawler's card and IP list.
async fn documents(dir: SocketAddr, tokens: &[&str]) -> Vec<(String, String)> {
    let mut paths = vec!["/crawlers".to_owned(), "/crawlers.json".into(), "/crawlers.atom".into()];
    for t in tokens {
        paths.push(format!("/crawlers/{t}.json"));
        paths.push(format!("/crawlers/{t}/ips.json"));
    }
    let mut out = Vec::new();
    for path in paths {
        let (status, body) = get(&format!("http://{dir}{path}")).await;
        assert_eq!(status, 200, "{path}: {body}");
        out.push((path, body));
    }
    out
}

fn entries(atom: &str) -> usize {
    atom.matches("<entry>").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disclosure_lists_the_crawlers_with_generated_rules_and_a_feed_of_changes() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let made = run(&["keys", "new", "k1"], &[("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap())]);
    assert!(made.status.success(), "{made:?}");
    write_atomically(
        &state.join("users.txt"),
        &(users_line("secretuser7") + &users_line("teamuser9")),
    );
    let file = dir.path().join("robots-proxy.toml");
    write_atomically(&file, &config(&state, ""));
    let (p, addr) = start(&file);

    // The key id is the directory's kid.
    let resp = super::support::direct_client()
        .get(format!("http://{addr}/.well-known/http-message-signatures-directory"))
        .header("host", "bots.example.com")
        .send()
        .await
        .unwrap();
    let directory: serde_json::Value = resp.json().await.unwrap();
    let kid = directory["keys"][0]["kid"].as_str().unwrap().to_owned();

    let (status, json) = get_json(&format!("http://{addr}/crawlers.json")).await;
    assert_eq!(status, 200);
    let crawlers = json["crawlers"].as_array().unwrap();
    assert_eq!(crawlers.len(), 1, "{json:#}");
    let bot = &crawlers[0];
    assert_eq!(bot["name"], "Example Bot");
    assert_eq!(bot["product_tokens"], serde_json::json!(["ExampleBot"]));
    assert_eq!(bot["purposes"], serde_json::json!(["train-ai"]));
    assert_eq!(bot["contact"], "mailto:crawlers@example.com");
    assert_eq!(bot["signature_agent"]["url"], "https://bots.example.com");
    assert_eq!(bot["signature_agent"]["key_ids"], serde_json::json!([kid]));
    assert_eq!(bot["ip_ranges"], serde_json::json!(["192.0.2.0/24"]));
    let robots = &bot["honours"]["robots_txt"];
    assert_eq!(robots["standard"], "RFC 9309");
    // `teamuser9` is report-only (issue 41: disclosed per crawler, counted, not named).
    assert_eq!(robots["enforcement"], "partly report-only");
    assert_eq!(robots["report_only_users"], 1);
    assert_eq!(robots["https"], "per-path");
    assert_eq!(robots["cache_max_age_seconds"], 43200, "generated from robots.max_age");
    let rules = robots["status_rules"].to_string();
    assert!(rules.contains("\"5xx\"") && rules.contains("everything disallowed"), "{rules}");
    assert!(rules.contains("\"4xx\"") && rules.contains("everything allowed"), "{rules}");
    assert_eq!(bot["honours"]["pace"]["max_rps_per_site"], 2.0);
    assert_eq!(bot["honours"]["pace"]["sites_with_own_pace"], 1);
    assert_eq!(bot["honours"]["usage"]["modes"][0]["mode"], "enforce");
    assert_eq!(bot["honours"]["usage"]["tdmrep"], true);
    assert_eq!(
        bot["honours"]["exceptions"],
        serde_json::json!({"allow": 1, "disallow": 0, "per_user": 1})
    );

    let (_, html) = get(&format!("http://{addr}/crawlers")).await;
    assert!(html.contains("Example Bot") && html.contains("RFC 9309"), "{html}");
    assert!(html.contains("robots.txt answered 5xx"), "{html}");
    assert!(!html.contains("<script") && !html.contains("rel=\"stylesheet\""), "{html}");
    // The page's one style sheet is named by its hash, nothing inline else applies; and the
    // validators are read as the key directory reads them: If-Modified-Since from
    // Last-Modified on answers 304, as If-None-Match with the ETag does (review-identity 12).
    let client = super::support::direct_client();
    let page = client.get(format!("http://{addr}/crawlers")).send().await.unwrap();
    let h = page.headers().clone();
    let csp = h["content-security-policy"].to_str().unwrap().to_owned();
    let sheet = html.split("<style>").nth(1).and_then(|b| b.split("</style>").next()).unwrap();
    let hash = {
        use base64ct::{Base64, Encoding};
        use sha2::{Digest, Sha256};
        Base64::encode_string(&Sha256::digest(sheet.as_bytes()))
    };
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains(&format!("style-src 'sha256-{hash}'")), "{csp}");
    let modified = h["last-modified"].to_str().unwrap().to_owned();
    let etag = h["etag"].to_str().unwrap().to_owned();
    for (name, value) in [("if-modified-since", modified.clone()), ("if-none-match", etag)] {
        let url = format!("http://{addr}/crawlers");
        let resp = client.get(&url).header(name, &value).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 304, "{name}: {value}");
    }
    let earlier =
        httpdate::parse_http_date(&modified).unwrap() - std::time::Duration::from_secs(10);
    let resp = client
        .get(format!("http://{addr}/crawlers"))
        .header("if-modified-since", httpdate::fmt_http_date(earlier))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);

    let (_, card) = get_json(&format!("http://{addr}/crawlers/ExampleBot.json")).await;
    assert_eq!(card["client_id"], "https://bots.example.com/crawlers/ExampleBot.json");
    assert_eq!(card["client_name"], "Example Bot");
    assert_eq!(
        card["jwks_uri"],
        "https://bots.example.com/.well-known/http-message-signatures-directory"
    );
    let wba = &card["web_bot_auth"];
    assert_eq!(wba["rfc9309-product-token"], "ExampleBot");
    // A report-only user and an allow exception in force: not claimed (issue 41).
    assert_eq!(wba["rfc9309-compliance"], false);
    assert_eq!(wba["trigger"], "crawler");
    assert_eq!(wba["purpose"], "train-ai");
    assert_eq!(wba["ips_uri"], "https://bots.example.com/crawlers/ExampleBot/ips.json");
    let (_, ips) = get_json(&format!("http://{addr}/crawlers/ExampleBot/ips.json")).await;
    assert_eq!(ips["prefixes"], serde_json::json!([{"ipv4Prefix": "192.0.2.0/24"}]));

    let docs = documents(addr, &["ExampleBot"]).await;
    assert_eq!(entries(&docs[2].1), 1, "{}", docs[2].1);
    for (path, body) in &docs {
        for secret in PRIVATE {
            assert!(!body.contains(secret), "{path} discloses {secret:?}:\n{body}");
        }
    }

    // A reload that adds an identity: a new feed entry naming it.
    let news = r#"  { token = "NewsBot", keys = ["k1"], agent = "https://bots.example.com" },
"#;
    write_atomically(&file, &config(&state, news));
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: configuration reloaded", 1).await;
    let (_, json) = get_json(&format!("http://{addr}/crawlers.json")).await;
    let names: Vec<&str> =
        json["crawlers"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["Example Bot", "NewsBot"], "{json:#}");
    let docs = documents(addr, &["ExampleBot", "NewsBot"]).await;
    let atom = &docs[2].1;
    assert_eq!(entries(atom), 2, "{atom}");
    assert!(atom.contains("added: NewsBot"), "{atom}");
    for (path, body) in &docs {
        for secret in PRIVATE {
            assert!(!body.contains(secret), "{path} discloses {secret:?}:\n{body}");
        }
    }
    // The same configuration again: no entry.
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: configuration reloaded", 2).await;
    let (_, atom) = get(&format!("http://{addr}/crawlers.atom")).await;
    assert_eq!(entries(&atom), 2, "{atom}");
    // A restart-only key changed (issue 41, review finding 8): the running value stays
    // disclosed, and no entry is added for a change not in force.
    let (_, before) = get_json(&format!("http://{addr}/crawlers.json")).await;
    let running = before["crawlers"][0]["honours"]["robots_txt"]["max_redirects"].clone();
    assert_ne!(running, 1);
    let restart_only =
        config(&state, news).replace("max_age = \"12h\"", "max_age = \"12h\"\nmax_redirects = 1");
    write_atomically(&file, &restart_only);
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: configuration reloaded", 3).await;
    let (_, json) = get_json(&format!("http://{addr}/crawlers.json")).await;
    assert_eq!(json["crawlers"][0]["honours"]["robots_txt"]["max_redirects"], running);
    let (_, atom) = get(&format!("http://{addr}/crawlers.atom")).await;
    assert_eq!(entries(&atom), 2, "{atom}");
    write_atomically(&file, &config(&state, news));
    drop(p);

    // A restart with the same configuration: the feed is kept, and no entry is added.
    let (_p, addr) = start(&file);
    let (_, atom) = get(&format!("http://{addr}/crawlers.atom")).await;
    assert_eq!(entries(&atom), 2, "{atom}");
    assert!(atom.contains("added: NewsBot"), "{atom}");
}

#[test]
fn disclosure_config_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    write_atomically(
        &file,
        &format!(
            "state_dir = {:?}\n\n[disclosure]\nenabled = true\noperator = \"Example Org\"\n\
             contact = \"mailto:crawlers@example.com\"\npublic_url = \"http://bots.example.com\"\n\
             crawlers = [{{ name = \"No Token\" }}, {{ token = \"Bot\", about_url = \"http://x.example\", \
             ip_ranges = [\"10.0.0.0/8\"] }}]\n",
            dir.path().join("state")
        ),
    );
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for key in [
        "disclosure.enabled",
        "disclosure.public_url",
        "disclosure.crawlers[1].token",
        "disclosure.crawlers[2].about_url",
        "disclosure.crawlers[2].ip_ranges",
    ] {
        assert!(err.contains(key), "{key} not named:\n{err}");
    }
}

/// Issue 41 (review findings 10, 11): `config check` refuses internal space declared as public
/// egress (the guard's list: IPv4-mapped private space, benchmarking, multicast) and an agent
/// URL with a password, and warns about an http:// agent and a gap between key windows.
#[test]
fn config_check_refuses_internal_egress_and_agent_credentials_and_warns_of_key_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let made = run(&["keys", "new", "a"], &[("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap())]);
    assert!(made.status.success(), "{made:?}");
    let made = run(&["keys", "new", "b"], &[("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap())]);
    assert!(made.status.success(), "{made:?}");
    let file = dir.path().join("robots-proxy.toml");
    let signing = |agent: &str| {
        format!(
            "state_dir = {state:?}\n\n[signing]\ndirectory_listen = \"127.0.0.1:0\"\nkeys = [\
             {{ name = \"a\", sign_until = \"2020-01-01T00:00:00Z\", publish_until = \"2020-01-02T00:00:00Z\" }}, \
             {{ name = \"b\", sign_from = \"2099-01-01T00:00:00Z\" }}]\n\
             identities = [{{ token = \"Bot\", keys = [\"a\", \"b\"], agent = \"{agent}\" }}]\n"
        )
    };
    for range in ["::ffff:10.0.0.0/104", "198.18.0.0/15", "224.0.0.0/4"] {
        let text = format!(
            "{}\n[disclosure]\nenabled = true\noperator = \"Example Org\"\n\
             contact = \"mailto:crawlers@example.com\"\npublic_url = \"https://bots.example.com\"\n\
             crawlers = [{{ token = \"Bot\", ip_ranges = [\"{range}\"] }}]\n",
            signing("https://bots.example.com")
        );
        write_atomically(&file, &text);
        let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{range}: {err}");
        assert!(err.contains("disclosure.crawlers[1].ip_ranges"), "{range}: {err}");
    }
    write_atomically(&file, &signing("https://user:hunter2@bots.example.com"));
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("user name or password"), "{err}");
    assert!(!err.contains("hunter2"), "the password is not repeated: {err}");

    write_atomically(&file, &signing("http://bots.example.com"));
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed
            .contains("# warning: signing.identities agent \"http://bots.example.com\" is http://"),
        "{printed}"
    );
    let gap = printed.lines().find(|l| l.contains("signing.identities Bot: no key signs from"));
    assert!(
        gap.is_some_and(|l| l.contains("until 2099-01-01T00:00:00Z: its requests leave unsigned")),
        "{printed}"
    );
}
