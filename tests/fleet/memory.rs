//! What the fleet keeps in Redis is bounded (issue 24 §8): a robots.txt record lives at most
//! `fleet.robots_ttl` (it lived `robots.give_up_after` + `robots.max_age`, 31 days), and a body
//! larger than `fleet.max_shared_body` is kept only by the instance that fetched it.

use std::time::Duration;

use super::support::{fleet, Redis, TimedOrigin};
use super::{get, until_fleet_up};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_live_at_most_robots_ttl_and_large_bodies_are_not_shared() {
    let Some(redis) = Redis::start().await else { return };
    let env = [
        ("ROBOTS_PROXY_FLEET__ROBOTS_TTL", "10min"),
        ("ROBOTS_PROXY_FLEET__MAX_SHARED_BODY", "1KiB"),
    ];
    let f = fleet(2, &redis, "memory", &env);
    until_fleet_up(&f, 1).await;
    let mut c = redis.connection();

    // A small robots.txt is shared, for 10 minutes at most.
    let small = TimedOrigin::start("User-agent: *\nDisallow: /private\n", Duration::ZERO).await;
    assert_eq!(get(&f, 0, &small.url("/a")).await, 200);
    let key = format!("test-memory:robots:http://{}", small.addr);
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut c).unwrap();
    assert!(ttl > 0 && ttl <= 600_000, "the record lives {ttl} ms, past fleet.robots_ttl");
    assert_eq!(get(&f, 1, &small.url("/private/x")).await, 403);
    assert_eq!(small.hits("/robots.txt"), 1, "instance 1 used the shared record");

    // A robots.txt over 1 KiB is kept by each instance for itself: nothing of it in Redis, no
    // lease left behind, and each instance obeys it.
    let big = format!("User-agent: *\nDisallow: /private\n{}", "# padding\n".repeat(200));
    let large = TimedOrigin::start(&big, Duration::ZERO).await;
    assert_eq!(get(&f, 0, &large.url("/a")).await, 200);
    assert_eq!(get(&f, 0, &large.url("/private/x")).await, 403);
    let authority = format!("http://{}", large.addr);
    let found = redis.keys(&format!("test-memory:*{authority}"));
    assert!(found.is_empty(), "a body over fleet.max_shared_body went to Redis: {found:?}");
    assert_eq!(get(&f, 1, &large.url("/private/x")).await, 403);
    assert_eq!(large.hits("/robots.txt"), 2, "each instance fetched it for itself");
    assert_eq!(get(&f, 0, &large.url("/private/y")).await, 403);
    assert_eq!(large.hits("/robots.txt"), 2, "instance 0 keeps its own copy");
}

/// With Redis's used memory at `fleet.records_memory_percent` (75) of its `maxmemory`, records
/// are no longer stored (each instance fetches for itself), while the pace, whose keys must
/// never be evicted (`noeviction`: nothing is), still writes its keys in the room left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_stop_at_records_memory_percent_and_leave_room_for_the_pace() {
    let Some(redis) = Redis::start().await else { return };
    let env =
        [("ROBOTS_PROXY_PACING__ENABLED", "true"), ("ROBOTS_PROXY_PACING__DEFAULT_RPS", "50")];
    let f = fleet(2, &redis, "full", &env);
    until_fleet_up(&f, 1).await;
    let mut c = redis.connection();
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    // Used memory is about 83 % of maxmemory: past 75 %, well short of full.
    let max = used * 6 / 5;
    redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(max).query::<()>(&mut c).unwrap();
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query::<()>(&mut c)
        .unwrap();
    let origin = TimedOrigin::start("User-agent: *\nDisallow: /private\n", Duration::ZERO).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    let authority = format!("http://{}", origin.addr);
    let records = redis.keys(&format!("test-full:robots:{authority}"));
    assert!(records.is_empty(), "a record was stored past records_memory_percent: {records:?}");
    assert!(redis.keys(&format!("test-full:lease:{authority}")).is_empty(), "lease left");
    assert!(!redis.keys(&format!("test-full:pace:{authority}")).is_empty(), "no pace key");
    assert_eq!(get(&f, 1, &origin.url("/private/x")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 2, "each instance fetched for itself");
    let log = f.instances[0].stderr();
    assert!(log.contains("records_memory_percent"), "{log}");
    // Room again: records are shared again.
    redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(0).query::<()>(&mut c).unwrap();
    let other = TimedOrigin::start("User-agent: *\nDisallow: /private\n", Duration::ZERO).await;
    assert_eq!(get(&f, 0, &other.url("/a")).await, 200);
    assert_eq!(get(&f, 1, &other.url("/private/x")).await, 403);
    assert_eq!(other.hits("/robots.txt"), 1, "shared again");
}
