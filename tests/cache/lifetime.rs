//! Lifetimes (RFC 9309 §2.4), stale copies, back-off and give-up (§2.3.1.4), purge. Time is
//! moved with the manual clock, never waited for.

use std::time::Duration;

use robots_proxy::cache::{FetchOutcome, RobotsRules, RobotsState};
use robots_proxy::clock::Clock;
use robots_proxy::config::{ByteSize, RobotsSection};

use super::support::{allowed, cache, cache_with, settings, settled, Origin, Reply};

const RULES: &str = "User-agent: *\nDisallow: /private\n";
const SECOND: Duration = Duration::from_secs(1);

/// §2.4: a 2xx copy is used while fresh; once past `max_age`, a 503 keeps it in use (stale),
/// and it is not refetched again before the back-off's retry time.
#[tokio::test]
async fn stale_copy_is_used_when_the_refetch_fails() {
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let first = cache.get(&authority).await;
    assert_eq!(first.state, RobotsState::Fresh);
    let fetched_at = first.fetched_at;

    origin.route("/robots.txt", Reply::status(503));
    clock.advance(settings().max_age - SECOND);
    assert_eq!(cache.get(&authority).await.state, RobotsState::Fresh);
    assert_eq!(origin.robots_hits(), 1, "fresh until max_age");

    clock.advance(2 * SECOND);
    let stale = cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);
    assert_eq!(stale.state, RobotsState::Stale);
    assert_eq!(stale.last_outcome, FetchOutcome::Status(503));
    assert_eq!(stale.fetched_at, fetched_at, "the copy keeps its own fetch time");
    assert_eq!(stale.failing_since, Some(clock.now()));
    assert!(!allowed(&stale, "/private/x"), "the old rules still apply");
    assert!(allowed(&stale, "/public"));

    // Within the back-off: served stale, no fetch.
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);

    // The origin recovers: the next retry gets a fresh copy.
    origin.route("/robots.txt", Reply::ok("User-agent: *\nDisallow: /other\n"));
    clock.advance(settings().retry_initial);
    let fresh = settled(&cache, &authority, &clock).await;
    assert_eq!(origin.robots_hits(), 3);
    assert_eq!(fresh.state, RobotsState::Fresh);
    assert_eq!((fresh.failures, fresh.failing_since), (0, None));
    assert!(allowed(&fresh, "/private/x"));
    assert!(!allowed(&fresh, "/other"));
}

/// §2.4: `Cache-Control: max-age` shorter than `max_age` shortens the lifetime.
#[tokio::test]
async fn cache_control_max_age_shortens_the_lifetime() {
    let origin = Origin::with_robots(Reply::ok(RULES).header("Cache-Control", "max-age=600")).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let first = cache.get(&authority).await;
    assert_eq!(first.expires_at, first.fetched_at + Duration::from_secs(600));

    clock.advance(Duration::from_secs(599));
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 1);

    clock.advance(2 * SECOND);
    let second = cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);
    assert_eq!(second.fetched_at, clock.now());
}

/// §2.4: a `max-age` longer than the configured `max_age` is capped at it.
#[tokio::test]
async fn cache_control_max_age_is_capped() {
    let two_days = "max-age=172800";
    let origin = Origin::with_robots(Reply::ok(RULES).header("Cache-Control", two_days)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let max_age = settings().max_age;
    let first = cache.get(&authority).await;
    assert_eq!(first.expires_at, first.fetched_at + max_age);

    clock.advance(max_age - SECOND);
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 1);
    clock.advance(2 * SECOND);
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);
}

/// `no-store` cannot make every request refetch: the lifetime is `min_age`.
#[tokio::test]
async fn no_store_means_min_age() {
    let origin = Origin::with_robots(Reply::ok(RULES).header("Cache-Control", "no-store")).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let min_age = settings().min_age;
    let first = cache.get(&authority).await;
    assert_eq!(first.expires_at, first.fetched_at + min_age);
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 1);
    clock.advance(min_age);
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);
}

