//! The pace kept in this process: one [`Schedule`] and one semaphore per authority.
//!
//! An authority's state is kept in a bounded cache (moka, least recently used evicted first:
//! LRU, not moka's default TinyLFU, which may refuse to keep a new site at all) and forgotten
//! after `idle` without requests. While a request waits for the authority or holds one of its
//! connection slots, the state is also held in a map of sites in use, where nothing evicts
//! it: a site in use is never forgotten, so its spacing and concurrency hold however many
//! other sites push it out of the cache. Leaving the map puts it back in the cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use moka::policy::EvictionPolicy;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::schedule::{Lane, Limits, Refusal, Schedule};
use super::store::{Admission, ForgetWhenIdle, Held, IdleWindow, PaceAsk, PaceFuture, PaceStore};
use super::MAX_SITES;
use crate::authority::Authority;

/// One authority: its limits, its schedule and its connection slots.
pub(super) struct Site {
    limits: Limits,
    schedule: Mutex<Schedule>,
    connections: Option<Arc<Semaphore>>,
}

impl Site {
    fn new(limits: Limits) -> Site {
        Self::with_schedule(limits, Schedule::default())
    }

    fn with_schedule(limits: Limits, schedule: Schedule) -> Site {
        let connections =
            limits.concurrency.map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS))));
        Site { limits, schedule: Mutex::new(schedule), connections }
    }

    /// When `limits`, the ones now in force, are not the ones this site was made with (a
    /// reload changed `[pacing]`): its successor, with the same spacing, empty queues and
    /// connection slots sized by `limits`. Requests already waiting or holding a slot keep
    /// the site they joined, and leave it.
    fn successor(&self, limits: Limits) -> Option<Arc<Site>> {
        (self.limits != limits)
            .then(|| Arc::new(Site::with_schedule(limits, self.schedule().spacing_only())))
    }

    /// The schedule. Never held across an `.await`; a panic while it was held (a bug) leaves
    /// bookkeeping that is still consistent enough to go on with.
    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        crate::sync::lock(&self.schedule)
    }
}

/// Counts a request as waiting in its queue (that of its Crawl-delay lane, or the site's)
/// until dropped, so a request whose client hangs up while waiting leaves the queue all the
/// same.
struct Queued<'a>(&'a Site, Option<Lane>);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.schedule().leave(self.1);
    }
}

/// The in-process [`PaceStore`]: the state of each authority lives in a bounded cache and is
/// forgotten after it has not been used for `idle` (longer than any spacing and wait could
/// last, so forgetting it changes no answer), or when [`MAX_SITES`] others were used more
/// recently; never while a request waits for it or holds one of its slots.
pub struct LocalPace {
    pub(super) sites: Arc<Sites>,
    window: Arc<IdleWindow>,
}

pub(super) struct Sites {
    pub(super) idle: moka::sync::Cache<Authority, Arc<Site>>,
    /// Sites with requests waiting or holding a slot, and how many: the state of record for
    /// them (the cache may have evicted its copy).
    in_use: Mutex<HashMap<Authority, (Arc<Site>, usize)>>,
}

/// A request's hold on its site while it waits or holds a slot.
pub(super) struct InUse {
    sites: Arc<Sites>,
    authority: Authority,
    site: Arc<Site>,
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut in_use = crate::sync::lock(&self.sites.in_use);
        let last = match in_use.get_mut(&self.authority) {
            Some((_, users)) => {
                *users -= 1;
                *users == 0
            }
            None => false,
        };
        if last {
            // Back to the cache, so its spacing holds for the idle window: the site of record,
            // which is a successor of this request's when the limits changed meanwhile.
            if let Some((site, _)) = in_use.remove(&self.authority) {
                self.sites.idle.insert(self.authority.clone(), site);
            }
        }
    }
}

/// A connection slot, with the hold on its site: both end when the request ends.
struct HeldSlot {
    _permit: OwnedSemaphorePermit,
    _in_use: InUse,
}

impl LocalPace {
    /// A store that forgets an authority after `idle` without requests, keeping at most
    /// [`MAX_SITES`] idle ones.
    pub fn new(idle: Duration) -> Self {
        Self::with_capacity(idle, MAX_SITES)
    }

    /// [`LocalPace::new`] keeping at most `capacity` sites that are not in use.
    pub fn with_capacity(idle: Duration, capacity: u64) -> Self {
        let window = IdleWindow::new(idle);
        let idle = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .eviction_policy(EvictionPolicy::lru())
            .expire_after(ForgetWhenIdle(window.clone()))
            .build();
        LocalPace { sites: Arc::new(Sites { idle, in_use: Mutex::default() }), window }
    }

