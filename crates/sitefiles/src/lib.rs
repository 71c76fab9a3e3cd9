//! The site-file store: one robots.txt (and one `tdmrep.json`) per authority, fetched once,
//! kept under RFC 9309's rules (and TDMRep's lifetimes).
//!
//! The rest of the crate reaches it only through the policy, which asks the [`RobotsStore`]
//! trait (get, peek, purge, stats), so that a fleet-wide store (Redis) can sit behind the same
//! small interface. [`RobotsCache`] is the in-process store.
//!
//! # How it works
//!
//! * **Key**: the [`Authority`] (scheme, host, port; RFC 9309 §2.3). Rules found through
//!   redirects are stored under the authority that was asked for (§2.3.1.2).
//! * **Status table** (§2.3.1.1–4): see `state::next_snapshot`. Fetch failures become cached
//!   *decisions* (allow all, disallow all, stale copy), never errors.
//! * **Freshness** (§2.4) is computed here, from `fetched_at`/`expires_at` kept in the value
//!   and the injected [`Clock`], because moka hides expired entries and a stale copy must stay
//!   usable while the origin fails. moka itself only bounds memory (a weigher on the compiled
//!   size) and drops entries nobody asked for in `give_up_after + max_age`.
//! * **One fetch per authority**, owned by the store: the store's sans-IO core (`core.rs`,
//!   `handle_*`/`poll_*`, shared with `tdmrep.json`, [`wellknown`]) is asked under its lock
//!   together with the entries, so every request that finds the entry missing *or due* joins
//!   the one fetch in flight. The first fetch and refetches go the same way. moka's `get_with`
//!   coalescing is not used: when its leading caller is dropped it restarts the init in
//!   another caller, which would fetch twice.
//! * **Each fetch is its own task** (`tokio::spawn`, by the driver: [`files`],
//!   `fetching.rs`): a client that hangs up drops only its wait, never the fetch the others
//!   wait for, and the result is cached all the same.
//! * **Refresh ahead** (`refresh_ahead`): in the last share of an entry's lifetime, the first
//!   request that finds it (through [`RobotsCache::get`] or [`RobotsCache::recent`]) claims
//!   the entry's [`RefreshMark`] and spawns its refetch; every request goes on with the entry,
//!   which is still within its lifetime. The refetch is the usual coalesced fetch (one in
//!   flight per authority; with a fleet, one for the fleet under the lease). A 2xx or 4xx
//!   replaces the entry; a failure keeps it until it expires, marked failing, so it is not
//!   refreshed again and its expiry is handled as a failing origin's (`state::next_snapshot`).
//! * **A due entry is refetched before answering**: a request that finds a 2xx copy past its
//!   lifetime (no request refreshed it in its window) waits for the refetch rather than being
//!   served the old copy in the meantime (no stale-while-revalidate past the lifetime). Every
//!   answer is then as fresh as §2.4 asks. While the origin fails, the copy is served
//!   as `Stale` without waiting until the back-off's next retry time, **and without waiting
//!   for that retry either**: a failing origin's entry stays in force (stale copy, disallow
//!   all, or allow all after the give-up) while its retry runs in the background, so a
//!   blackholed origin holds no request (stale-while-refetch, under §2.3.1.4's rules).
//! * **Fetch slots**: at most `max_concurrent_fetches` fetches at once, and
//!   `max_concurrent_fetches_per_host` to one host; the wait for a slot counts against
//!   `fetch_timeout`. A fetch that gets no slot in time answers its requests as unreachable
//!   (the earlier copy, or disallow all) without storing anything, so the origin is not
//!   backed off for the proxy's own congestion (`slots.rs`).
//! * **Give-up** (§2.3.1.4): after `give_up_after` of continuous failure, a copy is still used
//!   (`Stale`); without one everything is allowed with state [`RobotsState::Unavailable`]
//!   (the RFC's "assume the robots.txt is unavailable"), `failing_since` set to tell it apart
//!   from a 4xx.
//! * **Across restarts** (`persist.rs`, `state_dir/robots/`): the last good copy and the
//!   failure state of each authority, read back when an authority is first asked for.
//!
//! The root crate re-exports this crate as `robots_proxy::cache`.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod archived;
mod class;
mod core;
pub mod decode;
pub mod fetch;
mod fetching;
mod files;
mod lease;
mod persist;
mod refresh;
mod section;
mod shared;
mod sitefile;
mod slots;
mod state;
mod store;
pub mod wellknown;

