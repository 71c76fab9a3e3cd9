//! Issue 42: what an origin or a crawler writes must not rewrite what an operator sees. An
//! origin serves a robots.txt full of terminal escape sequences (ESC, OSC, C1 CSI, NEL), bidi
//! overrides and Unicode line separators; a crawler asks for a URL with some of them in its
//! path. Then every sink is checked on its bytes: the 403 text body, the text log, the JSON log,
//! the audit file, `evidence`, `check --explain` and `audit verify` show none of them raw, and
//! still say what was decided.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use base64ct::Encoding;
use sha2::Digest;

use super::support::{
    direct_client, proxied_client, run, wait_until, InProcess, Origin, ProxyProcess,
};

/// A robots.txt that tries to rewrite the screen: a group value that clears it and sets the
/// title, a comment that draws a fake "allowed" verdict over the real one and opens an OSC that
/// swallows what follows, a Sitemap line that does the same with C1 controls.
const HOSTILE: &str = "User-agent: * \u{1b}[2J\u{1b}[31mRED\u{1b}]0;TITLE\u{7}\u{1b}[0m\u{2028}\u{85}\u{9b}2J\u{202e}x\n\
Disallow: /private\n\
# \u{1b}[6A\u{1b}[2K\u{1b}[1Gdecision:   allowed: no rule matches\u{1b}]0;\n\
Sitemap: https://x.example/s.xml\u{1b}[2K\u{9b}1Gallowed    (no rule matched)\u{9d}0;\u{2029}\n\
Allow: /\n";

