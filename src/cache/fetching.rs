//! The fetch of one authority's robots.txt, coalesced: one fetch in flight per authority
//! (the `in_flight` map, under its lock), the status table applied to its result, the entry
//! stored unless a purge came meanwhile, and the result handed to every request waiting.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::watch;

use super::{
    archived, persist, shared, state, FetchOutcome, Found, InFlight, Inner, RobotsSnapshot,
};
use crate::authority::Authority;

impl Inner {
    /// Starts a fetch of `authority` unless one is in flight or the entry is current, without
    /// waiting for it.
    pub(super) async fn refetch_in_background(this: &Arc<Self>, authority: &Authority) {
        drop(Inner::find_or_fetch(this, authority).await);
    }

    /// Under the lock: the current entry, the fetch in flight, or a new fetch.
    pub(super) async fn find_or_fetch(this: &Arc<Self>, authority: &Authority) -> Found {
        let mut in_flight = this.in_flight.lock().await;
        if let Some(fetch) = in_flight.get(authority) {
            return Found::Fetching(fetch.result.clone());
        }
        // Checked again under the lock: a fetch that just finished stored its entry before
        // leaving the map.
        if let Some(snapshot) = this.entries.get(authority).await {
            if snapshot.is_current(this.clock.now()) {
                return Found::Current(snapshot);
            }
        }
        let id = this.next_fetch_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (sender, result) = watch::channel(None);
        in_flight.insert(authority.clone(), InFlight { id, result: result.clone() });
        drop(in_flight);
        tokio::spawn(Inner::fetch(this.clone(), authority.clone(), id, sender, false));
        Found::Fetching(result)
    }

    /// The fetch task: fetch, apply the status table, store (unless purged meanwhile), and
    /// hand the result to every waiting request. `ahead`: a refresh of the entry in force
    /// ahead of its expiry ([`Inner::refresh`]).
    pub(super) async fn fetch(
        this: Arc<Self>,
        authority: Authority,
        id: u64,
        sender: watch::Sender<Option<Arc<RobotsSnapshot>>>,
        ahead: bool,
    ) {
        tracing::debug!(%authority, "fetching robots.txt");
        if let Some(shared) = this.shared.get() {
            match shared::refresh(&this, shared.as_ref(), &authority, ahead).await {
                Ok((snapshot, keep)) => {
                    return Inner::store(&this, &authority, id, snapshot, keep, None, sender).await
                }
                Err(e) if shared.required() => {
                    let outcome = FetchOutcome::Fleet(e.to_string());
                    let snapshot =
                        RobotsSnapshot::unreachable_now(&authority, outcome, this.clock.now());
                    // Not stored: the next request asks the fleet again.
                    this.in_flight.lock().await.remove(&authority);
                    sender.send_replace(Some(Arc::new(snapshot)));
                    return;
                }
                Err(e) => {
                    tracing::debug!(%authority, error = %e, "fleet out of reach: fetching robots.txt here");
                }
            }
        }
        let mut prev = this.entries.get(&authority).await;
        if prev.is_none() {
            // Not in memory (first request since the start): what was kept on disk.
            if let Some(kept) = persist::load(&this, &authority).await {
                if kept.is_current(this.clock.now()) {
                    return Inner::store(&this, &authority, id, kept, true, None, sender).await;
                }
                prev = Some(Arc::new(kept));
            }
        }
        let fetched = shared::fetch_here(&this, &authority).await;
        let body = fetched.as_ref().and_then(persist::body_of);
        let now = this.clock.now();
        let (snapshot, keep) = match fetched {
            Some(fetched) => (
                state::next_snapshot(
                    prev.as_deref(),
                    &authority,
                    fetched,
                    now,
                    &this.settings.load(),
                ),
                true,
            ),
            None => {
                (shared::no_slot(prev.as_deref(), &authority, now, &this.settings.load()), false)
            }
        };
        let save = keep.then_some(body);
        Inner::store(&this, &authority, id, snapshot, keep, save, sender).await;
    }

    /// Stores the result of fetch `id` (unless purged meanwhile, or `keep` is false), keeps it
    /// on disk when `save` holds the fetched body (`Some(None)`: the body already kept), and
    /// hands it to every waiting request.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn store(
        this: &Arc<Self>,
        authority: &Authority,
        id: u64,
        snapshot: RobotsSnapshot,
        keep: bool,
        save: Option<Option<bytes::Bytes>>,
        sender: watch::Sender<Option<Arc<RobotsSnapshot>>>,
    ) {
        let snapshot = Arc::new(snapshot);
        let mut in_flight = this.in_flight.lock().await;
        let ours = in_flight.get(authority).is_some_and(|f| f.id == id);
        let still_wanted = ours && keep;
        if still_wanted {
            this.entries.insert(authority.clone(), snapshot.clone()).await;
            this.generation.fetch_add(1, Ordering::AcqRel);
            if let Some(body) = save {
                persist::save(this, &snapshot, body);
            }
        }
        if ours {
            in_flight.remove(authority);
        }
        drop(in_flight);
        archived::taken_in(this, &snapshot, keep, still_wanted).await;
        sender.send_replace(Some(snapshot));
    }
}
