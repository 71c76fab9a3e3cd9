//! Refresh ahead (`robots.refresh_ahead`): the first request that finds an entry in the last
//! share of its lifetime starts its refetch in the background, and every request goes on with
//! the entry, which is still valid. The refetch is the store's usual fetch task (one in flight
//! per authority, coalesced with any other fetch; with a fleet, one for the fleet under the
//! lease); what its answer does to the entry is `state::next_snapshot`'s to say.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use super::{state, Inner, RobotsSnapshot};

/// Set once, by the request that starts the refresh of an entry ahead of its expiry. A copy of
/// a snapshot (`Clone`) starts unclaimed: it is another entry.
#[derive(Debug, Default)]
pub(super) struct RefreshMark(AtomicBool);

impl Clone for RefreshMark {
    fn clone(&self) -> Self {
        RefreshMark::default()
    }
}

impl RefreshMark {
    /// `true` for the first caller only.
    pub(super) fn claim(&self) -> bool {
        !self.0.load(Ordering::Relaxed) && !self.0.swap(true, Ordering::AcqRel)
    }
}

impl Inner {
    /// Starts the refresh of `snapshot` ahead of its expiry, in the background, when a request
    /// at `now` finds it in its refresh window (`robots.refresh_ahead`, [`state::refresh_due`])
    /// and it is the first to: the request itself goes on with `snapshot`, as every other does
    /// until the refresh's result is stored. Synchronous and lock-free on the hot path: one
    /// atomic flag per entry ([`RefreshMark`]) lets one request through.
    pub(super) fn refresh_ahead(this: &Arc<Self>, snapshot: &Arc<RobotsSnapshot>, now: SystemTime) {
        if !state::refresh_due(snapshot, now, this.settings.load().refresh_ahead)
            || !snapshot.refresh.claim()
        {
            return;
        }
        tokio::spawn(Inner::refresh(this.clone(), snapshot.clone()));
    }

