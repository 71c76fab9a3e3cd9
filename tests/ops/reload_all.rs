//! Issue 23: a reload (SIGHUP, or `POST /api/reload` on the admin listener) applies `[https]`
//! mode and ports, `[signing]` keys (the key directory follows), `[robots]` lifetimes (the
//! cache is kept), `[[exceptions]]`, `[usage]`, `[access]` (allowed clients, users file,
//! allowed destinations) and `[pacing]` to what starts afterwards, in the real binary, while a
//! keep-alive connection and a CONNECT tunnel opened before stay open and keep working. An
//! invalid configuration is refused with every error and the running one stays; secrets are
//! masked; reloads in the middle of traffic lose no request and no audit record.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::reload_every_key::{connect, status};
use super::support::{get_json, post_json, write_atomically, KeepAlive, Origin, ProxyProcess};
use crate::proxy::tls_support::TlsOrigin;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const WAIT: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, PartialEq)]
enum Via {
    Signal,
    Api,
}

/// The parts of the configuration a round changes.
#[derive(Clone)]
struct Knobs {
    mode: &'static str,
    keys: &'static str,
    identity_keys: &'static str,
    max_age: &'static str,
    exceptions: String,
    usage: &'static str,
    allow_clients: &'static str,
    users_file: String,
    allow_destinations: &'static str,
    pacing: String,
}

fn config(state: &Path, tls: &TlsOrigin, ca_file: &Path, k: &Knobs) -> String {
    format!(
        "state_dir = {state:?}\n{exceptions}\n\
         [https]\nmode = \"{mode}\"\nconnect_ports = [{port}]\nupstream_ca_file = {ca_file:?}\n\
         [signing]\ndirectory_listen = \"127.0.0.1:0\"\nkeys = [{keys}]\n\
         identities = [{{ token = \"*\", keys = [{identity_keys}], agent = \"https://bots.example.com\" }}]\n\
         [robots]\nmax_age = \"{max_age}\"\n\
         [usage]\ntrain_ai = \"{usage}\"\n\
         [access]\nallow_clients = [{allow_clients}]\nallow_destinations = [{allow_destinations}]\n{users}\n\
         [pacing]\n{pacing}\n",
        exceptions = k.exceptions,
        mode = k.mode,
        port = tls.port(),
        keys = k.keys,
        identity_keys = k.identity_keys,
        max_age = k.max_age,
        usage = k.usage,
        allow_clients = k.allow_clients,
        allow_destinations = k.allow_destinations,
        users = k.users_file,
        pacing = k.pacing,
    )
}

/// A new connection's answer to `GET url` as `test/1.0` (0: closed without one).
async fn fresh_get(proxy: SocketAddr, url: &str, extra: &str) -> u16 {
    status(proxy, url, &format!("User-Agent: test/1.0\r\n{extra}")).await
}

/// An HTTP/1.1 client over TLS inside one CONNECT tunnel, kept open.
struct Tunnel {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: String,
}

impl Tunnel {
    async fn open(proxy: SocketAddr, tls: &TlsOrigin) -> Tunnel {
        let host = tls.host();
        let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let head = format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n");
        s.write_all(head.as_bytes()).await.unwrap();
        let mut opened = Vec::new();
        let mut byte = [0u8; 1];
        while !opened.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(WAIT, s.read(&mut byte)).await.unwrap().unwrap();
            assert_eq!(n, 1, "closed: {}", String::from_utf8_lossy(&opened));
            opened.push(byte[0]);
        }
        assert!(opened.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&opened));
        let mut roots = rustls::RootCertStore::empty();
        roots.add(tls.ca.der.clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(robots_proxy::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let stream =
            tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, s).await.unwrap();
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        Tunnel { sender, host }
    }

    async fn get(&mut self, path: &str) -> u16 {
        let req = http::Request::get(path)
            .header("host", &self.host)
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp =
            tokio::time::timeout(WAIT, self.sender.send_request(req)).await.unwrap().unwrap();
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        status
    }
}

