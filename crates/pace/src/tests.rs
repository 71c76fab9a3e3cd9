//! The async layer, on tokio's paused clock: waits are exact and cost no real time.

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::authority::Scheme;
use crate::robots::{ProductToken, RobotsTxt};

/// Each group ends with a rule: a `user-agent` line right after a `crawl-delay` line would
/// join the group above (RFC 9309 groups end at the first `user-agent` after a rule).
const ROBOTS: &str = "User-agent: SlowBot\nCrawl-delay: 0.2\nDisallow: /private\n\n\
                      User-agent: FastBot\nDisallow: /private\n\n\
                      User-agent: TwinA\nUser-agent: TwinB\nCrawl-delay: 1\nDisallow: /x\n\n\
                      User-agent: SleepyBot\nCrawl-delay: 3600\nDisallow: /x\n";

fn delay_for(token: &str) -> Option<CrawlDelay> {
    let robots = RobotsTxt::parse(ROBOTS.as_bytes());
    robots.crawl_delay(Some(&ProductToken::new(token).unwrap()))
}

fn site(host: &str) -> Authority {
    Authority::new(Scheme::Http, host, 80).unwrap()
}

/// `[pacing]` enabled, edited by `edit`.
fn section(edit: impl FnOnce(&mut PacingSection)) -> PacingSection {
    let mut section = PacingSection { enabled: true, ..PacingSection::default() };
    edit(&mut section);
    section
}

fn pacer(edit: impl FnOnce(&mut PacingSection)) -> Pacer {
    Pacer::new(&section(edit)).unwrap()
}

/// Admits one request and lets it finish at once.
async fn pass(p: &Pacer, authority: &Authority, delay: Option<CrawlDelay>) {
    let permit = p.admit_with_delay(authority, delay).await;
    assert!(permit.is_ok(), "{permit:?}");
}