/// §2.3.1.4: an unreachable robots.txt is retried with exponential back-off: not before the
/// retry time, and then with a doubled wait.
#[tokio::test]
async fn unreachable_is_retried_with_back_off() {
    let origin = Origin::with_robots(Reply::status(503)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let initial = settings().retry_initial;

    let first = cache.get(&authority).await;
    assert_eq!(first.expires_at, clock.now() + initial);
    clock.advance(initial - SECOND);
    assert_eq!(cache.get(&authority).await.failures, 1);
    assert_eq!(origin.robots_hits(), 1, "no fetch before the retry time");

    clock.advance(SECOND);
    let second = settled(&cache, &authority, &clock).await;
    assert_eq!(origin.robots_hits(), 2);
    assert_eq!(second.failures, 2);
    assert_eq!(second.failing_since, first.failing_since);
    assert_eq!(second.expires_at, clock.now() + 2 * initial);

    clock.advance(2 * initial - SECOND);
    cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);
    clock.advance(SECOND);
    let third = settled(&cache, &authority, &clock).await;
    assert_eq!(origin.robots_hits(), 3);
    assert_eq!(third.expires_at, clock.now() + 4 * initial);
    assert_eq!(third.state, RobotsState::Unreachable);
}

/// The back-off never waits longer than `retry_max`.
#[tokio::test]
async fn back_off_is_capped_at_retry_max() {
    let origin = Origin::with_robots(Reply::status(500)).await;
    let retry_max = Duration::from_secs(25);
    let (cache, clock) = cache_with(RobotsSection { retry_max, ..settings() });
    let authority = origin.authority();
    let mut waits = Vec::new();
    for _ in 0..4 {
        let snapshot = settled(&cache, &authority, &clock).await;
        let wait = snapshot.expires_at.duration_since(clock.now()).unwrap();
        waits.push(wait.as_secs());
        clock.advance(wait);
    }
    assert_eq!(waits, [10, 20, 25, 25]);
    assert_eq!(origin.robots_hits(), 4);
}

/// §2.3.1.4: unreachable for `give_up_after` (30 days) with no copy: everything allowed
/// (state unavailable, `failing_since` kept); retries go on and notice a recovery.
#[tokio::test]
async fn give_up_after_30_days_without_a_copy() {
    let origin = Origin::with_robots(Reply::status(503)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let give_up_after = settings().give_up_after;
    assert_eq!(give_up_after, Duration::from_secs(30 * 24 * 3600));

    let first = cache.get(&authority).await;
    assert!(matches!(first.rules, RobotsRules::DisallowAll));
    let since = first.failing_since;

    // A minute before the 30 days are up (and past the retry time): still disallowed.
    let minute = Duration::from_secs(60);
    clock.advance(give_up_after - minute);
    let before = settled(&cache, &authority, &clock).await;
    assert!(matches!(before.rules, RobotsRules::DisallowAll), "{before:?}");
    assert!(before.expires_at < clock.now() + minute);

    clock.advance(minute);
    let gave_up = settled(&cache, &authority, &clock).await;
    assert_eq!(origin.robots_hits(), 3);
    assert!(matches!(gave_up.rules, RobotsRules::AllowAll), "{gave_up:?}");
    assert_eq!(gave_up.state, RobotsState::Unavailable);
    assert_eq!(gave_up.failing_since, since);
    assert_eq!(gave_up.last_outcome, FetchOutcome::Status(503));
    assert!(allowed(&gave_up, "/private/x"));

    origin.route("/robots.txt", Reply::ok(RULES));
    clock.advance(settings().retry_max);
    let recovered = settled(&cache, &authority, &clock).await;
    assert_eq!(recovered.state, RobotsState::Fresh);
    assert!(!allowed(&recovered, "/private/x"));
}

/// §2.3.1.4: after `give_up_after` with a copy, the copy stays in use.
#[tokio::test]
async fn give_up_after_30_days_keeps_the_copy() {
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    cache.get(&authority).await;
    origin.route("/robots.txt", Reply::status(500));
    clock.advance(settings().max_age);
    let stale = cache.get(&authority).await;
    assert_eq!(stale.state, RobotsState::Stale);

    clock.advance(settings().give_up_after);
    let later = settled(&cache, &authority, &clock).await;
    assert_eq!(origin.robots_hits(), 3);
    assert_eq!(later.state, RobotsState::Stale);
    assert_eq!(later.failing_since, stale.failing_since);
    assert!(!allowed(&later, "/private/x"));
    assert!(allowed(&later, "/public"));
}

/// A 4xx after a 2xx drops the copy (§2.3.1.3: the file is gone now).
#[tokio::test]
async fn not_found_after_a_copy_allows_all() {
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let first = cache.get(&authority).await;
    assert!(!allowed(&first, "/private/x"));
    origin.route("/robots.txt", Reply::status(404));
    clock.advance(settings().max_age);
    let gone = cache.get(&authority).await;
    assert_eq!(gone.state, RobotsState::Unavailable);
    assert!(allowed(&gone, "/private/x"));
}

/// `purge` and `purge_all` force the next request to fetch again.
#[tokio::test]
async fn purge_forces_a_refetch() {
    let one = Origin::with_robots(Reply::ok(RULES)).await;
    let two = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, _clock) = cache();
    cache.get(&one.authority()).await;
    cache.get(&two.authority()).await;
    cache.get(&one.authority()).await;
    assert_eq!((one.robots_hits(), two.robots_hits()), (1, 1));
    cache.run_pending_tasks().await;
    assert_eq!(cache.entry_count(), 2);
    assert!(cache.weighted_size() > 0);

    cache.purge(&one.authority()).await.unwrap();
    assert!(cache.peek(&one.authority()).await.is_none());
    cache.get(&one.authority()).await;
    cache.get(&two.authority()).await;
    assert_eq!((one.robots_hits(), two.robots_hits()), (2, 1), "only the purged one refetches");

    cache.purge_all().await.unwrap();
    cache.run_pending_tasks().await;
    assert_eq!(cache.entry_count(), 0);
    cache.get(&one.authority()).await;
    cache.get(&two.authority()).await;
    cache.get(&two.authority()).await;
    assert_eq!((one.robots_hits(), two.robots_hits()), (3, 2));
    assert_eq!(cache.fetches_started(), 5);
}

