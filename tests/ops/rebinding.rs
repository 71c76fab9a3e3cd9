//! DNS rebinding: a web page whose name is rebound to 127.0.0.1 reaches the admin listener and
//! the key directory with its own name in `Host` (and `Origin`). Both answer only for their own
//! names; the real binary, raw requests with exactly the headers such a page sends.

use std::net::SocketAddr;

use super::support::{directory_proxy, Origin, ProxyProcess};
use crate::proxy::support::{raw, RawResponse};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const EVIL: &str = "rebind.evil.example:9090";

async fn get(addr: SocketAddr, path: &str, host: &str) -> RawResponse {
    raw(addr, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).await
}

async fn purge_all(addr: SocketAddr, host: &str, origin: &str) -> RawResponse {
    let request = format!(
        "POST /cache/purge-all HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    raw(addr, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_answers_only_for_its_own_names() {
    let origin = Origin::start(ROBOTS).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[admin]\nhosts = [\"gateway.internal\"]\n").unwrap();
    let p = ProxyProcess::start(&["--config", config.to_str().unwrap()], &[]);
    let admin = p.admin_addr;
    let client = super::support::proxied_client(p.proxy_addr);
    let page = format!("{}/a", origin.base());
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200);
    assert_eq!(origin.robots_hits(), 1);

    // The rebinding page reads nothing and purges nothing.
    for path in ["/api/summary", "/", "/metrics", "/robots?url=http://example.com/"] {
        let resp = get(admin, path, EVIL).await;
        assert_eq!(resp.status, 421, "{path}: {resp:?}");
        assert!(!resp.body.contains("recent"), "{path}: {}", resp.body);
    }
    let resp = purge_all(admin, EVIL, &format!("http://{EVIL}")).await;
    assert_eq!(resp.status, 421, "{resp:?}");
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200);
    assert_eq!(origin.robots_hits(), 1, "the cache was purged by a rebinding page");
    // No Host at all (HTTP/1.0) is no name of the listener either.
    let resp = raw(admin, "GET /api/summary HTTP/1.0\r\n\r\n").await;
    assert_eq!(resp.status, 421, "{resp:?}");

    // Its own names, with or without the port.
    let port = admin.port();
    for host in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_owned(),
        format!("localhost:{port}"),
        "localhost".to_owned(),
        "gateway.internal".to_owned(),
        format!("Gateway.Internal:{port}"),
    ] {
        let resp = get(admin, "/api/summary", &host).await;
        assert_eq!(resp.status, 200, "{host}: {resp:?}");
    }
    assert_eq!(get(admin, "/api/summary", &format!("localhost:{}", port ^ 1)).await.status, 421);
    let own = format!("127.0.0.1:{port}");
    let resp = purge_all(admin, &own, &format!("http://{own}")).await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200);
    assert_eq!(origin.robots_hits(), 2, "purged from the status page's own origin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_directory_answers_only_for_its_agents_authorities() {
    let state = tempfile::tempdir().unwrap();
    let (_proxy, directory) = directory_proxy(&state, "https://bots.example.com");
    let path = "/.well-known/http-message-signatures-directory";
    for host in [EVIL, "127.0.0.1", &directory.to_string(), "bots.example.com:8443", "localhost"] {
        let resp = get(directory, path, host).await;
        assert_eq!(resp.status, 421, "{host}: {resp:?}");
        assert!(!resp.headers.contains_key("signature"), "{host}: {resp:?}");
    }
    for host in ["bots.example.com", "Bots.Example.COM:443"] {
        let resp = get(directory, path, host).await;
        assert_eq!(resp.status, 200, "{host}: {resp:?}");
        assert!(resp.headers.contains_key("signature"), "{host}: {resp:?}");
    }
}

/// A port published by `docker run -p` or compose reaches the admin listener with the published
/// port in `Host` (ops H2, fleet N7): `admin.hosts` names it with its port, and that name
/// passes with exactly that port; any other port, and any name not listed, still gets 421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_port_named_in_admin_hosts_is_answered_and_no_other() {
    let p = ProxyProcess::start(
        &[],
        &[("ROBOTS_PROXY_ADMIN__HOSTS", "localhost:19091,127.0.0.1:19091,[::1]:19091")],
    );
    let admin = p.admin_addr;
    for host in ["localhost:19091", "LOCALHOST:19091", "127.0.0.1:19091", "[::1]:19091"] {
        let resp = get(admin, "/healthz", host).await;
        assert_eq!(resp.status, 200, "{host}: {resp:?}");
    }
    for host in [
        "localhost:19092",
        "127.0.0.1:19092",
        "rebind.evil.example:19091",
        "[::1]:19092",
        "user@localhost:19091",
    ] {
        let resp = get(admin, "/api/summary", host).await;
        assert_eq!(resp.status, 421, "{host}: {resp:?}");
    }
}

/// The image's environment (the Dockerfile's `ENV` lines) lets a published port reach the
/// admin listener: clients from the container network's private ranges, and `127.0.0.1`
/// (`docker run -p 127.0.0.1:9090:9090`) as a name; `config check` accepts it.
#[test]
fn the_images_environment_admits_the_published_admin_port() {
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).unwrap();
    let mut env: Vec<(String, String)> = Vec::new();
    let joined = dockerfile.replace("\\\n", " ");
    for line in joined.lines().filter_map(|l| l.trim().strip_prefix("ENV ")) {
        for pair in line.split_whitespace() {
            if let Some((k, v)) = pair.split_once('=') {
                env.push((k.to_owned(), v.to_owned()));
            }
        }
    }
    let value = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let clients = value("ROBOTS_PROXY_ADMIN__ALLOW_CLIENTS").expect("the image sets it");
    for range in ["172.16.0.0/12", "10.0.0.0/8", "192.168.0.0/16"] {
        assert!(clients.split(',').any(|c| c == range), "{range} not in {clients}");
    }
    let hosts = value("ROBOTS_PROXY_ADMIN__HOSTS").expect("the image sets it");
    assert!(hosts.split(',').any(|h| h == "127.0.0.1"), "{hosts}");
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_owned();
    let mut vars: Vec<(&str, &str)> = env
        .iter()
        .filter(|(k, _)| k != "ROBOTS_PROXY_CONFIG" && k != "ROBOTS_PROXY_STATE_DIR")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    vars.push(("ROBOTS_PROXY_STATE_DIR", &state_dir));
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/robots-proxy.toml");
    let out = super::support::run(&["config", "check", "--config", config], &vars);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("\"172.16.0.0/12\""), "{said}");
}
