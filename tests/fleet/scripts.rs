//! The fleet's Redis side on its own, against a real redis-server: the fetch lease of the
//! shared robots.txt and the Lua scripts of the shared pace (`src/fleet/pace`), driven through
//! their public types, with Redis's own state read back.

use std::sync::Arc;
use std::time::Duration;

use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::cache::SharedRobots;
use robots_proxy::fleet::pace::RedisPace;
use robots_proxy::fleet::robots::SharedRedis;
use robots_proxy::fleet::{Fleet, FleetSection, RedisUrl};
use robots_proxy::pacing::{Held, Lane, Limits, PaceAsk, PaceStore};

use super::support::Redis;

/// An instance's link to `redis`, named `name`, under the test's key prefix.
pub fn link(redis: &Redis, prefix: &str, name: &str) -> Arc<Fleet> {
    let section = FleetSection {
        redis: RedisUrl::try_from(redis.url()).unwrap(),
        key_prefix: format!("test-{prefix}:"),
        instance: name.to_owned(),
        ..FleetSection::default()
    };
    Fleet::new(&section, "unused").unwrap().unwrap()
}

fn site() -> Authority {
    Authority::new(Scheme::Http, "lease.example", 80).unwrap()
}

/// A late holder gives back only its own lease: once its lease ran out and another instance
/// (here of the same name) took it, neither giving back nor storing deletes the new holder's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_holder_of_the_fetch_lease_gives_it_back() {
    let Some(redis) = Redis::start().await else { return };
    let late = SharedRedis::new(link(&redis, "lease-owner", "gw"));
    let holder = SharedRedis::new(link(&redis, "lease-owner", "gw"));
    let a = site();
    assert!(late.lease(&a, Duration::from_millis(200)).await.unwrap());
    assert!(!holder.lease(&a, Duration::from_secs(30)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(holder.lease(&a, Duration::from_secs(30)).await.unwrap(), "the lease ran out");
    late.release(&a).await.unwrap();
    assert!(!late.lease(&a, Duration::from_secs(30)).await.unwrap(), "released another's lease");
    late.store(&a, b"record".to_vec(), Duration::from_secs(30)).await.unwrap();
    assert!(!late.lease(&a, Duration::from_secs(30)).await.unwrap(), "stored over another's lease");
    // The holder's own give-back works.
    holder.release(&a).await.unwrap();
    assert!(late.lease(&a, Duration::from_secs(30)).await.unwrap());
}

/// The pace of an instance named `name`; slots last `lease`.
pub fn pace(redis: &Redis, prefix: &str, name: &str, lease: Duration) -> RedisPace {
    RedisPace::new(link(redis, prefix, name), Duration::from_secs(600), lease)
}

/// Limits: one request every `interval_ms` (0: none), `concurrency` (0: none).
pub fn limits(
    interval_ms: u64,
    concurrency: usize,
    queue_limit: usize,
    max_wait_ms: u64,
) -> Limits {
    Limits {
        interval: (interval_ms > 0).then(|| Duration::from_millis(interval_ms)),
        concurrency: (concurrency > 0).then_some(concurrency),
        queue_limit,
        max_wait: Duration::from_millis(max_wait_ms),
    }
}

pub fn ask<'a>(authority: &'a Authority, lane: Option<Lane>, limits: Limits) -> PaceAsk<'a> {
    PaceAsk { authority, lane, limits }
}

/// Two processes with the same instance name have members of their own: two slots of a site
/// held, one by each, are two (the members were `name#n`, the same in both, so the second
/// ZADD only updated the first, and a third request found a slot free).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namesake_instances_do_not_share_a_slot() {
    let Some(redis) = Redis::start().await else { return };
    let one = pace(&redis, "namesakes", "gw", Duration::from_secs(30));
    let two = pace(&redis, "namesakes", "gw", Duration::from_secs(30));
    let a = site();
    let l = limits(0, 2, 10, 300);
    let first = one.admit(ask(&a, None, l)).await.unwrap();
    let second = two.admit(ask(&a, None, l)).await.unwrap();
    assert!(first.slot.is_some() && second.slot.is_some());
    let third = one.admit(ask(&a, None, l)).await;
    assert_eq!(third.unwrap_err(), Held::NoConnection, "three requests in flight, limit 2");
    drop((first, second));
}
