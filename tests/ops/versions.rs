//! Every decision names the robots.txt version it used (issue 19): blocks under two versions
//! of a real origin's robots.txt carry the SHA-256 of the bytes served, in the audit record and
//! the 403 bodies; the audit file holds each version once, before the first record naming it,
//! and again in the new file after a SIGHUP rotation; a body that is not UTF-8 is kept in
//! base64, byte for byte.

use std::path::Path;

use base64ct::Encoding;

use super::support::{get_json, post_json, proxied_client, wait_until, Origin, ProxyProcess};

const V1: &str = "User-agent: *\nDisallow: /private\n";
const V2: &str = "# version two\nUser-agent: *\nDisallow: /secret\n";

/// The lowercase hex SHA-256 of `bytes`, computed here, independently of the proxy.
fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every whole line of `path`, parsed.
/// The records of the file but the lifecycle ones (`proxy_start`, `proxy_stop`,
/// `proxy_reconfigured`: about the process, not robots.txt), in order.
fn records(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| {
            !matches!(
                r["event.action"].as_str(),
                Some("proxy_start" | "proxy_stop" | "proxy_reconfigured")
            )
        })
        .collect()
}

fn actions(records: &[serde_json::Value]) -> Vec<String> {
    records.iter().map(|r| r["event.action"].as_str().unwrap_or("").to_owned()).collect()
}

/// Each version's `robots_version` record comes once (per authority), and before every record
/// that names it.
fn check_announced_once_before_use(records: &[serde_json::Value]) {
    let mut announced = std::collections::HashSet::new();
    for r in records {
        let Some(digest) = r["robots.sha256"].as_str() else { continue };
        let key = (digest.to_owned(), r["robots.authority"].to_string());
        if r["event.action"] == "robots_version" {
            assert!(announced.insert(key), "announced twice in one file: {r}");
        } else {
            assert!(announced.contains(&key), "named before it was announced: {r}");
        }
    }
}

