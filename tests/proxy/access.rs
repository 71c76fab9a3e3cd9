//! Who may use the proxy: the client access list and proxy authentication (issue #6).

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::{raw, raw_get, Origin, TestProxy};

const ROBOTS: &str = "User-agent: AliceBot\nDisallow: /\n\nUser-agent: *\nDisallow: /private\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_outside_the_access_list_is_disconnected_unanswered() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        c.access.allow_clients = vec!["10.0.0.0/8".parse().unwrap()];
    })
    .await;
    let mut stream = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {}/x HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    // The proxy may close before or while the request is written.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection is closed, not left open");
    assert!(buf.is_empty(), "no answer: {}", String::from_utf8_lossy(&buf));
    assert!(origin.seen().is_empty(), "nothing reached the origin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_inside_the_access_list_is_served() {
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        c.access.allow_clients = vec!["10.0.0.0/8".parse().unwrap(), "127.0.0.1".parse().unwrap()];
    })
    .await;
    let resp = raw_get(proxy.addr, &format!("{}/x", origin.base()), "x", "").await;
    assert_eq!(resp.status, 200, "{resp:?}");
}

/// A users file with Argon2 hashes of the default cost (the least a users file accepts is
/// close to it; argon2 is optimised in test builds).
fn users_file(dir: &tempfile::TempDir) -> PathBuf {
    let cost = argon2::Params::default();
    let hash = |pw: &str| robots_proxy::access::hash_password(pw, &cost).unwrap();
    let text = format!(
        "# test users\nalice:{}:AliceBot\n\nbob:{}\n",
        hash("alice-secret"),
        hash("bob-secret")
    );
    let path = dir.path().join("users");
    std::fs::write(&path, text).unwrap();
    path
}

fn basic(user: &str, password: &str) -> String {
    use base64ct::Encoding;
    let token = base64ct::Base64::encode_string(format!("{user}:{password}").as_bytes());
    format!("Proxy-Authorization: Basic {token}\r\n")
}

async fn auth_proxy(dir: &tempfile::TempDir) -> TestProxy {
    let users = users_file(dir);
    TestProxy::start_with(move |c| {
        c.access.users_file = Some(users);
        c.audit.all_decisions = true;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_valid_credentials_get_407() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(ROBOTS).await;
    let proxy = auth_proxy(&dir).await;
    let url = format!("{}/x", origin.base());
    for extra in [
        String::new(),
        basic("alice", "wrong"),
        basic("mallory", "alice-secret"),
        "Proxy-Authorization: Bearer abc\r\n".to_owned(),
        "Proxy-Authorization: Basic !!notbase64\r\n".to_owned(),
    ] {
        let resp = raw_get(proxy.addr, &url, "x", &extra).await;
        assert_eq!(resp.status, 407, "{extra:?}: {resp:?}");
        let challenge = &resp.headers["proxy-authenticate"];
        assert!(challenge.starts_with("Basic realm=\"robots-proxy\""), "{challenge}");
        assert!(resp.body.contains("407 Proxy Authentication Required"), "{}", resp.body);
    }
    let connect =
        raw(proxy.addr, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
    assert_eq!(connect.status, 407, "CONNECT needs credentials too: {connect:?}");
    assert!(origin.seen().is_empty(), "nothing reached the origin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_credentials_pass_and_are_not_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(ROBOTS).await;
    let proxy = auth_proxy(&dir).await;
    let client = super::support::reqwest_builder()
        .proxy(
            reqwest::Proxy::all(format!("http://{}", proxy.addr))
                .unwrap()
                .basic_auth("bob", "bob-secret"),
        )
        .build()
        .unwrap();
    for _ in 0..3 {
        let resp = client.get(format!("{}/hello", origin.base())).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let seen = origin.seen().into_iter().find(|s| s.target == "/hello").unwrap();
    assert!(seen.headers.get("proxy-authorization").is_none());
    let resp = client.get(format!("{}/private/x", origin.base())).send().await.unwrap();
    assert_eq!(resp.status(), 403, "robots.txt still applies to authenticated users");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_tied_to_a_token_gets_its_rules_whatever_the_user_agent() {
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(ROBOTS).await;
    let proxy = auth_proxy(&dir).await;
    let url = format!("{}/page", origin.base());
    let alice = basic("alice", "alice-secret");
    let bob = basic("bob", "bob-secret");
    // alice is AliceBot: `Disallow: /`, even when her User-Agent or token header says otherwise.
    for extra in ["User-Agent: curl/8.5.0\r\n", "X-Robots-Product-Token: OtherBot\r\n", ""] {
        let resp = raw_get(proxy.addr, &url, "x", &format!("{alice}{extra}")).await;
        assert_eq!(resp.status, 403, "alice with {extra:?}: {resp:?}");
        assert!(resp.body.contains("Product token: AliceBot"), "{}", resp.body);
    }
    // bob has no tied token: the usual sources apply.
    let resp = raw_get(proxy.addr, &url, "x", &format!("{bob}User-Agent: curl/8.5.0\r\n")).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    let resp =
        raw_get(proxy.addr, &url, "x", &format!("{bob}X-Robots-Product-Token: AliceBot\r\n")).await;
    assert_eq!(resp.status, 403, "bob may still name a token: {resp:?}");
    let records = proxy.audit_records().await;
    let alice_records: Vec<_> =
        records.iter().filter(|r| r["robots.product_token"] == "AliceBot").collect();
    assert_eq!(alice_records.len(), 4, "{records:#?}");
}

#[test]
fn user_hash_prints_a_users_file_line() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let run = |args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(&["user", "hash", "carol", "--token", "CarolBot"], "pass word\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8(out.stdout).unwrap();
    let line = line.trim_end();
    assert!(line.starts_with("carol:$argon2id$"), "{line}");
    assert!(line.ends_with(":CarolBot"), "{line}");
    // The line is a users file that accepts the password, spaces included.
    let auth = robots_proxy::access::Authenticator::parse(line, std::path::Path::new("u")).unwrap();
    let mut headers = http::HeaderMap::new();
    use base64ct::Encoding;
    let value = format!("Basic {}", base64ct::Base64::encode_string(b"carol:pass word"));
    headers.insert("proxy-authorization", value.parse().unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let user = runtime.block_on(auth.authenticate(&headers)).unwrap();
    assert_eq!(user.token.as_ref().map(|t| t.as_str()), Some("CarolBot"));
    // No password, or a name that cannot be used: exit status 2 and a message.
    let out = run(&["user", "hash", "carol"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
    let out = run(&["user", "hash", "a:b"], "pw\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("user name"));
}