pub use class::FetchClass;
pub use section::{RawRobotsSection, RobotsSection, ROBOTS_BOUNDS};

pub use archived::ResultHook;
pub use shared::{Shared, SharedError};
pub use sitefile::FileKind;
pub use store::{PurgedAll, RobotsStore, StoreFuture, StoreStats};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper_util::client::legacy::connect::Connect;

use fetch::{Fetch, HttpFetcher};
use refresh::RefreshMark;
use robots_proxy_archive::robots_version::RobotsVersion;
use robots_proxy_authority::Authority;
use robots_proxy_clock::Clock;
use robots_proxy_engine::usage::UsagePreferences;
use robots_proxy_engine::{CrawlDelay, ProductToken, RobotsTxt};

/// The rules in force for an authority.
#[derive(Debug, Clone)]
pub enum RobotsRules {
    /// A parsed robots.txt (fresh or stale).
    Parsed(Arc<RobotsTxt>),
    /// Everything allowed: robots.txt unavailable (4xx, RFC 9309 §2.3.1.3), or unreachable
    /// for longer than `give_up_after` with no earlier copy (§2.3.1.4).
    AllowAll,
    /// Everything disallowed: robots.txt unreachable and no earlier copy (§2.3.1.4).
    DisallowAll,
}

impl RobotsRules {
    /// Whether these rules let `token` fetch `path` (a path and query, one reading of it).
    /// `/robots.txt` itself is always allowed, whatever the rules.
    pub fn allows(&self, token: Option<&ProductToken>, path: &str) -> bool {
        match self {
            RobotsRules::Parsed(robots) => robots.decide(token, path).is_allowed(),
            RobotsRules::AllowAll => true,
            RobotsRules::DisallowAll => robots_proxy_engine::is_robots_txt_path(path),
        }
    }

    /// Whether these rules disallow every path for `token` (so a whole tunnel may be refused).
    pub fn disallows_everything(&self, token: Option<&ProductToken>) -> bool {
        match self {
            RobotsRules::Parsed(robots) => robots.disallows_everything(token),
            RobotsRules::DisallowAll => true,
            RobotsRules::AllowAll => false,
        }
    }

    /// The `crawl-delay` that applies to `token`, if robots.txt was parsed and states one.
    pub fn crawl_delay(&self, token: Option<&ProductToken>) -> Option<CrawlDelay> {
        self.parsed().and_then(|robots| robots.crawl_delay(token))
    }

    /// The AI usage preferences robots.txt states for `path` (unknown unless it was parsed).
    pub fn usage(&self, token: Option<&ProductToken>, path: &str) -> UsagePreferences {
        self.parsed().map(|robots| robots.usage(token, path)).unwrap_or_default()
    }

    /// The AI usage preferences robots.txt states for every path (unknown unless it was parsed).
    pub fn usage_everywhere(&self, token: Option<&ProductToken>) -> UsagePreferences {
        self.parsed().map(|robots| robots.usage_everywhere(token)).unwrap_or_default()
    }

    /// The parsed robots.txt, if these rules come from one.
    pub fn parsed(&self) -> Option<&RobotsTxt> {
        match self {
            RobotsRules::Parsed(robots) => Some(robots),
            RobotsRules::AllowAll | RobotsRules::DisallowAll => None,
        }
    }

    /// `parsed`, `allow_all` or `disallow_all`, for the admin page.
    pub fn kind_word(&self) -> &'static str {
        match self {
            RobotsRules::Parsed(_) => "parsed",
            RobotsRules::AllowAll => "allow_all",
            RobotsRules::DisallowAll => "disallow_all",
        }
    }
}

