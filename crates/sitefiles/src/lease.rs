//! The fleet's lease-and-poll loop, once for every [`SiteFile`] kind
//! ([`through_fleet`]): the shared record when it is current, else one fetch for the whole
//! fleet under the kind's lease, given back whenever the fetch ends without a record to store.
//! What differs between kinds (how a fetch here runs, what limits it, how long a record is
//! kept) is the kind's [`FetchHere`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::shared::{Shared, SharedError, LEASE_SLACK, POLL};
use super::sitefile::SiteFile;
use super::slots::Slot;
use super::{Inner, RobotsSection};
use robots_proxy_authority::Authority;

/// How a kind's file is fetched here, and what of its result the fleet keeps.
pub(super) trait FetchHere: SiteFile {
    /// The fetch slot every site file's fetch takes ([`super::slots`]) before the lease is
    /// taken, so the lease does not run out while this instance waits for one; by `deadline`,
    /// `None` when none came in time.
    fn ticket(
        inner: &Arc<Inner>,
        authority: &Authority,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Option<Slot>> + Send {
        super::shared::acquire_slot(inner, authority, deadline)
    }

    /// The fetch, with its slot in hand, taken at `start`; `None` when it could not run (the
    /// origin is not to blame: nothing is stored).
    fn fetch(
        inner: &Arc<Inner>,
        authority: &Authority,
        ticket: Slot,
        start: tokio::time::Instant,
        deadline: tokio::time::Instant,
    ) -> impl Future<Output = Option<Self::Answer>> + Send;

    /// One fetch by this instance alone (no fleet, or the fleet out of reach): its slot, then
    /// the fetch, the wait for the slot counted against `fetch_timeout`. `None` when no slot
    /// came in time or the fetch could not run (the origin is not to blame: nothing is stored).
    fn fetch_here(
        inner: &Arc<Inner>,
        authority: &Authority,
    ) -> impl Future<Output = Option<Self::Answer>> + Send {
        async move {
            let start = tokio::time::Instant::now();
            let deadline =
                robots_proxy_clock::deadline_after(start, inner.settings.load().fetch_timeout);
            let slot = Self::ticket(inner, authority, deadline).await?;
            Self::fetch(inner, authority, slot, start, deadline).await
        }
    }

    /// The raw body `answer` carries, if the record keeps one.
    fn body_of(answer: &Self::Answer) -> Option<Bytes>;

    /// Whether the record of `value` keeps the body it came from.
    fn keeps_body(value: &Self::Value) -> bool;

    /// Bytes of a body worth reading back from a record.
    fn body_limit(inner: &Inner) -> usize;

    /// What requests are answered while no fetch could run (`prev`: the value before):
    /// never stored.
    fn no_fetch(
        prev: Option<&Self::Value>,
        authority: &Authority,
        now: SystemTime,
        settings: &RobotsSection,
    ) -> Self::Value;

    /// Whether a record's `value` is used as it is at `now`, without a fetch (`ahead`: the
    /// fetch is a refresh ahead of expiry).
    fn usable(value: &Self::Value, now: SystemTime, ahead: bool, settings: &RobotsSection) -> bool;

    /// How long the fleet may keep the record of `value` made at `now`.
    fn record_ttl(value: &Self::Value, now: SystemTime, settings: &RobotsSection) -> Duration;
}

/// The value of `K` for `authority`, through the fleet: the shared record when it is current,
/// else one fetch for the whole fleet; and whether to keep it (not when no fetch could run, or
/// when the authority was purged while it was fetched).
///
/// 1. Loads the shared record, and uses it when it is usable (no origin fetch).
/// 2. Otherwise, with a fetch slot in hand, takes the lease (which expires by itself, so
///    an instance that dies holding it delays the others only until then), looks at the record
///    once more (another instance may have just stored it: the lease is given back), fetches,
///    applies the kind's table to the shared previous value, and stores the new record (which
///    gives the lease back). A fetch that ends without a result, or with one too large to
///    share, gives the lease back too.
/// 3. Or, when another instance holds the lease, waits for its record (polling), and takes the
///    lease itself if it runs out first; gives up (an error) after twice the lease and the
///    fetch timeout.
pub(super) async fn through_fleet<K: FetchHere>(
    inner: &Arc<Inner>,
    shared: &dyn Shared,
    authority: &Authority,
    ahead: bool,
) -> Result<(K::Value, bool), SharedError> {
    let settings: &RobotsSection = &inner.settings.load_full();
    let kind = K::KIND;
    let times = shared.store_clock();
    let body_limit = K::body_limit(inner);
    let decode = |record: Option<Vec<u8>>| {
        let now = inner.clock.now();
        record.as_deref().and_then(|r| K::decode(authority, r, body_limit, now, times))
    };
    let usable = |value: &K::Value| K::usable(value, inner.clock.now(), ahead, settings);
    let lease = settings.fetch_timeout.saturating_add(LEASE_SLACK);
    // Past this, give up waiting for another instance and fetch here (it must have lost
    // its lease twice over: the store is misbehaving).
    let give_up = robots_proxy_clock::deadline_after(
        tokio::time::Instant::now(),
        lease.saturating_mul(2).saturating_add(settings.fetch_timeout),
    );
    loop {
        let prev = match decode(shared.load(kind, authority).await?) {
            Some((value, _)) if usable(&value) => return Ok((value, true)),
            other => other,
        };
        // The wait for the slot counts against `fetch_timeout`.
        let start = tokio::time::Instant::now();
        let deadline = robots_proxy_clock::deadline_after(start, settings.fetch_timeout);
        let Some(ticket) = K::ticket(inner, authority, deadline).await else {
            let now = inner.clock.now();
            return Ok((
                K::no_fetch(prev.as_ref().map(|(v, _)| v), authority, now, settings),
                false,
            ));
        };
        if shared.lease(kind, authority, lease).await? {
            // Looked at again under the lease: another instance may have stored its record and
            // given the lease back between the look above and taking it.
            let prev = match decode(shared.load(kind, authority).await?) {
                Some((value, _)) if usable(&value) => {
                    shared.release(kind, authority).await?;
                    return Ok((value, true));
                }
                newer => newer.or(prev),
            };
            let Some(answer) = K::fetch(inner, authority, ticket, start, deadline).await else {
                shared.release(kind, authority).await?;
                let now = inner.clock.now();
                let prev = prev.as_ref().map(|(v, _)| v);
                return Ok((K::no_fetch(prev, authority, now, settings), false));
            };
            let body = K::body_of(&answer).or_else(|| prev.as_ref().and_then(|(_, b)| b.clone()));
            let now = inner.clock.now();
            let value = K::next(prev.as_ref().map(|(v, _)| v), authority, answer, now, settings);
            let shared_body = body.as_ref().filter(|_| K::keeps_body(&value));
            if shared_body.is_some_and(|b| b.len() > shared.max_body()) {
                // Too large to share (fleet.max_shared_body): kept here only; every instance
                // fetches it for itself.
                tracing::debug!(%authority, file = kind.name(), "larger than fleet.max_shared_body: not shared");
                shared.release(kind, authority).await?;
                return Ok((value, true));
            }
            let record = K::encode(&value, shared_body, now, times);
            let ttl = K::record_ttl(&value, now, settings);
            let keep = match shared.store(kind, authority, record, ttl).await {
                Ok(stored) => stored,
                Err(e) => {
                    tracing::debug!(%authority, file = kind.name(), error = %e, "not shared with the fleet");
                    true
                }
            };
            if !keep {
                tracing::debug!(%authority, file = kind.name(), "purged while it was fetched: not kept");
            }
            return Ok((value, keep));
        }
        drop(ticket);
        if tokio::time::Instant::now() >= give_up {
            return Err(SharedError(format!(
                "no instance of the fleet stored the {} of {authority} in time",
                kind.path().trim_start_matches('/')
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}
