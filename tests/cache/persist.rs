//! The robots cache's state on disk (`RobotsCache::persist_in`): the 30-day rule counts from
//! the first failure even across a restart, and a purge forgets what is on disk too.

use std::path::Path;
use std::time::Duration;

use robots_proxy::cache::{RobotsRules, RobotsState};

use super::support::{cache, settings, Origin, Reply};

/// Waits (at most 2 s) until `dir` holds `n` records.
async fn records(dir: &Path, n: usize) {
    for _ in 0..200 {
        let count = std::fs::read_dir(dir).map_or(0, |d| {
            d.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "rec")).count()
        });
        if count == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never held {n} record(s)", dir.display());
}

#[tokio::test]
async fn the_30_days_count_from_the_first_failure_across_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("robots");
    let origin = Origin::with_robots(Reply::status(503)).await;
    let (first, clock) = cache();
    first.persist_in(dir.clone()).unwrap();
    let failing = first.get(&origin.authority()).await;
    assert!(matches!(failing.rules, RobotsRules::DisallowAll));
    records(&dir, 1).await;
    drop(first);

    // Restarted 30 days later; the origin still fails.
    let (second, later) = cache();
    later.advance(settings().give_up_after);
    let _ = clock;
    second.persist_in(dir.clone()).unwrap();
    let gave_up = second.get(&origin.authority()).await;
    assert_eq!(gave_up.state, RobotsState::Unavailable, "{gave_up:?}");
    assert!(matches!(gave_up.rules, RobotsRules::AllowAll));
    assert_eq!(gave_up.failing_since, failing.failing_since);
    assert_eq!(gave_up.failures, 2);
}

#[tokio::test]
async fn a_purge_forgets_what_is_on_disk() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("robots");
    let origin = Origin::with_robots(Reply::ok("User-agent: *\nDisallow: /x\n")).await;
    let (cache, _clock) = cache();
    cache.persist_in(dir.clone()).unwrap();
    cache.get(&origin.authority()).await;
    records(&dir, 1).await;
    cache.purge(&origin.authority()).await.unwrap();
    records(&dir, 0).await;
    cache.get(&origin.authority()).await;
    assert_eq!(origin.robots_hits(), 2, "a purged copy is fetched again, not read back");
    records(&dir, 1).await;
    cache.purge_all().await.unwrap();
    records(&dir, 0).await;
}