/// The state of an authority's robots.txt, as the audit log and 403 bodies report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RobotsState {
    /// A 2xx copy within its lifetime.
    Fresh,
    /// An earlier 2xx copy used past its lifetime because refetching fails.
    Stale,
    /// robots.txt answered 4xx (not 429), or too many redirects: everything allowed. Also the
    /// state after `give_up_after` of failures with no copy (RFC 9309 §2.3.1.4 lets a crawler
    /// then "assume the robots.txt file is unavailable"); `failing_since` is set in that case.
    Unavailable,
    /// robots.txt cannot be fetched (429, 5xx, network) and there is no copy.
    Unreachable,
}

/// What the last fetch attempt gave.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum FetchOutcome {
    /// An HTTP status (after redirects).
    Status(u16),
    /// More than `max_redirects` redirects.
    RedirectLimit,
    /// DNS failure, refused or reset connection, timeout, invalid response: the description.
    Network(String),
    /// The destination guard refused the address of the robots.txt URL or of a redirect
    /// ([`robots_proxy_net::guard`]): the description names the address and why. Counts as unreachable
    /// (§2.3.1.4); the proxy answers such requests with `destination_ip_prohibited`.
    Prohibited(String),
    /// The fleet's shared store could not be reached and `fleet.on_redis_error` is
    /// `refuse`: nothing was fetched, nothing is cached, and the proxy answers 503.
    Fleet(String),
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
    /// When the rules in force were fetched (for `Parsed`, also when `Stale`), or when the
    /// state was reached: the fetch for a 4xx, the first failure for `Unreachable`,
    /// `failing_since + give_up_after` after giving up.
    pub fetched_at: SystemTime,
    /// When the entry is due to be fetched again: the end of its lifetime, or while fetches
    /// fail, the next retry time of the back-off.
    pub expires_at: SystemTime,
    /// Since when fetches have failed without a break (429, 5xx, network); `None` after a
    /// 2xx or 4xx answer.
    pub failing_since: Option<SystemTime>,
    /// Failed fetches in a row (0 after a 2xx or 4xx); sets the back-off.
    pub failures: u32,
    /// The robots.txt version the parsed rules come from (the body as parsed, its SHA-256,
    /// when it was fetched): made once per fetch that gave a body, kept with a stale copy.
    /// `None` when no file is in force (allow all, disallow all).
    pub version: Option<Arc<RobotsVersion>>,
    /// Whether a refresh ahead of expiry was started from this entry (`robots.refresh_ahead`):
    /// the first request in the refresh window claims it, so one refetch runs per entry.
    refresh: RefreshMark,
}

impl RobotsSnapshot {
    /// Disallow all, unreachable as of `now` and due again at once: the answer to a request
    /// when no fetch result came for `authority` (never stored, so the next request asks again).
    pub(crate) fn unreachable_now(
        authority: &Authority,
        outcome: FetchOutcome,
        now: SystemTime,
    ) -> RobotsSnapshot {
        RobotsSnapshot {
            authority: authority.clone(),
            robots_url: authority.robots_url(),
            rules: RobotsRules::DisallowAll,
            state: RobotsState::Unreachable,
            last_outcome: outcome,
            fetched_at: now,
            expires_at: now,
            failing_since: Some(now),
            failures: 1,
            version: None,
            refresh: RefreshMark::default(),
        }
    }