    /// The refresh task: the usual coalesced fetch (a request that finds the entry expired
    /// meanwhile joins it), started only if no fetch is in flight and `from` is still the entry
    /// in force (not purged or replaced since): the core's [`super::core::Core::handle_refresh`].
    async fn refresh(this: Arc<Self>, from: Arc<RobotsSnapshot>) {
        if let Some(job) = this.robots.refresh(&from.authority, &from).await {
            Inner::spawn(&this, job);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;
    use crate::fetch::{Fetch, Fetched};
    use crate::{FetchOutcome, RobotsCache, RobotsSection, RobotsState};
    use robots_proxy_authority::{Authority, Scheme};
    use robots_proxy_clock::{Clock, ManualClock};
    use robots_proxy_engine::RobotsTxt;

    /// The first fetch answers at once; every later one waits for a permit of `gate`, then
    /// answers `later` (a body, or 503 when `None`).
    struct Gated {
        calls: AtomicUsize,
        gate: Arc<Semaphore>,
        later: Option<&'static [u8]>,
    }

    impl Fetch for Gated {
        fn fetch(&self, _: Authority) -> Pin<Box<dyn Future<Output = Fetched> + Send>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let (gate, later) = (self.gate.clone(), self.later);
            Box::pin(async move {
                let body: &[u8] = if n == 0 {
                    b"User-agent: *\nDisallow: /old\n"
                } else {
                    let _permit = gate.acquire().await;
                    match later {
                        Some(body) => body,
                        None => return Fetched::Unreachable { outcome: FetchOutcome::Status(503) },
                    }
                };
                Fetched::Robots {
                    status: 200,
                    robots: Arc::new(RobotsTxt::parse(body)),
                    body: bytes::Bytes::from_static(body),
                    max_age: None,
                }
            })
        }
    }

    fn setup(later: Option<&'static [u8]>) -> (RobotsCache, Arc<Gated>, Arc<ManualClock>) {
        let fetcher = Arc::new(Gated {
            calls: AtomicUsize::new(0),
            gate: Arc::new(Semaphore::new(0)),
            later,
        });
        let clock =
            Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 30)));
        let settings = RobotsSection {
            max_age: Duration::from_secs(100),
            min_age: Duration::ZERO,
            refresh_ahead: 0.2,
            ..RobotsSection::default()
        };
        let cache = RobotsCache::with_fetcher(settings, clock.clone(), fetcher.clone());
        (cache, fetcher, clock)
    }

    /// Lets the spawned tasks run until `done` holds (at most 1000 turns).
    async fn turns_until(mut done: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never happened");
    }

    /// Lets the spawned tasks run until the entry held for `a` satisfies `done`.
    async fn entry_until(
        cache: &RobotsCache,
        a: &Authority,
        done: impl Fn(&Arc<RobotsSnapshot>) -> bool,
    ) {
        for _ in 0..1000 {
            if cache.inner.robots.entries.get(a).await.is_some_and(|s| done(&s)) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the entry never changed as expected");
    }

    /// Asks for `a` many times; none of the answers may wait (a held refresh would hang them).
    async fn ask(cache: &RobotsCache, a: &Authority, times: usize) -> Vec<Arc<RobotsSnapshot>> {
        let mut answers = Vec::new();
        for _ in 0..times {
            let got = tokio::time::timeout(Duration::from_secs(5), cache.get(a)).await;
            answers.push(got.expect("a request waited for the refresh"));
        }
        answers
    }

    #[tokio::test]
    async fn one_refresh_in_flight_while_requests_go_on_with_the_copy() {
        let (cache, fetcher, clock) = setup(Some(b"User-agent: *\nDisallow: /new\n"));
        let a = Authority::new(Scheme::Http, "a.test", 80).unwrap();
        let first = cache.get(&a).await;
        assert!(!first.rules.allows(None, "/old"));
        clock.advance(Duration::from_secs(79));
        ask(&cache, &a, 10).await;
        turns_until(|| true).await;
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 1, "not before the last 20 %");
        clock.advance(Duration::from_secs(1));
        for answer in ask(&cache, &a, 50).await {
            assert!(Arc::ptr_eq(&answer, &first), "the copy in force, while the refresh runs");
        }
        turns_until(|| fetcher.calls.load(Ordering::SeqCst) == 2).await;
        for answer in ask(&cache, &a, 50).await {
            assert!(!answer.rules.allows(None, "/old"));
        }
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 2, "one refresh in flight");
        assert_eq!(cache.stats().refreshes, 1);
        fetcher.gate.add_permits(1);
        entry_until(&cache, &a, |s| !Arc::ptr_eq(s, &first)).await;
        let renewed = cache.get(&a).await;
        assert!(renewed.rules.allows(None, "/old") && !renewed.rules.allows(None, "/new"));
        assert_eq!(renewed.fetched_at, clock.now());
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_503_refresh_keeps_the_copy_until_it_expires() {
        let (cache, fetcher, clock) = setup(None);
        fetcher.gate.add_permits(100);
        let a = Authority::new(Scheme::Http, "a.test", 80).unwrap();
        let first = cache.get(&a).await;
        clock.advance(Duration::from_secs(85));
        ask(&cache, &a, 5).await;
        entry_until(&cache, &a, |s| s.failures == 1).await;
        clock.advance(Duration::from_secs(14));
        for answer in ask(&cache, &a, 20).await {
            assert_eq!(answer.state, RobotsState::Fresh);
            assert_eq!(answer.version, first.version);
            assert!(!answer.rules.allows(None, "/old"));
        }
        assert_eq!(fetcher.calls.load(Ordering::SeqCst), 2, "no second refresh after a 503");
        // Expired: the copy goes on, stale, while the retry runs (the 503 rules).
        clock.advance(Duration::from_secs(1));
        let stale = cache.get(&a).await;
        assert_eq!(stale.state, RobotsState::Stale);
        assert!(!stale.rules.allows(None, "/old"));
        turns_until(|| fetcher.calls.load(Ordering::SeqCst) == 3).await;
        entry_until(&cache, &a, |s| s.failures == 2).await;
        let after = cache.get(&a).await;
        assert_eq!(
            (after.state, after.version.clone()),
            (RobotsState::Stale, first.version.clone())
        );
    }
}
