//! Slow robots.txt fetches do not stall other sites (RFC 9309 leaves the fetching to the
//! crawler; these are the proxy's own bounds): the wait for a fetch slot counts against
//! `fetch_timeout`, fetches are capped per host, and a failing origin's retry holds no request.
//! Against real tarpits on loopback: origins that accept the request and never answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use robots_proxy::cache::{RobotsCache, RobotsRules, RobotsState};
use robots_proxy::config::RobotsSection;

use super::support::{allowed, cache_with, eventually, settings, Origin, Reply};

const RULES: &str = "User-agent: *\nDisallow: /private\n";
const FETCH_TIMEOUT: Duration = Duration::from_secs(2);

fn short(edit: impl FnOnce(&mut RobotsSection)) -> RobotsSection {
    let mut s = RobotsSection {
        connect_timeout: Duration::from_secs(1),
        fetch_timeout: FETCH_TIMEOUT,
        ..settings()
    };
    edit(&mut s);
    s
}

fn spawn_get(cache: &Arc<RobotsCache>, origin: &Origin) -> tokio::task::JoinHandle<()> {
    let (cache, authority) = (cache.clone(), origin.authority());
    tokio::spawn(async move {
        cache.get(&authority).await;
    })
}

/// With one fetch slot and three tarpits queued before it, a healthy site is answered within
/// `fetch_timeout` of asking (its wait counts against its own timeout), not after every
/// tarpit's timeout in turn; and the wait is not held against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tarpits_do_not_stall_a_healthy_site_past_fetch_timeout() {
    let (cache, _clock) = cache_with(short(|s| s.max_concurrent_fetches = 1));
    let mut tarpits = Vec::new();
    for _ in 0..3 {
        tarpits.push(Origin::with_robots(Reply::Hang).await);
    }
    let first = &tarpits[0];
    let mut waiting = vec![spawn_get(&cache, first)];
    assert!(eventually(Duration::from_secs(2), || first.robots_hits() == 1).await);
    for tarpit in &tarpits[1..] {
        waiting.push(spawn_get(&cache, tarpit));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;

    let healthy = Origin::with_robots(Reply::ok(RULES)).await;
    let asked = Instant::now();
    let snapshot = cache.get(&healthy.authority()).await;
    let waited = asked.elapsed();
    assert!(
        waited < FETCH_TIMEOUT + FETCH_TIMEOUT / 2,
        "a healthy site waited {waited:?} behind tarpits (fetch_timeout {FETCH_TIMEOUT:?})"
    );
    // Either it got the slot in time (fresh), or it is answered as unreachable for now and
    // nothing is cached against it: the next request fetches.
    if snapshot.state != RobotsState::Fresh {
        assert!(matches!(snapshot.rules, RobotsRules::DisallowAll), "{snapshot:?}");
        let again = cache.get(&healthy.authority()).await;
        assert_eq!(again.state, RobotsState::Fresh, "{again:?}");
    }
    assert!(!allowed(&*cache.get(&healthy.authority()).await, "/private"));
    for w in waiting {
        w.abort();
    }
}

/// Review-core N7: with every global slot taken by tarpits (here one slot, three tarpits
/// under one host's names and ports), a healthy site's first fetch no longer waits for them
/// to time out: a fetch still running after a second gives its global slot back (to the pool
/// of slow fetches), so the healthy site is fetched, fresh, long before `fetch_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_fetches_give_their_slot_to_a_healthy_site() {
    const LONG: Duration = Duration::from_secs(8);
    let (cache, _clock) = cache_with(short(|s| {
        s.max_concurrent_fetches = 1;
        s.max_concurrent_fetches_per_host = 4;
        s.fetch_timeout = LONG;
    }));
    let mut tarpits = Vec::new();
    for _ in 0..3 {
        tarpits.push(Origin::with_robots(Reply::Hang).await);
    }
    let waiting: Vec<_> = tarpits.iter().map(|t| spawn_get(&cache, t)).collect();
    assert!(eventually(Duration::from_secs(2), || tarpits[0].robots_hits() == 1).await);
    let healthy = Origin::with_robots(Reply::ok(RULES)).await;
    let asked = Instant::now();
    let snapshot = cache.get(&healthy.authority()).await;
    let waited = asked.elapsed();
    assert_eq!(snapshot.state, RobotsState::Fresh, "{snapshot:?} after {waited:?}");
    assert!(waited < LONG / 2, "a healthy site waited {waited:?} behind tarpits");
    for w in waiting {
        w.abort();
    }
}

