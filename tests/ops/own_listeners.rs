//! The process's own listeners are never a destination (issue #12): not the proxy listener (a
//! request there would loop) and not the admin listener (its endpoints have no authentication:
//! the audit summary, cache purges), whatever `access.allow_destinations` re-opens, for
//! forwarded requests and for robots.txt fetches and their redirects, and through every
//! address a wildcard listener is reached by.

use std::net::{IpAddr, SocketAddr};

use super::support::{directory_proxy, proxied_client, InProcess, Origin, ProxyProcess};
use crate::cache::support::{Origin as RawOrigin, Reply};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// The `Proxy-Status` header of a response, or "".
fn proxy_status(resp: &reqwest::Response) -> String {
    resp.headers().get("proxy-status").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_listener_is_never_a_destination() {
    let origin = Origin::start(ROBOTS).await;
    // Loopback is re-opened (the harness allows 127.0.0.0/8), the admin listens on 127.0.0.1.
    let p = InProcess::start().await;
    let client = p.client();
    let page = format!("{}/page", origin.base());
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200);
    assert_eq!(origin.robots_hits(), 1, "robots.txt is cached now");

    let admin = p.admin_addr.port();
    for url in [
        format!("http://127.0.0.1:{admin}/api/summary"),
        format!("http://127.0.0.1:{admin}/healthz"),
        format!("http://localhost:{admin}/api/summary"),
    ] {
        let resp = client.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 403, "{url}");
        let status = proxy_status(&resp);
        assert!(status.contains("error=destination_ip_prohibited"), "{url}: {status}");
        let body = resp.text().await.unwrap();
        assert!(body.starts_with("403 Forbidden"), "{url}: {body}");
        assert!(!body.contains("\"requests\""), "the admin's data is not returned: {body}");
    }
    let own = client.get(format!("http://127.0.0.1:{admin}/api/summary")).send().await.unwrap();
    assert!(proxy_status(&own).contains("own listener"), "{}", proxy_status(&own));

    let purge = client.post(format!("http://127.0.0.1:{admin}/cache/purge-all")).send();
    assert_eq!(purge.await.unwrap().status(), 403);
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200);
    assert_eq!(origin.robots_hits(), 1, "nothing was purged: robots.txt still comes from cache");

    p.audit.flush().await.unwrap();
    let audit = std::fs::read_to_string(&p.audit_path).unwrap();
    let refusals: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["event.action"] == "destination_prohibited")
        .collect();
    assert_eq!(refusals.len(), 5, "{audit}");
    assert!(refusals.iter().any(|r| r["http.request.method"] == "POST"), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_txt_redirect_to_the_admin_listener_is_a_prohibited_fetch() {
    let p = InProcess::start().await;
    // Followed, the redirect would read the admin's `ok` as an empty robots.txt: allow all.
    let healthz = format!("http://127.0.0.1:{}/healthz", p.admin_addr.port());
    let origin = RawOrigin::with_robots(Reply::redirect(302, &healthz)).await;
    origin.route("/page", Reply::ok("page"));
    let resp = p.client().get(format!("{}/page", origin.base_url())).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let status = proxy_status(&resp);
    assert!(status.contains("error=destination_ip_prohibited"), "{status}");
    let body = resp.text().await.unwrap();
    assert!(body.contains(&format!("robots.txt at {healthz}")), "{body}");
    assert!(body.contains("own listener"), "{body}");
    assert_eq!(origin.robots_hits(), 1);
    assert_eq!(origin.hits("/page"), 0, "the page is not fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_listeners_are_never_destinations() {
    let origin = Origin::start(ROBOTS).await;
    // The real binary, both listeners on 0.0.0.0 (as in the Docker image), every destination
    // range re-opened: only the own-listener rule stands between a client and the listeners.
    let state = tempfile::tempdir().unwrap();
    let p = ProxyProcess::start_listening(
        "0.0.0.0:0",
        "0.0.0.0:0",
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap()),
            ("ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS", "0.0.0.0/0,::/0"),
        ],
    );
    assert!(p.proxy_addr.ip().is_unspecified(), "{}", p.proxy_addr);
    let client = proxied_client(SocketAddr::from(([127, 0, 0, 1], p.proxy_addr.port())));
    let page = format!("{}/page", origin.base());
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200, "other ports are open");

    let mut hosts = vec!["127.0.0.1".to_owned(), "127.0.0.2".to_owned(), "[::1]".to_owned()];
    let interfaces = if_addrs::get_if_addrs().unwrap();
    hosts.extend(interfaces.iter().filter_map(|i| match i.ip() {
        IpAddr::V4(v4) if !v4.is_loopback() => Some(v4.to_string()),
        _ => None,
    }));
    for port in [p.proxy_addr.port(), p.admin_addr.port()] {
        for host in &hosts {
            let url = format!("http://{host}:{port}/api/summary");
            let resp = client.get(&url).send().await.unwrap();
            assert_eq!(resp.status(), 403, "{url}");
            let status = proxy_status(&resp);
            assert!(status.contains("own listener"), "{url}: {status}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_is_never_a_destination_and_refused_clients_are_named() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (state.path().join("proxy.pem"), state.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    // The real binary with a TLS listener that requires client certificates.
    let p = ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap()),
            ("ROBOTS_PROXY_PROXY__TLS_LISTEN", "127.0.0.1:0"),
            ("ROBOTS_PROXY_PROXY__TLS_CERTIFICATE", cert_path.to_str().unwrap()),
            ("ROBOTS_PROXY_PROXY__TLS_KEY", key_path.to_str().unwrap()),
            ("ROBOTS_PROXY_ACCESS__CLIENT_CA", cert_path.to_str().unwrap()),
            ("ROBOTS_PROXY_ACCESS__CLIENT_CERTIFICATE", "required"),
        ],
    );
    let stderr = p.stderr();
    let tls: SocketAddr = stderr
        .lines()
        .find_map(|l| l.strip_prefix("robots-proxy TLS listening on "))
        .unwrap_or_else(|| panic!("the TLS listener is announced: {stderr}"))
        .trim()
        .parse()
        .unwrap();

    // The guard knows the TLS listener's bound port.
    let client = proxied_client(p.proxy_addr);
    let page = format!("{}/page", origin.base());
    assert_eq!(client.get(&page).send().await.unwrap().status(), 200);
    let resp = client.get(format!("http://127.0.0.1:{}/x", tls.port())).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert!(proxy_status(&resp).contains("own listener"), "{}", proxy_status(&resp));

    // A client without a certificate: a TLS alert for it, a WARN line naming the cause.
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("HTTPS-proxy"))
    {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "20", "--proxy-insecure", "--proxy"])
            .arg(format!("https://{tls}"))
            .arg(&page)
            .env_remove("http_proxy")
            .output()
            .unwrap();
        assert!(!out.status.success(), "refused");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("alert"), "curl names the TLS alert: {said}");
        p.wait_for_stderr("TLS client refused", 1).await;
        let log = p.stderr();
        let line = log.lines().find(|l| l.contains("TLS client refused")).unwrap();
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains("sent no certificate"), "{line}");
        eprintln!("{line}");
    } else {
        crate::skip::missing("curl with HTTPS-proxy support", "apt-get install curl");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_directory_listener_serves_the_keys_and_is_never_a_destination() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    // `keys new` as an operator runs it, then the real binary with the directory listener.
    let (p, directory) = directory_proxy(&state, "https://bots.example.com");
    let url = format!("http://{directory}/.well-known/http-message-signatures-directory");

    // Asked for as its agent's authority (any other Host gets 421, see `rebinding`).
    let direct = super::support::direct_client()
        .get(&url)
        .header("host", "bots.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 200);
    assert_eq!(
        direct.headers()["content-type"],
        "application/http-message-signatures-directory+json"
    );
    let input = direct.headers()["signature-input"].to_str().unwrap().to_owned();
    assert!(input.contains("tag=\"http-message-signatures-directory\""), "{input}");
    let body: serde_json::Value = direct.json().await.unwrap();
    assert_eq!(body["keys"][0]["kty"], "OKP");
    assert_eq!(body["keys"][0]["crv"], "Ed25519");

    // Every request through the proxy is signed ("*"); the directory itself is refused.
    let client = proxied_client(p.proxy_addr);
    assert_eq!(client.get(format!("{}/page", origin.base())).send().await.unwrap().status(), 200);
    let through = client.get(&url).send().await.unwrap();
    assert_eq!(through.status(), 403);
    assert!(proxy_status(&through).contains("own listener"), "{}", proxy_status(&through));
}

/// The shipped systemd unit lets the process open every address family it needs (ops M2):
/// AF_INET and AF_INET6 (listeners, origins), AF_UNIX (sd_notify, the journal) and AF_NETLINK,
/// which getifaddrs(3) needs for the guard to list the interface addresses; without it, a
/// wildcard listener refuses every origin on its own port as "this proxy's own listener".
#[test]
fn the_systemd_unit_allows_the_address_families_the_proxy_needs() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/systemd/robots-proxy.service"
    ))
    .unwrap();
    let families: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.trim().strip_prefix("RestrictAddressFamilies="))
        .flat_map(str::split_whitespace)
        .collect();
    for needed in ["AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"] {
        assert!(
            families.contains(&needed),
            "{needed} not in RestrictAddressFamilies: {families:?}"
        );
    }
    // And what the guard asks of the system works here: the interface addresses are listed.
    let listed = if_addrs::get_if_addrs().expect("getifaddrs works with AF_NETLINK");
    assert!(listed.iter().any(|i| i.ip().is_loopback()), "{listed:?}");
}
