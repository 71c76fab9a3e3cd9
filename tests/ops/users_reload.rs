//! Revoking a user: remove their line from the users file, send SIGHUP, and they get 407. A
//! file that fails to parse keeps the users in force, and the log names the file and the line.

use std::time::Duration;

use super::support::{write_atomically, Origin, ProxyProcess};
use crate::proxy::support::{raw_get, RawResponse};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn line(name: &str, password: &str) -> String {
    let cheap = argon2::Params::new(8, 1, 1, None).unwrap();
    format!("{name}:{}\n", robots_proxy::access::hash_password(password, &cheap).unwrap())
}

fn basic(user: &str, password: &str) -> String {
    use base64ct::Encoding;
    let token = base64ct::Base64::encode_string(format!("{user}:{password}").as_bytes());
    format!("Proxy-Authorization: Basic {token}\r\n")
}

async fn get_as(p: &ProxyProcess, url: &str, user: &str, password: &str) -> RawResponse {
    raw_get(p.proxy_addr, url, "x", &basic(user, password)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_removed_from_the_users_file_is_refused_after_sighup() {
    let origin = Origin::start(ROBOTS).await;
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let alice = line("alice", "alice-secret");
    let bob = line("bob", "bob-secret");
    write_atomically(&users, &format!("{alice}{bob}"));
    let file = users.to_str().unwrap();
    let p = ProxyProcess::start(&[], &[("ROBOTS_PROXY_ACCESS__USERS_FILE", file)]);
    let url = format!("{}/page", origin.base());
    assert_eq!(get_as(&p, &url, "alice", "alice-secret").await.status, 200);
    assert_eq!(get_as(&p, &url, "bob", "bob-secret").await.status, 200);

    // Alice is removed: the credential she used a moment ago no longer works.
    write_atomically(&users, &bob);
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: configuration reloaded", 1).await;
    let resp = get_as(&p, &url, "alice", "alice-secret").await;
    assert_eq!(resp.status, 407, "{resp:?}");
    assert!(p.stderr().contains("SIGHUP: users file reloaded"), "{}", p.stderr());
    assert_eq!(get_as(&p, &url, "bob", "bob-secret").await.status, 200);

    // A broken file is refused as a whole: the users in force stay, the log says where.
    write_atomically(&users, &format!("{alice}not a users line\n"));
    p.signal("HUP");
    p.wait_for_stderr("the running users stay", 1).await;
    let log = p.stderr();
    assert!(log.contains(&format!("{file} line 2")), "{log}");
    assert_eq!(get_as(&p, &url, "bob", "bob-secret").await.status, 200);
    assert_eq!(get_as(&p, &url, "alice", "alice-secret").await.status, 407);

    // Fixed again: Alice is back.
    write_atomically(&users, &format!("{alice}{bob}"));
    p.signal("HUP");
    p.wait_for_stderr("SIGHUP: users file reloaded", 2).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(get_as(&p, &url, "alice", "alice-secret").await.status, 200);
}
