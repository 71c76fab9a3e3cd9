//! The fleet's Redis side on its own, against a real redis-server: the fetch lease of the
//! shared robots.txt and the Lua scripts of the shared pace (`crates/fleet/src/pace`), driven through
//! their public types, with Redis's own state read back.

use std::sync::Arc;
use std::time::Duration;

use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::cache::{FileKind, Shared};
use robots_proxy::fleet::pace::RedisPace;
use robots_proxy::fleet::robots::SharedRedis;
use robots_proxy::fleet::{Fleet, FleetSection, RedisUrl};
use robots_proxy::pacing::{Bound, Held, Lane, Limits, LocalPace, PaceAsk, PaceStore, Refusal};

use super::support::Redis;

/// An instance's link to `redis`, named `name`, under the test's key prefix.
pub fn link(redis: &Redis, prefix: &str, name: &str) -> Arc<Fleet> {
    link_to(&redis.url(), prefix, name)
}

/// [`link`] to the redis-server at `url`.
pub fn link_to(url: &str, prefix: &str, name: &str) -> Arc<Fleet> {
    let section = FleetSection {
        redis: RedisUrl::try_from(url.to_owned()).unwrap(),
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
    assert!(late.lease(FileKind::Robots, &a, Duration::from_millis(200)).await.unwrap());
    assert!(!holder.lease(FileKind::Robots, &a, Duration::from_secs(30)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        holder.lease(FileKind::Robots, &a, Duration::from_secs(30)).await.unwrap(),
        "the lease ran out"
    );
    late.release(FileKind::Robots, &a).await.unwrap();
    assert!(
        !late.lease(FileKind::Robots, &a, Duration::from_secs(30)).await.unwrap(),
        "released another's lease"
    );
    late.store(FileKind::Robots, &a, b"record".to_vec(), Duration::from_secs(30)).await.unwrap();
    assert!(
        !late.lease(FileKind::Robots, &a, Duration::from_secs(30)).await.unwrap(),
        "stored over another's lease"
    );
    // The holder's own give-back works.
    holder.release(FileKind::Robots, &a).await.unwrap();
    assert!(late.lease(FileKind::Robots, &a, Duration::from_secs(30)).await.unwrap());
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

/// Admits every ask at once (spawned), each holding its admission for `hold`: when each was
/// let through, after `t0`, in order, and the refusals.
async fn admit_all(
    store: &Arc<RedisPace>,
    asks: Vec<(Authority, Option<Lane>, Limits)>,
    hold: Duration,
) -> (Vec<Duration>, Vec<Held>) {
    admit_all_from(tokio::time::Instant::now(), store, asks, hold).await
}

/// [`admit_all`], the instants taken after `t0` (an instant before the asks).
async fn admit_all_from(
    t0: tokio::time::Instant,
    store: &Arc<RedisPace>,
    asks: Vec<(Authority, Option<Lane>, Limits)>,
    hold: Duration,
) -> (Vec<Duration>, Vec<Held>) {
    let tasks: Vec<_> = asks
        .into_iter()
        .map(|(a, lane, l)| {
            let store = store.clone();
            tokio::spawn(async move {
                let admitted = store.admit(ask(&a, lane, l)).await;
                let at = t0.elapsed();
                if let Ok(permit) = admitted {
                    tokio::time::sleep(hold).await;
                    drop(permit);
                    return Ok(at);
                }
                admitted.map(|_| at)
            })
        })
        .collect();
    let (mut starts, mut refused) = (Vec::new(), Vec::new());
    for t in tasks {
        match t.await.unwrap() {
            Ok(at) => starts.push(at),
            Err(held) => refused.push(held),
        }
    }
    starts.sort();
    (starts, refused)
}

fn assert_between(what: &str, d: Duration, least_ms: u64, most_ms: u64) {
    let (least, most) = (Duration::from_millis(least_ms), Duration::from_millis(most_ms));
    assert!(d >= least && d <= most, "{what}: {d:?}, expected {least:?}..={most:?}");
}

/// RESERVE spaces requests by the rate on Redis's clock (plus its margin), not more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_spaces_requests_by_the_rate() {
    let Some(redis) = Redis::start().await else { return };
    let store = Arc::new(pace(&redis, "script-rate", "a", Duration::from_secs(30)));
    let l = limits(100, 0, 10, 5000);
    let asks = (0..5).map(|_| (site(), None, l)).collect();
    let (starts, refused) = admit_all(&store, asks, Duration::ZERO).await;
    assert_eq!(refused, []);
    // Reserved 100 ms + its margin (2 ms) apart on Redis's clock, from the first reservation,
    // which comes after t0: the n-th cannot start before t0 + n × 102 ms (less 2 ms for the two
    // clocks), however the tasks are scheduled. Held against that grid from t0 rather than gap
    // by gap, a task woken late (a loaded machine) shortens no later gap; the upper side has a
    // wide margin for it (review-tests F6).
    for (n, at) in starts.iter().enumerate() {
        let due = 102 * n as u64;
        assert_between(&format!("start {n} ({starts:?})"), *at, due.saturating_sub(2), due + 300);
    }
    // Everything started: nothing counts in the queue (its entries lapsed at their starts,
    // and are pruned by the next reservation).
    let queue = redis.keys("test-script-rate:queue:*");
    for q in &queue {
        let (members, now) = redis.scores(q);
        assert!(members.iter().all(|(_, lapses)| *lapses <= now), "{members:?} at {now}");
    }
}

/// RESERVE refuses at once a wait past max_wait (and reserves nothing), and a request that
/// would wait when queue_limit wait already.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_refuses_too_long_waits_and_full_queues() {
    let Some(redis) = Redis::start().await else { return };
    let store = Arc::new(pace(&redis, "script-refuse", "a", Duration::from_secs(30)));
    let a = site();
    let l = limits(1000, 0, 10, 1500);
    let first = store.admit(ask(&a, None, l)).await.unwrap();
    assert!(!first.waited);
    let second = tokio::spawn({
        let (store, a) = (store.clone(), a.clone());
        async move { store.admit(ask(&a, None, l)).await.map(|p| p.waited) }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let refused = store.admit(ask(&a, None, l)).await.unwrap_err();
    // At once: a request that waited would have waited its 1.8 s or more (review-tests F6: the
    // bound was 200 ms, a Redis round trip on a loaded machine and no margin).
    assert!(started.elapsed() < Duration::from_millis(1000), "refused after waiting");
    match refused {
        Held::Refused(Refusal::TooLong { wait, bound: Bound::Rate }) => {
            assert_between("wait", wait, 1800, 2100);
        }
        other => panic!("{other:?}"),
    }
    assert!(second.await.unwrap().unwrap(), "the second waited its turn");
    // queue_limit 1: one waits, the next that would wait is refused.
    let b = Authority::new(Scheme::Http, "queue.example", 80).unwrap();
    let l = limits(1000, 0, 1, 5000);
    let _first = store.admit(ask(&b, None, l)).await.unwrap();
    let waiting = tokio::spawn({
        let (store, b) = (store.clone(), b.clone());
        async move { store.admit(ask(&b, None, l)).await.is_ok() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    match store.admit(ask(&b, None, l)).await.unwrap_err() {
        Held::Refused(Refusal::QueueFull { waiting: 1, bound: Bound::Rate, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(waiting.await.unwrap());
}

/// Requests in different Crawl-delay lanes do not wait for each other; the same lane is
/// spaced by its delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_delay_lanes_are_apart() {
    let Some(redis) = Redis::start().await else { return };
    let store = Arc::new(pace(&redis, "script-lanes", "a", Duration::from_secs(30)));
    let l = limits(0, 0, 10, 5000);
    let lane = |line| Some(Lane { line, delay: Duration::from_millis(300) });
    // Each lane's first request, and one with no Crawl-delay, goes at once: none waited (the
    // store says so; no clock is read, review-tests F6).
    let lane2 = tokio::time::Instant::now();
    for (lane, what) in [(lane(2), "lane 2"), (lane(7), "lane 7"), (None, "no lane")] {
        let permit = store.admit(ask(&site(), lane, l)).await.unwrap();
        assert!(!permit.waited, "{what} waited for another lane");
    }
    // The same lane again: reserved 306 ms (margin included) and 612 ms after lane 2's first
    // start, which came after `lane2`: held against that grid, with a wide upper margin.
    let asks = vec![(site(), lane(2), l), (site(), lane(2), l)];
    let (starts, _) = admit_all_from(lane2, &store, asks, Duration::ZERO).await;
    assert_between(&format!("first ({starts:?})"), starts[0], 304, 306 + 300);
    assert_between(&format!("second ({starts:?})"), starts[1], 610, 612 + 300);
}

/// BEGIN spaces requests that waited for the one slot from the last actual start (the
/// schedule's `begin`), and counts them in the queue: they do not go out together when the
/// slot frees, and not later than the spacing says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_spaces_requests_that_waited_for_a_slot() {
    let Some(redis) = Redis::start().await else { return };
    let store = Arc::new(pace(&redis, "script-begin", "a", Duration::from_secs(30)));
    let a = site();
    let l = limits(200, 1, 3, 5000);
    let slow = store.admit(ask(&a, None, l)).await.unwrap();
    let t0 = tokio::time::Instant::now();
    let waiters = tokio::spawn({
        let store = store.clone();
        async move {
            admit_all(&store, (0..3).map(|_| (site(), None, l)).collect(), Duration::ZERO).await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Three wait (for their start, then for the slot): the queue is full.
    match store.admit(ask(&a, None, l)).await.unwrap_err() {
        Held::Refused(Refusal::QueueFull { waiting: 3, .. }) => {}
        other => panic!("{other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(900)).await;
    drop(slow);
    let freed = t0.elapsed();
    let (starts, refused) = waiters.await.unwrap();
    assert_eq!(refused, []);
    // The first when the slot is given back (pub/sub wakes it), then reserved 204 ms apart.
    // A waiter woken late shortens the next gap (184 ms seen on a loaded machine), so each
    // start is held against the grid from the first (a 60 ms margin), no two come together,
    // and none is held much past its turn (review-tests F6).
    assert_between("first after the slot freed", starts[0].saturating_sub(freed), 0, 300);
    for (n, at) in starts.iter().enumerate() {
        let due = 204 * n as u64;
        let what = format!("start {n} after the first ({starts:?})");
        assert_between(&what, *at - starts[0], due.saturating_sub(60), due + 150);
    }
    for pair in starts.windows(2) {
        assert_between("gap", pair[1] - pair[0], 150, 320);
    }
}

/// A slot whose holder died (never given back, never renewed) frees itself when its lease
/// ends: a waiter gets it no sooner, and not much later (it looks again by itself at most
/// every 2 s). The holder "dies" with its own runtime, and every task of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_of_a_dead_holder_frees_when_its_lease_ends() {
    let Some(redis) = Redis::start().await else { return };
    let lease = Duration::from_secs(2);
    let l = limits(0, 1, 10, 10_000);
    let url = redis.url();
    let taken = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let taken = runtime.block_on(async {
            let dead = RedisPace::new(
                link_to(&url, "script-lease", "dead"),
                Duration::from_secs(600),
                lease,
            );
            let held = dead.admit(ask(&site(), None, l)).await.unwrap();
            let taken = std::time::Instant::now();
            std::mem::forget(held);
            taken
        });
        runtime.shutdown_background();
        taken
    })
    .join()
    .unwrap();
    let alive = pace(&redis, "script-lease", "alive", lease);
    let admitted = alive.admit(ask(&site(), None, l)).await.unwrap();
    assert!(admitted.waited && admitted.slot.is_some());
    assert_between("slot free after", taken.elapsed(), 1950, 4300);
}

/// A slot held longer than its lease (a request still in flight: `response_timeout` raised
/// by a reload) is renewed, and not taken by another meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_held_past_its_lease_is_renewed() {
    let Some(redis) = Redis::start().await else { return };
    let lease = Duration::from_secs(1);
    let holder = pace(&redis, "script-renew", "holder", lease);
    let other = pace(&redis, "script-renew", "other", lease);
    let l = limits(0, 1, 10, 2000);
    let held = holder.admit(ask(&site(), None, l)).await.unwrap();
    let refused = other.admit(ask(&site(), None, l)).await;
    assert_eq!(refused.unwrap_err(), Held::NoConnection, "the slot lapsed while held");
    drop(held);
    let admitted = other.admit(ask(&site(), None, l)).await;
    assert!(admitted.is_ok(), "{admitted:?}");
}

/// Each group has its own queue in Redis, as in `LocalPace` (issue 28 §1): with the one slot
/// held and `queue_limit` 1, a request of the Crawl-delay lane of line 9 and one with no
/// Crawl-delay each wait for the slot; the next of each group is refused, and a request of
/// another lane (line 2), whose queue is empty, still waits for its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_has_its_own_queue() {
    let Some(redis) = Redis::start().await else { return };
    let l = limits(0, 1, 1, 5000);
    let lane = |line| Some(Lane { line, delay: Duration::from_millis(100) });
    let fleet: Arc<dyn PaceStore> =
        Arc::new(pace(&redis, "script-groups", "a", Duration::from_secs(30)));
    let alone: Arc<dyn PaceStore> = Arc::new(LocalPace::new(Duration::from_secs(600)));
    let mut outcomes = Vec::new();
    for store in [fleet, alone] {
        let a = site();
        let held = store.admit(ask(&a, None, l)).await.unwrap();
        let wait = |lane: Option<Lane>| {
            let (store, a) = (store.clone(), a.clone());
            tokio::spawn(async move { store.admit(ask(&a, lane, l)).await.map(|p| p.waited) })
        };
        let until_waiting = |n: usize| {
            let (store, a) = (store.clone(), a.clone());
            async move {
                for _ in 0..500 {
                    if store.queue_depth(&a) == n {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("never {n} waiting (one refused for another group's queue?)");
            }
        };
        let waiters = vec![wait(lane(9)), wait(None)];
        until_waiting(2).await;
        let refused = |r: Result<_, Held>| match r {
            Err(Held::Refused(Refusal::QueueFull { waiting, .. })) => waiting,
            other => panic!("{:?}", other.map(|p: robots_proxy::pacing::Admission| p.waited)),
        };
        let lane_full = refused(store.admit(ask(&a, lane(9), l)).await);
        let none_full = refused(store.admit(ask(&a, None, l)).await);
        let other_lane = wait(lane(2));
        until_waiting(3).await;
        drop(held);
        let mut waited = Vec::new();
        for w in waiters.into_iter().chain([other_lane]) {
            waited.push(w.await.unwrap().map_err(|held| format!("{held:?}")));
        }
        outcomes.push((lane_full, none_full, waited));
    }
    let expected = (1, 1, vec![Ok(true); 3]);
    assert_eq!(outcomes, [expected.clone(), expected], "[fleet, LocalPace]");
}
