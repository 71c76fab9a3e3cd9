//! Site files shared with a fleet: one fetch per authority and file for every instance.
//!
//! A [`Shared`] store (Redis, in `crate::fleet`) keeps, per authority and [`FileKind`], a
//! record, and a fetch lease; every kind goes through the same lease-and-poll loop
//! (`lease.rs`, [`super::lease::through_fleet`]). robots.txt's record (this module) keeps
//! what RFC
//! 9309's rules need: the raw body (capped as a local fetch is) with its SHA-256 and the status
//! of its fetch (so every instance names the same robots.txt version), the rules' kind, the state,
//! the last outcome, when it was fetched, when it expires, and the failure count and start
//! that drive the back-off, the stale copy and the give-up rule. The status table itself
//! (`state::next_snapshot`) runs where the fetch runs, so every instance reaches the same
//! state from the same answers.
//!
//! When a local entry is missing or due, the instance's one fetch task
//! ([`super::lease::through_fleet`]):
//! 1. loads the shared record, and uses it when it is still current (no origin fetch);
//! 2. otherwise takes the authority's fetch lease (which expires by itself, so an instance
//!    that dies holding it delays the others only until then), looks at the record once more
//!    (another instance may have just stored it), fetches, applies the status table to the
//!    shared previous state, and stores the new record;
//! 3. or, when another instance holds the lease, waits for its record (polling), and takes
//!    the lease itself if it expires first.
//!
//! A refresh ahead of expiry goes the same way, except that a current record in its refresh
//! window is not used as it is: the instance that takes the lease refetches it, and the others
//! take the record it stores (or, after a failed refresh, the copy marked failing).
//!
//! The parsed copy is kept in the local cache until the shared expiry, so a request to a
//! cached site makes no round trip to the shared store.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::fetch::Fetched;
use super::sitefile::FileKind;
use super::store::StoreFuture;
use super::{state, FetchClass, FetchOutcome, Inner, RobotsRules, RobotsSnapshot, RobotsState};
use robots_proxy_archive::robots_version::RobotsVersion;
use robots_proxy_authority::Authority;
use robots_proxy_clock::StoreClock;
use robots_proxy_engine::RobotsTxt;

/// The shared store could not be reached or answered wrongly: the description.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SharedError(pub String);

/// Where a fleet's site-file records live (see the [module documentation](self)): one family
/// of calls for every [`FileKind`] (robots.txt, `tdmrep.json`), so every kind gets the same
/// lease, the same purge rules and the same seal.
pub trait Shared: Send + Sync + 'static {
    /// The record of `kind` kept for `authority`, if any.
    fn load<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
    ) -> StoreFuture<'a, Result<Option<Vec<u8>>, SharedError>>;

    /// Takes the fetch lease of `kind` for `authority` for `ttl`: `true` when this instance
    /// got it (and should fetch), `false` when another instance fetches it now.
    fn lease<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, SharedError>>;

    /// Gives the fetch lease of `kind` for `authority` back without storing anything.
    fn release<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
    ) -> StoreFuture<'a, Result<(), SharedError>>;

    /// Stores the record of `kind` for `authority` for `ttl` (at most: the store may keep it
    /// for less, or not at all when it is full) and gives the fetch lease back. `false` when
    /// nothing was stored because the lease is no longer this instance's: the authority was
    /// purged since it was taken (or the lease ran out and another instance fetches). The
    /// result must then not be kept here either: it may predate the purge.
    fn store<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
        record: Vec<u8>,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, SharedError>>;

    /// Drops every record of `authority` (every record with `None`) and tells every instance
    /// to drop its local copies.
    fn purge<'a>(
        &'a self,
        authority: Option<&'a Authority>,
    ) -> StoreFuture<'a, Result<(), SharedError>>;

    /// Whether a request must be refused when the shared store cannot be reached
    /// (`fleet.on_redis_error = "refuse"`), rather than decided on this instance's own fetch.
    fn required(&self) -> bool;

    /// The largest body shared (`fleet.max_shared_body`): the result of a fetch with a larger
    /// one is kept only by the instance that fetched it.
    fn max_body(&self) -> usize;

    /// The store's clock as seen from this instance: every time written into a shared record
    /// (fetched, expires, failing since) is on it, and converted to this instance's clock when
    /// read ([`StoreClock`]). A store without a clock of its own uses this instance's.
    fn store_clock(&self) -> &StoreClock {
        StoreClock::local()
    }
}