    /// The site of `authority`, held in use until the returned hold is dropped.
    pub(super) fn enter(&self, authority: &Authority, limits: Limits) -> InUse {
        let mut in_use = crate::sync::lock(&self.sites.in_use);
        let site = match in_use.get_mut(authority) {
            Some((site, users)) => {
                *users += 1;
                if let Some(next) = site.successor(limits) {
                    *site = next;
                }
                site.clone()
            }
            None => {
                let kept =
                    self.sites.idle.get_with_by_ref(authority, || Arc::new(Site::new(limits)));
                let site = kept.successor(limits).unwrap_or(kept);
                in_use.insert(authority.clone(), (site.clone(), 1));
                site
            }
        };
        InUse { sites: self.sites.clone(), authority: authority.clone(), site }
    }

    /// The site of `authority` if it is known, in use or not, without keeping it.
    pub(super) fn peek(&self, authority: &Authority) -> Option<Arc<Site>> {
        let in_use = crate::sync::lock(&self.sites.in_use);
        match in_use.get(authority) {
            Some((site, _)) => Some(site.clone()),
            None => self.sites.idle.get(authority),
        }
    }

    async fn admit_here(&self, ask: PaceAsk<'_>) -> Result<Admission, Held> {
        let PaceAsk { authority, lane, limits } = ask;
        let in_use = self.enter(authority, limits);
        let site = in_use.site.clone();
        let limits = site.limits;
        let arrival = Instant::now();
        let deadline = arrival.checked_add(limits.max_wait).unwrap_or(arrival);
        let connection_free = site.connections.as_ref().is_none_or(|c| c.available_permits() > 0);
        let slot = site
            .schedule()
            .reserve(arrival, lane, &limits, connection_free)
            .map_err(Held::Refused)?;
        let queued = Queued(&site, lane);
        let mut waited = false;
        if slot.start > arrival {
            waited = true;
            tokio::time::sleep_until(slot.start).await;
        }
        let mut waited_for_connection = false;
        let connection = match &site.connections {
            None => None,
            Some(connections) => match connections.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    waited = true;
                    waited_for_connection = true;
                    let wait =
                        tokio::time::timeout_at(deadline, connections.clone().acquire_owned());
                    match wait.await {
                        Ok(Ok(permit)) => Some(permit),
                        // Timed out (or the semaphore closed, which it never is).
                        Ok(Err(_)) | Err(_) => return Err(Held::NoConnection),
                    }
                }
            },
        };
        let now = Instant::now();
        let spacing =
            limits.interval.unwrap_or_default().max(lane.map_or(Duration::ZERO, |l| l.delay));
        let latest = super::begin_deadline(deadline, spacing, waited_for_connection);
        let begun = site.schedule().begin(now, lane, &limits, latest);
        match begun {
            Ok(start) if start > now => {
                waited = true;
                tokio::time::sleep_until(start).await;
            }
            Ok(_) => {}
            Err((start, bound)) => {
                return Err(Held::Refused(Refusal::TooLong { wait: start - arrival, bound }));
            }
        }
        drop(queued);
        let slot = connection.map(|permit| {
            Box::new(HeldSlot { _permit: permit, _in_use: in_use }) as Box<dyn Send + Sync>
        });
        Ok(Admission { waited, slot })
    }
}

impl PaceStore for LocalPace {
    fn admit<'a>(&'a self, ask: PaceAsk<'a>) -> PaceFuture<'a, Result<Admission, Held>> {
        Box::pin(self.admit_here(ask))
    }

    fn queue_depth(&self, authority: &Authority) -> usize {
        self.peek(authority).map_or(0, |site| site.schedule().waiting())
    }

    fn queue_depths(&self) -> Vec<(Authority, usize)> {
        // A site with requests waiting is in use.
        let in_use = crate::sync::lock(&self.sites.in_use);
        in_use
            .iter()
            .map(|(authority, (site, _))| (authority.clone(), site.schedule().waiting()))
            .filter(|(_, waiting)| *waiting > 0)
            .collect()
    }

    fn sites(&self) -> u64 {
        self.sites.idle.entry_count()
    }

    fn set_idle_window(&self, window: Duration) {
        if self.window.set(window) {
            // Read once, each kept site's window starts over at the new length (the expiry
            // is set on the read; a reload is rare, and there are at most MAX_SITES). Reading,
            // not writing back: a request may put a successor site in meanwhile. Sites in
            // use are not in the cache's keeping.
            for (authority, _) in &self.sites.idle {
                self.sites.idle.get(&*authority);
            }
        }
    }
}
