//! The product token as the real binary finds it in what crawlers send (issue 26.2, 26.3):
//! User-Agents with bytes outside ASCII, crawlers that name themselves without a version, and
//! tokens that never appear in a User-Agent (`Google-Extended`), against a real origin.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::{wait_until, Origin, ProxyProcess};

const ROBOTS: &str = "User-agent: ExampleBot\nDisallow: /private\n\n\
User-agent: Bytespider\nUser-agent: GoogleOther\nDisallow: /\n\n\
User-agent: Google-Extended\nDisallow: /\n\n\
User-agent: *\nAllow: /\n";

/// `GET url` through the proxy with `headers` (raw bytes, each line ending in CRLF): the status.
async fn get_raw(proxy: SocketAddr, url: &str, host: &str, headers: &[u8]) -> u16 {
    let mut request = format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n").into_bytes();
    request.extend_from_slice(headers);
    request.extend_from_slice(b"Connection: close\r\n\r\n");
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(&request).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut buf)).await;
    let head = String::from_utf8_lossy(&buf);
    head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn start_proxy(state: &tempfile::TempDir) -> ProxyProcess {
    ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap()),
            ("ROBOTS_PROXY_HTTPS__MODE", "reject"),
            ("ROBOTS_PROXY_AUDIT__FSYNC", "never"),
            ("ROBOTS_PROXY_AUDIT__ALL_DECISIONS", "true"),
        ],
    )
}

/// The audit records for `path` written so far, waiting (up to 10 s) for `n` of them.
async fn records_for(state: &tempfile::TempDir, path: &str, n: usize) -> Vec<serde_json::Value> {
    let file = state.path().join("audit.jsonl");
    let read = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|r| r["url.path"] == path)
            .collect()
    };
    wait_until(&format!("{n} audit record(s) for {path}"), || read().len() >= n).await;
    read()
}

/// A User-Agent with one Latin-1 byte keeps its product token: the group of `ExampleBot`
/// applies (403), and the record carries the User-Agent, escaped, and the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latin_1_user_agent_keeps_its_token_and_is_recorded_escaped() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&state);
    let host = origin.addr.to_string();
    let url = format!("{}/private/x", origin.base());
    let status =
        get_raw(proxy.proxy_addr, &url, &host, b"User-Agent: ExampleBot/1.0 caf\xe9\r\n").await;
    assert_eq!(status, 403, "stderr:\n{}", proxy.stderr());
    let records = records_for(&state, "/private/x", 1).await;
    let r = &records[0];
    assert_eq!(r["user_agent.original"], "ExampleBot/1.0 caf\\xE9", "{r}");
    assert_eq!(r["robots.product_token"], "ExampleBot", "{r}");
    assert_eq!(r["event.action"], "robots_disallow", "{r}");

    // The token header has no such fault to fix: a value that is not a token (a Latin-1 byte
    // in it) is not one, and the next source, the User-Agent, decides.
    let url = format!("{}/private/y", origin.base());
    let headers = b"X-Robots-Product-Token: Example\xe9Bot\r\nUser-Agent: ExampleBot/1.0\r\n";
    assert_eq!(get_raw(proxy.proxy_addr, &url, &host, headers).await, 403);
    let url = format!("{}/public", origin.base());
    let status =
        get_raw(proxy.proxy_addr, &url, &host, b"User-Agent: ExampleBot/1.0 caf\xe9\r\n").await;
    assert_eq!(status, 200);
}

/// Crawlers that name themselves in a comment without a version (Bytespider, GoogleOther) get
/// their own group, and `Google-Extended`, a token that no User-Agent carries, applies when it
/// is given explicitly, never from Googlebot's User-Agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versionless_crawlers_and_explicit_tokens_get_their_groups() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&state);
    let host = origin.addr.to_string();
    let url = format!("{}/page", origin.base());
    let bytespider = "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) \
                      Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)";
    let google_other = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; \
                        GoogleOther) Chrome/W.X.Y.Z Safari/537.36";
    let googlebot = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; \
                     Googlebot/2.1; +http://www.google.com/bot.html) Chrome/W.X.Y.Z Safari/537.36";
    for (headers, want) in [
        (format!("User-Agent: {bytespider}\r\n"), 403),
        (format!("User-Agent: {google_other}\r\n"), 403),
        (format!("User-Agent: {googlebot}\r\n"), 200),
        (format!("User-Agent: {googlebot}\r\nX-Robots-Product-Token: Google-Extended\r\n"), 403),
    ] {
        let status = get_raw(proxy.proxy_addr, &url, &host, headers.as_bytes()).await;
        assert_eq!(status, want, "{headers}");
    }
    let records = records_for(&state, "/page", 4).await;
    let tokens: Vec<&str> =
        records.iter().map(|r| r["robots.product_token"].as_str().unwrap_or("")).collect();
    assert_eq!(tokens, ["Bytespider", "GoogleOther", "Googlebot", "Google-Extended"]);
}