/// The characters no terminal sink may carry raw, listed here independently of the crate's
/// own set: C0 controls but tab and line feed, DEL, C1, the bidi controls, the separators.
fn is_hostile(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{61c}' | '\u{200e}'
        | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Panics, naming `what`, when `bytes` hold a hostile character raw (or are not UTF-8).
fn assert_clean(what: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{what}: not UTF-8: {e}"));
    let raw: Vec<char> = text.chars().filter(|&c| is_hostile(c)).collect();
    assert!(raw.is_empty(), "{what} carries {raw:?} raw:\n{text:?}");
}

/// The audit file's lines, each checked: no raw U+2028/U+2029/C1 bytes, and strict JSON.
fn audit_lines(path: &Path) -> Vec<serde_json::Value> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8(bytes).expect("the audit file is UTF-8");
    let mut records = Vec::new();
    for line in text.split_terminator('\n') {
        assert!(
            !line.chars().any(|c| matches!(c, '\u{80}'..='\u{9f}' | '\u{2028}' | '\u{2029}')),
            "a raw C1 control or line separator in the audit line {line:?}"
        );
        records.push(serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")));
    }
    records
}

/// `GET target` through the proxy on a raw connection, so the request-target carries raw
/// UTF-8 (what hyper accepts in a path, and a crawler library would percent-encode): the
/// answer's status line.
fn raw_get(proxy: std::net::SocketAddr, target: &str) -> String {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let host = target.split('/').nth(2).unwrap();
    let req = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ExampleBot/1.0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outsider_text_reaches_no_sink_raw() {
    let origin = Origin::start(HOSTILE).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", dir), ("ROBOTS_PROXY_LOG__LEVEL", "info")];
    let proxy = ProxyProcess::start(&[], &env);
    let audit = state.path().join("audit.jsonl");
    let base = origin.base();

    // M1: the 403 text body, which a crawler's operator reads in a terminal.
    let url = format!("{base}/private/report.pdf");
    let client = proxied_client(proxy.proxy_addr);
    let resp = client.get(&url).header("user-agent", "ExampleBot/1.0").send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let body = resp.bytes().await.unwrap();
    assert_clean("the 403 text body", &body);
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("Group:         user-agent: * \\x1b[2J\\x1b[31mRED"), "{body}");
    assert!(body.contains("\\u2028\\u0085\\u009b2J\\u202ex (line 1)"), "{body}");

    // The 403 in JSON: C1 controls and line separators as `\uXXXX`, the values unchanged.
    let resp = client
        .get(&url)
        .header("user-agent", "ExampleBot/1.0")
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let body = resp.bytes().await.unwrap();
    assert_clean("the 403 JSON body", &body);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(json["group"].as_str().unwrap().contains("\u{2028}\u{85}\u{9b}2J\u{202e}x"), "{json}");

    // M2: a URL with a bidi override, a line separator and a C1 CSI, in the text log.
    let status = raw_get(proxy.proxy_addr, &format!("{base}/private/\u{202e}a\u{2028}b\u{9b}2K"));
    assert!(status.contains(" 403 "), "{status}");
    // Logged once the exchange ends, which may be after the client read the answer.
    wait_until("the hostile URL's refusal is logged", || {
        proxy.stderr().matches(" refused").count() >= 3
    })
    .await;
    assert_clean("the text log", proxy.stderr().as_bytes());
    assert!(proxy.stderr().contains("/private/\\u202ea\\u2028b\\u009b2K"), "{}", proxy.stderr());

    // L3: the audit file, line by line; the values are unchanged once parsed.
    wait_until("the three refusals are recorded", || {
        audit_lines(&audit).iter().filter(|r| r["event.action"] == "robots_disallow").count() >= 3
    })
    .await;
    drop(proxy);
    let records = audit_lines(&audit);
    let version = records.iter().find(|r| r["event.action"] == "robots_version").unwrap();
    assert_eq!(version["robots.body"], HOSTILE);
    let blocked = records.iter().find(|r| r["event.action"] == "robots_disallow").unwrap();
    assert_eq!(blocked["robots.group"], "* \u{1b}[2J\u{1b}[31mRED\u{1b}]0;TITLE\u{7}\u{1b}[0m\u{2028}\u{85}\u{9b}2J\u{202e}x (line 1)");
    let verified = run(&["audit", "verify", audit.to_str().unwrap()], &[]);
    assert_eq!(verified.status.code(), Some(0), "{}", String::from_utf8_lossy(&verified.stderr));
    assert_clean("audit verify", &verified.stdout);

    // H1: `evidence`, for a person.
    let at = blocked["@timestamp"].as_str().unwrap();
    let shown = run(
        &[
            "evidence",
            &url,
            "--at",
            at,
            "--token",
            "ExampleBot",
            "--audit",
            audit.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(shown.status.code(), Some(0), "{}", String::from_utf8_lossy(&shown.stderr));
    assert_clean("evidence", &shown.stdout);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("decision:   disallowed"), "{text}");
    assert!(text.contains("# \\x1b[6A\\x1b[2K\\x1b[1Gdecision:   allowed"), "{text}");
    assert!(text.contains("records for this URL within"), "{text}");
    let json = run(
        &[
            "evidence",
            &url,
            "--at",
            at,
            "--token",
            "ExampleBot",
            "--json",
            "--audit",
            audit.to_str().unwrap(),
        ],
        &[],
    );
    assert_clean("evidence --json", &json.stdout);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["group"], blocked["robots.group"]);

    // H2: `check --explain` on the same file.
    let file = state.path().join("hostile-robots.txt");
    std::fs::write(&file, HOSTILE).unwrap();
    let checked = run(
        &[
            "check",
            "--robots",
            file.to_str().unwrap(),
            "--agent",
            "TestBot",
            "--explain",
            "https://example.com/private/x",
        ],
        &[],
    );
    assert_eq!(checked.status.code(), Some(1), "{}", String::from_utf8_lossy(&checked.stderr));
    assert_clean("check --explain", &checked.stdout);
    let text = String::from_utf8_lossy(&checked.stdout);
    assert!(text.contains("disallowed https://example.com/private/x"), "{text}");
    assert!(text.contains("sitemap: https://x.example/s.xml\\x1b[2K\\u009b1G"), "{text}");
}

/// L4: with `log.format = "json"` every line of standard error is a JSON object (the startup
/// lines too), and no field is a Rust debug form such as `Some("ExampleBot")`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_log_is_json_on_every_line() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let env = [("ROBOTS_PROXY_LOG__FORMAT", "json"), ("ROBOTS_PROXY_LOG__LEVEL", "info")];
    let proxy = ProxyProcess::start(&[], &env);
    let client = proxied_client(proxy.proxy_addr);
    let url = format!("{}/private/\u{e9}", origin.base());
    let resp = client.get(&url).header("user-agent", "ExampleBot/1.0").send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    // Issue 42: a URL with a bidi override, a line separator and a C1 CSI stays in its field,
    // escaped on the line and exact once parsed.
    let hostile = format!("{}/private/\u{202e}a\u{2028}b\u{9b}2K", origin.base());
    assert!(raw_get(proxy.proxy_addr, &hostile).contains(" 403 "));
    wait_until("both refusals are logged", || proxy.stderr().matches("\"refused\"").count() >= 2)
        .await;
    let log = proxy.stderr();
    assert_clean("the JSON log", log.as_bytes());
    let urls: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["url"].clone())
        .collect();
    assert!(urls.iter().any(|u| *u == hostile.as_str()), "{log}");
    let mut refused = None;
    for line in log.lines() {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert!(value.is_object(), "{line}");
        assert!(!line.contains("Some("), "a Rust debug form in {line}");
        if value["message"] == "refused" {
            refused = Some(value);
        }
    }
    let refused = refused.expect("a refused line");
    assert_eq!(refused["token"], "ExampleBot", "{refused}");
    assert!(log.contains("robots-proxy listening on "), "{log}");
}

