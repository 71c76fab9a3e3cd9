//! Refresh ahead (`robots.refresh_ahead`): the first request that finds an entry in the last
//! share of its lifetime starts its refetch in the background, and every request goes on with
//! the entry, which is still valid. The refetch is the store's usual fetch task (one in flight
//! per authority, coalesced with any other fetch; with a fleet, one for the fleet under the
//! lease); what its answer does to the entry is `state::next_snapshot`'s to say.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::watch;

use super::{state, InFlight, Inner, RobotsSnapshot};

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
        if !state::refresh_due(snapshot, now, this.settings.refresh_ahead)
            || !snapshot.refresh.claim()
        {
            return;
        }
        tokio::spawn(Inner::refresh(this.clone(), snapshot.clone()));
    }

    /// The refresh task: the usual coalesced fetch (a request that finds the entry expired
    /// meanwhile joins it), run only if no fetch is in flight and `from` is still the entry in
    /// force (not purged or replaced since).
    async fn refresh(this: Arc<Self>, from: Arc<RobotsSnapshot>) {
        let authority = &from.authority;
        let mut in_flight = this.in_flight.lock().await;
        if in_flight.contains_key(authority) {
            return;
        }
        match this.entries.get(authority).await {
            Some(entry) if Arc::ptr_eq(&entry, &from) => {}
            _ => return,
        }
        let id = this.next_fetch_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (sender, result) = watch::channel(None);
        in_flight.insert(authority.clone(), InFlight { id, result });
        drop(in_flight);
        this.counters.refreshes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%authority, "refreshing robots.txt ahead of its expiry");
        Inner::fetch(this.clone(), authority.clone(), id, sender, true).await;
    }
}
