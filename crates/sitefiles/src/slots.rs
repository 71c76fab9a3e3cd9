//! Fetch slots: at most `robots.max_concurrent_fetches` robots.txt fetches at once, and at
//! most `robots.max_concurrent_fetches_per_host` to one host (all its ports and both schemes
//! together), so that slow origins (tarpits: they accept and never answer) on one host cannot
//! take every slot. A fetch takes its host's slot first, then a global one; waiting for both
//! has a deadline (the caller's, which counts the wait in `fetch_timeout`).
//!
//! A host's semaphore lives in the map only while a fetch to that host holds or waits for a
//! slot, so the map is bounded by the fetches in flight, not by the sites ever seen.
//!
//! **Slow fetches give their global slot back** (review-core N7): a fetch still running after
//! [`SLOW_AFTER`] moves to the slow pool ([`Slot::become_slow`]: `SLOW_POOL_FACTOR` times the
//! global slots) and frees its global slot for the next site. Tarpits (any number of names, on
//! one machine or many) then hold the global slots for at most [`SLOW_AFTER`] each, so a healthy
//! site's first fetch waits at most that long for a slot, never a whole `fetch_timeout`. When
//! the slow pool is full too, the fetch that cannot join it is cut short (its site unreachable
//! for this fetch): that bounds what slow origins can hold.
//!
//! **Why a hung origin still holds a global slot for [`SLOW_AFTER`]** (issue 37, N7): when a
//! fetch starts, a hung origin (it accepts, and never answers) cannot be told from a healthy
//! one: both have sent nothing yet. Only time, or progress, tells them apart. Counting only
//! "active" fetches against the global cap would need a moment at which a fetch becomes
//! active; if that is its first response byte, every fetch *starts* outside the cap, and the
//! cap no longer bounds what it is for: the connections, DNS look-ups and TLS handshakes a
//! crawl across many new sites opens at once (only the per-host cap would remain, and it does
//! not bound the number of hosts). If it is "no byte for a while", that while is a timer like
//! [`SLOW_AFTER`]. So a fetch holds its global slot until it has run [`SLOW_AFTER`], long
//! enough for a healthy robots.txt (one round trip, a handshake, a small body) and short
//! enough that a healthy site behind any number of tarpits waits at most that long for a slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a fetch holds its global slot before it counts as slow and moves to the slow pool.
pub(super) const SLOW_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The slow pool holds this many times the global slots.
const SLOW_POOL_FACTOR: usize = 4;

/// The global and per-host fetch slots, and the pool of slow fetches.
pub(super) struct FetchSlots {
    global: Arc<Semaphore>,
    slow: Arc<Semaphore>,
    per_host: usize,
    hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

/// Held while a fetch runs; gives its slots back when dropped.
pub(super) struct Slot {
    /// The global slot, or once the fetch is slow, its place in the slow pool.
    global: OwnedSemaphorePermit,
    slow_pool: Arc<Semaphore>,
    slow: bool,
    _host: HostSlot,
}

impl Slot {
    /// The fetch has run [`SLOW_AFTER`]: it gives its global slot back and takes a place in
    /// the slow pool instead; `false` when the slow pool is full (the fetch must stop).
    pub(super) fn become_slow(&mut self) -> bool {
        if self.slow {
            return true;
        }
        match self.slow_pool.clone().try_acquire_owned() {
            Ok(place) => {
                // Dropping the global permit gives it to the next fetch waiting.
                self.global = place;
                self.slow = true;
                true
            }
            Err(_) => false,
        }
    }
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
        let global = global.clamp(1, Semaphore::MAX_PERMITS);
        let slow = global.saturating_mul(SLOW_POOL_FACTOR).min(Semaphore::MAX_PERMITS);
        FetchSlots {
            global: Arc::new(Semaphore::new(global)),
            slow: Arc::new(Semaphore::new(slow)),
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
        Some(Slot { global, slow_pool: self.slow.clone(), slow: false, _host: host_slot })
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

    /// Review-core N7: a slow fetch gives its global slot back, so another site's fetch does
    /// not wait for it; past the slow pool, a slow fetch is told to stop.
    #[tokio::test]
    async fn slow_fetches_give_their_global_slot_back() {
        let slots = FetchSlots::new(1, 4);
        let soon = || Instant::now() + Duration::from_millis(50);
        let mut tarpit = slots.acquire("tarpit.test", soon()).await.expect("free");
        assert!(slots.acquire("healthy.test", soon()).await.is_none(), "the one global slot");
        assert!(tarpit.become_slow());
        let healthy = slots.acquire("healthy.test", soon()).await.expect("given back");
        drop(healthy);
        // The slow pool holds four (4 × 1 global slot): the fifth slow fetch must stop.
        let mut more = Vec::new();
        for i in 0..3 {
            let mut s = slots.acquire(&format!("t{i}.test"), soon()).await.expect("free");
            assert!(s.become_slow(), "slow fetch {i}");
            more.push(s);
        }
        let mut fifth = slots.acquire("t9.test", soon()).await.expect("free");
        assert!(!fifth.become_slow(), "the slow pool is full");
        drop(tarpit);
        assert!(fifth.become_slow(), "a place came free");
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