    /// Age of the rules in force at `now`.
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.fetched_at).unwrap_or_default()
    }

    /// Whether the entry is within its lifetime (or back-off) at `now`, so it is used without
    /// a fetch.
    pub fn is_current(&self, now: SystemTime) -> bool {
        now < self.expires_at
    }

    /// Why the robots.txt fetch was refused by the destination guard, when everything is
    /// disallowed for that reason (the request is then refused as `destination_ip_prohibited`).
    pub fn prohibited_fetch(&self) -> Option<&str> {
        match (&self.last_outcome, &self.rules) {
            (FetchOutcome::Prohibited(why), RobotsRules::DisallowAll) => Some(why),
            _ => None,
        }
    }

    /// The TLS error, when robots.txt could not be fetched because the origin's certificate
    /// failed verification and nothing earlier is cached: a request could not be forwarded
    /// either.
    pub fn untrusted_certificate(&self) -> Option<&str> {
        match (&self.last_outcome, &self.rules) {
            (FetchOutcome::Network(error), RobotsRules::DisallowAll)
                if error.to_ascii_lowercase().contains("certificate") =>
            {
                Some(error)
            }
            _ => None,
        }
    }

    /// Why the fleet's shared state could not be used, when the request must be refused for
    /// it (`fleet.on_redis_error = "refuse"`): the proxy answers 503.
    pub fn fleet_unavailable(&self) -> Option<&str> {
        match &self.last_outcome {
            FetchOutcome::Fleet(why) => Some(why),
            _ => None,
        }
    }

    /// Approximate memory held by this entry, in bytes: what the cache weighs it by.
    pub fn weight(&self) -> usize {
        let rules = match &self.rules {
            RobotsRules::Parsed(robots) => robots.heap_size(),
            RobotsRules::AllowAll | RobotsRules::DisallowAll => 0,
        };
        let key_and_url = 2 * self.authority.host().len() + self.robots_url.len();
        // The version's body, digest and time (usually only this entry holds them).
        let version = self.version.as_ref().map_or(0, |v| v.body().len() + 160);
        std::mem::size_of::<Self>() + ENTRY_OVERHEAD + key_and_url + rules + version
    }
}

/// Counters of the cache's work since it was made, read by the metrics at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// [`RobotsCache::get`] calls answered from the cache without waiting.
    pub hits: u64,
    /// [`RobotsCache::get`] calls that waited for a fetch (started or joined).
    pub misses: u64,
    /// Refreshes started ahead of expiry (`robots.refresh_ahead`); no request waits for them.
    pub refreshes: u64,
    /// Completed fetches by [`FetchClass`], in the order of [`FetchClass::ALL`].
    pub fetches: [u64; 7],
}

impl CacheStats {
    /// Completed fetches of `class`.
    pub fn fetches(&self, class: FetchClass) -> u64 {
        self.fetches[class as usize]
    }
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    /// Refreshes started ahead of expiry.
    refreshes: AtomicU64,
    fetches: [AtomicU64; 7],
}

/// Bytes counted per entry beyond the snapshot itself: moka's node, the key and the `Arc`s.
const ENTRY_OVERHEAD: usize = 256;

/// The longest time-to-live moka accepts is 1000 years; ours is far below that.
const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How often a `get` whose fetch task vanished (runtime shutting down) tries again.
const JOIN_ATTEMPTS: usize = 3;

/// One robots.txt per authority, fetched once however many requests wait for it.
///
/// Cheap to share: wrap it in an `Arc`. Must be used inside a tokio runtime (fetches are
/// spawned as tasks).
pub struct RobotsCache {
    inner: Arc<Inner>,
}

struct Inner {
    /// `[robots]`; a reload replaces its lifetimes ([`RobotsCache::reconfigure`]).
    settings: arc_swap::ArcSwap<RobotsSection>,
    clock: Arc<dyn Clock>,
    fetcher: Arc<dyn Fetch>,
    /// robots.txt per authority: the entries and the store's core ([`files`], [`core`]).
    robots: files::Files<sitefile::Robots>,
    /// `robots.max_concurrent_fetches` and `…_per_host`: fetches beyond them wait for a slot,
    /// within `fetch_timeout`.
    fetch_slots: slots::FetchSlots,
    counters: Counters,
    /// Changes whenever `entries` gains, replaces or drops an entry: what a
    /// [`RecentRobots`] checks to know its copies are still the cache's.
    generation: AtomicU64,
    /// The fleet's shared store, when robots.txt is shared ([`RobotsCache::share_with`]).
    shared: std::sync::OnceLock<Arc<dyn Shared>>,
    /// Bytes of a body worth parsing (as the fetcher reads them).
    body_limit: usize,
    /// Where what RFC 9309's rules need is kept across restarts ([`RobotsCache::persist_in`]).
    persist: std::sync::OnceLock<Arc<persist::Persist>>,
    /// `/.well-known/tdmrep.json` per authority, fetched by `fetcher` ([`wellknown`]): the
    /// store's second kind, on the same core.
    tdmrep: files::Files<wellknown::Tdmrep>,
    /// Where every result taken in is archived ([`RobotsCache::archive_to`]).
    archive: std::sync::OnceLock<Arc<robots_proxy_archive::Archive>>,
    /// Told of every result archived ([`RobotsCache::on_result`]): the audit log.
    on_result: std::sync::OnceLock<archived::ResultHook>,
}