/// At most `max_concurrent_fetches_per_host` fetches go to one host, whatever the port: a
/// second tarpit on 127.0.0.1 is not fetched while the first holds the host's slot, and a
/// healthy site on another host (127.0.0.2) is fetched at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_are_capped_per_host() {
    let (cache, _clock) = cache_with(short(|s| {
        s.max_concurrent_fetches = 8;
        s.max_concurrent_fetches_per_host = 1;
    }));
    let a = Origin::with_robots(Reply::Hang).await;
    let b = Origin::with_robots(Reply::Hang).await;
    let first = spawn_get(&cache, &a);
    assert!(eventually(Duration::from_secs(2), || a.robots_hits() == 1).await);
    let second = spawn_get(&cache, &b);

    let other_host = Origin::start_on("127.0.0.2").await;
    other_host.route("/robots.txt", Reply::ok(RULES));
    let asked = Instant::now();
    let snapshot = cache.get(&other_host.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh, "{snapshot:?}");
    assert!(asked.elapsed() < FETCH_TIMEOUT, "{:?}", asked.elapsed());
    // The second port of 127.0.0.1 has still not been asked: its fetch waits for the host.
    assert_eq!(b.robots_hits(), 0);
    first.abort();
    second.abort();
}

/// `tdmrep.json` fetches take the same slots as robots.txt's (they took none: a crawl across
/// many new sites opened one `tdmrep.json` connection per site at once, however few slots the
/// operator allowed). With one fetch per host, a second site of 127.0.0.1 is not asked for its
/// `tdmrep.json` while the first's hangs, nor for its robots.txt; a site on 127.0.0.2 is
/// fetched at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_json_fetches_take_the_same_slots() {
    const TDMREP: &str = "/.well-known/tdmrep.json";
    let (cache, _clock) = cache_with(short(|s| {
        s.max_concurrent_fetches = 8;
        s.max_concurrent_fetches_per_host = 1;
        s.fetch_timeout = 4 * FETCH_TIMEOUT;
    }));
    let a = Origin::with_robots(Reply::ok(RULES)).await;
    a.route(TDMREP, Reply::Hang);
    let b = Origin::with_robots(Reply::ok(RULES)).await;
    b.route(TDMREP, Reply::Hang);
    let tdmrep = |origin: &Origin| {
        let (cache, authority) = (cache.clone(), origin.authority());
        tokio::spawn(async move {
            robots_proxy::cache::RobotsStore::tdmrep(&*cache, &authority).await;
        })
    };
    let first = tdmrep(&a);
    assert!(eventually(Duration::from_secs(2), || a.hits(TDMREP) == 1).await);
    let second = tdmrep(&b);
    let robots = spawn_get(&cache, &b);
    let other_host = Origin::start_on("127.0.0.2").await;
    other_host.route("/robots.txt", Reply::ok(RULES));
    other_host.route(TDMREP, Reply::ok("[]"));
    let asked = Instant::now();
    robots_proxy::cache::RobotsStore::tdmrep(&*cache, &other_host.authority()).await;
    assert_eq!(other_host.hits(TDMREP), 1);
    assert!(asked.elapsed() < FETCH_TIMEOUT, "{:?}", asked.elapsed());
    // 127.0.0.1's one slot is still held by the first site's hanging tdmrep.json.
    assert_eq!((b.hits(TDMREP), b.robots_hits()), (0, 0));
    for task in [first, second, robots] {
        task.abort();
    }
}

/// A failing origin with a good stale copy: once its retry is due, requests are answered from
/// the stale copy at once while the retry runs, instead of waiting up to `fetch_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_origin_is_refetched_while_its_stale_copy_answers() {
    let s = short(|_| {});
    let (cache, clock) = cache_with(s.clone());
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    assert_eq!(cache.get(&origin.authority()).await.state, RobotsState::Fresh);
    origin.route("/robots.txt", Reply::Hang);
    // The copy expires; the first refetch times out (this request waits for it: the origin
    // was not known to fail) and the copy is kept, stale.
    clock.advance(s.max_age + Duration::from_secs(1));
    let stale = cache.get(&origin.authority()).await;
    assert_eq!(stale.state, RobotsState::Stale, "{stale:?}");
    assert_eq!(origin.robots_hits(), 2);
    // The retry is due: answered from the stale copy without waiting for the tarpit.
    clock.advance(s.retry_initial + Duration::from_secs(1));
    let asked = Instant::now();
    let answer = cache.get(&origin.authority()).await;
    let waited = asked.elapsed();
    assert!(waited < FETCH_TIMEOUT / 2, "waited {waited:?} for a failing origin's retry");
    assert_eq!(answer.state, RobotsState::Stale);
    assert!(!allowed(&answer, "/private/x"));
    assert!(allowed(&answer, "/public"));
    // The retry did start, in the background.
    assert!(eventually(Duration::from_secs(2), || origin.robots_hits() == 3).await);
    // And when it fails, the back-off goes on from its result.
    let after = {
        let mut last = None;
        for _ in 0..50 {
            let now = cache.peek(&origin.authority()).await.unwrap();
            if now.failures == 2 {
                last = Some(now);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        last.expect("the background retry stored its result")
    };
    assert_eq!(after.state, RobotsState::Stale);
}
