//! One fetch per authority, however many requests wait, and a fetch that survives the client
//! that started it.

use std::sync::Arc;
use std::time::Duration;

use robots_proxy::cache::RobotsState;

use super::support::{allowed, cache, eventually, settings, Origin, Reply};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

/// 1,000 concurrent first requests for one authority make exactly one robots.txt fetch, and
/// so do 1,000 concurrent requests that find the entry due for a refetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_requests_make_one_fetch() {
    let origin = Origin::with_robots(Reply::ok(RULES).delayed(Duration::from_millis(100))).await;
    let (cache, clock) = cache();
    let authority = origin.authority();

    for round in 1..=2 {
        let tasks: Vec<_> = (0..1000)
            .map(|_| {
                let cache = cache.clone();
                let authority = authority.clone();
                tokio::spawn(async move { cache.get(&authority).await })
            })
            .collect();
        let mut snapshots = Vec::with_capacity(tasks.len());
        for task in tasks {
            snapshots.push(task.await.expect("get task"));
        }
        assert_eq!(origin.robots_hits(), round, "round {round}");
        assert!(snapshots.iter().all(|s| Arc::ptr_eq(s, &snapshots[0])));
        assert_eq!(snapshots[0].state, RobotsState::Fresh);
        assert!(!allowed(&snapshots[0], "/private/x"));
        // Make the entry due: the next round must refetch, once.
        clock.advance(settings().max_age);
    }
    assert_eq!(cache.fetches_started(), 2);
}

/// A client that hangs up mid-fetch (its `get` future dropped) does not cancel the fetch:
/// another request joins it, and its result is cached, with one fetch in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_client_does_not_cancel_the_fetch() {
    let delay = Duration::from_millis(300);
    let origin = Origin::with_robots(Reply::ok(RULES).delayed(delay)).await;
    let (cache, _clock) = cache();
    let authority = origin.authority();

    let first = {
        let cache = cache.clone();
        let authority = authority.clone();
        tokio::spawn(async move { cache.get(&authority).await })
    };
    assert!(eventually(Duration::from_secs(5), || origin.robots_hits() == 1).await);
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());

    let second = cache.get(&authority).await;
    assert_eq!(second.state, RobotsState::Fresh);
    assert!(!allowed(&second, "/private/x"));
    assert_eq!(origin.robots_hits(), 1, "the second request joined the first fetch");
    assert_eq!(cache.fetches_started(), 1);
}

/// Even with nobody left waiting, the fetch completes and its result is cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_fetch_is_still_cached() {
    let origin = Origin::with_robots(Reply::ok(RULES).delayed(Duration::from_millis(200))).await;
    let (cache, _clock) = cache();
    let authority = origin.authority();

    let only = {
        let cache = cache.clone();
        let authority = authority.clone();
        tokio::spawn(async move { cache.get(&authority).await })
    };
    assert!(eventually(Duration::from_secs(5), || origin.robots_hits() == 1).await);
    only.abort();

    let mut cached = None;
    for _ in 0..500 {
        cached = cache.peek(&authority).await;
        if cached.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cached = cached.expect("the abandoned fetch stored its result");
    assert_eq!(cached.state, RobotsState::Fresh);
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 1);
}