/// The cache is bounded by `cache_memory`, entries weighed by their compiled size.
#[tokio::test]
async fn cache_memory_bounds_the_entries() {
    let mut big_rules = String::from("User-agent: *\n");
    for i in 0..200 {
        big_rules.push_str(&format!("Disallow: /section-{i}/private\n"));
    }
    let big = Origin::with_robots(Reply::ok(big_rules)).await;
    let small = Origin::with_robots(Reply::ok(RULES)).await;
    let (probe, _clock) = cache();
    let big_weight = probe.get(&big.authority()).await.weight();
    let small_weight = probe.get(&small.authority()).await.weight();
    assert!(big_weight > small_weight + 200 * "/section-0/private".len(), "{big_weight}");

    // Room for about two small entries.
    let memory = 2 * small_weight as u64 + small_weight as u64 / 2;
    let settings = RobotsSection { cache_memory: ByteSize(memory), ..settings() };
    let (cache, _clock) = cache_with(settings);
    let mut origins = Vec::new();
    for _ in 0..5 {
        let origin = Origin::with_robots(Reply::ok(RULES)).await;
        cache.get(&origin.authority()).await;
        origins.push(origin);
    }
    cache.run_pending_tasks().await;
    assert!(cache.weighted_size() <= memory, "{} > {memory}", cache.weighted_size());
    assert!(cache.entry_count() <= 2, "{} entries", cache.entry_count());
}

/// What a client connection remembers ([`RecentRobots`]) is used only while it is what
/// [`RobotsCache::get`] would answer: not when it was remembered before a fetch stored a newer
/// copy, not after a purge, not once it has expired.
#[tokio::test]
async fn remembered_snapshots_follow_the_cache() {
    use robots_proxy::cache::RecentRobots;
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, clock) = cache();
    let authority = origin.authority();
    let mut recent = RecentRobots::default();

    // Remembered at the generation read before the fetch, which then stored its copy.
    let generation = cache.generation();
    let first = cache.get(&authority).await;
    cache.remember(&mut recent, generation, first);
    assert!(cache.recent(&recent, &authority).is_none(), "the cache changed since");

    let generation = cache.generation();
    let second = cache.get(&authority).await;
    cache.remember(&mut recent, generation, second.clone());
    let used = cache.recent(&recent, &authority).expect("current and unchanged");
    assert!(std::sync::Arc::ptr_eq(&used, &second));
    assert_eq!(origin.robots_hits(), 1);

    // A purge makes every remembered copy unusable.
    cache.purge(&authority).await.unwrap();
    assert!(cache.recent(&recent, &authority).is_none(), "purged");
    let refetched = cache.get(&authority).await;
    assert_eq!(origin.robots_hits(), 2);
    let generation = cache.generation();
    assert!(std::sync::Arc::ptr_eq(&cache.get(&authority).await, &refetched));
    cache.remember(&mut recent, generation, refetched);
    assert!(cache.recent(&recent, &authority).is_some());

    // Past its lifetime it is not used either, although the cache has not changed.
    clock.advance(settings().max_age + SECOND);
    assert!(cache.recent(&recent, &authority).is_none(), "expired");
}