/// The few snapshots one holder (a client connection) used last, so that a keep-alive
/// connection asking the same sites again does not go through the shared cache each time.
///
/// Used only while the cache has not changed since they were remembered (any fetch result
/// stored, or purge, makes them unusable) and only while they are current, so a request
/// decided from here is decided exactly as [`RobotsCache::get`] would decide it.
#[derive(Default)]
pub struct RecentRobots {
    generation: u64,
    snapshots: Vec<Arc<RobotsSnapshot>>,
}

impl RecentRobots {
    /// How many authorities one holder remembers; beyond it the oldest is forgotten.
    const CAPACITY: usize = 8;
}

impl RobotsCache {
    /// A cache that fetches over plain HTTP with `settings` and tells time by `clock`. An
    /// `https` authority gets [`FetchOutcome::Network`]`("https not supported yet")`, that
    /// is, it counts as unreachable.
    pub fn new(settings: RobotsSection, clock: Arc<dyn Clock>) -> Self {
        let fetcher = HttpFetcher::plain(&settings);
        Self::with_fetcher(settings, clock, Arc::new(fetcher))
    }

    /// A cache that fetches through `connector`, which must handle both `http` and `https`
    /// URLs (for example a TLS connector wrapping an `HttpConnector` with
    /// `enforce_http(false)`). Its connect timeout is the connector's to set;
    /// `settings.connect_timeout` is not applied.
    pub fn with_connector<C>(settings: RobotsSection, clock: Arc<dyn Clock>, connector: C) -> Self
    where
        C: Connect + Clone + Send + Sync + 'static,
    {
        let fetcher = HttpFetcher::with_connector(&settings, connector, true);
        Self::with_fetcher(settings, clock, Arc::new(fetcher))
    }

