//! Where Redis is, and its password, never reach a proxy client; the password reaches no log,
//! no admin answer and no `config check` output, whatever the form of `fleet.redis`.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::support::{client, have_redis, Redis, TimedOrigin};
use crate::ops::support::ProxyProcess;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const SECRET: &str = "s3cretPW";

/// A redis-server listening only on a unix socket, with a password; stopped by PID.
struct UnixRedis {
    child: Child,
    _dir: tempfile::TempDir,
    socket: String,
}

impl UnixRedis {
    async fn start() -> Option<UnixRedis> {
        if !have_redis() {
            crate::skip::missing("redis-server", "apt-get install redis-server");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("redis.sock").to_string_lossy().into_owned();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket", &socket, "--requirepass", SECRET])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        // Stopped on drop, a failed start included.
        let redis = UnixRedis { child, _dir: dir, socket };
        for _ in 0..500 {
            if std::os::unix::net::UnixStream::connect(&redis.socket).is_ok() {
                return Some(redis);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("redis-server did not listen on {}", redis.socket);
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for UnixRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn admin_text(proxy: &ProxyProcess, path: &str) -> String {
    let c = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    c.get(format!("{}{path}", proxy.admin())).send().await.unwrap().text().await.unwrap()
}

async fn until_up(proxy: &ProxyProcess, up: u8) {
    let want = format!("robots_proxy_fleet_up {up}");
    for _ in 0..200 {
        if admin_text(proxy, "/metrics").await.lines().any(|l| l == want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never {want}:\n{}", proxy.stderr());
}

/// The 503 a proxy client gets for a site nobody asked for yet (robots.txt must come from the
/// fleet), checked to say nothing of `hidden`.
async fn refused_body(proxy: &ProxyProcess, hidden: &[&str]) {
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let resp = client(proxy.proxy_addr).get(origin.url("/x")).send().await.unwrap();
    assert_eq!(resp.status(), 503);
    let status = resp.headers()["proxy-status"].to_str().unwrap().to_owned();
    let body = resp.text().await.unwrap();
    assert!(body.contains("fleet's shared store cannot be reached"), "{body}");
    for h in hidden {
        assert!(
            !body.contains(h) && !status.contains(h),
            "{h:?} told to a client: {body} {status}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_password_is_masked_everywhere_and_no_client_learns_where_redis_is() {
    let Some(mut redis) = UnixRedis::start().await else { return };
    let url = format!("redis+unix://{}?db=1&pass={SECRET}", redis.socket);
    let env = [
        ("ROBOTS_PROXY_FLEET__REDIS", url.as_str()),
        ("ROBOTS_PROXY_FLEET__KEY_PREFIX", "test-secrets:"),
        ("ROBOTS_PROXY_FLEET__ON_REDIS_ERROR", "refuse"),
    ];
    let proxy = ProxyProcess::start(&[], &env);
    // The password is the one that lets the instance in.
    until_up(&proxy, 1).await;
    let summary = admin_text(&proxy, "/api/summary").await;
    assert!(summary.contains("pass=***"), "{summary}");
    redis.stop();
    refused_body(&proxy, &[SECRET, &redis.socket, "redis.sock", "unix", "db=1"]).await;
    until_up(&proxy, 0).await;
    let summary = admin_text(&proxy, "/api/summary").await;
    assert!(!summary.contains(SECRET), "{summary}");
    let robots = admin_text(&proxy, "/robots?url=http://127.0.0.1:9/x").await;
    assert!(!robots.contains(SECRET), "{robots}");
    let log = proxy.stderr();
    assert!(log.contains("out of reach") && log.contains("pass=***"), "{log}");
    assert!(!log.contains(SECRET), "{log}");
    // `config check` prints the configuration with the password masked.
    let out = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["config", "check"])
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(shown.contains("pass=***") && !shown.contains(SECRET), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_names_neither_host_nor_port_user_or_db_of_redis() {
    let Some(mut redis) = Redis::start().await else { return };
    let port = redis.port.to_string();
    redis.stop();
    let url = format!("redis://fleetuser:{SECRET}@127.0.0.1:{port}/7");
    let env = [
        ("ROBOTS_PROXY_FLEET__REDIS", url.as_str()),
        ("ROBOTS_PROXY_FLEET__KEY_PREFIX", "test-secrets-tcp:"),
        ("ROBOTS_PROXY_FLEET__ON_REDIS_ERROR", "refuse"),
    ];
    let proxy = ProxyProcess::start(&[], &env);
    for _ in 0..3 {
        refused_body(&proxy, &[SECRET, &port, "fleetuser", "/7", "redis://"]).await;
    }
    // The operator sees where, masked.
    let log = proxy.stderr();
    assert!(log.contains(&format!("redis://fleetuser:***@127.0.0.1:{port}/7")), "{log}");
    assert!(!log.contains(SECRET), "{log}");
}

#[test]
fn an_unparseable_url_is_refused_without_its_password() {
    let out = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["config", "check"])
        .env_clear()
        .env("ROBOTS_PROXY_FLEET__REDIS", format!("rediss//app:{SECRET}@redis.internal:6379"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a Redis URL"), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
}
