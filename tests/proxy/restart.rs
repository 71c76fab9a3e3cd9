//! What RFC 9309's rules need survives a restart of the real binary (`state_dir/robots/`):
//! a site that goes down while the proxy is stopped keeps its last good copy, used stale,
//! instead of starting over with everything disallowed.

use std::time::Duration;

use super::support::{raw_get, RawResponse};
use crate::cache::support::{Origin, Reply};
use crate::ops::support::ProxyProcess;

const RULES: &str = "User-agent: *\nDisallow: /private\n";

async fn get(proxy: &ProxyProcess, origin: &Origin, path: &str) -> RawResponse {
    let host = origin.base_url().trim_start_matches("http://").to_owned();
    raw_get(proxy.proxy_addr, &format!("{}{path}", origin.base_url()), &host, "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_copy_survives_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap().to_owned();
    // Copies expire after 2 s, so the restarted proxy must refetch.
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", state_dir.as_str()),
        ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "2s"),
        ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__FETCH_TIMEOUT", "3s"),
        ("ROBOTS_PROXY_ROBOTS__CONNECT_TIMEOUT", "1s"),
    ];
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    origin.route("/private", Reply::ok("private content"));
    origin.route("/ok", Reply::ok("ok content"));

    let proxy = ProxyProcess::start(&[], &env);
    assert_eq!(get(&proxy, &origin, "/private").await.status, 403);
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 200);
    // The record is written off the request path: wait for it.
    let dir = state.path().join("robots");
    for _ in 0..200 {
        let records = std::fs::read_dir(&dir).map(|d| {
            d.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "rec")).count()
        });
        if records.is_ok_and(|n| n > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(proxy);

    // The origin's robots.txt fails while the proxy is down, and the copy expires.
    origin.route("/robots.txt", Reply::status(503));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let proxy = ProxyProcess::start(&[], &env);
    let ok = get(&proxy, &origin, "/ok").await;
    assert_eq!(ok.status, 200, "the kept copy allows /ok: {ok:?}");
    let private = get(&proxy, &origin, "/private").await;
    assert_eq!(private.status, 403, "{private:?}");
    assert!(private.body.contains("stale"), "{}", private.body);
    assert!(origin.robots_hits() >= 2, "the restarted proxy tried the origin again");
}
