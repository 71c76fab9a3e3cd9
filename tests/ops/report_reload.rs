//! Report-only mode reloads on SIGHUP like the rest of `[policy]`, in the real binary: a
//! gateway switched from enforce to report forwards what it refused a moment ago, writes it as
//! `would_block`, counts it, and back to enforce refuses it again.

use super::support::{get, get_json, sample, write_atomically, KeepAlive, Origin, ProxyProcess};
use crate::proxy::support::raw_get;

/// With a users file (`users`): `example` is tied to ExampleBot, `tester` to no token. Report
/// mode for a token is granted only to a user tied to it (controls 1).
fn config(state: &std::path::Path, policy: &str) -> String {
    let users = state.join("users");
    format!(
        "state_dir = {state:?}\n[access]\nusers_file = {users:?}\n[policy]\n{policy}\n\
         [https]\nmode = \"reject\"\n"
    )
}

/// `Proxy-Authorization` for `user`, password `pw`.
fn basic(user: &str) -> String {
    use base64ct::Encoding;
    let token = base64ct::Base64::encode_string(format!("{user}:pw").as_bytes());
    format!("Proxy-Authorization: Basic {token}\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_switches_enforce_to_report_and_back() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    let hash = robots_proxy::access::hash_password("pw", &argon2::Params::default()).unwrap();
    let users = format!("example:{hash}:ExampleBot\ntester:{hash}\n");
    write_atomically(&state.path().join("users"), &users);
    write_atomically(&file, &config(state.path(), "mode = \"enforce\"\n"));
    let proxy = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let url = format!("{}/private/1", origin.base());
    let ua = &basic("example");
    let tester = &basic("tester");
    let mut kept = KeepAlive::connect(proxy.proxy_addr).await;
    assert_eq!(kept.get_with(&url, tester).await.0, 403);

    write_atomically(&file, &config(state.path(), "mode = \"report\"\n"));
    proxy.signal("HUP");
    proxy.wait_for_stderr("SIGHUP: configuration reloaded", 1).await;
    let resp = raw_get(proxy.proxy_addr, &url, "x", ua).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert!(resp.headers["proxy-status"].contains("report only: would be refused"), "{resp:?}");
    assert_eq!(
        kept.get_with(&url, tester).await.0,
        200,
        "a connection opened before the reload too"
    );
    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    let series = "robots_proxy_would_block_total{token=\"ExampleBot\",action=\"robots_disallow\"}";
    assert_eq!(sample(&metrics, series), 1.0, "{metrics}");
    let (_, summary) = get_json(&format!("{}/api/summary", proxy.admin())).await;
    assert_eq!(summary["would_block"]["total"], 2, "{summary}");
    assert_eq!(summary["would_block"]["top_tokens"][0]["name"], "ExampleBot", "{summary}");

    // Per token under enforce: ExampleBot (its tied user) reported, another token (`test`)
    // refused, and so is a user who only names ExampleBot.
    write_atomically(&file, &config(state.path(), "report_tokens = [\"ExampleBot\"]\n"));
    proxy.signal("HUP");
    proxy.wait_for_stderr("SIGHUP: configuration reloaded", 2).await;
    assert_eq!(raw_get(proxy.proxy_addr, &url, "x", ua).await.status, 200);
    assert_eq!(kept.get_with(&url, tester).await.0, 403);
    let claim = format!("{tester}X-Robots-Product-Token: ExampleBot\r\n");
    assert_eq!(raw_get(proxy.proxy_addr, &url, "x", &claim).await.status, 403);

    let audit = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    let reported = audit.lines().filter(|l| l.contains("\"would_block\"")).count();
    assert!(reported >= 2, "{audit}");
}
