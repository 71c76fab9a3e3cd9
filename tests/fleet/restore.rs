//! The fleet's pace survives a store that loses it (review-fleet N3, issue 40 part 3): Redis
//! restarted without persistence forgets every site's starts and the slots held, and each
//! instance puts back what it knows within one heartbeat (`crates/fleet/src/pace/ledger.rs`). The
//! real binary, a real redis-server stopped and started again on its port (`--save ""`), an
//! origin that notes when each request arrives.

use std::time::{Duration, Instant};

use super::support::{fleet, Redis, TimedOrigin};
use super::{get, metrics, until_fleet_up, ROBOTS};

/// Redis stopped and started again, empty; returns once every instance is back in the fleet
/// and has had the time to put its pace back (the heartbeat that finds Redis back starts it).
async fn restart_empty(redis: &mut Redis, f: &super::support::Fleet) {
    redis.stop();
    until_fleet_up(f, 0).await;
    redis.restart().await;
    until_fleet_back(f).await;
}

/// Waits until every instance is in the fleet again, and one heartbeat more: the heartbeat
/// that finds Redis back has every instance put its pace back at once.
async fn until_fleet_back(f: &super::support::Fleet) {
    until_fleet_up(f, 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Every instance says it put its pace back, whole, at least once.
async fn assert_restored(f: &super::support::Fleet) {
    for (i, proxy) in f.instances.iter().enumerate() {
        let m = metrics(proxy).await;
        let whole = m
            .lines()
            .find_map(|l| {
                l.strip_prefix("robots_proxy_fleet_pace_restores_total{outcome=\"whole\"} ")
            })
            .and_then(|n| n.parse::<u64>().ok());
        assert!(whole.is_some_and(|n| n >= 1), "instance {i} put back nothing: {whole:?}");
    }
}

fn pacing(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut env =
        vec![("ROBOTS_PROXY_PACING__ENABLED", "true"), ("ROBOTS_PROXY_PACING__MAX_WAIT", "20s")];
    env.extend_from_slice(extra);
    env
}

/// Crawl-delay 8 s: a request through one instance, Redis restarted empty, then a request of
/// the same site through the other instance: it still starts a Crawl-delay after the first
/// (before, it started at once: the review saw a 5 s Crawl-delay give a 3.1 s gap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_keeps_the_crawl_delay_of_the_fleet() {
    let Some(mut redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start("User-agent: *\nCrawl-delay: 8\n", Duration::ZERO).await;
    let f = fleet(2, &redis, "restore-delay", &pacing(&[]));
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/first")).await, 200);
    restart_empty(&mut redis, &f).await;
    let sent = Instant::now();
    assert_eq!(get(&f, 1, &origin.url("/second")).await, 200);
    let (first, second) = (origin.arrivals("/first")[0], origin.arrivals("/second")[0]);
    assert!(sent - first < Duration::from_millis(7500), "the restart took too long to test");
    assert!(
        second - first >= Duration::from_millis(7990),
        "the second request reached the origin {:?} after the first (Crawl-delay 8 s)",
        second - first
    );
    assert_restored(&f).await;
}

/// Concurrency 1: a slow request holds the site's one slot through one instance while Redis
/// restarts empty; a request of the same site through the other instance waits until the slow
/// one's response came, as before the restart (before: two were in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_keeps_the_slots_held() {
    let Some(mut redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env = pacing(&[("ROBOTS_PROXY_PACING__DEFAULT_CONCURRENCY", "1")]);
    let f = fleet(2, &redis, "restore-slots", &env);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 1, &origin.url("/warm")).await, 200);
    let c = super::support::client(f.instances[0].proxy_addr);
    let url = origin.url("/slow/9000");
    let slow = tokio::spawn(async move { c.get(url).send().await.unwrap().status().as_u16() });
    origin.until_arrived("/slow/9000").await;
    restart_empty(&mut redis, &f).await;
    assert_eq!(get(&f, 1, &origin.url("/fast")).await, 200);
    assert_eq!(slow.await.unwrap(), 200);
    let (held, fast) = (origin.arrivals("/slow/")[0], origin.arrivals("/fast")[0]);
    assert!(
        fast - held >= Duration::from_millis(8950),
        "the second request reached the origin {:?} after the one holding the slot for 9 s",
        fast - held
    );
    assert_restored(&f).await;
}

/// Crawl-delay 8 s, `on_redis_error = "local"`: while Redis is down an instance admits a
/// request by its own pace; once Redis is back (empty), the other instance's request is spaced
/// from that one, which the store never saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_made_alone_during_an_outage_spaces_the_fleet_after_it() {
    let Some(mut redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start("User-agent: *\nCrawl-delay: 8\n", Duration::ZERO).await;
    let f = fleet(2, &redis, "restore-alone", &pacing(&[]));
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/warm")).await, 200);
    redis.stop();
    until_fleet_up(&f, 0).await;
    assert_eq!(get(&f, 0, &origin.url("/alone")).await, 200);
    redis.restart().await;
    until_fleet_back(&f).await;
    assert_eq!(get(&f, 1, &origin.url("/after")).await, 200);
    let (alone, after) = (origin.arrivals("/alone")[0], origin.arrivals("/after")[0]);
    assert!(
        after - alone >= Duration::from_millis(7990),
        "the request after the outage reached the origin {:?} after the one made alone",
        after - alone
    );
    assert_restored(&f).await;
}
