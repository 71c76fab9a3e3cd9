//! The robots cache: one robots.txt per authority, fetched once, kept under RFC 9309's rules.
//!
//! SKELETON: the types below are the contract with the policy and proxy modules; the body of
//! [`RobotsCache`] (moka, fetcher, status table, freshness, back-off) is to be completed.
//!
//! The rest of the crate talks to robots.txt only through [`RobotsCache::get`], so that a
//! fleet-wide store (Redis) can later sit behind the same small interface.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::authority::Authority;
use crate::clock::Clock;
use crate::config::RobotsSection;
use crate::robots::RobotsTxt;

/// The rules in force for an authority.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RobotsRules {
    /// A parsed robots.txt (fresh or stale).
    Parsed(Arc<RobotsTxt>),
    /// Everything allowed: robots.txt unavailable (4xx), or unreachable for longer than
    /// `give_up_after` with no earlier copy.
    AllowAll,
    /// Everything disallowed: robots.txt unreachable and no earlier copy.
    DisallowAll,
}

/// The state of an authority's robots.txt, as the audit log and 403 bodies report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RobotsState {
    /// A 2xx copy within its lifetime.
    Fresh,
    /// An earlier 2xx copy used past its lifetime because refetching fails.
    Stale,
    /// robots.txt answered 4xx (not 429), or too many redirects: everything allowed.
    Unavailable,
    /// robots.txt cannot be fetched (429, 5xx, network) and there is no copy.
    Unreachable,
}

/// What the last fetch attempt gave.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchOutcome {
    /// An HTTP status (after redirects).
    Status(u16),
    /// More than `max_redirects` redirects.
    RedirectLimit,
    /// DNS failure, refused or reset connection, timeout, invalid response: the description.
    Network(String),
}

/// What the cache knows about one authority's robots.txt at one moment.
#[derive(Debug, Clone)]
pub struct RobotsSnapshot {
    /// The authority.
    pub authority: Authority,
    /// `scheme://host[:port]/robots.txt`
    pub robots_url: String,
    /// The rules in force.
    pub rules: RobotsRules,
    /// Fresh, stale, unavailable or unreachable.
    pub state: RobotsState,
    /// What the last fetch attempt gave.
    pub last_outcome: FetchOutcome,
    /// When the rules in force were fetched (for `Parsed`), or when the state was reached.
    pub fetched_at: SystemTime,
    /// When the entry is due to be fetched again.
    pub expires_at: SystemTime,
}

impl RobotsSnapshot {
    /// Age of the rules in force at `now`.
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.fetched_at).unwrap_or_default()
    }
}

/// One robots.txt per authority, fetched once however many requests wait for it.
pub struct RobotsCache {
    _settings: RobotsSection,
    _clock: Arc<dyn Clock>,
}

impl RobotsCache {
    /// A cache that fetches with `settings` and tells time by `clock`.
    pub fn new(settings: RobotsSection, clock: Arc<dyn Clock>) -> Self {
        RobotsCache { _settings: settings, _clock: clock }
    }

    /// The robots.txt state for `authority`, fetching it if it is missing or due.
    pub async fn get(&self, authority: &Authority) -> Arc<RobotsSnapshot> {
        let now = self._clock.now();
        Arc::new(RobotsSnapshot {
            authority: authority.clone(),
            robots_url: authority.robots_url(),
            rules: RobotsRules::AllowAll,
            state: RobotsState::Unavailable,
            last_outcome: FetchOutcome::Status(404),
            fetched_at: now,
            expires_at: now,
        })
    }

    /// Drops the cached robots.txt of `authority`, so the next request fetches it again.
    pub async fn purge(&self, _authority: &Authority) {}

    /// Drops every cached robots.txt.
    pub async fn purge_all(&self) {}
}
