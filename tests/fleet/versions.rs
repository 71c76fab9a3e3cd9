//! Every instance of a fleet names the same robots.txt version (issue 19, item 7): the shared
//! record carries the digest and the fetch time, so a block decided on the record another
//! instance stored names the same `robots.sha256` and `robots.fetched_at` as the fetcher's.

use std::time::Duration;

use super::support::{fleet, Redis, TimedOrigin};
use super::{get, until_fleet_up};

/// The audit records of instance `i` whose `event.action` is `action`.
fn records(f: &super::support::Fleet, i: usize, action: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(f.state_dir(i).join("audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["event.action"] == action)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_name_the_same_digest() {
    let Some(redis) = Redis::start().await else { return };
    let f = fleet(2, &redis, "versions", &[]);
    until_fleet_up(&f, 1).await;
    const BODY: &str = "# shared\nUser-agent: *\nDisallow: /private\n";
    let origin = TimedOrigin::start(BODY, Duration::ZERO).await;
    assert_eq!(get(&f, 0, &origin.url("/private/a")).await, 403);
    assert_eq!(get(&f, 1, &origin.url("/private/b")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 1, "instance 1 used the shared record");

    let digest = ring::digest::digest(&ring::digest::SHA256, BODY.as_bytes());
    let want: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    // The record in Redis names it too, for whoever reads the store.
    let key = format!("test-versions:robots:http://{}", origin.addr);
    let record: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut redis.connection()).unwrap();
    // The record's header line comes after the purge-generation tag (`g0`).
    let text = String::from_utf8_lossy(&record).into_owned();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("g0"), "{text}");
    let header = lines.next().unwrap_or("").to_owned();
    assert!(header.contains(&want), "{header}");

    let mut named = Vec::new();
    for i in 0..2 {
        let mut blocks = Vec::new();
        for _ in 0..250 {
            blocks = records(&f, i, "robots_disallow");
            if !blocks.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let block = blocks.first().unwrap_or_else(|| panic!("instance {i} recorded no block"));
        let announce = records(&f, i, "robots_version");
        assert_eq!(announce.len(), 1, "instance {i}: {announce:?}");
        assert_eq!(announce[0]["robots.body"], BODY);
        named.push((
            block["robots.sha256"].as_str().unwrap().to_owned(),
            block["robots.fetched_at"].as_str().unwrap().to_owned(),
            announce[0]["robots.sha256"].as_str().unwrap().to_owned(),
        ));
    }
    assert_eq!(named[0].0, want);
    assert_eq!(named[0], named[1], "both instances name one version, fetched once");
    assert_eq!(named[0].2, want);
}