async fn block(proxy: &ProxyProcess, url: &str, json: bool) -> reqwest::Response {
    let mut req = proxied_client(proxy.proxy_addr).get(url).header("user-agent", "ExampleBot/1.0");
    if json {
        req = req.header("accept", "application/json");
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 403, "{url}");
    resp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_name_the_version_served_and_each_file_holds_it() {
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", dir)]);
    let audit = state.path().join("audit.jsonl");
    let base = origin.base();
    let (v1, v2) = (sha256_hex(V1.as_bytes()), sha256_hex(V2.as_bytes()));

    // Version 1: the text and JSON 403 bodies and the admin's answer name its digest.
    let text = block(&proxy, &format!("{base}/private/1"), false).await.text().await.unwrap();
    let version_line = text.lines().find(|l| l.starts_with("Version:")).expect(&text);
    assert!(version_line.starts_with(&format!("Version:       sha256:{v1}, fetched 20")), "{text}");
    let json: serde_json::Value =
        block(&proxy, &format!("{base}/private/2"), true).await.json().await.unwrap();
    assert_eq!(json["robots_sha256"], v1.as_str(), "{json}");
    let fetched_v1 = json["robots_fetched_at"].as_str().unwrap().to_owned();
    assert!(version_line.ends_with(&fetched_v1), "{text} {json}");
    let (code, answer) =
        get_json(&format!("{}/robots?url={base}/private/3&agent=ExampleBot", proxy.admin())).await;
    assert_eq!(code, 200);
    assert_eq!(answer["decision"]["robots_sha256"], v1.as_str(), "{answer}");
    assert_eq!(answer["decision"]["robots_fetched_at"], fetched_v1.as_str(), "{answer}");

    // Version 2, after a purge: the next blocks name the new bytes.
    origin.set_robots(200, V2);
    let (code, _) = post_json(&format!("{}/cache/purge?authority={base}", proxy.admin())).await;
    assert_eq!(code, 200);
    block(&proxy, &format!("{base}/secret/1"), false).await;
    block(&proxy, &format!("{base}/secret/2"), false).await;

    wait_until("four blocks recorded", || {
        records(&audit).iter().filter(|r| r["event.action"] == "robots_disallow").count() == 4
    })
    .await;
    let first = records(&audit);
    assert_eq!(
        actions(&first),
        [
            "robots_version",
            "robots_fetch",
            "robots_disallow",
            "robots_disallow",
            "robots_version",
            "robots_fetch",
            "robots_disallow",
            "robots_disallow"
        ],
        "{first:#?}"
    );
    check_announced_once_before_use(&first);
    let blocks: Vec<_> = first.iter().filter(|r| r["event.action"] == "robots_disallow").collect();
    let named: Vec<_> = blocks.iter().map(|r| r["robots.sha256"].as_str().unwrap()).collect();
    assert_eq!(named, [v1.as_str(), v1.as_str(), v2.as_str(), v2.as_str()]);
    assert_eq!(blocks[0]["robots.fetched_at"], fetched_v1.as_str());
    // Each fetch is a `robots_fetch` record naming what it gave, after its version's body.
    for (fetched, body) in [(&first[1], V1), (&first[5], V2)] {
        assert_eq!(fetched["robots.sha256"], sha256_hex(body.as_bytes()).as_str(), "{fetched}");
        assert_eq!(fetched["robots.consequence"], "rules", "{fetched}");
        assert!(fetched["robots.expires_at"].as_str().is_some(), "{fetched}");
    }
    for (announce, body) in [(&first[0], V1), (&first[4], V2)] {
        assert_eq!(announce["robots.body"], body, "{announce}");
        assert_eq!(announce["robots.sha256"], sha256_hex(body.as_bytes()).as_str());
        assert_eq!(announce["robots.authority"], base.as_str());
        assert_eq!(announce["robots.url"], format!("{base}/robots.txt").as_str());
        assert_eq!(announce["robots.status_code"], 200);
        assert_eq!(announce["robots.state"], "fresh");
        assert!(announce.get("robots.body_base64").is_none());
    }

    // Rotation: the new file announces the version again before its first record.
    let rotated = state.path().join("audit.jsonl.1");
    std::fs::rename(&audit, &rotated).unwrap();
    proxy.signal("HUP");
    proxy.wait_for_stderr("SIGHUP: configuration reloaded", 1).await;
    block(&proxy, &format!("{base}/secret/3"), false).await;
    block(&proxy, &format!("{base}/secret/4"), false).await;
    wait_until("the new file's blocks", || {
        records(&audit).iter().filter(|r| r["event.action"] == "robots_disallow").count() == 2
    })
    .await;
    let second = records(&audit);
    assert_eq!(actions(&second), ["robots_version", "robots_disallow", "robots_disallow"]);
    check_announced_once_before_use(&second);
    assert_eq!(second[0]["robots.body"], V2);
    assert_eq!(records(&rotated).len(), first.len(), "the rotated file is left as it was");
}

/// A one-file origin that answers `/robots.txt` with `body`, byte for byte (not UTF-8).
async fn raw_origin(body: &'static [u8]) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.write_all(body).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_utf8_is_kept_in_base64_byte_for_byte() {
    const LATIN1: &[u8] = b"# caf\xe9\nUser-agent: *\nDisallow: /private\n";
    let addr = raw_origin(LATIN1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", dir)]);
    let audit = state.path().join("audit.jsonl");
    block(&proxy, &format!("http://{addr}/private/x"), false).await;
    // The version, its fetch and the block.
    wait_until("the block recorded", || records(&audit).len() == 3).await;
    let lines = records(&audit);
    let announce = &lines[0];
    assert_eq!(announce["event.action"], "robots_version", "{lines:#?}");
    assert!(announce.get("robots.body").is_none(), "{announce}");
    let encoded = announce["robots.body_base64"].as_str().unwrap();
    assert_eq!(base64ct::Base64::decode_vec(encoded).unwrap(), LATIN1);
    let digest = sha256_hex(LATIN1);
    assert_eq!(announce["robots.sha256"], digest.as_str());
    assert_eq!(lines[1]["robots.sha256"], digest.as_str());
    assert_eq!(lines[2]["robots.sha256"], digest.as_str());
    assert_eq!(announce["robots.body_bytes"], LATIN1.len());
}

/// Allows (`audit.all_decisions`), throttles (the site's `crawl-delay`) and tunnels (tunnel mode)
/// are decided on robots.txt too, and name its version; a CONNECT refused for its port was not,
/// and names none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allows_throttles_and_tunnels_name_the_version() {
    const ROBOTS: &str = "User-agent: *\nCrawl-delay: 30\nDisallow: /private\n";
    let origin = Origin::start(ROBOTS).await;
    // Tunnel mode decides on the https origin's robots.txt.
    let tls = crate::proxy::tls_support::TlsOrigin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let ca_file = state.path().join("origin-ca.pem");
    std::fs::write(&ca_file, &tls.ca.pem).unwrap();
    let ports = format!("[{}]", tls.port());
    let proxy = ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", dir),
            ("ROBOTS_PROXY_AUDIT__ALL_DECISIONS", "true"),
            ("ROBOTS_PROXY_PACING__ENABLED", "true"),
            ("ROBOTS_PROXY_PACING__MAX_WAIT", "100ms"),
            ("ROBOTS_PROXY_HTTPS__MODE", "tunnel"),
            ("ROBOTS_PROXY_HTTPS__CONNECT_PORTS", &ports),
            ("ROBOTS_PROXY_HTTPS__UPSTREAM_CA_FILE", ca_file.to_str().unwrap()),
        ],
    );
    let audit = state.path().join("audit.jsonl");
    let base = origin.base();
    let client = proxied_client(proxy.proxy_addr);
    assert_eq!(client.get(format!("{base}/a")).send().await.unwrap().status(), 200);
    assert_eq!(client.get(format!("{base}/b")).send().await.unwrap().status(), 429);
    let connect = |target: String| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(proxy.proxy_addr).await.unwrap();
        let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        s.write_all(head.as_bytes()).await.unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let opened = connect(tls.host()).await;
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");
    let refused = connect("127.0.0.1:1".to_owned()).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");

    let want = sha256_hex(ROBOTS.as_bytes());
    // Six decisions, two versions and their two `robots_fetch` records.
    wait_until("the decisions recorded", || {
        let lines = records(&audit);
        lines.len() >= 8 && lines.iter().any(|r| r["event.action"] == "connect_refuse")
    })
    .await;
    let lines = records(&audit);
    check_announced_once_before_use(&lines);
    let by = |action: &str| -> Vec<serde_json::Value> {
        lines.iter().filter(|r| r["event.action"] == action).cloned().collect()
    };
    for action in ["robots_allow", "throttled", "tunnel_allow"] {
        let found = by(action);
        assert!(!found.is_empty(), "no {action} record: {lines:#?}");
        for r in found {
            assert_eq!(r["robots.sha256"], want.as_str(), "{r}");
            assert!(r["robots.fetched_at"].as_str().is_some(), "{r}");
        }
    }
    let port_refusals = by("connect_refuse");
    assert_eq!(port_refusals.len(), 1, "{lines:#?}");
    assert!(port_refusals[0].get("robots.sha256").is_none(), "{}", port_refusals[0]);
    // The same bytes at two authorities: announced for each.
    assert_eq!(by("robots_version").len(), 2, "{lines:#?}");
}
