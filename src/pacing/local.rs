//! The pace kept in this process: one [`Schedule`] and one semaphore per authority.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::schedule::{Limits, Refusal, Schedule};
use super::store::{Admission, Held, PaceAsk, PaceFuture, PaceStore};
use super::MAX_SITES;
use crate::authority::Authority;

/// One authority: its limits, its schedule and its connection slots.
struct Site {
    limits: Limits,
    schedule: Mutex<Schedule>,
    connections: Option<Arc<Semaphore>>,
}

impl Site {
    fn new(limits: Limits) -> Site {
        let connections =
            limits.concurrency.map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS))));
        Site { limits, schedule: Mutex::new(Schedule::default()), connections }
    }

    /// The schedule. Never held across an `.await`; a panic while it was held (a bug) leaves
    /// bookkeeping that is still consistent enough to go on with.
    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a request as waiting in its authority's queue until dropped, so a request whose
/// client hangs up while waiting leaves the queue all the same.
struct Queued<'a>(&'a Site);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.schedule().leave();
    }
}

/// The in-process [`PaceStore`]: the state of each authority lives in a bounded cache and is
/// forgotten after it has not been used for `idle` (longer than any spacing and wait could
/// last, so forgetting it changes no answer).
pub struct LocalPace {
    sites: moka::sync::Cache<Authority, Arc<Site>>,
}

impl LocalPace {
    /// A store that forgets an authority after `idle` without requests.
    pub fn new(idle: Duration) -> Self {
        LocalPace {
            sites: moka::sync::Cache::builder().max_capacity(MAX_SITES).time_to_idle(idle).build(),
        }
    }

    async fn admit_here(&self, ask: PaceAsk<'_>) -> Result<Admission, Held> {
        let PaceAsk { authority, lane, limits } = ask;
        let site = self.sites.get_with_by_ref(authority, || Arc::new(Site::new(limits)));
        let limits = site.limits;
        let arrival = Instant::now();
        let deadline = arrival.checked_add(limits.max_wait).unwrap_or(arrival);
        let connection_free = site.connections.as_ref().is_none_or(|c| c.available_permits() > 0);
        let slot = site
            .schedule()
            .reserve(arrival, lane, &limits, connection_free)
            .map_err(Held::Refused)?;
        let queued = Queued(&site);
        let mut waited = false;
        if slot.start > arrival {
            waited = true;
            tokio::time::sleep_until(slot.start).await;
        }
        let connection = match &site.connections {
            None => None,
            Some(connections) => match connections.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    waited = true;
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
        let begun = site.schedule().begin(now, lane, &limits, deadline);
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
        let slot = connection.map(|permit| Box::new(permit) as Box<dyn Send + Sync>);
        Ok(Admission { waited, slot })
    }
}

impl PaceStore for LocalPace {
    fn admit<'a>(&'a self, ask: PaceAsk<'a>) -> PaceFuture<'a, Result<Admission, Held>> {
        Box::pin(self.admit_here(ask))
    }

    fn queue_depth(&self, authority: &Authority) -> usize {
        // `iter` would not keep the entry alive, but is linear; one look-up is fine here.
        self.sites.get(authority).map_or(0, |site| site.schedule().waiting())
    }

    fn queue_depths(&self) -> Vec<(Authority, usize)> {
        self.sites
            .iter()
            .map(|(authority, site)| (authority.as_ref().clone(), site.schedule().waiting()))
            .filter(|(_, waiting)| *waiting > 0)
            .collect()
    }

    fn sites(&self) -> u64 {
        self.sites.entry_count()
    }
}
