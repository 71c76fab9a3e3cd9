//! Revoking a user: remove their line from the users file, send SIGHUP, and they get 407. A
//! file that fails to parse keeps the users in force, and the log names the file and the line.

use std::time::Duration;

use super::support::{write_atomically, Origin, ProxyProcess};
use crate::proxy::support::{raw_get, RawResponse};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn line(name: &str, password: &str) -> String {
    let cost = argon2::Params::default();
    format!("{name}:{}\n", robots_proxy::access::hash_password(password, &cost).unwrap())
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

/// A users-file hash below the minimum Argon2 cost is refused at load, naming the file and the
/// line (issue 26 §21); `config check` and `serve` alike.
#[test]
fn a_hash_below_the_minimum_cost_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let weak = argon2::Params::new(8, 1, 1, None).unwrap();
    let weak = robots_proxy::access::hash_password("pw", &weak).unwrap();
    std::fs::write(&users, format!("{}bob:{weak}\n", line("alice", "alice-secret"))).unwrap();
    let file = users.to_str().unwrap();
    let state = dir.path().join("state");
    let env = [
        ("ROBOTS_PROXY_ACCESS__USERS_FILE", file),
        ("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap()),
    ];
    for args in [&["config", "check"][..], &["serve", "--listen", "127.0.0.1:0"][..]] {
        let out = super::support::run(args, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&format!("{file} line 2")), "{args:?}: {err}");
        assert!(err.contains("m=8,t=1,p=1 is below the minimum"), "{args:?}: {err}");
    }
}
