//! What differs between the well-known files of a site the store keeps (robots.txt,
//! `tdmrep.json`, and the next one): a [`SiteFile`] kind. Everything else (one fetch per
//! authority, waiters, refresh ahead, purges, the fleet's lease, bounded memory) is the store's,
//! written once ([`super::core`], [`super::files`], [`super::shared`]).

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use super::fetch::Fetched;
use super::{state, RobotsSection, RobotsSnapshot, RobotsState};
use robots_proxy_authority::Authority;
use robots_proxy_clock::StoreClock;

/// Which file of a site: how the fleet names its records and leases, and its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// `/robots.txt` (RFC 9309): Redis keys `robots:<authority>` and `lease:<authority>`.
    Robots,
    /// `/.well-known/tdmrep.json` (W3C TDMRep): Redis keys `tdmrep:<authority>` and
    /// `lease:tdmrep:<authority>`.
    Tdmrep,
}

impl FileKind {
    /// The file's path from the root of the site.
    pub fn path(self) -> &'static str {
        match self {
            FileKind::Robots => "/robots.txt",
            FileKind::Tdmrep => super::wellknown::TDMREP_PATH,
        }
    }

    /// The file's short name (`robots`, `tdmrep`): the fleet's record key names it.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Robots => "robots",
            FileKind::Tdmrep => "tdmrep",
        }
    }
}

/// One kind of file the store keeps per authority: how an answer becomes the value kept, when
/// that value is current, what it weighs, and how the fleet's record of it reads and writes.
/// Pure: no I/O, time passed in.
pub(crate) trait SiteFile: Send + Sync + 'static {
    /// Which file.
    const KIND: FileKind;
    /// What is kept per authority and handed to requests.
    type Value: Send + Sync + 'static;
    /// What one fetch of the file gave.
    type Answer: Send + 'static;

    /// Whether `value` is used at `now` without a fetch.
    fn is_current(value: &Self::Value, now: SystemTime) -> bool;

    /// What a request is answered with while the retry of `value`, past its time, runs: `None`
    /// when requests wait for the fetch instead. (robots.txt: a failing origin's entry stays in
    /// force while its retry runs, RFC 9309 §2.3.1.4.)
    fn while_retrying(value: &Arc<Self::Value>) -> Option<Arc<Self::Value>>;

    /// The memory `value` holds, in bytes, for the store's bound.
    fn weight(value: &Self::Value) -> usize;

    /// The value kept after `answer` came at `now`, `prev` being the value before (if any).
    fn next(
        prev: Option<&Self::Value>,
        authority: &Authority,
        answer: Self::Answer,
        now: SystemTime,
        settings: &RobotsSection,
    ) -> Self::Value;

    /// The fleet's record of `value` (`body`: the raw file it came from, if kept), its times
    /// on the store's clock `times`.
    fn encode(
        value: &Self::Value,
        body: Option<&Bytes>,
        now: SystemTime,
        times: &StoreClock,
    ) -> Vec<u8>;

    /// The value a fleet's record describes, and its body; `None` for a record that cannot be
    /// read (it is then fetched again, as if missing).
    fn decode(
        authority: &Authority,
        record: &[u8],
        body_limit: usize,
        now: SystemTime,
        times: &StoreClock,
    ) -> Option<(Self::Value, Option<Bytes>)>;
}

/// robots.txt: the RFC 9309 status table ([`state::next_snapshot`]) and its lifetimes.
pub(crate) struct Robots;

impl SiteFile for Robots {
    const KIND: FileKind = FileKind::Robots;
    type Value = RobotsSnapshot;
    type Answer = Fetched;

    fn is_current(value: &RobotsSnapshot, now: SystemTime) -> bool {
        value.is_current(now)
    }

    fn while_retrying(value: &Arc<RobotsSnapshot>) -> Option<Arc<RobotsSnapshot>> {
        value.failing_since?;
        if value.state == RobotsState::Fresh {
            // A copy whose refresh failed, now past its lifetime: served as the stale copy it
            // is until the retry answers.
            return Some(Arc::new(RobotsSnapshot {
                state: RobotsState::Stale,
                ..(**value).clone()
            }));
        }
        Some(value.clone())
    }

    fn weight(value: &RobotsSnapshot) -> usize {
        value.weight()
    }

    fn next(
        prev: Option<&RobotsSnapshot>,
        authority: &Authority,
        answer: Fetched,
        now: SystemTime,
        settings: &RobotsSection,
    ) -> RobotsSnapshot {
        state::next_snapshot(prev, authority, answer, now, settings)
    }

    fn encode(
        value: &RobotsSnapshot,
        body: Option<&Bytes>,
        _now: SystemTime,
        times: &StoreClock,
    ) -> Vec<u8> {
        super::shared::encode(value, body, times)
    }

    fn decode(
        authority: &Authority,
        record: &[u8],
        body_limit: usize,
        _now: SystemTime,
        times: &StoreClock,
    ) -> Option<(RobotsSnapshot, Option<Bytes>)> {
        super::shared::decode(authority, record, body_limit, times)
    }
}