/// How long a waiting instance sleeps between looks at the record another one is fetching.
pub(super) const POLL: Duration = Duration::from_millis(25);

/// Beyond `fetch_timeout`, how long the fetch lease lasts: time to store the record.
pub(super) const LEASE_SLACK: Duration = Duration::from_secs(2);

/// The first line of a record (JSON); the raw body follows after a newline.
#[derive(Serialize, Deserialize)]
struct Header {
    v: u8,
    rules: Kind,
    state: RobotsState,
    outcome: FetchOutcome,
    fetched_at_ms: u64,
    expires_at_ms: u64,
    failing_since_ms: Option<u64>,
    failures: u32,
    /// The lowercase hex SHA-256 of the body (issue 19), for readers of the record; an
    /// instance that loads the record hashes the body itself, so the body decides. Absent in
    /// records written before it existed, and when no body is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    /// The HTTP status of the fetch that gave the body (`fetched_at_ms` is its time); absent
    /// in older records and without a body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_status: Option<u16>,
    /// Whether the fetch that gave the body named a server that reads paths case-insensitively
    /// ([`robots_proxy_engine::RobotsTxt::with_case_insensitive_origin`]): a copy read back from the
    /// disk after a restart, or taken from the fleet, decides exactly as the fetch it came from
    /// (with the case-folded reading). Absent (false) in older records and without a body.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    folds_case: bool,
}

#[derive(Serialize, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Parsed,
    AllowAll,
    DisallowAll,
}

#[cfg(test)]
fn from_millis(ms: u64) -> SystemTime {
    StoreClock::local().from_store(ms, MAX_MILLIS)
}

/// 9999-12-31T23:59:59Z, in milliseconds since the epoch.
const MAX_MILLIS: u64 = 253_402_300_799_000;

/// The most a record's header line may take; a longer record than the body limit and this is
/// refused before anything of it is decoded.
const MAX_HEADER: usize = 64 * 1024;

/// The record of `snapshot`, whose parsed rules (if any) came from `body`, its times on the
/// store's clock `times` ([`StoreClock::local`] for a file on this instance's disk).
pub(super) fn encode(
    snapshot: &RobotsSnapshot,
    body: Option<&Bytes>,
    times: &StoreClock,
) -> Vec<u8> {
    let millis = |t| times.to_store(t);
    let rules = match &snapshot.rules {
        RobotsRules::Parsed(_) => Kind::Parsed,
        RobotsRules::AllowAll => Kind::AllowAll,
        RobotsRules::DisallowAll => Kind::DisallowAll,
    };
    let header = Header {
        v: 1,
        rules,
        state: snapshot.state,
        outcome: snapshot.last_outcome.clone(),
        fetched_at_ms: millis(snapshot.fetched_at),
        expires_at_ms: millis(snapshot.expires_at),
        failing_since_ms: snapshot.failing_since.map(millis),
        failures: snapshot.failures,
        sha256: None,
        body_status: None,
        folds_case: false,
    };
    let mut header = header;
    if let RobotsRules::Parsed(robots) = &snapshot.rules {
        header.folds_case = robots.case_insensitive_origin();
    }
    if rules == Kind::Parsed {
        if let Some(version) = &snapshot.version {
            header.sha256 = Some(version.sha256().to_owned());
            header.body_status = version.status();
        }
    }
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    if rules == Kind::Parsed {
        out.extend_from_slice(body.map_or(&[][..], |b| &b[..]));
    }
    out
}