/// Reloads through `via`; the report (for SIGHUP, `null`: the log has it).
async fn reload(p: &ProxyProcess, via: Via, n: usize) -> Value {
    match via {
        Via::Signal => {
            p.signal("HUP");
            p.wait_for_stderr("SIGHUP: configuration reloaded", n).await;
            Value::Null
        }
        Via::Api => {
            let (status, report) = post_json(&format!("{}/api/reload", p.admin())).await;
            assert_eq!(status, 200, "{report:#}");
            assert_eq!(report["outcome"], "applied", "{report:#}");
            report
        }
    }
}

/// The report, or the log for SIGHUP, names `key` as changed.
fn assert_changed(p: &ProxyProcess, report: &Value, key: &str) {
    match report {
        Value::Null => {
            let log = p.stderr();
            assert!(
                log.lines().any(|l| l.contains("SIGHUP: changed") && l.contains(key)),
                "{key} not logged as changed:\n{log}"
            );
        }
        _ => {
            let changed = report["changed"].as_array().unwrap();
            assert!(changed.iter().any(|c| c["key"] == key), "{key} not in {report:#}");
        }
    }
}

fn keys_new(state: &Path, name: &str) {
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["keys", "new", name])
        .env_clear()
        .env("ROBOTS_PROXY_STATE_DIR", state)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
}

async fn directory_keys(p: &ProxyProcess) -> usize {
    let line = p
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix("robots-proxy key directory listening on ").map(str::to_owned))
        .unwrap();
    let url = format!("http://{}/.well-known/http-message-signatures-directory", line.trim());
    let resp = super::support::direct_client()
        .get(&url)
        .header("host", "bots.example.com")
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    body["keys"].as_array().map_or(0, Vec::len)
}