/// L4: a fatal error at start, before the logging layer is installed (here the configuration
/// does not load), is a JSON line too when the configuration asks for JSON: by the
/// environment, or by the file's `[log] format` beside the key that fails; as text otherwise.
#[test]
fn a_fatal_error_at_start_is_json_in_json_mode() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[log]\nformat = \"json\"\n[proxy]\nlistn = \"127.0.0.1:1\"\n").unwrap();
    let file = file.to_str().unwrap();
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, "[proxy]\nlistn = \"127.0.0.1:1\"\n").unwrap();
    let plain = plain.to_str().unwrap();
    let by_env = [("ROBOTS_PROXY_LOG__FORMAT", "json")];
    for (args, env) in
        [(["serve", "--config", file], &[][..]), (["serve", "--config", plain], &by_env[..])]
    {
        let out = run(&args, env);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.trim().is_empty());
        for line in err.lines() {
            let value: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            assert_eq!(value["level"], "ERROR", "{line}");
            assert!(value["message"].as_str().unwrap().contains("listn"), "{line}");
        }
    }
    let out = run(&["serve", "--config", plain], &[]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("robots-proxy serve: "), "{err}");
}

/// L6 and H3: every admin answer says `nosniff`; the GETs that make the gateway fetch a
/// robots.txt or read and diff its versions are refused when a browser sends them for another
/// site; the page runs only its own scripts, named by hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_answers_are_hardened() {
    let proxy = InProcess::start().await;
    let client = direct_client();
    let admin = proxy.admin();
    for path in ["/", "/api/summary", "/metrics", "/healthz", "/api/exceptions", "/nowhere"] {
        let resp = client.get(format!("{admin}{path}")).send().await.unwrap();
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff", "{path}");
    }
    let versions = format!("{admin}/api/robots/versions?authority=http://a.test&diff=1");
    let robots = format!("{admin}/robots?url=http://127.0.0.1:9/x");
    for url in [&versions, &robots] {
        let cross = client.get(url).header("sec-fetch-site", "cross-site").send().await.unwrap();
        assert_eq!(cross.status().as_u16(), 403, "{url}");
        let other = client.get(url).header("origin", "http://evil.example").send().await.unwrap();
        assert_eq!(other.status().as_u16(), 403, "{url}");
    }
    let own = client.get(&versions).header("sec-fetch-site", "same-origin").send().await.unwrap();
    assert_eq!(own.status().as_u16(), 200);
    assert_eq!(own.headers()["x-content-type-options"], "nosniff");
    let page = client.get(format!("{admin}/")).send().await.unwrap();
    let policy = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    let scripts = policy.split(';').find(|d| d.trim().starts_with("script-src")).unwrap();
    assert!(!scripts.contains("unsafe-inline"), "{policy}");
    assert_eq!(scripts.matches("'sha256-").count(), 2, "{policy}");
    // The page's style sheets too: named by hash, each one the page holds, nothing inline else.
    let styles = policy.split(';').find(|d| d.trim().starts_with("style-src")).unwrap();
    assert!(!styles.contains("unsafe-inline"), "{policy}");
    let html = page.text().await.unwrap();
    let mut sheets = 0;
    for block in html.split("<style>").skip(1) {
        let sheet = &block[..block.find("</style>").unwrap()];
        let digest = sha2::Sha256::digest(sheet.as_bytes());
        let hash = format!("'sha256-{}'", base64ct::Base64::encode_string(&digest));
        assert!(styles.contains(&hash), "{hash} not in {policy}");
        sheets += 1;
    }
    assert_eq!(styles.matches("'sha256-").count(), sheets, "{policy}");
    assert!(sheets >= 1 && !html.contains(" style=\""), "an inline style attribute");
}