/// The snapshot a record describes, and its body; `None` for a record this version cannot
/// read (it is then fetched again, as if missing). Its times, on the store's clock `times`,
/// are turned into this instance's; clamped to the end of year 9999: RFC 3339 (the log's and
/// the audit record's time format) has four-digit years, and a record from Redis is not to be
/// trusted that far.
pub(super) fn decode(
    authority: &Authority,
    record: &[u8],
    body_limit: usize,
    times: &StoreClock,
) -> Option<(RobotsSnapshot, Option<Bytes>)> {
    let from_millis = |ms| times.from_store(ms, MAX_MILLIS);
    if record.len() > body_limit.saturating_add(MAX_HEADER) {
        return None;
    }
    let split = memchr::memchr(b'\n', record)?;
    let header: Header = serde_json::from_slice(&record[..split]).ok()?;
    if header.v != 1 {
        return None;
    }
    let body = Bytes::copy_from_slice(&record[split + 1..]);
    let fetched_at = from_millis(header.fetched_at_ms);
    let (rules, body, version) = match header.rules {
        Kind::Parsed => {
            let robots = RobotsTxt::parse_with_limit(&body, body_limit)
                .with_case_insensitive_origin(header.folds_case);
            // Hashed here, once per load (as it is parsed once per load), from the body itself.
            let version = RobotsVersion::new(
                &authority.to_string(),
                &authority.robots_url(),
                body.clone(),
                fetched_at,
                header.body_status,
            );
            (RobotsRules::Parsed(Arc::new(robots)), Some(body), Some(Arc::new(version)))
        }
        Kind::AllowAll => (RobotsRules::AllowAll, None, None),
        Kind::DisallowAll => (RobotsRules::DisallowAll, None, None),
    };
    let snapshot = RobotsSnapshot {
        authority: authority.clone(),
        robots_url: authority.robots_url(),
        rules,
        state: header.state,
        last_outcome: header.outcome,
        fetched_at,
        expires_at: from_millis(header.expires_at_ms),
        failing_since: header.failing_since_ms.map(from_millis),
        failures: header.failures,
        version,
        refresh: Default::default(),
    };
    Some((snapshot, body))
}

/// robots.txt through the fleet's loop: the status table's lifetimes decide when a record is
/// used as it is.
impl super::lease::FetchHere for super::sitefile::Robots {
    async fn fetch(
        inner: &Arc<Inner>,
        authority: &Authority,
        slot: super::slots::Slot,
        start: tokio::time::Instant,
        deadline: tokio::time::Instant,
    ) -> Option<Fetched> {
        fetch_with_slot(inner, authority, slot, start, deadline).await
    }

    fn body_of(answer: &Fetched) -> Option<Bytes> {
        match answer {
            Fetched::Robots { body, .. } => Some(body.clone()),
            _ => None,
        }
    }

    fn keeps_body(value: &RobotsSnapshot) -> bool {
        value.rules.parsed().is_some()
    }

    fn body_limit(inner: &Inner) -> usize {
        inner.body_limit
    }

    fn no_fetch(
        prev: Option<&RobotsSnapshot>,
        authority: &Authority,
        now: SystemTime,
        settings: &super::RobotsSection,
    ) -> RobotsSnapshot {
        no_slot(prev, authority, now, settings)
    }

    /// A current record in its refresh window is not used as it is by a refresh ahead of
    /// expiry: the instance that takes the lease refetches it, and the others take the record
    /// it stores.
    fn usable(
        value: &RobotsSnapshot,
        now: SystemTime,
        ahead: bool,
        settings: &super::RobotsSection,
    ) -> bool {
        value.is_current(now) && !(ahead && state::refresh_due(value, now, settings.refresh_ahead))
    }