    /// A cache that fetches through `fetcher` (the HTTP fetcher, or a test's).
    pub fn with_fetcher(
        settings: RobotsSection,
        clock: Arc<dyn Clock>,
        fetcher: Arc<dyn Fetch>,
    ) -> Self {
        let ttl = settings.give_up_after.saturating_add(settings.max_age).min(MAX_TTL);
        let fetch_slots = slots::FetchSlots::new(
            settings.max_concurrent_fetches,
            settings.max_concurrent_fetches_per_host,
        );
        let settings_body = settings.max_body.0;
        let robots = files::Files::new(settings.cache_memory.0, ttl);
        let tdmrep = files::Files::new(wellknown::MAX_BYTES, wellknown::TDMREP_LIFETIME);
        RobotsCache {
            inner: Arc::new(Inner {
                settings: arc_swap::ArcSwap::from_pointee(settings),
                clock,
                fetcher,
                robots,
                fetch_slots,
                counters: Counters::default(),
                generation: AtomicU64::new(0),
                shared: std::sync::OnceLock::new(),
                body_limit: fetch::body_limit(settings_body),
                persist: std::sync::OnceLock::new(),
                tdmrep,
                archive: std::sync::OnceLock::new(),
                on_result: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Shares robots.txt with a fleet through `shared` from now on (see [`Shared`]).
    /// Only the first call counts.
    pub fn share_with(&self, shared: Arc<dyn Shared>) {
        let _ = self.inner.shared.set(shared);
    }

    /// Puts the lifetimes of `section` in force (`robots.max_age`, `min_age`, `give_up_after`,
    /// `retry_initial`, `retry_max`, `refresh_ahead`): they apply to the next fetch result of each authority.
    /// The entries cached stay, with the expiry they were given. The other keys are the
    /// fetcher's and the memory bound's, built once (see `config::restart_reason`).
    pub fn reconfigure(&self, section: &RobotsSection) {
        let mut settings = RobotsSection::clone(&self.inner.settings.load());
        settings.max_age = section.max_age;
        settings.min_age = section.min_age;
        settings.give_up_after = section.give_up_after;
        settings.retry_initial = section.retry_initial;
        settings.retry_max = section.retry_max;
        settings.refresh_ahead = section.refresh_ahead;
        self.inner.settings.store(Arc::new(settings));
    }

    /// Keeps each authority's last good copy and failure state in `dir` across restarts (see
    /// `persist.rs`). Only the first call counts.
    pub fn persist_in(&self, dir: std::path::PathBuf) -> std::io::Result<()> {
        let s = self.inner.settings.load();
        let keep_for = s.give_up_after.saturating_add(s.max_age).min(MAX_TTL);
        let _ = self.inner.persist.set(Arc::new(persist::Persist::open(dir, keep_for)?));
        Ok(())
    }

    /// The snapshot `recent` holds for `authority`, if it is still the cache's current one.
    /// Counted as a cache hit.
    pub fn recent(
        &self,
        recent: &RecentRobots,
        authority: &Authority,
    ) -> Option<Arc<RobotsSnapshot>> {
        if recent.generation != self.inner.generation.load(Ordering::Acquire) {
            return None;
        }
        let snapshot = recent.snapshots.iter().find(|s| s.authority == *authority)?;
        let now = self.inner.clock.now();
        if !snapshot.is_current(now) {
            return None;
        }
        self.inner.counters.hits.fetch_add(1, Ordering::Relaxed);
        Inner::refresh_ahead(&self.inner, snapshot, now);
        Some(snapshot.clone())
    }

    /// The cache's generation now: read it before [`RobotsCache::get`] and give it to
    /// [`RobotsCache::remember`] with the result.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Keeps `snapshot`, got from [`RobotsCache::get`] when the cache was at `generation`,
    /// in `recent`.
    pub fn remember(
        &self,
        recent: &mut RecentRobots,
        generation: u64,
        snapshot: Arc<RobotsSnapshot>,
    ) {
        if recent.generation != generation {
            recent.snapshots.clear();
            recent.generation = generation;
        }
        recent.snapshots.retain(|s| s.authority != snapshot.authority);
        if recent.snapshots.len() == RecentRobots::CAPACITY {
            recent.snapshots.remove(0);
        }
        recent.snapshots.push(snapshot);
    }

    /// The robots.txt state for `authority`, fetching it if it is missing or due.
    ///
    /// However many requests ask at once, one fetch runs per authority; they all get its
    /// result. Never fails: fetch failures are states ([`RobotsState`]).
    pub async fn get(&self, authority: &Authority) -> Arc<RobotsSnapshot> {
        let now = self.inner.clock.now();
        let counters = &self.inner.counters;
        if let Some(snapshot) = self.inner.robots.entries.get(authority).await {
            if snapshot.is_current(now) {
                counters.hits.fetch_add(1, Ordering::Relaxed);
                Inner::refresh_ahead(&self.inner, &snapshot, now);
                return snapshot;
            }
        }
        let mut missed = false;
        for _ in 0..JOIN_ATTEMPTS {
            let wait = match Inner::ask(&self.inner, authority).await {
                // Current (it just came), or in force while its retry runs: a failing
                // origin's stale copy, disallow all, or allow all after the give-up stays in
                // force until the retry's answer arrives, and requests do not wait for it.
                self::core::Asked::Use(snapshot) if !missed => {
                    counters.hits.fetch_add(1, Ordering::Relaxed);
                    return snapshot;
                }
                self::core::Asked::Use(snapshot) => return snapshot,
                self::core::Asked::Wait(wait) => wait,
            };
            if !missed {
                missed = true;
                counters.misses.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(snapshot) = files::wait_for(wait).await {
                return snapshot;
            }
            // The fetch task ended without a result (the runtime is shutting down).
        }
        tracing::warn!(%authority, "robots.txt fetch task ended without a result");
        let outcome = FetchOutcome::Network("robots.txt fetch task ended".to_owned());
        Arc::new(RobotsSnapshot::unreachable_now(authority, outcome, self.inner.clock.now()))
    }

    /// What the cache holds for `authority`, current or not, without fetching.
    /// With a fleet, what the shared store holds when this instance holds nothing.
    pub async fn peek(&self, authority: &Authority) -> Option<Arc<RobotsSnapshot>> {
        if let Some(local) = self.inner.robots.entries.get(authority).await {
            return Some(local);
        }
        let shared = self.inner.shared.get()?;
        let record = shared.load(FileKind::Robots, authority).await.ok()??;
        shared::decode(authority, &record, self.inner.body_limit, shared.store_clock())
            .map(|(s, _)| Arc::new(s))
    }

    /// Drops the cached robots.txt of `authority` (and its `tdmrep.json`), so the next request
    /// fetches it again. A fetch in flight still answers the requests already waiting for it,
    /// but its result is not stored. This instance's copy is always dropped; the error says
    /// what of the fleet's part (the shared record, telling the other instances) was not done.
    pub async fn purge(&self, authority: &Authority) -> Result<(), SharedError> {
        self.purge_local(authority).await;
        match self.inner.shared.get() {
            Some(shared) => shared.purge(Some(authority)).await,
            None => Ok(()),
        }
    }

    /// Drops this instance's copy of the robots.txt of `authority` only (another instance of
    /// the fleet purged it).
    pub async fn purge_local(&self, authority: &Authority) {
        let robots = &self.inner.robots;
        let mut core = robots.core.lock().await;
        persist::forget(&self.inner, Some(authority)).await;
        let tdmrep = &self.inner.tdmrep;
        tdmrep.purge(&mut *tdmrep.core.lock().await, Some(authority)).await;
        robots.purge(&mut core, Some(authority)).await;
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops every cached robots.txt (and forgets fetches in flight, as [`Self::purge`]); the
    /// error says what of the fleet's part was not done.
    pub async fn purge_all(&self) -> Result<(), SharedError> {
        self.purge_all_local().await;
        match self.inner.shared.get() {
            Some(shared) => shared.purge(None).await,
            None => Ok(()),
        }
    }

    /// Drops every copy this instance holds (another instance of the fleet purged them all,
    /// or purges may have been missed while the fleet was out of reach).
    pub async fn purge_all_local(&self) {
        let robots = &self.inner.robots;
        let mut core = robots.core.lock().await;
        persist::forget(&self.inner, None).await;
        let tdmrep = &self.inner.tdmrep;
        tdmrep.purge(&mut *tdmrep.core.lock().await, None).await;
        robots.purge(&mut core, None).await;
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Authorities cached (approximate: moka counts lazily).
    pub fn entry_count(&self) -> u64 {
        self.inner.robots.entries.entry_count()
    }

    /// Bytes the cached entries weigh (approximate), against `cache_memory`.
    pub fn weighted_size(&self) -> u64 {
        self.inner.robots.entries.weighted_size()
    }

    /// Fetches started since the cache was made (first fetches and refetches).
    pub fn fetches_started(&self) -> u64 {
        self.inner.robots.fetches_started()
    }

    /// Hits, misses and fetch outcomes since the cache was made.
    pub fn stats(&self) -> CacheStats {
        let c = &self.inner.counters;
        CacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            refreshes: c.refreshes.load(Ordering::Relaxed),
            fetches: std::array::from_fn(|i| c.fetches[i].load(Ordering::Relaxed)),
        }
    }

    /// Runs moka's pending maintenance (evictions, counts), so the getters above are exact.
    pub async fn run_pending_tasks(&self) {
        self.inner.robots.entries.run_pending_tasks().await;
    }
}