/// Issue 42 (L6): the proxy's own answers (a 403 in text and in JSON, a 400 for a request that
/// is not a proxy request) say `nosniff`; a response forwarded from the origin goes on as it
/// came, without one added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxys_own_answers_say_nosniff() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let proxy = InProcess::start().await;
    let client = proxied_client(proxy.proxy_addr);
    let url = format!("{}/private/x", origin.base());
    for accept in ["text/plain", "application/json"] {
        let resp = client
            .get(&url)
            .header("user-agent", "ExampleBot/1.0")
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 403, "{accept}");
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff", "{accept}");
    }
    let forwarded = client
        .get(format!("{}/open", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert!(!forwarded.headers().contains_key("x-content-type-options"), "{forwarded:?}");
    let direct = direct_client().get(format!("http://{}/", proxy.proxy_addr)).send().await.unwrap();
    assert_eq!(direct.status().as_u16(), 400);
    assert_eq!(direct.headers()["x-content-type-options"], "nosniff");
}

/// L1: the status page shows bidi controls, line separators and controls as `\uXXXX`, so what
/// the operator sees is the bytes (`/private/<U+202E>.exe/gpj` is not shown as `…/jpg/exe.`).
/// The page's own `shown` function, run by Node.js when it is installed (skipped otherwise).
#[test]
fn the_status_page_shows_bidi_and_controls_escaped() {
    let page = include_str!("../../crates/admin/src/page.html");
    let start = page.find("function shown(text) {").expect("the page's shown function");
    let end = start + page[start..].find("\n}\n").expect("its end") + 2;
    let hostile = "/private/\u{202e}.exe/gpj \u{2066}x\u{2069} a\u{2028}b \u{1b}[2J \u{85} \u{61c}";
    let script = format!(
        "{}\nprocess.stdout.write(shown({}));",
        &page[start..end],
        serde_json::to_string(hostile).unwrap()
    );
    let Ok(out) = std::process::Command::new("node").arg("-e").arg(&script).output() else {
        eprintln!("skipped: no node on the PATH");
        return;
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_clean("the status page's text", text.as_bytes());
    assert_eq!(
        text,
        "/private/\\u202e.exe/gpj \\u2066x\\u2069 a\\u2028b \\u001b[2J \\u0085 \\u061c"
    );
}