    fn record_ttl(
        value: &RobotsSnapshot,
        now: SystemTime,
        settings: &super::RobotsSection,
    ) -> Duration {
        record_ttl(value, now, settings)
    }
}

/// How long the shared store may keep a record: past its expiry, as long as the local cache
/// would keep it (a stale copy stays usable while the origin fails, up to the give-up). The
/// fleet keeps it for `fleet.robots_ttl` at most.
pub(super) fn record_ttl(
    snapshot: &RobotsSnapshot,
    now: SystemTime,
    settings: &super::RobotsSection,
) -> Duration {
    let until_expiry = snapshot.expires_at.duration_since(now).unwrap_or_default();
    let keep = settings.give_up_after.saturating_add(settings.max_age);
    until_expiry.max(keep).min(super::MAX_TTL).max(Duration::from_secs(1))
}

/// A fetch slot for `authority` ([`super::slots`]: at most `max_concurrent_fetches` at once,
/// `max_concurrent_fetches_per_host` to one host), or `None` when none came free by `deadline`.
pub(super) async fn acquire_slot(
    inner: &Arc<Inner>,
    authority: &Authority,
    deadline: tokio::time::Instant,
) -> Option<super::slots::Slot> {
    let slot = inner.fetch_slots.acquire(authority.host(), deadline).await;
    if slot.is_none() {
        let timeout = inner.settings.load().fetch_timeout;
        tracing::warn!(
            %authority, ?timeout,
            "no robots.txt fetch slot came free within fetch_timeout \
             (robots.max_concurrent_fetches, robots.max_concurrent_fetches_per_host)"
        );
    }
    slot
}

/// robots.txt's fetch with a fetch slot in hand, taken at `start`; the fetch must be done by
/// `deadline` when the slot came late ([`in_slot`]).
pub(super) async fn fetch_with_slot(
    inner: &Arc<Inner>,
    authority: &Authority,
    slot: super::slots::Slot,
    start: tokio::time::Instant,
    deadline: tokio::time::Instant,
) -> Option<Fetched> {
    // The fetch runs in a task of its own so that even a panic in it (a bug) ends as an
    // "unreachable" outcome instead of leaving the waiters without an answer.
    let task = tokio::spawn(inner.fetcher.fetch(authority.clone()));
    match in_slot(authority, "robots.txt", slot, start, deadline, task).await {
        InSlot::Done(joined) => Some(count(inner, joined)),
        InSlot::TooManySlow(why) => {
            let outcome = FetchOutcome::Network(why);
            Some(count(inner, Ok(Fetched::Unreachable { outcome })))
        }
        InSlot::LateAndOutOfTime => None,
    }
}

/// How a fetch run in its slot ([`in_slot`]) ended.
pub(super) enum InSlot<T> {
    /// It ran to its end (or its task failed: a panic, a bug).
    Done(Result<T, tokio::task::JoinError>),
    /// Cut short: it was slow, and the pool of slow fetches was full (why, for the record).
    TooManySlow(String),
    /// Cut short: it started late (it waited for its slot) and `deadline` came first; the
    /// origin is not to blame.
    LateAndOutOfTime,
}

