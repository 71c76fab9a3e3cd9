//! The store's driver, the part every [`SiteFile`] kind shares: the entries (moka, bounded by
//! the kind's weight, LRU), the [`Core`] behind an async lock, and the channels requests wait
//! on. The kind's own driver (`fetching.rs` for robots.txt, `wellknown.rs` for `tdmrep.json`)
//! spawns the [`FetchJob`]s it is handed, runs the fetch (through the fleet's lease,
//! [`super::shared::through_fleet`]) and hands the value back ([`Files::finish`]).
//!
//! A request that finds a current entry reads moka only: no lock, no allocation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::core::{Asked, Core, FetchJob, Output};
use super::sitefile::SiteFile;
use robots_proxy_authority::Authority;

/// Where the requests waiting for one fetch wait: its value, once it comes.
pub(super) type Wait<V> = Arc<watch::Sender<Option<Arc<V>>>>;

/// A fetch the store runs for kind `K`.
pub(super) type Job<K> = FetchJob<Wait<<K as SiteFile>::Value>>;

/// The outputs of a finished fetch run after the lock: archive, answer.
pub(super) type After<K> = Vec<Output<<K as SiteFile>::Value, Wait<<K as SiteFile>::Value>>>;

fn new_wait<V>() -> Wait<V> {
    Arc::new(watch::Sender::new(None))
}

/// One kind's entries and core.
pub(super) struct Files<K: SiteFile> {
    pub(super) entries: moka::future::Cache<Authority, Arc<K::Value>>,
    /// Changed together with `entries` while it is held, so a request either joins a fetch
    /// or sees the entry that fetch stored.
    pub(super) core: tokio::sync::Mutex<Core<K, Wait<K::Value>>>,
    /// Fetches started so far (read without the lock, for the metrics).
    started: AtomicU64,
}

impl<K: SiteFile> Files<K> {
    /// Entries weighing at most `memory` bytes ([`SiteFile::weight`]), each dropped `ttl` after
    /// it was stored.
    pub(super) fn new(memory: u64, ttl: Duration) -> Self {
        // LRU: moka's default admission (TinyLFU) may refuse to keep a new authority at all,
        // and a negative-cache or back-off entry that is not kept refetches on every request.
        let entries = moka::future::Cache::builder()
            .max_capacity(memory)
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .weigher(|_key: &Authority, value: &Arc<K::Value>| {
                u32::try_from(K::weight(value)).unwrap_or(u32::MAX)
            })
            .time_to_live(ttl)
            .build();
        Files {
            entries,
            core: tokio::sync::Mutex::new(Core::default()),
            started: AtomicU64::new(0),
        }
    }

    /// Under the lock: what a request for `authority` at `now` does (the entry looked at again
    /// under it), and the fetch to spawn, if one starts.
    pub(super) async fn ask(
        &self,
        now: SystemTime,
        authority: &Authority,
    ) -> (Asked<K::Value, Wait<K::Value>>, Option<Job<K>>) {
        let mut core = self.core.lock().await;
        let entry = self.entries.get(authority).await;
        let asked = core.handle_ask(now, authority, entry.as_ref(), new_wait);
        (asked, self.started(core.poll_fetch()))
    }

    /// Under the lock: the refresh of `from` ahead of its expiry, if it is still the entry in
    /// force and no fetch is in flight.
    pub(super) async fn refresh(
        &self,
        authority: &Authority,
        from: &Arc<K::Value>,
    ) -> Option<Job<K>> {
        let mut core = self.core.lock().await;
        let still = self.entries.get(authority).await.is_some_and(|e| Arc::ptr_eq(&e, from));
        core.handle_refresh(authority, still, new_wait);
        self.started(core.poll_fetch())
    }

    /// Fetch `job` ended with `value` (`keep`: a result to keep): stored under the lock unless
    /// purged meanwhile (`stored` is then told of it, also under the lock); the archive and
    /// answer steps, to run after it, are returned.
    pub(super) async fn finish(
        &self,
        job: Job<K>,
        value: K::Value,
        keep: bool,
        stored: impl FnOnce(&Arc<K::Value>),
    ) -> After<K> {
        let mut core = self.core.lock().await;
        core.handle_fetched(job, Arc::new(value), keep);
        let mut after = Vec::new();
        let mut stored = Some(stored);
        while let Some(output) = core.poll_output() {
            match output {
                Output::Store { authority, value } => {
                    self.entries.insert(authority, value.clone()).await;
                    if let Some(stored) = stored.take() {
                        stored(&value);
                    }
                }
                other => after.push(other),
            }
        }
        after
    }

    /// Fetch `job` ended without a result: its waiters get `value`; nothing is kept.
    pub(super) async fn abandon(&self, job: Job<K>, value: K::Value) {
        let mut core = self.core.lock().await;
        core.handle_abandoned(job, Arc::new(value));
        let after: Vec<_> = std::iter::from_fn(|| core.poll_output()).collect();
        drop(core);
        for output in after {
            answer(output);
        }
    }

    /// Drops `authority`'s entry (every entry with `None`) and forgets its fetches in flight,
    /// with the core's lock held (`core`).
    pub(super) async fn purge(
        &self,
        core: &mut Core<K, Wait<K::Value>>,
        authority: Option<&Authority>,
    ) {
        core.handle_purge(authority);
        match authority {
            Some(authority) => self.entries.invalidate(authority).await,
            None => self.entries.invalidate_all(),
        }
    }

    /// Fetches started so far.
    pub(super) fn fetches_started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    fn started(&self, job: Option<Job<K>>) -> Option<Job<K>> {
        if job.is_some() {
            self.started.fetch_add(1, Ordering::Relaxed);
        }
        job
    }
}

/// Runs an [`Output::Answer`]: every request waiting at it gets the value. Other outputs are
/// the kind driver's (archive) and are left alone.
pub(super) fn answer<V>(output: Output<V, Wait<V>>) {
    if let Output::Answer { wait, value } = output {
        wait.send_replace(Some(value));
    }
}

/// Waits at `wait` for the fetch's value; `None` if the fetch task ended without one (the
/// runtime is shutting down).
pub(super) async fn wait_for<V>(wait: Wait<V>) -> Option<Arc<V>> {
    let mut receiver = wait.subscribe();
    // The sender is held by `wait` itself: the wait ends when the value comes.
    drop(wait);
    receiver.wait_for(Option::is_some).await.ok().and_then(|v| v.clone())
}