async fn every_section(via: Via) {
    let origin = Origin::start(ROBOTS).await;
    let tls = TlsOrigin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let ca_file = state.path().join("origin-ca.pem");
    std::fs::write(&ca_file, &tls.ca.pem).unwrap();
    keys_new(state.path(), "k1");
    keys_new(state.path(), "k2");
    let file = state.path().join("robots-proxy.toml");
    let mut k = Knobs {
        mode: "tunnel",
        keys: "{ name = \"k1\" }",
        identity_keys: "\"k1\"",
        max_age: "1h",
        exceptions: String::new(),
        usage: "off",
        allow_clients: "\"127.0.0.0/8\"",
        users_file: String::new(),
        allow_destinations: "\"127.0.0.0/8\"",
        pacing: "enabled = false".to_owned(),
    };
    let write = |k: &Knobs| write_atomically(&file, &config(state.path(), &tls, &ca_file, k));
    write(&k);
    // The harness's ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS would win over the file.
    let p = ProxyProcess::start_under(
        "unset ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS",
        &["--config", file.to_str().unwrap()],
        &[],
    );
    let page = format!("{}/page", origin.base());
    let private = format!("{}/private/1", origin.base());
    // Held open across every reload below.
    let mut kept = KeepAlive::connect(p.proxy_addr).await;
    assert_eq!(kept.get(&page).await.0, 200);
    let mut tunnel = Tunnel::open(p.proxy_addr, &tls).await;
    assert_eq!(tunnel.get("/page").await, 200);
    let tunnels = tls.connections();
    assert_eq!(fresh_get(p.proxy_addr, &private, "").await, 403);
    assert_eq!(directory_keys(&p).await, 1);
    let robots_fetches = origin.robots_hits();
    let mut n = 0;

    // [https]: a new CONNECT is refused; the tunnel opened before goes on.
    k.mode = "reject";
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "https.mode");
    assert!(connect(p.proxy_addr, &tls.host()).await.starts_with("HTTP/1.1 403"));
    assert_eq!(tunnel.get("/page").await, 200, "the tunnel opened before the reload");
    assert_eq!(tls.connections(), tunnels, "through the same tunnel");

    // [signing]: key rotation; the key directory publishes the new key at once.
    k.keys = "{ name = \"k1\" }, { name = \"k2\" }";
    k.identity_keys = "\"k2\"";
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "signing.keys");
    assert_eq!(directory_keys(&p).await, 2);

    // [robots] lifetimes: applied, and the cache is kept (no new robots.txt fetch).
    k.max_age = "2h";
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "robots.max_age");
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 200);
    assert_eq!(origin.robots_hits(), robots_fetches, "the robots cache is kept");

    // [[exceptions]] and [usage]. A disallow: an allow for a token is granted only to a
    // proxy user tied to it (controls 1), and this round runs without a users file.
    let held = format!("{}/held/1", origin.base());
    assert_eq!(fresh_get(p.proxy_addr, &held, "").await, 200, "robots.txt allows it");
    k.exceptions = format!(
        "[[exceptions]]\nid = \"reload-test\"\nauthorities = [\"127.0.0.1:{}\"]\n\
         tokens = [\"test\"]\npaths = [\"/held\"]\neffect = \"disallow\"\n\
         reference = \"issue 23\"\ngranted_by = \"tests\"\nexpires = \"2099-01-01T00:00:00Z\"\n",
        origin.addr.port()
    );
    k.usage = "enforce";
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "exceptions");
    assert_changed(&p, &report, "usage.train_ai");
    assert_eq!(fresh_get(p.proxy_addr, &held, "").await, 403, "the exception refuses it");

    // [access] allow_clients: a new connection from loopback is closed at once; the one
    // opened before is still served.
    k.allow_clients = "\"10.0.0.0/8\"";
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "access.allow_clients");
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 0, "refused at accept");
    assert_eq!(kept.get(&page).await.0, 200, "the connection opened before the reload");
    k.allow_clients = "\"127.0.0.0/8\"";

    // [access] users_file: from none to one, requests need credentials.
    let users = state.path().join("users");
    let cost = argon2::Params::default();
    let hash = robots_proxy::access::hash_password("pw", &cost).unwrap();
    write_atomically(&users, &format!("alice:{hash}\n"));
    k.users_file = format!("users_file = {users:?}");
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "access.users_file");
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 407);
    k.users_file = String::new();

    // [access] allow_destinations: 127.0.0.0/8 is no longer re-opened.
    k.allow_destinations = "";
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "access.allow_destinations");
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 403);
    assert_eq!(tunnel.get("/page").await, 200, "the tunnel still");
    k.allow_destinations = "\"127.0.0.0/8\"";

    // [pacing]: one request per 100 s to the origin, none may wait.
    k.pacing = format!(
        "enabled = true\nmax_wait = \"10ms\"\n\
         sites = [{{ authority = \"http://127.0.0.1:{}\", rps = 0.01 }}]",
        origin.addr.port()
    );
    write(&k);
    n += 1;
    let report = reload(&p, via, n).await;
    assert_changed(&p, &report, "pacing.enabled");
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 200);
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 429);
    assert_eq!(tunnel.get("/page").await, 200, "the tunnel at the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_every_section_with_a_connection_and_a_tunnel_open() {
    every_section(Via::Signal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_api_reload_reloads_every_section_with_a_connection_and_a_tunnel_open() {
    every_section(Via::Api).await;
}

fn plain(state: &Path, extra: &str) -> String {
    format!("state_dir = {state:?}\n[https]\nmode = \"reject\"\n{extra}")
}

/// `robots-proxy config check --against-running --admin URL [--json]`: exit code, stdout.
fn against_running(admin: &str, json: bool) -> (i32, String) {
    let mut args = vec!["config", "check", "--against-running", "--admin", admin];
    if json {
        args.push("--json");
    }
    let out = super::support::run(&args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

/// The preview and `config check --against-running` show the diff (secrets masked) and apply
/// nothing; an invalid configuration is refused by `POST /api/reload` (422) and SIGHUP with
/// every error listed, and the running configuration stays in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_configuration_is_refused_with_every_error_and_the_running_one_stays() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    write_atomically(&file, &plain(state.path(), ""));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let private = format!("{}/private/1", origin.base());
    assert_eq!(fresh_get(p.proxy_addr, &private, "").await, 403);
    // A disallow exception: whether it is in force shows on a path robots.txt allows (an
    // allow for a token needs a user tied to it, controls 1, and there is no users file).
    let open = format!("{}/open/1", origin.base());
    assert_eq!(fresh_get(p.proxy_addr, &open, "").await, 200);
    let allow = format!(
        "[[exceptions]]\nid = \"x\"\nauthorities = [\"127.0.0.1:{}\"]\ntokens = [\"test\"]\n\
         paths = [\"/open\"]\neffect = \"disallow\"\nreference = \"r\"\ngranted_by = \"g\"\n\
         expires = \"2099-01-01T00:00:00Z\"\n",
        origin.addr.port()
    );

    // A valid change, previewed: key by key, the restart keys with their reason, the Redis
    // password masked; nothing applied.
    let valid = format!(
        "{}{allow}",
        plain(
            state.path(),
            "[pacing]\ndefault_rps = 5.0\n[proxy]\nvia = \"elsewhere\"\n\
             [fleet]\nredis = \"redis://:hunter2@127.0.0.1:1/0\"\n"
        )
    );
    write_atomically(&file, &valid);
    let (status, preview) = get_json(&format!("{}/api/reload/preview", p.admin())).await;
    assert_eq!(status, 200, "{preview:#}");
    assert_eq!(preview["outcome"], "preview");
    let text = preview.to_string();
    assert!(!text.contains("hunter2"), "{preview:#}");
    let changed: Vec<&str> =
        preview["changed"].as_array().unwrap().iter().filter_map(|c| c["key"].as_str()).collect();
    assert!(
        changed.contains(&"pacing.default_rps") && changed.contains(&"exceptions"),
        "{changed:?}"
    );
    let restart = preview["restart_required"].as_array().unwrap();
    let via = restart.iter().find(|r| r["key"] == "proxy.via").expect("proxy.via");
    assert!(via["reason"].as_str().unwrap().contains("listener"), "{via}");
    assert_eq!(via["configured"], "elsewhere", "{via}");
    assert!(restart.iter().any(|r| r["key"] == "fleet.redis"), "{preview:#}");
    assert_eq!(fresh_get(p.proxy_addr, &open, "").await, 200, "a preview applies nothing");
    let (code, out) = against_running(&p.admin(), false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("pacing.default_rps: 0.0 -> 5.0"), "{out}");
    assert!(out.contains("proxy.via") && out.contains("after a restart"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    let (code, out) = against_running(&p.admin(), true);
    assert_eq!(code, 0, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["outcome"], "preview", "{out}");

    // Invalid: three errors, all listed; the allow exception in the same file is not applied.
    let invalid = format!(
        "{}{allow}",
        plain(
            state.path(),
            "[robots]\nmin_age = \"2h\"\nmax_age = \"1h\"\n[pacing]\nbogus = 1\n\
             [limits]\nmax_connections = 0\n"
        )
    );
    write_atomically(&file, &invalid);
    let (status, report) = post_json(&format!("{}/api/reload", p.admin())).await;
    assert_eq!(status, 422, "{report:#}");
    assert_eq!(report["outcome"], "refused");
    let keys: Vec<&str> =
        report["errors"].as_array().unwrap().iter().filter_map(|e| e["key"].as_str()).collect();
    for key in ["robots.min_age", "pacing.bogus", "limits.max_connections"] {
        assert!(keys.contains(&key), "{key} not in {report:#}");
    }
    assert_eq!(fresh_get(p.proxy_addr, &open, "").await, 200, "the running one stays");
    let (code, out) = against_running(&p.admin(), false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would be refused") && out.contains("robots.min_age"), "{out}");
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: the new configuration is refused", 1).await;
    assert!(p.stderr().contains("pacing.bogus"), "{}", p.stderr());
    assert_eq!(fresh_get(p.proxy_addr, &open, "").await, 200);

    // Fixed: applied.
    write_atomically(&file, &format!("{}{allow}", plain(state.path(), "")));
    let (status, report) = post_json(&format!("{}/api/reload", p.admin())).await;
    assert_eq!(status, 200, "{report:#}");
    assert_eq!(fresh_get(p.proxy_addr, &open, "").await, 403);
}

/// A users file that cannot be read refuses the reload: the users in force stay, and the
/// report says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_users_file_keeps_the_users_and_says_so() {
    use base64ct::Encoding;
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let users = state.path().join("users");
    let cost = argon2::Params::default();
    let hash = robots_proxy::access::hash_password("pw", &cost).unwrap();
    write_atomically(&users, &format!("alice:{hash}\n"));
    let file = state.path().join("robots-proxy.toml");
    write_atomically(&file, &plain(state.path(), &format!("[access]\nusers_file = {users:?}\n")));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let page = format!("{}/page", origin.base());
    let alice =
        format!("Proxy-Authorization: Basic {}\r\n", base64ct::Base64::encode_string(b"alice:pw"));
    assert_eq!(fresh_get(p.proxy_addr, &page, &alice).await, 200);
    std::fs::remove_file(&users).unwrap();
    std::fs::create_dir(&users).unwrap();
    let (status, report) = post_json(&format!("{}/api/reload", p.admin())).await;
    assert_eq!(status, 422, "{report:#}");
    assert_eq!(report["users_file"]["reloaded"], false, "{report:#}");
    assert!(report["users_file"]["error"].as_str().is_some(), "{report:#}");
    assert!(
        report["errors"].as_array().unwrap().iter().any(|e| e["key"] == "access.users_file"),
        "{report:#}"
    );
    assert_eq!(fresh_get(p.proxy_addr, &page, &alice).await, 200, "alice is still a user");
    assert_eq!(fresh_get(p.proxy_addr, &page, "").await, 407);
}

/// An origin that counts the requests it answers (robots.txt aside).
async fn counting_origin() -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let counted = counted.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<_>| {
                    let counted = counted.clone();
                    async move {
                        let _: &hyper::body::Incoming = req.body();
                        let body = if req.uri().path() == "/robots.txt" {
                            ROBOTS.to_owned()
                        } else {
                            counted.fetch_add(1, Ordering::SeqCst);
                            "hello".to_owned()
                        };
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(Bytes::from(body)),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, hits)
}

/// 20 reloads (half SIGHUP, half `POST /api/reload`), each changing what they apply, while four
/// clients send 200 requests: every request is answered 200 or 403, every 200 reached the
/// origin, and every decision has its audit record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_traffic_lose_no_request_and_no_audit_record() {
    use std::sync::atomic::Ordering;
    let (origin, hits) = counting_origin().await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    let version = |i: usize| {
        plain(
            state.path(),
            &format!(
                "[audit]\nall_decisions = true\n[robots]\nmax_age = \"{}h\"\n\
                 [pacing]\nenabled = {}\n",
                1 + i % 2,
                i.is_multiple_of(2)
            ),
        )
    };
    write_atomically(&file, &version(0));
    let p = Arc::new(ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]));
    let traffic: Vec<_> = (0..4)
        .map(|client| {
            let proxy = p.proxy_addr;
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for i in 0..50 {
                    let path = if (client + i) % 2 == 0 { "page" } else { "private/x" };
                    let url = format!("http://{origin}/{path}/{client}/{i}");
                    statuses.push(fresh_get(proxy, &url, "").await);
                }
                statuses
            })
        })
        .collect();
    let mut signals = 0;
    for i in 1..=20 {
        write_atomically(&file, &version(i));
        if i % 2 == 0 {
            signals += 1;
            reload(&p, Via::Signal, signals).await;
        } else {
            reload(&p, Via::Api, 0).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut statuses = Vec::new();
    for t in traffic {
        statuses.extend(t.await.unwrap());
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 403).count();
    assert_eq!(ok + refused, 200, "every request answered 200 or 403: {statuses:?}");
    assert_eq!(ok, 100);
    assert_eq!(hits.load(Ordering::SeqCst), ok, "every 200 reached the origin, once");
    let audit = state.path().join("audit.jsonl");
    let count = |action: &str| {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["event.action"] == action)
            .count()
    };
    super::support::wait_until("every record written", || {
        count("robots_allow") + count("robots_disallow") >= 200
    })
    .await;
    assert_eq!(count("robots_allow"), ok);
    assert_eq!(count("robots_disallow"), refused);
}

/// One bad value per section (and one rule between sections): `(what to add to the file, the
/// key refused, a part of its message)`. Every section's `TryFrom` and the rules between
/// sections are one conversion, so `config check`, the loader (what `serve` runs) and a reload
/// must refuse each with the same key, origin and message.
const BAD_VALUES: &[(&str, &str, &str)] = &[
    ("[proxy]\nvia = \"a b\"\n", "proxy.via", "is not a valid Via pseudonym"),
    ("[admin]\nhosts = [\"a/b\"]\n", "admin.hosts", "is not a host name or IP address"),
    ("[upstream]\nconnect_timeout = \"0s\"\n", "upstream.connect_timeout", "longer than zero"),
    ("[robots]\nrefresh_ahead = 0.9\n", "robots.refresh_ahead", "is not a share of the lifetime"),
    ("[policy]\ntoken_sources = []\n", "policy.token_sources", "must name at least one of"),
    ("[audit]\nqueue_capacity = 0\n", "audit.queue_capacity", "must be at least 1"),
    (
        "[archive]\nmax_versions_per_authority = 0\n",
        "archive.max_versions_per_authority",
        "at least 1",
    ),
    ("[log]\nlevel = \"a=b=c\"\n", "log.level", "is not a valid filter"),
    ("connect_ports = [0]\n", "https.connect_ports", "0 is not a port"),
    ("[pacing]\ndefault_rps = -1.0\n", "pacing.default_rps", "is not a rate"),
    ("[[usage.crawlers]]\ntoken = \"a\"\npurposes = []\n", "usage.crawlers", "purposes is empty"),
    ("[access]\nallow_clients = []\n", "access.allow_clients", "must list at least one range"),
    (
        "[limits]\nmax_request_line = \"32KiB\"\nmax_header_bytes = \"16KiB\"\n",
        "limits.max_request_line",
        "is more than limits.max_header_bytes",
    ),
    ("[fleet]\nprevious_key_file = \"/k\"\n", "fleet.previous_key_file", "needs fleet.key_file"),
    ("[signing]\nlifetime = \"5m\"\nreuse = \"10m\"\n", "signing.reuse", "is not shorter than"),
    ("[disclosure]\ncontact = \"gopher://x\"\n", "disclosure.contact", "neither an https URL"),
    (
        "[[exceptions]]\nid = \"x\"\nauthorities = []\ntokens = [\"a\"]\neffect = \"disallow\"\n\
         reference = \"r\"\ngranted_by = \"g\"\n",
        "exceptions[1].authorities",
        "must name at least one host",
    ),
    // Between sections: the archive against robots.max_body.
    ("[archive]\nmax_bytes = \"1KiB\"\n", "archive.max_bytes", "cannot hold even one robots.txt"),
];

/// Every row of [`BAD_VALUES`] is refused alike by the loader, `config check` and a reload
/// (`POST /api/reload`), with the one problem, its key, its origin (the file) and the same
/// message; the running configuration stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_the_loader_and_a_reload_refuse_each_bad_value_alike() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    write_atomically(&file, &plain(state.path(), ""));
    let p = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let private = format!("{}/private/1", origin.base());
    for (extra, key, part) in BAD_VALUES {
        write_atomically(&file, &plain(state.path(), extra));
        let sources =
            robots_proxy::config::ConfigSources { file: Some(file.clone()), ..Default::default() };
        let e = robots_proxy::config::load(sources).expect_err(key);
        let [problem] = e.problems() else { panic!("{key}: one problem: {e}") };
        assert_eq!(problem.key.as_deref(), Some(*key), "{e}");
        assert!(problem.message.contains(part), "{key}: {e}");
        let from = problem.origin.as_ref().map(ToString::to_string);
        assert_eq!(from, Some(format!("file {}", file.display())), "{e}");

        let out =
            super::support::run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
        assert_eq!(out.status.code(), Some(1), "{key}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&problem.to_string()), "{key}: {problem}\n{stderr}");

        let (status, report) = post_json(&format!("{}/api/reload", p.admin())).await;
        assert_eq!(status, 422, "{key}: {report:#}");
        let errors = report["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{key}: {report:#}");
        assert_eq!(errors[0]["key"], *key, "{report:#}");
        assert_eq!(errors[0]["message"], problem.message.as_str(), "{report:#}");
        assert_eq!(errors[0]["origin"], from.unwrap().as_str(), "{report:#}");
    }
    // The running configuration stayed in force all along.
    assert_eq!(fresh_get(p.proxy_addr, &private, "").await, 403);
}