/// Runs the fetch `task` of `file` for `authority` with `slot` in hand, taken at `start`: the
/// one rule for every site file's fetch (robots.txt, `tdmrep.json`). A fetch still running
/// after [`super::slots::SLOW_AFTER`] gives its global slot back for the next site's fetch
/// ([`super::slots::Slot::become_slow`]); when the pool of slow fetches is full it is cut
/// short. A fetch that waited for its slot must be done by `deadline`.
pub(super) async fn in_slot<T>(
    authority: &Authority,
    file: &str,
    mut slot: super::slots::Slot,
    start: tokio::time::Instant,
    deadline: tokio::time::Instant,
    mut task: tokio::task::JoinHandle<T>,
) -> InSlot<T> {
    // How long it waited for its slot, before it ran.
    let waited = start.elapsed();
    if let Ok(joined) = tokio::time::timeout(super::slots::SLOW_AFTER, &mut task).await {
        drop(slot);
        return InSlot::Done(joined);
    }
    if !slot.become_slow() {
        task.abort();
        let why = format!("{file} fetch cut short: slow, and too many slow fetches run at once");
        tracing::warn!(%authority, "{why}");
        return InSlot::TooManySlow(why);
    }
    let joined = if waited < SLOT_WAIT_GRACE {
        // Started on time: the fetcher's own `fetch_timeout` applies, and a timeout is the
        // origin's.
        (&mut task).await
    } else {
        match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(joined) => joined,
            Err(_) => {
                task.abort();
                tracing::warn!(
                    %authority, ?waited,
                    "{file} fetch cut short: it waited for a slot, and fetch_timeout ran out"
                );
                return InSlot::LateAndOutOfTime;
            }
        }
    };
    drop(slot);
    InSlot::Done(joined)
}

/// The fetch's result (a panic in it is unreachable), counted by its class.
fn count(inner: &Inner, joined: Result<Fetched, tokio::task::JoinError>) -> Fetched {
    let fetched = match joined {
        Ok(fetched) => fetched,
        Err(e) => Fetched::Unreachable {
            outcome: FetchOutcome::Network(format!("robots.txt fetch failed: {e}")),
        },
    };
    let class = FetchClass::of(&fetched.outcome());
    inner.counters.fetches[class as usize].fetch_add(1, Ordering::Relaxed);
    fetched
}

/// A slot wait shorter than this leaves the fetch its whole `fetch_timeout`.
const SLOT_WAIT_GRACE: Duration = Duration::from_millis(20);

