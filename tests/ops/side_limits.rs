//! The side listeners (the key directory, the admin listener) share the process's file
//! descriptors with the proxy: idle connections past their caps are closed at once, idle ones
//! within them time out, and the admin listener admits only `admin.allow_clients`. The real
//! binary, real sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::support::{directory_proxy, proxied_client, Origin, ProxyProcess};
use crate::proxy::support::raw;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// Opens `n` connections to `addr` that send nothing.
async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        all.push(TcpStream::connect(addr).await.unwrap());
    }
    all
}

/// How many of `streams` the server closes within `within` (read gives EOF or an error).
async fn closed_within(streams: &mut [TcpStream], within: Duration) -> usize {
    let deadline = tokio::time::Instant::now() + within;
    let mut closed = 0;
    for s in streams.iter_mut() {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout_at(deadline, s.read(&mut byte)).await {
            closed += 1;
        }
    }
    closed
}

async fn get_status(addr: SocketAddr, path: &str, host: &str) -> u16 {
    raw(addr, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"))
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_directory_cap_are_closed_and_the_proxy_keeps_serving() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let (p, directory) = directory_proxy(&state, "https://bots.example.com");
    let path = "/.well-known/http-message-signatures-directory";
    assert_eq!(get_status(directory, path, "bots.example.com").await, 200);

    // 300 idle connections from one client: past the per-client cap (32) and the total (256).
    let mut idle = idle_connections(directory, 300).await;
    let closed = closed_within(&mut idle, Duration::from_secs(2)).await;
    assert!(closed >= 300 - 32, "only {closed} of 300 idle connections were closed at once");
    // The proxy serves meanwhile.
    let client = proxied_client(p.proxy_addr);
    let resp = client.get(format!("{}/page", origin.base())).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    // The ones kept end by the idle timeout (5 s), and the directory answers again.
    let started = Instant::now();
    let mut all_closed = false;
    while started.elapsed() < Duration::from_secs(15) {
        if closed_within(&mut idle, Duration::from_millis(500)).await == idle.len() {
            all_closed = true;
            break;
        }
    }
    assert!(all_closed, "idle connections to the directory were still open after 15 s");
    assert_eq!(get_status(directory, path, "bots.example.com").await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_caps_its_connections() {
    let origin = Origin::start(ROBOTS).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[admin]\nmax_connections = 8\n").unwrap();
    let p = ProxyProcess::start(&["--config", config.to_str().unwrap()], &[]);
    let mut idle = idle_connections(p.admin_addr, 40).await;
    let closed = closed_within(&mut idle, Duration::from_secs(2)).await;
    assert!(closed >= 32, "only {closed} of 40 idle admin connections were closed at once");
    let client = proxied_client(p.proxy_addr);
    let resp = client.get(format!("{}/page", origin.base())).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    drop(idle);
    let host = p.admin_addr.to_string();
    let mut answered = false;
    for _ in 0..100 {
        if get_status(p.admin_addr, "/healthz", &host).await == 200 {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "the admin listener did not answer once the idle connections closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_admits_only_its_clients() {
    let origin = Origin::start(ROBOTS).await;
    let dir = tempfile::tempdir().unwrap();
    // Loopback is not in the list: this client may not use the admin listener.
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[admin]\nallow_clients = [\"192.0.2.0/24\"]\n").unwrap();
    let p = ProxyProcess::start(&["--config", config.to_str().unwrap()], &[]);
    let host = p.admin_addr.to_string();
    let url = format!("/robots?url={}/x", origin.base());
    assert_eq!(get_status(p.admin_addr, &url, &host).await, 0, "no answer at all");
    assert_eq!(get_status(p.admin_addr, "/api/summary", &host).await, 0);
    assert_eq!(origin.robots_hits(), 0, "robots.txt fetched for a client not allowed");
    p.wait_for_stderr("client address not allowed", 1).await;
    drop(p);

    // By default, loopback only: this client is.
    let p = ProxyProcess::start(&[], &[]);
    let host = p.admin_addr.to_string();
    assert_eq!(get_status(p.admin_addr, &url, &host).await, 200);
    assert_eq!(origin.robots_hits(), 1);
}