/// Waits (virtual time) until `authority` has `n` requests waiting; bounded.
async fn until_waiting(p: &Pacer, authority: &Authority, n: usize) {
    for _ in 0..1000 {
        if p.queue_depth(authority) == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("queue depth never reached {n}: {}", p.queue_depth(authority));
}

fn assert_about(elapsed: Duration, expected: Duration) {
    // Virtual time: exact up to the rounding of fractional delays.
    let slack = Duration::from_millis(1);
    assert!(
        elapsed >= expected && elapsed <= expected + slack,
        "took {elapsed:?}, expected {expected:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn crawl_delay_spaces_a_crawlers_requests() {
    let p = pacer(|_| {});
    let a = site("a.example");
    let slow = delay_for("SlowBot");
    assert!(slow.is_some());
    let t0 = Instant::now();
    for _ in 0..10 {
        pass(&p, &a, slow).await;
    }
    assert_about(t0.elapsed(), Duration::from_millis(1800));
    let stats = p.stats();
    assert_eq!((stats.delayed, stats.refused, stats.waiting), (9, 0, 0));
    assert!(stats.total_delay >= Duration::from_millis(1800), "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn a_group_without_delay_is_not_slowed() {
    let p = pacer(|_| {});
    let a = site("a.example");
    pass(&p, &a, delay_for("SlowBot")).await;
    let t0 = Instant::now();
    assert_eq!(delay_for("FastBot"), None);
    for _ in 0..10 {
        pass(&p, &a, delay_for("FastBot")).await;
    }
    assert_eq!(t0.elapsed(), Duration::ZERO);
    // SlowBot's own next request still waits its delay.
    pass(&p, &a, delay_for("SlowBot")).await;
    assert_about(t0.elapsed(), Duration::from_millis(200));
    assert_eq!(p.stats().delayed, 1);
}

#[tokio::test(start_paused = true)]
async fn tokens_of_one_group_share_its_delay_and_sites_are_separate() {
    let p = pacer(|_| {});
    let (a, b) = (site("a.example"), site("b.example"));
    let t0 = Instant::now();
    pass(&p, &a, delay_for("TwinA")).await;
    pass(&p, &b, delay_for("TwinB")).await;
    assert_eq!(t0.elapsed(), Duration::ZERO, "another authority does not wait");
    pass(&p, &a, delay_for("TwinB")).await;
    assert_about(t0.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn an_absurd_crawl_delay_is_capped() {
    let p = pacer(|s| s.max_crawl_delay = Duration::from_secs(2));
    let a = site("a.example");
    let t0 = Instant::now();
    pass(&p, &a, delay_for("SleepyBot")).await;
    pass(&p, &a, delay_for("SleepyBot")).await;
    assert_about(t0.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn disabled_or_not_obeying_never_waits() {
    let off = pacer(|s| {
        s.enabled = false;
        s.default_rps = 1.0;
        s.default_concurrency = 1;
    });
    let ignore = pacer(|s| s.obey_crawl_delay = false);
    let a = site("a.example");
    let t0 = Instant::now();
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(off.admit_with_delay(&a, delay_for("SlowBot")).await.unwrap());
        pass(&ignore, &a, delay_for("SlowBot")).await;
    }
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert!(!off.is_enabled());
    assert_eq!(off.stats(), PacingStats::default());
    assert_eq!(ignore.stats().delayed, 0);
    assert_eq!(off.queue_depth(&a), 0);
}

#[tokio::test(start_paused = true)]
async fn the_default_rate_holds_across_crawlers() {
    let p = pacer(|s| s.default_rps = 5.0);
    let a = site("a.example");
    let t0 = Instant::now();
    let starts: Vec<Duration> =
        futures_util::future::join_all(["SlowBot", "FastBot", "TwinA", "Other"].map(|token| {
            let p = &p;
            let a = &a;
            async move {
                let delay = delay_for(token).filter(|_| token != "SlowBot");
                pass(p, a, delay).await;
                t0.elapsed()
            }
        }))
        .await;
    let mut sorted = starts.clone();
    sorted.sort();
    let ms = |n| Duration::from_millis(n);
    assert_eq!(sorted[0], Duration::ZERO);
    for (i, pair) in sorted.windows(2).enumerate() {
        assert!(pair[1] - pair[0] >= ms(200) - ms(1), "start {i}: {starts:?}");
    }
    assert_eq!(p.stats().delayed, 3);
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_is_refused_at_once() {
    let p = pacer(|s| {
        s.default_rps = 0.5;
        s.max_wait = Duration::from_secs(1);
    });
    let a = site("a.example");
    pass(&p, &a, None).await;
    let t0 = Instant::now();
    let err = p.admit_with_delay(&a, None).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::ZERO, "refused without waiting");
    assert_eq!(err.pace, Pace::Rate { interval: Duration::from_secs(2) });
    assert_eq!(
        err.cause,
        ThrottleCause::WaitTooLong {
            wait: Duration::from_secs(2),
            max_wait: Duration::from_secs(1)
        }
    );
    assert_eq!(err.retry_after, Duration::from_secs(2));
    let text = err.to_string();
    assert!(text.starts_with("http://a.example is paced (one request every 2s)"), "{text}");
    assert!(text.contains("wait 2s, longer than pacing.max_wait (1s)"), "{text}");
    assert_eq!(p.stats().refused, 1);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_refused_and_names_the_crawl_delay() {
    let p = std::sync::Arc::new(pacer(|s| s.queue_limit = 1));
    let a = site("a.example");
    pass(&p, &a, delay_for("SlowBot")).await;
    let waiter = {
        let (p, a) = (p.clone(), a.clone());
        tokio::spawn(async move { p.admit_with_delay(&a, delay_for("SlowBot")).await.map(drop) })
    };
    until_waiting(&p, &a, 1).await;
    let err = p.admit_with_delay(&a, delay_for("SlowBot")).await.unwrap_err();
    assert_eq!(err.pace, Pace::CrawlDelay { delay: Duration::from_millis(200), line: 2 });
    assert!(matches!(err.cause, ThrottleCause::QueueFull { waiting: 1, .. }), "{err:?}");
    assert_eq!(err.retry_after, Duration::from_secs(1));
    assert!(err.to_string().contains("Crawl-delay 200ms from robots.txt line 2"), "{err}");
    let full = "the queue of its robots.txt group (Crawl-delay line 2) is full";
    assert!(err.to_string().contains(full), "{err}");
    // The waiting request gets its turn.
    assert!(waiter.await.unwrap().is_ok());
    assert_eq!(p.queue_depth(&a), 0);
    let stats = p.stats();
    assert_eq!((stats.delayed, stats.refused, stats.waiting), (1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn concurrency_waits_for_a_free_connection() {
    let p = std::sync::Arc::new(pacer(|s| s.default_concurrency = 1));
    let a = site("a.example");
    let held = p.admit_with_delay(&a, None).await.unwrap();
    let t0 = Instant::now();
    let second = {
        let (p, a) = (p.clone(), a.clone());
        tokio::spawn(async move {
            let permit = p.admit_with_delay(&a, None).await;
            (permit.is_ok(), t0.elapsed())
        })
    };
    until_waiting(&p, &a, 1).await;
    assert_eq!(p.queue_depths(), [(a.clone(), 1)]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(held);
    let (ok, waited) = second.await.unwrap();
    assert!(ok);
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
    assert_eq!(p.stats().delayed, 1);
    assert!(p.queue_depths().is_empty());
}

#[tokio::test(start_paused = true)]
async fn no_free_connection_within_max_wait_is_refused() {
    let p = pacer(|s| {
        s.default_concurrency = 1;
        s.max_wait = Duration::from_secs(3);
    });
    let a = site("a.example");
    let _held = p.admit_with_delay(&a, None).await.unwrap();
    let t0 = Instant::now();
    let err = p.admit_with_delay(&a, None).await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
    assert_eq!(err.pace, Pace::Concurrency { max: 1 });
    assert_eq!(err.cause, ThrottleCause::NoConnection { max_wait: Duration::from_secs(3) });
    // Issue 26 §23: not "try again in a second" for a site saturated for all of max_wait.
    assert_eq!(err.retry_after, Duration::from_secs(3));
    assert_eq!(p.queue_depth(&a), 0);
    assert_eq!(p.stats().refused, 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_given_up_while_waiting_leaves_the_queue() {
    let p = std::sync::Arc::new(pacer(|s| {
        s.default_rps = 0.1;
        s.queue_limit = 1;
    }));
    let a = site("a.example");
    let t0 = Instant::now();
    pass(&p, &a, None).await;
    let waiter = {
        let (p, a) = (p.clone(), a.clone());
        tokio::spawn(async move { p.admit_with_delay(&a, None).await.map(drop) })
    };
    until_waiting(&p, &a, 1).await;
    assert_eq!(p.stats().waiting, 1);
    waiter.abort();
    let _ = waiter.await;
    assert_eq!(p.queue_depth(&a), 0);
    assert_eq!(p.stats().waiting, 0);
    // The queue has room again; the abandoned slot (at 10 s) still spaces the next one.
    pass(&p, &a, None).await;
    assert_about(t0.elapsed(), Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn a_site_entry_replaces_the_default_pace_for_its_authority_only() {
    let p = pacer(|s| {
        s.default_rps = 0.0;
        s.sites = vec![SitePace {
            authority: "http://paced.example".into(),
            rps: Some(2.0),
            concurrency: None,
        }];
    });
    let (paced, free) = (site("paced.example"), site("free.example"));
    let t0 = Instant::now();
    for _ in 0..3 {
        pass(&p, &free, None).await;
    }
    assert_eq!(t0.elapsed(), Duration::ZERO);
    for _ in 0..3 {
        pass(&p, &paced, None).await;
    }
    assert_about(t0.elapsed(), Duration::from_secs(1));
}

#[test]
fn retry_after_is_whole_seconds_rounded_up() {
    assert_eq!(retry_after(Duration::ZERO), Duration::from_secs(1));
    assert_eq!(retry_after(Duration::from_millis(1001)), Duration::from_secs(2));
    assert_eq!(retry_after(Duration::from_secs(20)), Duration::from_secs(20));
    assert_eq!(show(Duration::from_nanos(1_799_999_999)), "1s 800ms");
}

/// Requests that waited for a connection together still start one spacing apart, or are
/// refused when that would take them past `max_wait`.
async fn bunched_behind_a_connection(max_wait: Duration) -> Vec<Result<Duration, Throttled>> {
    let p = std::sync::Arc::new(pacer(|s| {
        s.default_rps = 1.0;
        s.default_concurrency = 1;
        s.max_wait = max_wait;
    }));
    let a = site("a.example");
    let t0 = Instant::now();
    let held = p.admit_with_delay(&a, None).await.unwrap();
    let mut waiters = Vec::new();
    for n in 1..=2 {
        let (task_p, task_a) = (p.clone(), a.clone());
        waiters.push(tokio::spawn(async move {
            // Each lets its connection go at once, so the next one gets it.
            task_p.admit_with_delay(&task_a, None).await.map(|_| t0.elapsed())
        }));
        until_waiting(&p, &a, n).await;
    }
    // Slots reserved at 1 s and 2 s pass while the connection is held until 2.5 s.
    tokio::time::sleep_until(t0 + Duration::from_millis(2500)).await;
    drop(held);
    let mut results = Vec::new();
    for w in waiters {
        results.push(w.await.unwrap());
    }
    results
}

#[tokio::test(start_paused = true)]
async fn requests_bunched_behind_a_connection_stay_spaced() {
    let results = bunched_behind_a_connection(Duration::from_secs(10)).await;
    assert_about(*results[0].as_ref().unwrap(), Duration::from_millis(2500));
    assert_about(*results[1].as_ref().unwrap(), Duration::from_millis(3500));
}

#[tokio::test(start_paused = true)]
async fn requests_bunched_behind_a_connection_are_refused_past_max_wait() {
    let results = bunched_behind_a_connection(Duration::from_secs(3)).await;
    assert_about(*results[0].as_ref().unwrap(), Duration::from_millis(2500));
    let err = results[1].as_ref().unwrap_err();
    assert_eq!(err.pace, Pace::Rate { interval: Duration::from_secs(1) });
    assert!(
        matches!(err.cause, ThrottleCause::WaitTooLong { wait, .. } if wait >= Duration::from_millis(3499)),
        "{err:?}"
    );
}

/// A site whose request holds its only connection slot is not forgotten when many other sites
/// pass through a small store: the next request to it still waits for that slot. (Before, the
/// evicted site was made anew, with a fresh semaphore, and the concurrency cap was exceeded.)
#[tokio::test(start_paused = true)]
async fn a_site_in_use_is_never_forgotten() {
    let section =
        PacingSection { enabled: true, default_concurrency: 1, ..PacingSection::default() };
    let store = std::sync::Arc::new(LocalPace::with_capacity(Duration::from_secs(600), 4));
    let p = Pacer::with_store(&section, store.clone()).unwrap();
    let busy = site("busy.test");
    let holding = p.admit_with_delay(&busy, None).await.expect("first request admitted");
    for i in 0..200 {
        pass(&p, &site(&format!("other{i}.test")), None).await;
        store.sites.idle.run_pending_tasks();
    }
    assert!(store.sites.idle.entry_count() <= 4, "{}", store.sites.idle.entry_count());
    // The slot is still held: a second request to the busy site must wait for it, and gives
    // up after max_wait.
    let second = p.admit_with_delay(&busy, None).await;
    assert!(second.is_err(), "a second request got a connection while the first holds it");
    drop(holding);
    // Once the slot is free, the site is kept as any other.
    pass(&p, &busy, None).await;
}

/// LRU, not TinyLFU: a new site is kept even in a full store of sites used more often, so its
/// pace holds from its first request.
#[tokio::test(start_paused = true)]
async fn a_new_site_is_kept_in_a_full_store() {
    let store = LocalPace::with_capacity(Duration::from_secs(600), 4);
    let limits = Limits::new(Some(Duration::from_secs(1)), None, 10, Duration::from_secs(30));
    for _ in 0..20 {
        for i in 0..4 {
            let a = site(&format!("popular{i}.test"));
            drop(store.enter(&a, limits));
        }
    }
    store.sites.idle.run_pending_tasks();
    let newcomer = site("new.test");
    drop(store.enter(&newcomer, limits));
    store.sites.idle.run_pending_tasks();
    assert!(store.peek(&newcomer).is_some(), "the new site was not kept");
}

/// A reload that slows a site down holds for the site's next requests, also when the site was
/// paced before (its state is kept): the new spacing, not the one it was first seen with.
#[tokio::test(start_paused = true)]
async fn a_reloaded_pace_applies_to_a_site_already_paced() {
    let fast = |s: &mut PacingSection| {
        s.default_rps = 1000.0;
        s.max_wait = Duration::from_secs(60);
    };
    let p = pacer(fast);
    let a = site("a.example");
    pass(&p, &a, None).await;
    pass(&p, &a, None).await;
    let slow = section(|s| {
        fast(s);
        s.default_rps = 0.1;
    });
    p.apply(p.prepare(&slow).unwrap());
    // 10 s from the last start (made at most 1 ms before t0), and 10 s between starts; under
    // the site's first pace each would have waited 1 ms.
    let t0 = Instant::now();
    pass(&p, &a, None).await;
    let first = t0.elapsed();
    let ten = Duration::from_secs(10);
    assert!(first >= ten - Duration::from_millis(2) && first <= ten, "{first:?}");
    pass(&p, &a, None).await;
    assert_about(t0.elapsed() - first, ten);
}

/// A reload that changes a site's concurrency gives new requests slots of the new size, while
/// a request holding a slot of the old ones keeps it (until it ends, the two sizes add up).
#[tokio::test(start_paused = true)]
async fn a_reloaded_concurrency_applies_to_a_site_in_use() {
    let one = |s: &mut PacingSection| {
        s.default_concurrency = 1;
        s.max_wait = Duration::from_secs(1);
    };
    let p = pacer(one);
    let a = site("a.example");
    let held = p.admit_with_delay(&a, None).await.unwrap();
    let two = section(|s| {
        one(s);
        s.default_concurrency = 2;
    });
    p.apply(p.prepare(&two).unwrap());
    let t0 = Instant::now();
    let second = p.admit_with_delay(&a, None).await.unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO, "a slot of the new two");
    let third = p.admit_with_delay(&a, None).await.unwrap();
    drop(held);
    assert!(p.admit_with_delay(&a, None).await.is_err(), "two slots, both taken");
    drop((second, third));
}

/// A reload that lengthens the idle window (a longer spacing, a longer `max_wait`) keeps the
/// pace of a site quiet since before it: kept only for the window of the start, the site would
/// be forgotten and its next request go at once, though its new spacing had not run. On moka's
/// clock, which is real time.
#[test]
fn a_reload_that_lengthens_the_idle_window_keeps_sites_quiet_since_before() {
    let limits = Limits::new(Some(Duration::from_secs(1)), None, 10, Duration::from_secs(30));
    let short = Duration::from_millis(100);
    let reloaded = std::sync::Arc::new(LocalPace::new(short));
    let kept = std::sync::Arc::new(LocalPace::new(short));
    let p = Pacer::with_store(&section(|_| {}), reloaded.clone()).unwrap();
    let a = site("quiet.example");
    drop(reloaded.enter(&a, limits));
    drop(kept.enter(&a, limits));
    let longer = section(|s| s.max_wait = Duration::from_secs(120));
    p.apply(p.prepare(&longer).unwrap());
    std::thread::sleep(short * 3);
    assert!(kept.peek(&a).is_none(), "the store without the reload keeps its window of 100 ms");
    assert!(reloaded.peek(&a).is_some(), "forgotten after the window of the start");
}
