//! The robots store: the seam between the policy and wherever robots.txt snapshots live.
//!
//! [`RobotsStore`] is what the policy asks: get a snapshot (one coalesced fetch per authority
//! when it is missing or due), purge, and report. [`super::RobotsCache`] is the in-process
//! store (moka); a fleet-wide one (Redis) implements the same trait without touching the proxy.
//!
//! The hot path stays cheap: a client connection keeps the snapshots it used last in a
//! [`RecentRobots`], and [`RobotsStore::recent`] answers from there, without a look-up or an
//! allocation, while the store says they are still its current ones.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::wellknown::TdmSite;
use super::{CacheStats, RecentRobots, RobotsCache, RobotsSnapshot, SharedError};
use robots_proxy_authority::Authority;

/// A boxed future borrowed from the store, so that the trait can be used as `dyn RobotsStore`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Size and counters of a store, for `/metrics` and the admin page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Authorities held (approximate).
    pub entries: u64,
    /// Bytes the held entries weigh (approximate).
    pub memory_bytes: u64,
    /// Hits, misses and completed fetches by class.
    pub counters: CacheStats,
}

/// What a purge of every robots.txt did.
#[derive(Debug, Clone)]
pub struct PurgedAll {
    /// Authorities this instance held before (all dropped).
    pub entries_before: u64,
    /// With a fleet, what of the fleet's part was not done (the shared records, telling the
    /// other instances): the purge was partial.
    pub fleet: Result<(), SharedError>,
}

/// Where the policy gets robots.txt snapshots from.
pub trait RobotsStore: Send + Sync + 'static {
    /// The snapshot `memory` holds for `authority`, if it is still the store's current one
    /// (counted as a hit). Synchronous: the hot path of a keep-alive connection.
    fn recent(&self, memory: &RecentRobots, authority: &Authority) -> Option<Arc<RobotsSnapshot>>;

    /// The store's generation now: read before [`RobotsStore::get`] and given to
    /// [`RobotsStore::remember`] with its result.
    fn generation(&self) -> u64;

    /// Keeps `snapshot`, got when the store was at `generation`, in `memory`.
    fn remember(&self, memory: &mut RecentRobots, generation: u64, snapshot: Arc<RobotsSnapshot>);

    /// The robots.txt state for `authority`, fetched first when missing or due: one fetch per
    /// authority however many ask. Never fails: fetch failures are states.
    fn get<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Arc<RobotsSnapshot>>;

    /// What `authority`'s `/.well-known/tdmrep.json` says, fetched first when missing or
    /// expired (see [`super::wellknown`]: one fetch per authority per lifetime, shared in a fleet).
    fn tdmrep<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Arc<TdmSite>>;

    /// What the store holds for `authority`, current or not, without fetching.
    fn peek<'a>(&'a self, authority: &'a Authority)
        -> StoreFuture<'a, Option<Arc<RobotsSnapshot>>>;

    /// Drops the robots.txt of `authority`, so the next request fetches it again. This
    /// instance's copy is always dropped; the error says what of a fleet's part was not done.
    fn purge<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Result<(), SharedError>>;

    /// Drops every robots.txt; answers how many authorities were held, and whether the
    /// fleet's part was done.
    fn purge_all(&self) -> StoreFuture<'_, PurgedAll>;

    /// Size and counters, after pending housekeeping.
    fn stats(&self) -> StoreFuture<'_, StoreStats>;

    /// Size and counters as they stand, without waiting (for `/metrics`).
    fn stats_now(&self) -> StoreStats;

    /// The archive of every robots.txt version taken in ([`robots_proxy_archive`]), if kept.
    fn archive(&self) -> Option<Arc<robots_proxy_archive::Archive>> {
        None
    }
}

impl RobotsStore for RobotsCache {
    fn recent(&self, memory: &RecentRobots, authority: &Authority) -> Option<Arc<RobotsSnapshot>> {
        RobotsCache::recent(self, memory, authority)
    }

    fn generation(&self) -> u64 {
        RobotsCache::generation(self)
    }

    fn remember(&self, memory: &mut RecentRobots, generation: u64, snapshot: Arc<RobotsSnapshot>) {
        RobotsCache::remember(self, memory, generation, snapshot);
    }

    fn get<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Arc<RobotsSnapshot>> {
        Box::pin(RobotsCache::get(self, authority))
    }

    fn tdmrep<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Arc<TdmSite>> {
        Box::pin(super::Inner::tdmrep(&self.inner, authority))
    }

    fn peek<'a>(
        &'a self,
        authority: &'a Authority,
    ) -> StoreFuture<'a, Option<Arc<RobotsSnapshot>>> {
        Box::pin(RobotsCache::peek(self, authority))
    }

    fn purge<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Result<(), SharedError>> {
        Box::pin(RobotsCache::purge(self, authority))
    }

    fn purge_all(&self) -> StoreFuture<'_, PurgedAll> {
        Box::pin(async move {
            self.run_pending_tasks().await;
            let entries_before = self.entry_count();
            let fleet = RobotsCache::purge_all(self).await;
            PurgedAll { entries_before, fleet }
        })
    }

    fn stats(&self) -> StoreFuture<'_, StoreStats> {
        Box::pin(async move {
            self.run_pending_tasks().await;
            self.stats_now()
        })
    }

    fn archive(&self) -> Option<Arc<robots_proxy_archive::Archive>> {
        RobotsCache::archive(self)
    }

    fn stats_now(&self) -> StoreStats {
        StoreStats {
            entries: self.entry_count(),
            memory_bytes: self.weighted_size(),
            counters: RobotsCache::stats(self),
        }
    }
}
