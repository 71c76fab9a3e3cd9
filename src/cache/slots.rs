//! Fetch slots: at most `robots.max_concurrent_fetches` robots.txt fetches at once, and at
//! most `robots.max_concurrent_fetches_per_host` to one host (all its ports and both schemes
//! together), so that slow origins (tarpits: they accept and never answer) on one host cannot
//! take every slot. A fetch takes its host's slot first, then a global one; waiting for both
//! has a deadline (the caller's, which counts the wait in `fetch_timeout`).
//!
//! A host's semaphore lives in the map only while a fetch to that host holds or waits for a
//! slot, so the map is bounded by the fetches in flight, not by the sites ever seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The global and per-host fetch slots.
pub(super) struct FetchSlots {
    global: Arc<Semaphore>,
    per_host: usize,
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

/// Held while a fetch runs; gives both slots back when dropped.
pub(super) struct Slot {
    _global: OwnedSemaphorePermit,
    _host: HostSlot,
}

/// A claim on a host's semaphore (a permit once acquired). Dropping it removes the host's
/// entry when no other fetch holds or waits for it.
struct HostSlot {
    host: String,
    semaphore: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        self.permit.take();
        // The map's reference and ours: nobody else holds or waits.
        if Arc::strong_count(&self.semaphore) <= 2 {
            hosts.remove(&self.host);
        }
    }
}

impl FetchSlots {
    /// `global` slots in all, `per_host` for one host (each at least 1).
    pub(super) fn new(global: usize, per_host: usize) -> FetchSlots {
        FetchSlots {
            global: Arc::new(Semaphore::new(global.clamp(1, Semaphore::MAX_PERMITS))),
            per_host: per_host.clamp(1, Semaphore::MAX_PERMITS),
            hosts: Arc::default(),
        }
    }

    /// A slot for a fetch to `host`, or `None` when none came free before `deadline`.
    pub(super) async fn acquire(&self, host: &str, deadline: Instant) -> Option<Slot> {
        let semaphore = {
            let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
            hosts
                .entry(host.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_host)))
                .clone()
        };
        let mut host_slot = HostSlot {
            host: host.to_owned(),
            semaphore: semaphore.clone(),
            permit: None,
            hosts: self.hosts.clone(),
        };
        let global = self.global.clone();
        // The semaphores are never closed, so acquiring fails only by the deadline.
        let both = async move {
            let host = semaphore.acquire_owned().await.ok()?;
            let global = global.acquire_owned().await.ok()?;
            Some((host, global))
        };
        let (host_permit, global) = tokio::time::timeout_at(deadline, both).await.ok()??;
        host_slot.permit = Some(host_permit);
        Some(Slot { _global: global, _host: host_slot })
    }

    /// Hosts with a fetch holding or waiting for a slot (for tests).
    #[cfg(test)]
    fn hosts(&self) -> usize {
        self.hosts.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn per_host_and_global_caps_hold() {
        let slots = FetchSlots::new(2, 1);
        let soon = || Instant::now() + Duration::from_millis(50);
        let a = slots.acquire("a.test", soon()).await.expect("a first slot");
        // The host's one slot is taken: another fetch to a.test waits, and gives up.
        assert!(slots.acquire("a.test", soon()).await.is_none());
        let b = slots.acquire("b.test", soon()).await.expect("another host");
        // Both global slots are taken.
        assert!(slots.acquire("c.test", soon()).await.is_none());
        assert_eq!(slots.hosts(), 2);
        drop(a);
        let c = slots.acquire("c.test", soon()).await.expect("a global slot came free");
        drop((b, c));
        assert_eq!(slots.hosts(), 0, "hosts are forgotten once no fetch holds or waits");
    }

    #[tokio::test]
    async fn a_waiter_gets_the_slot_when_it_comes_free() {
        let slots = Arc::new(FetchSlots::new(1, 1));
        let held = slots.acquire("a.test", Instant::now()).await.expect("free");
        let waiting = {
            let slots = slots.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(5);
                slots.acquire("a.test", deadline).await.is_some()
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiting.await.unwrap());
        assert_eq!(slots.hosts(), 0);
    }
}
