//! Refresh ahead in a fleet: one refetch for the whole fleet, through the fetch lease, while
//! every instance answers with the rules in force; the record it stores is what every instance
//! then decides with.

use std::time::Duration;

use super::support::{fleet, fleet_each, Redis};
use super::{metrics, until_fleet_up};
use crate::ops::refresh_ahead::{statuses, until, GatedOrigin};

const OLD: &str = "User-agent: *\nDisallow: /old\n";
const NEW: &str = "User-agent: *\nDisallow: /new\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_refreshes_for_the_fleet() {
    let Some(redis) = Redis::start().await else { return };
    let env = [
        ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "10s"),
        ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__REFRESH_AHEAD", "0.5"),
    ];
    let f = fleet(2, &redis, "refresh-ahead", &env);
    until_fleet_up(&f, 1).await;
    let origin = GatedOrigin::start(OLD).await;
    let (a, b) = (f.instances[0].proxy_addr, f.instances[1].proxy_addr);
    let old = origin.url("/old");
    assert_eq!(statuses(a, &origin.url("/old"), 1).await, [403]);
    assert_eq!(statuses(b, &origin.url("/old"), 1).await, [403]);
    assert_eq!(origin.robots_hits(), 1, "one fetch for the fleet");
    origin.set_robots(200, NEW);
    origin.hold();
    // Into the refresh window (from 5 s after the fetch; it expires at 10 s).
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let (on_a, on_b) = tokio::join!(statuses(a, &old, 20), statuses(b, &old, 20));
    assert!(on_a.iter().chain(&on_b).all(|s| *s == 403), "old rules: {on_a:?} {on_b:?}");
    // Both instances started their refresh; one holds the lease and the origin's one refetch.
    for proxy in &f.instances {
        let mut started = false;
        for _ in 0..500 {
            if metrics(proxy).await.lines().any(|l| l == "robots_proxy_cache_refreshes_total 1") {
                started = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(started, "an instance never started its refresh");
    }
    until("the refetch reaches the origin", || origin.held() == 1).await;
    let (on_a, on_b) = tokio::join!(statuses(a, &old, 10), statuses(b, &old, 10));
    assert!(on_a.iter().chain(&on_b).all(|s| *s == 403), "old rules: {on_a:?} {on_b:?}");
    assert_eq!((origin.robots_hits(), origin.held()), (2, 1), "one refetch for the fleet");
    origin.release();
    for proxy in [a, b] {
        let mut renewed = false;
        for _ in 0..300 {
            if statuses(proxy, &origin.url("/old"), 1).await == [200] {
                renewed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(renewed, "the new rules never applied on {proxy}");
        assert_eq!(statuses(proxy, &origin.url("/new"), 2).await, [403; 2]);
    }
    assert_eq!(origin.robots_hits(), 2, "the refreshed record is shared");
}

/// Review-fleet N5: freshness follows Redis's clock. Instance 0 runs 60 s fast (the debug
/// build's test clock, `ROBOTSPROXY_DEBUG_CLOCK_SKEW_MS`). The record it fetches expires for the
/// fleet `max_age` after the fetch by Redis's clock, not 60 s later: a path the site disallows
/// afterwards is refused by the correct instance once `max_age` has passed. And a record the
/// correct instance fetched is not expired early by the fast one (no second fetch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freshness_follows_redis_clock_not_a_fast_instance() {
    let Some(redis) = Redis::start().await else { return };
    let env = [("ROBOTS_PROXY_ROBOTS__MAX_AGE", "3s"), ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s")];
    let fast: &[(&str, &str)] = &[("ROBOTSPROXY_DEBUG_CLOCK_SKEW_MS", "60000")];
    let f = fleet_each(&[redis.url(), redis.url()], "skewed-clock", &env, &[fast, &[]]);
    until_fleet_up(&f, 1).await;
    let (fast, right) = (f.instances[0].proxy_addr, f.instances[1].proxy_addr);

    // The fast instance fetches; the site then disallows /private/.
    let origin = GatedOrigin::start(OLD).await;
    assert_eq!(statuses(fast, &origin.url("/private/a"), 1).await, [200]);
    assert_eq!(statuses(right, &origin.url("/private/a"), 1).await, [200]);
    assert_eq!(origin.robots_hits(), 1, "one fetch for the fleet");
    origin.set_robots(200, "User-agent: *\nDisallow: /private/\n");
    // Past max_age (3 s) with a margin, by the real clock: the record has expired for every
    // instance (before the fix it lived 60 s more on the correct one).
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert_eq!(statuses(right, &origin.url("/private/b"), 1).await, [403]);
    assert_eq!(statuses(fast, &origin.url("/private/b"), 1).await, [403]);
    assert_eq!(origin.robots_hits(), 2, "one refetch for the fleet");

    // The correct instance fetches a new site's robots.txt: the fast one takes its record as
    // current (before the fix it saw it as expired 57 s ago and fetched again).
    let other = GatedOrigin::start(OLD).await;
    assert_eq!(statuses(right, &other.url("/old"), 1).await, [403]);
    assert_eq!(statuses(fast, &other.url("/old"), 1).await, [403]);
    assert_eq!(statuses(fast, &other.url("/new"), 1).await, [200]);
    assert_eq!(other.robots_hits(), 1, "the fast instance used the shared record");
}
