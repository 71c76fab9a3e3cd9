//! Sealed shared records (issue 40 §1, review-ops C1): with `fleet.key_file`, a robots.txt
//! record or purge message written into Redis by hand (a forged body under a genuine header,
//! another site's genuine record, an older genuine record of the same site, garbage, a plain or
//! replayed purge message) is never used: the disallowed path stays 403 and audited, and every
//! refusal is counted. Keys change with `fleet.previous_key_file`; without a key,
//! `config check` warns.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Commands;

use super::support::{fleet, Fleet, Redis, TimedOrigin};
use super::{get, metrics, until_fleet_up};

const DISALLOW: &str = "User-agent: *\nDisallow: /private\n";
const ALLOW_ALL: &str = "User-agent: *\nAllow: /\n";

/// A new fleet key in `dir`, written by the command operators use.
fn new_key(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let out = crate::ops::support::run(&["fleet", "key", "new", path.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a fleet key is its owner's alone");
    path
}

/// The robots.txt record key of `origin` under the fleet's prefix `prefix`.
fn record_key(prefix: &str, origin: &TimedOrigin) -> String {
    format!("test-{prefix}:robots:{}", origin.url(""))
}

/// Waits (up to 5 s) until Redis holds the record `key`, and returns it.
async fn stored(redis: &Redis, key: &str) -> Vec<u8> {
    for _ in 0..250 {
        let value: Option<Vec<u8>> = redis.connection().get(key).unwrap();
        if let Some(value) = value {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{key} was never stored");
}

/// Purges `origin` through instance `i`'s admin (a genuine, sealed purge): every instance
/// drops its copy and the record is deleted.
async fn purge(f: &Fleet, i: usize, origin: &TimedOrigin) {
    let url = format!("{}/cache/purge?authority={}", f.instances[i].admin(), origin.url(""));
    let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    let resp = admin.post(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
}

/// The value of the refusal counter of `kind` and `reason` on instance `i`.
async fn refused(f: &Fleet, i: usize, kind: &str, reason: &str) -> f64 {
    let text = metrics(&f.instances[i]).await;
    let series =
        format!("robots_proxy_fleet_records_refused_total{{kind=\"{kind}\",reason=\"{reason}\"}}");
    crate::ops::support::sample(&text, &series)
}

/// Whether instance `i`'s audit log holds a `robots_disallow` record for `path` (waits up to
/// 5 s for the writer).
async fn audited_block(f: &Fleet, i: usize, path: &str) -> bool {
    for _ in 0..250 {
        let text = std::fs::read_to_string(f.state_dir(i).join("audit.jsonl")).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|r| r["event.action"] == "robots_disallow" && r["url.path"] == path);
        if found {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// `/private/<n>` through every instance: 403 each time, and each block audited.
async fn still_refused(f: &Fleet, origin: &TimedOrigin, n: &str) {
    for i in 0..f.instances.len() {
        let path = format!("/private/{n}-{i}");
        assert_eq!(get(f, i, &origin.url(&path)).await, 403, "{path} through instance {i}");
        assert!(audited_block(f, i, &path).await, "{path}: no robots_disallow record on {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_written_by_hand_into_redis_are_never_used() {
    let Some(redis) = Redis::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = new_key(dir.path(), "fleet.key");
    let key_env = key.to_str().unwrap();
    let f = fleet(2, &redis, "sealed", &[("ROBOTS_PROXY_FLEET__KEY_FILE", key_env)]);
    until_fleet_up(&f, 1).await;
    let origin = TimedOrigin::start(ALLOW_ALL, Duration::ZERO).await;
    let other = TimedOrigin::start(ALLOW_ALL, Duration::ZERO).await;
    let record = record_key("sealed", &origin);
    let mut c = redis.connection();

    // Genuine records: the origin's while it allowed everything (kept, to be replayed later),
    // and another site's that allows everything.
    assert_eq!(get(&f, 0, &origin.url("/private/first")).await, 200);
    let old = stored(&redis, &record).await;
    assert!(old.starts_with(b"s1 "), "{}", String::from_utf8_lossy(&old));
    assert_eq!(get(&f, 0, &other.url("/x")).await, 200);
    let others = stored(&redis, &record_key("sealed", &other)).await;

    // A purge, captured by a subscriber of the test's own, to be replayed later.
    let mut sub = redis::Client::open(redis.url()).unwrap().get_connection().unwrap();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("test-sealed:purge").unwrap();
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    origin.set_robots(DISALLOW);
    purge(&f, 1, &origin).await;
    let captured: Vec<u8> = pubsub.get_message().unwrap().get_payload().unwrap();
    drop(pubsub);
    still_refused(&f, &origin, "genuine").await;
    let genuine = stored(&redis, &record).await;
    let fetches = origin.hits("/robots.txt");

    // Review-ops C1 as it was reproduced: the body swapped under the genuine header, and a
    // plain purge message. The plain message is not used: each instance keeps its copy.
    let text = String::from_utf8_lossy(&genuine).into_owned();
    let forged = text.replace("Disallow: /private", "Allow: /");
    assert_ne!(forged, text);
    let _: () = c.set(&record, forged.as_bytes()).unwrap();
    let plain = format!("http 127.0.0.1 {}", origin.addr.port());
    let _: () = c.publish("test-sealed:purge", &plain).unwrap();
    // The replayed genuine purge message is not used either.
    let _: () = c.publish("test-sealed:purge", &captured).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    still_refused(&f, &origin, "plain-purge").await;
    assert_eq!(origin.hits("/robots.txt"), fetches, "no copy was dropped");
    for i in 0..2 {
        assert!(refused(&f, i, "purge", "unsealed").await >= 1.0, "instance {i}");
        assert!(refused(&f, i, "purge", "older").await >= 1.0, "instance {i}");
    }

    // Each forgery stored right after a genuine purge, so that the instances read it: the
    // forged body, another site's genuine record, the older genuine record of this site,
    // garbage. None is used: an instance that reads one fetches for itself (and its record
    // replaces the forgery).
    let forgeries: [(&str, Vec<u8>, &str); 4] = [
        ("forged-body", forged.into_bytes(), "bad_seal"),
        ("other-site", others, "bad_seal"),
        ("replayed", old, "older"),
        ("garbage", b"\x00garbage\xff\nUser-agent: *\nAllow: /\n".to_vec(), "unsealed"),
    ];
    for (name, value, reason) in forgeries {
        let before =
            refused(&f, 0, "robots", reason).await + refused(&f, 1, "robots", reason).await;
        purge(&f, 1, &origin).await;
        let _: () = c.set(&record, &value).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        still_refused(&f, &origin, name).await;
        let after = refused(&f, 0, "robots", reason).await + refused(&f, 1, "robots", reason).await;
        assert!(after > before, "{name}: not counted as {reason} ({before} -> {after})");
        let now: Vec<u8> = c.get(&record).unwrap();
        assert_ne!(now, value, "{name}: the forgery stayed in Redis");
    }
    let log = f.instances[0].stderr();
    assert!(log.contains("a shared record in Redis was not used"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_change_with_the_previous_key_file() {
    let Some(redis) = Redis::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let old = new_key(dir.path(), "old.key");
    let new = new_key(dir.path(), "new.key");
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    let origin = TimedOrigin::start(DISALLOW, Duration::ZERO).await;
    let first = fleet(1, &redis, "rotate", &[("ROBOTS_PROXY_FLEET__KEY_FILE", old)]);
    until_fleet_up(&first, 1).await;
    assert_eq!(get(&first, 0, &origin.url("/private/a")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 1);
    stored(&redis, &record_key("rotate", &origin)).await;

    // The new key, with the old one as previous: the record sealed with the old key is used.
    let rotated = fleet(
        1,
        &redis,
        "rotate",
        &[("ROBOTS_PROXY_FLEET__KEY_FILE", new), ("ROBOTS_PROXY_FLEET__PREVIOUS_KEY_FILE", old)],
    );
    until_fleet_up(&rotated, 1).await;
    assert_eq!(get(&rotated, 0, &origin.url("/private/b")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 1, "the old key's record was used");
    assert!(audited_block(&rotated, 0, "/private/b").await);

    // The new key alone: the old key's record does not verify, and is fetched again.
    let alone = fleet(1, &redis, "rotate", &[("ROBOTS_PROXY_FLEET__KEY_FILE", new)]);
    until_fleet_up(&alone, 1).await;
    assert_eq!(get(&alone, 0, &origin.url("/private/c")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 2, "the old key's record was refused");
    // Read twice (before and under the fetch lease), refused each time.
    assert!(refused(&alone, 0, "robots", "bad_seal").await >= 1.0);
}

#[test]
fn config_check_warns_about_a_fleet_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap();
    let base =
        [("ROBOTS_PROXY_STATE_DIR", state), ("ROBOTS_PROXY_FLEET__REDIS", "redis://127.0.0.1:1/0")];
    let out = crate::ops::support::run(&["config", "check"], &base);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("fleet.redis is set without fleet.key_file"), "{err}");
    assert!(err.contains("whoever can write to that Redis decides"), "{err}");

    // With a key, no warning; a key others may read is refused, naming the fix.
    let key = new_key(dir.path(), "fleet.key");
    let with_key = [base[0], base[1], ("ROBOTS_PROXY_FLEET__KEY_FILE", key.to_str().unwrap())];
    let out = crate::ops::support::run(&["config", "check"], &with_key);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("without fleet.key_file"), "{err}");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = crate::ops::support::run(&["config", "check"], &with_key);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("fleet.key_file") && err.contains("chmod 600"), "{err}");
}

/// The purge generation is sealed as the records are (issue 40 item 4): a purge of everything
/// writes it sealed; one written by hand (set back, or plain) is counted and never used, the
/// disallowed path staying 403; one deleted (a restart without persistence) is put back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_generation_written_by_hand_is_never_used() {
    let Some(redis) = Redis::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = new_key(dir.path(), "fleet.key");
    let f =
        fleet(2, &redis, "generation", &[("ROBOTS_PROXY_FLEET__KEY_FILE", key.to_str().unwrap())]);
    until_fleet_up(&f, 1).await;
    let origin = TimedOrigin::start(DISALLOW, Duration::ZERO).await;
    let generation = "test-generation:purge-generation";
    let mut c = redis.connection();
    still_refused(&f, &origin, "before").await;

    // A genuine purge of everything: the generation is sealed.
    let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    let resp = admin.post(format!("{}/cache/purge-all", f.instances[1].admin())).send().await;
    assert_eq!(resp.unwrap().status(), 200);
    let sealed: Vec<u8> = c.get(generation).unwrap();
    assert!(sealed.starts_with(b"s1 1 "), "{}", String::from_utf8_lossy(&sealed));
    still_refused(&f, &origin, "sealed").await;

    // Set back by hand, and a plain counter ahead: neither is used.
    for (name, forged) in [("set-back", "0"), ("plain", "7")] {
        let before = refused(&f, 0, "generation", "unsealed").await
            + refused(&f, 1, "generation", "unsealed").await;
        let _: () = c.set(generation, forged).unwrap();
        purge(&f, 0, &origin).await;
        still_refused(&f, &origin, name).await;
        let after = refused(&f, 0, "generation", "unsealed").await
            + refused(&f, 1, "generation", "unsealed").await;
        assert!(after > before, "{name}: not counted ({before} -> {after})");
    }

    // Gone (as after a restart without persistence): put back, sealed, as the highest used.
    let _: () = c.del(generation).unwrap();
    purge(&f, 0, &origin).await;
    still_refused(&f, &origin, "deleted").await;
    let back: Vec<u8> = c.get(generation).unwrap();
    assert!(back.starts_with(b"s1 1 "), "{}", String::from_utf8_lossy(&back));
    // The next purge of everything moves past every generation used.
    let resp = admin.post(format!("{}/cache/purge-all", f.instances[0].admin())).send().await;
    assert_eq!(resp.unwrap().status(), 200);
    let next: Vec<u8> = c.get(generation).unwrap();
    assert!(next.starts_with(b"s1 2 "), "{}", String::from_utf8_lossy(&next));
    still_refused(&f, &origin, "after").await;
}
