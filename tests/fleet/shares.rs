//! A site's share (issue 40, Speed): where the pace is finer than the timer's tick, a `RESERVE`
//! that lets its request go also reserves the next places of the rate within that tick, each
//! with its slot, for the instance's next requests. The real binary, a real redis-server, an
//! origin that counts what it has in flight; Redis's own log says which calls each request
//! cost.

use std::time::{Duration, Instant};

use super::support::{client, fleet, Redis, TimedOrigin};
use super::{all_at_once, at_once, ROBOTS};

/// The `RESERVE` calls among `scripts` (`Redis::scripts_on` of a pace key): five keys and
/// fifteen arguments (`BEGIN` has ten), and how many more starts each asked for (its
/// fourteenth).
fn reserves(scripts: &[Vec<String>]) -> Vec<u32> {
    scripts
        .iter()
        .filter(|args| args.len() == 3 + 5 + 15 && args[2] == "5")
        .map(|args| args[21].parse().expect("RESERVE's fourteenth argument is a count"))
        .collect()
}

fn env(concurrency: &'static str) -> [(&'static str, &'static str); 4] {
    [
        ("ROBOTS_PROXY_PACING__ENABLED", "true"),
        ("ROBOTS_PROXY_PACING__DEFAULT_RPS", "1000000"),
        ("ROBOTS_PROXY_PACING__DEFAULT_CONCURRENCY", concurrency),
        ("ROBOTS_PROXY_PACING__QUEUE_LIMIT", "1000"),
    ]
}

/// Waits (up to 5 s) until the site holds no slot in Redis; the slots it still holds if it
/// never gets there.
async fn until_no_slot_held(redis: &Redis, prefix: &str) -> usize {
    let key = |k: &String| k.starts_with(&format!("test-{prefix}:slots:"));
    let mut held = 0;
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let mut c = redis.connection();
        held = 0;
        for k in redis.keys(&format!("test-{prefix}:slots:*")).iter().filter(|k| key(k)) {
            let n: usize = redis::cmd("ZCARD").arg(k).query(&mut c).unwrap();
            held += n;
        }
        if held == 0 {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    held
}

/// A busy site at a rate finer than the tick: many of its requests take a place of their
/// instance's share, with no script call of their own, and the slots of the share go back to
/// Redis once the load ends (not after a slot's lease of half a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_site_finer_than_the_tick_costs_redis_a_call_for_several_requests() {
    let Some(redis) = Redis::start().await else { return };
    let f = fleet(1, &redis, "shares", &env("1000"));
    let proxy = f.instances[0].proxy_addr;
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let warm = client(proxy).get(origin.url("/warm")).send().await.unwrap();
    assert_eq!(warm.status(), 200);
    redis.log_every_command();
    let (rounds, each) = (8, 50);
    for round in 0..rounds {
        let urls = (0..each).map(|i| origin.url(&format!("/s/{round}/{i}")));
        let statuses = at_once(&[proxy], urls).await;
        assert_eq!(statuses, vec![200; each], "round {round}");
    }
    let n = rounds * each;
    let asked = reserves(&redis.scripts_on("test-shares:pace:"));
    assert!(!asked.is_empty(), "no RESERVE seen in Redis's log");
    // Without shares, one RESERVE per request, each asking for nothing more. How many a
    // share serves depends on how close together the requests come (a start lives a tick
    // past its place), so the bound leaves room for a slow machine: calls for 0.55 of the
    // requests on one machine, 0.84 to 0.90 on one three times slower (a debug build, where
    // 50 requests take longer than a tick to admit), 0.02 in the release bench
    // (docs/benchmarks.md). Here: at least one request in twenty went on a place of its
    // instance's share, with no call of its own.
    let served_from_shares = n.saturating_sub(asked.len());
    assert!(
        served_from_shares * 20 >= n,
        "{} RESERVE calls for {n} requests (one each without shares): {asked:?}",
        asked.len()
    );
    assert!(asked.iter().any(|w| *w >= 8), "no share grew to 8 starts: {asked:?}");
    assert!(asked.iter().all(|w| *w <= 64), "a share asked for more than 64: {asked:?}");
    assert_eq!(origin.paths("/s/").len(), n);
    assert_eq!(until_no_slot_held(&redis, "shares").await, 0, "slots still held after the load");
}

/// Shares never let the fleet past its concurrency limit, and a limit too small to share
/// from is not shared: two instances, a limit of 12, 72 requests that each hold the origin
/// 150 ms, all at once. Never more than 12 at the origin; every request answered; no slot left
/// held. With a limit of 2, no `RESERVE` may take more than its own (half of what is free
/// after it is nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_keep_the_fleet_s_concurrency_limit() {
    let Some(redis) = Redis::start().await else { return };
    for (limit, prefix) in [(12usize, "shares-12"), (2, "shares-2")] {
        let text = limit.to_string();
        let env = env(Box::leak(text.into_boxed_str()));
        let f = fleet(2, &redis, prefix, &env);
        let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
        for proxy in &f.instances {
            let warm = client(proxy.proxy_addr).get(origin.url("/warm")).send().await.unwrap();
            assert_eq!(warm.status(), 200);
        }
        redis.log_every_command();
        let n = limit * 6;
        let statuses = all_at_once(&f, (0..n).map(|i| origin.url(&format!("/slow/150?{i}")))).await;
        assert_eq!(statuses, vec![200; n], "limit {limit}");
        let most = origin.most_in_flight();
        assert!(most <= limit, "{most} in flight at the origin with a limit of {limit}");
        assert!(most >= limit / 2, "only {most} in flight with a limit of {limit}: over-waiting");
        assert_eq!(until_no_slot_held(&redis, prefix).await, 0, "limit {limit}: slots still held");
        if limit == 2 {
            // Each RESERVE took its own slot only: the requests after the first two waited and
            // began by BEGIN, so there were at least as many script calls as requests.
            let calls = redis.scripts_on(&format!("test-{prefix}:pace:")).len();
            assert!(calls >= n, "{calls} pace calls for {n} requests with a limit of 2");
        }
    }
}