/// What requests are answered while no fetch could run (`FetchHere::fetch_here` gave `None`): the
/// status table's "unreachable" row applied to `prev` (the earlier copy, or disallow all),
/// due at once. Not stored, and not counted as a failure of the origin.
pub(super) fn no_slot(
    prev: Option<&RobotsSnapshot>,
    authority: &Authority,
    now: SystemTime,
    settings: &super::RobotsSection,
) -> RobotsSnapshot {
    let outcome = FetchOutcome::Network(
        "no robots.txt fetch slot free within fetch_timeout (too many fetches at once)".to_owned(),
    );
    let mut snapshot =
        state::next_snapshot(prev, authority, Fetched::Unreachable { outcome }, now, settings);
    snapshot.expires_at = now;
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;
    use robots_proxy_authority::Scheme;
    use std::time::UNIX_EPOCH;

    /// Review-core N2: the case-insensitive origin flag travels with the copy (disk and fleet),
    /// so a copy decides exactly as the fetch it came from; a record without the field (older,
    /// or a case-sensitive origin) reads as case-sensitive.
    #[test]
    fn the_case_insensitive_origin_flag_travels_with_the_record() {
        let a = Authority::new(Scheme::Http, "iis.test", 80).unwrap();
        let body = Bytes::from_static(b"User-agent: *\nDisallow: /private/\n");
        let t = from_millis(1_800_000_000_000);
        let snapshot = |folds: bool| RobotsSnapshot {
            authority: a.clone(),
            robots_url: a.robots_url(),
            rules: RobotsRules::Parsed(Arc::new(
                RobotsTxt::parse(&body).with_case_insensitive_origin(folds),
            )),
            state: RobotsState::Fresh,
            last_outcome: FetchOutcome::Status(200),
            fetched_at: t,
            expires_at: t + Duration::from_secs(60),
            failing_since: None,
            failures: 0,
            version: None,
            refresh: Default::default(),
        };
        let folds =
            |record: &[u8]| match decode(&a, record, 1 << 20, StoreClock::local()).unwrap().0.rules
            {
                RobotsRules::Parsed(r) => r.case_insensitive_origin(),
                _ => panic!("not parsed"),
            };
        let iis = encode(&snapshot(true), Some(&body), StoreClock::local());
        assert!(folds(&iis));
        let plain = encode(&snapshot(false), Some(&body), StoreClock::local());
        assert!(!folds(&plain));
        assert!(!String::from_utf8_lossy(&plain).lines().next().unwrap().contains("folds_case"));
    }

    #[test]
    fn a_record_round_trips_with_its_body() {
        let a = Authority::new(Scheme::Http, "a.test", 80).unwrap();
        let body = Bytes::from_static(b"User-agent: *\nDisallow: /x\xff\n");
        let t = from_millis(1_800_000_000_123);
        let snapshot = RobotsSnapshot {
            authority: a.clone(),
            robots_url: a.robots_url(),
            rules: RobotsRules::Parsed(Arc::new(RobotsTxt::parse(&body))),
            state: RobotsState::Stale,
            last_outcome: FetchOutcome::Network("reset".into()),
            fetched_at: t,
            expires_at: t + Duration::from_secs(60),
            failing_since: Some(t),
            failures: 3,
            version: Some(Arc::new(RobotsVersion::new(
                &a.to_string(),
                &a.robots_url(),
                body.clone(),
                t,
                Some(200),
            ))),
            refresh: Default::default(),
        };
        let record = encode(&snapshot, Some(&body), StoreClock::local());
        let (back, back_body) = decode(&a, &record, 1 << 20, StoreClock::local()).unwrap();
        assert_eq!(back_body.as_deref(), Some(&body[..]));
        assert!(!back.rules.allows(None, "/x%FF"));
        assert!(back.rules.allows(None, "/y"));
        assert_eq!((back.state, back.failures), (RobotsState::Stale, 3));
        assert_eq!(
            (back.fetched_at, back.expires_at, back.failing_since),
            (t, t + Duration::from_secs(60), Some(t))
        );
        assert_eq!(back.last_outcome, FetchOutcome::Network("reset".into()));
        // The version travels with the record: the same digest, time and status.
        assert_eq!(back.version, snapshot.version);
        let text = String::from_utf8_lossy(&record);
        let digest = robots_proxy_archive::robots_version::sha256_hex(&body);
        assert!(text.lines().next().unwrap().contains(&digest), "{text}");
        // A record written before the digest existed still loads, and names its body's digest.
        let old = b"{\"v\":1,\"rules\":\"parsed\",\"state\":\"fresh\",\"outcome\":{\"kind\":\"status\",\"detail\":200},\"fetched_at_ms\":1800000000123,\"expires_at_ms\":1800000060123,\"failing_since_ms\":null,\"failures\":0}\nUser-agent: *\n";
        let (old, _) = decode(&a, old, 1 << 20, StoreClock::local()).unwrap();
        let version = old.version.unwrap();
        assert_eq!(
            version.sha256(),
            robots_proxy_archive::robots_version::sha256_hex(b"User-agent: *\n")
        );
        assert_eq!((version.fetched_at(), version.status()), (t, None));
        assert!(decode(&a, b"{\"v\":9}\n", 10, StoreClock::local()).is_none());
        assert!(decode(&a, b"garbage", 10, StoreClock::local()).is_none());
        // A record larger than the body limit allows is refused before it is decoded.
        let mut huge = encode(&snapshot, Some(&body), StoreClock::local());
        huge.extend(std::iter::repeat_n(b'#', MAX_HEADER + 2048));
        assert!(decode(&a, &huge, 1024, StoreClock::local()).is_none());
    }

    #[test]
    fn times_from_a_poisoned_record_stay_within_four_digit_years() {
        let far = from_millis(u64::MAX);
        assert_eq!(far, UNIX_EPOCH + Duration::from_millis(MAX_MILLIS));
        let text = humantime::format_rfc3339(far).to_string();
        assert!(text.starts_with("9999-12-31T23:59:59"), "{text}");
    }
}
