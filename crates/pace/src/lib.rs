//! Politeness: how fast requests may go to a site, across every crawler behind the proxy.
//!
//! robots.txt says where a crawler may go; `Crawl-delay` and plain courtesy say how fast. One
//! crawler cannot know that twenty others of the same organisation hit the same site at once;
//! the proxy sees them all, so it paces them together. Off by default (`pacing.enabled`).
//!
//! # What is enforced, per authority (the robots.txt key: scheme, host, port)
//!
//! * **Crawl-delay** (`pacing.obey_crawl_delay`): requests whose applicable robots.txt group
//!   has a `Crawl-delay` start at least that delay apart. Requests whose delay comes from the
//!   same `crawl-delay` line (the same group, whatever the product token that chose it) share
//!   one spacing; requests governed by another group, or by none, do not wait for them. Delays
//!   above `pacing.max_crawl_delay` count as that maximum.
//! * **Rate** (`pacing.default_rps`, or the authority's entry in `pacing.sites`): all requests
//!   to the authority together start at least `1 / rps` apart. A rate of more than 1,000 a
//!   second is finer than the timer: its starts less than a millisecond ahead go at once, in
//!   their places ([`TICK`]), so any span sees at most the rate and one millisecond's worth.
//! * **Concurrency** (`pacing.default_concurrency`, or `pacing.sites`): at most that many
//!   requests to the authority are in flight. A request holds its place from when it is
//!   forwarded until the origin's response headers arrive (the [`PacePermit`] is dropped
//!   then); streaming the body does not count.
//!
//! A request that must wait waits in a bounded queue for at most `pacing.max_wait`. One that
//! would wait longer (known on arrival for Crawl-delay and rate, since starts are reserved in
//! order; found out after `max_wait` for a connection), or that finds its queue full, is
//! refused with a [`Throttled`] error, which the proxy answers with `429 Too Many Requests`
//! and `Retry-After`.
//!
//! **Queues are per group.** Each robots.txt group with a Crawl-delay (one `crawl-delay` line)
//! has a queue of its own per authority, and the requests with no Crawl-delay share one more;
//! each holds at most `pacing.queue_limit` requests, whatever holds them back (their delay,
//! the rate or a free connection). A full queue refuses only requests of its own group, so one
//! crawler's backlog never gets another group's requests refused. (The rate and the
//! concurrency limit are still shared by every group: under them, a request starts after the
//! requests reserved before it, whatever their group.)
//!
//! Requests inside intercepted CONNECT tunnels are paced like plain ones; `tunnel` mode cannot
//! see requests, so it is not paced.
//!
//! # Design
//!
//! The private `schedule` module is the pure core: it decides from instants it is given, so
//! its rules are unit tested without sleeping. This layer sleeps on [`tokio::time`]
//! (monotonic, and under the tests' control with paused time) rather than the robots cache's
//! wall clock, and waits for free connections on a semaphore per authority.
//!
//! The state of an authority lives in a bounded cache keyed, like the robots cache beside it,
//! by [`Authority`]. It is forgotten after it has not been used for longer than any spacing
//! and wait could last (plus a margin for requests still in flight), so forgetting it changes
//! no answer; at most [`MAX_SITES`] authorities not in use are kept, the least recently used
//! dropped first (LRU; a new site is always admitted). An authority with requests waiting or
//! holding a connection slot is never dropped (see `local`).
//!
//! [`Pacer::stats`] and [`Pacer::queue_depths`] are for metrics.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// The crates this one stands on, under the names the project uses for them.
use robots_proxy_authority as authority;
use robots_proxy_engine as robots;
use robots_proxy_sync as sync;

mod local;
mod schedule;
mod section;
mod store;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::authority::Authority;
use crate::robots::CrawlDelay;
pub use schedule::Bound;

pub use local::LocalPace;
pub use schedule::{begin_deadline, goes_at, Lane, Limits, Refusal, BEGIN_GRACE, TICK};
pub use section::{
    PacingError, PacingSection, RawPacingSection, SitePace, MAX_CONCURRENCY, PACING_BOUNDS,
};
pub use store::{Admission, ForgetWhenIdle, Held, IdleWindow, PaceAsk, PaceFuture, PaceStore};

/// Most authorities whose pacing state is kept at once.
pub const MAX_SITES: u64 = 100_000;

/// How long the state of an authority is kept after its last request, beyond the longest
/// spacing and wait: covers requests still in flight (holding a connection) when the last
/// one arrived.
const IDLE_MARGIN: Duration = Duration::from_secs(5 * 60);

/// Paces requests per authority; see the [module documentation](self).
///
/// Shared by every connection (`Arc`); must be used inside a tokio runtime.
pub struct Pacer {
    /// Replaced whole on a reload ([`Pacer::prepare`], [`Pacer::apply`]); a request reads it
    /// once, so it is paced by the settings it arrived under.
    enabled: arc_swap::ArcSwapOption<Enabled>,
    /// Where the pace is kept: the same across reloads, so a reload forgets no site's pace.
    store: Option<Arc<dyn PaceStore>>,
    counters: Counters,
}

/// `[pacing]` read for a reload, not yet in force ([`Pacer::prepare`]).
pub struct PacingPlan {
    enabled: Option<Enabled>,
    /// How long the store keeps an authority's pace after its last request, under it.
    idle_window: Duration,
}

/// The pacer's state when `pacing.enabled` is true.
struct Enabled {
    obey_crawl_delay: bool,
    max_crawl_delay: Duration,
    default: Limits,
    overrides: HashMap<Authority, Limits>,
    store: Arc<dyn PaceStore>,
}

#[derive(Default)]
struct Counters {
    delayed: AtomicU64,
    delay_nanos: AtomicU64,
    refused: AtomicU64,
    waiting: AtomicU64,
}

/// Counters of what pacing did since the proxy started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PacingStats {
    /// Requests that waited before being forwarded.
    pub delayed: u64,
    /// The time those requests waited, all together.
    pub total_delay: Duration,
    /// Requests refused with 429 (queue full, or the wait would have been too long).
    pub refused: u64,
    /// Requests waiting right now, all authorities together.
    pub waiting: u64,
    /// Authorities whose pacing state is kept (approximate: the cache counts lazily).
    pub sites: u64,
}

/// Leave to forward one request. Dropping it frees the request's connection slot (with a
/// concurrency limit): keep it until the origin's response headers have arrived.
#[derive(Default)]
#[must_use = "the request's connection slot is freed when the permit is dropped"]
pub struct PacePermit {
    _slot: Option<Box<dyn Send + Sync>>,
}

impl fmt::Debug for PacePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacePermit").field("holds_slot", &self._slot.is_some()).finish()
    }
}

/// A request refused because it would break the pace of its authority: answered with 429.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{authority} is paced ({pace}) and {cause}")]
#[non_exhaustive]
pub struct Throttled {
    /// The authority.
    pub authority: Authority,
    /// The part of the pace that held the request back.
    pub pace: Pace,
    /// Why it could not wait.
    pub cause: ThrottleCause,
    /// When to try again (what `Retry-After` says), in whole seconds, at least 1: the wait it
    /// would have needed; for want of a free connection (the concurrency limit), `max_wait`.
    pub retry_after: Duration,
}

/// The part of an authority's pace that held a request back.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Pace {
    /// The `Crawl-delay` of the request's robots.txt group (capped by
    /// `pacing.max_crawl_delay`).
    CrawlDelay {
        /// The delay applied.
        delay: Duration,
        /// The `crawl-delay` line in robots.txt.
        line: u32,
    },
    /// The authority's rate: one request every `interval`.
    Rate {
        /// `1 / rps`.
        interval: Duration,
    },
    /// The authority's concurrency limit.
    Concurrency {
        /// Requests in flight at once.
        max: usize,
    },
}

impl fmt::Display for Pace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pace::CrawlDelay { delay, line } => {
                write!(f, "Crawl-delay {} from robots.txt line {line}", show(*delay))
            }
            Pace::Rate { interval } => write!(f, "one request every {}", show(*interval)),
            Pace::Concurrency { max } => write!(f, "at most {max} in flight"),
        }
    }
}

/// Why a request could not wait for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThrottleCause {
    /// Its turn would come after `wait`, more than `pacing.max_wait`.
    WaitTooLong {
        /// The wait it would have needed.
        wait: Duration,
        /// `pacing.max_wait`.
        max_wait: Duration,
    },
    /// `pacing.queue_limit` requests already wait in the request's queue: that of its
    /// robots.txt group's Crawl-delay, or the authority's queue of requests with none.
    QueueFull {
        /// Requests waiting in that queue.
        waiting: usize,
        /// The `crawl-delay` line of the group whose queue it is; `None`: the queue of the
        /// requests with no Crawl-delay.
        line: Option<u32>,
        /// The wait it would have needed (zero when only a connection was missing).
        wait: Duration,
    },
    /// No connection to the authority came free within `pacing.max_wait`.
    NoConnection {
        /// `pacing.max_wait`.
        max_wait: Duration,
    },
    /// The fleet's shared pace cannot be reached, and `fleet.on_redis_error` is `refuse`:
    /// answered with 503, not 429.
    FleetUnavailable,
}

impl fmt::Display for ThrottleCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThrottleCause::WaitTooLong { wait, max_wait } => write!(
                f,
                "the request would have to wait {}, longer than pacing.max_wait ({})",
                show(*wait),
                show(*max_wait)
            ),
            ThrottleCause::QueueFull { waiting, line, wait } => {
                match line {
                    Some(line) => write!(
                        f,
                        "the queue of its robots.txt group (Crawl-delay line {line}) is full"
                    )?,
                    None => write!(f, "its queue of requests with no Crawl-delay is full")?,
                }
                write!(f, " (pacing.queue_limit: {waiting} waiting)")?;
                if wait.is_zero() {
                    write!(f, " with no free connection")
                } else {
                    write!(f, "; this request would have waited {}", show(*wait))
                }
            }
            ThrottleCause::FleetUnavailable => write!(
                f,
                "the fleet's shared pace (Redis) cannot be reached and fleet.on_redis_error is \
                 \"refuse\""
            ),
            ThrottleCause::NoConnection { max_wait } => write!(
                f,
                "no connection to it came free within pacing.max_wait ({})",
                show(*max_wait)
            ),
        }
    }
}

/// A duration for people: to the millisecond, rounded up (so a wait is never understated).
fn show(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    let ms = u64::try_from(ms).unwrap_or(u64::MAX);
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

/// `Retry-After` for a wait: whole seconds, rounded up, at least one.
fn retry_after(wait: Duration) -> Duration {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Duration::from_secs(secs.max(1))
}

/// Counts a request as waiting in the stats until dropped.
struct Waiting<'a>(&'a Counters);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pacer {
    /// A pacer for `section` that keeps the pace in this process; it does nothing when
    /// `section.enabled` is false.
    pub fn new(section: &PacingSection) -> Result<Self, PacingError> {
        Self::with_store(section, Arc::new(LocalPace::new(idle_after(section)?)))
    }

    /// A pacer for `section` that keeps the pace in `store` (for a fleet, a shared one).
    pub fn with_store(
        section: &PacingSection,
        store: Arc<dyn PaceStore>,
    ) -> Result<Self, PacingError> {
        let enabled = Self::enabled(section, &store)?;
        Ok(Pacer {
            enabled: arc_swap::ArcSwapOption::from(enabled.map(Arc::new)),
            store: Some(store),
            counters: Counters::default(),
        })
    }

    fn enabled(
        section: &PacingSection,
        store: &Arc<dyn PaceStore>,
    ) -> Result<Option<Enabled>, PacingError> {
        let (default, sites) = section.resolve()?;
        if !section.enabled {
            return Ok(None);
        }
        Ok(Some(Enabled {
            obey_crawl_delay: section.obey_crawl_delay,
            max_crawl_delay: section.max_crawl_delay,
            default,
            overrides: sites.into_iter().collect(),
            store: store.clone(),
        }))
    }

    /// For a reload: `section` checked and read, to be put in force by [`Pacer::apply`]. The
    /// store (the pace of every site so far, shared with a fleet) stays the one the pacer was
    /// built with.
    pub fn prepare(&self, section: &PacingSection) -> Result<PacingPlan, PacingError> {
        let idle_window = idle_after(section)?;
        let store = match &self.store {
            Some(store) => store.clone(),
            None => Arc::new(LocalPace::new(idle_window)),
        };
        Ok(PacingPlan { enabled: Self::enabled(section, &store)?, idle_window })
    }

    /// Puts a [`Pacer::prepare`]d `[pacing]` in force for requests that arrive from now on,
    /// at sites already paced too (spaced from their last start by the new limits); requests
    /// already waiting keep their place and the pace they were given. The store keeps each
    /// site's pace for the new section's idle window ([`idle_after`]).
    pub fn apply(&self, plan: PacingPlan) {
        if let Some(store) = &self.store {
            store.set_idle_window(plan.idle_window);
        }
        self.enabled.store(plan.enabled.map(Arc::new));
    }

    /// A pacer that lets everything through at once.
    pub fn disabled() -> Self {
        Pacer {
            enabled: arc_swap::ArcSwapOption::empty(),
            store: None,
            counters: Counters::default(),
        }
    }

    /// Whether requests are paced at all.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load().is_some()
    }

    /// Waits until a request to `authority` may be forwarded without breaking the authority's
    /// pace: [`Pacer::admit_with_delay`] with the `Crawl-delay` that `crawl_delay` looks up
    /// (the robots.txt group that applies to the request's token), called only when pacing is
    /// on and obeys `Crawl-delay` (the look-up is not free, and the proxy's hot path runs this
    /// for every request).
    pub async fn admit(
        &self,
        authority: &Authority,
        crawl_delay: impl FnOnce() -> Option<CrawlDelay>,
    ) -> Result<PacePermit, Throttled> {
        let Some(on) = self.enabled.load_full() else { return Ok(PacePermit::default()) };
        let delay = if on.obey_crawl_delay { crawl_delay() } else { None };
        self.admit_with_delay(authority, delay).await
    }

    /// Waits until a request to `authority` may be forwarded without breaking its pace, given
    /// the `Crawl-delay` of the robots.txt group that applies to the request. Returns at once when pacing is off or nothing limits the request.
    ///
    /// Refuses, without waiting, a request whose turn would come after `pacing.max_wait` or
    /// that finds `pacing.queue_limit` requests already waiting in its queue (its group's, see
    /// the [module documentation](self)); a request that waits for a
    /// free connection is refused when none comes free within `pacing.max_wait`.
    ///
    /// Cancel-safe: dropping the future while it waits gives its place in the queue back (its
    /// reserved start stays taken, which only spaces later requests a little more).
    pub async fn admit_with_delay(
        &self,
        authority: &Authority,
        crawl_delay: Option<CrawlDelay>,
    ) -> Result<PacePermit, Throttled> {
        let Some(on) = self.enabled.load_full() else { return Ok(PacePermit::default()) };
        let lane = crawl_delay
            .filter(|_| on.obey_crawl_delay)
            .and_then(|d| Lane::new(d.line(), d.duration(), on.max_crawl_delay));
        let limits = on.overrides.get(authority).copied().unwrap_or(on.default);
        if lane.is_none() && limits.is_unlimited() {
            return Ok(PacePermit::default());
        }
        self.counters.waiting.fetch_add(1, Ordering::Relaxed);
        let waiting = Waiting(&self.counters);
        let arrival = Instant::now();
        let admitted = on.store.admit(PaceAsk { authority, lane, limits }).await;
        drop(waiting);
        match admitted {
            Ok(admission) => {
                if admission.waited {
                    let nanos = u64::try_from(arrival.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    self.counters.delayed.fetch_add(1, Ordering::Relaxed);
                    self.counters.delay_nanos.fetch_add(nanos, Ordering::Relaxed);
                }
                Ok(PacePermit { _slot: admission.slot })
            }
            Err(Held::Refused(refusal)) => Err(self.refused(authority, lane, &limits, refusal)),
            Err(Held::Unavailable) => Err(self.throttled(
                authority,
                limits.interval.map_or(
                    Pace::Concurrency { max: limits.concurrency.unwrap_or_default() },
                    |interval| Pace::Rate { interval },
                ),
                ThrottleCause::FleetUnavailable,
                Duration::ZERO,
            )),
            // The site had no free connection for all of `max_wait`: that is the estimate of
            // when one is free, not a second.
            Err(Held::NoConnection) => Err(self.throttled(
                authority,
                Pace::Concurrency { max: limits.concurrency.unwrap_or_default() },
                ThrottleCause::NoConnection { max_wait: limits.max_wait },
                limits.max_wait,
            )),
        }
    }

    /// The [`Throttled`] error for a refusal of the core, counted.
    fn refused(
        &self,
        authority: &Authority,
        lane: Option<Lane>,
        limits: &Limits,
        refusal: Refusal,
    ) -> Throttled {
        let (bound, cause, wait) = match refusal {
            Refusal::TooLong { wait, bound } => {
                (bound, ThrottleCause::WaitTooLong { wait, max_wait: limits.max_wait }, wait)
            }
            // Queued behind a full concurrency limit, the wait is not known: every request
            // ahead may wait up to `max_wait` for a connection, so that is when to come back.
            Refusal::QueueFull { waiting, wait, bound: Bound::Concurrency } => (
                Bound::Concurrency,
                ThrottleCause::QueueFull { waiting, line: lane.map(|l| l.line), wait },
                wait.max(limits.max_wait),
            ),
            Refusal::QueueFull { waiting, wait, bound } => {
                let line = lane.map(|l| l.line);
                (bound, ThrottleCause::QueueFull { waiting, line, wait }, wait)
            }
        };
        let pace = match (bound, lane, limits.interval) {
            (Bound::CrawlDelay, Some(lane), _) => {
                Pace::CrawlDelay { delay: lane.delay, line: lane.line }
            }
            (Bound::Rate, _, Some(interval)) => Pace::Rate { interval },
            _ => Pace::Concurrency { max: limits.concurrency.unwrap_or_default() },
        };
        self.throttled(authority, pace, cause, wait)
    }

    fn throttled(
        &self,
        authority: &Authority,
        pace: Pace,
        cause: ThrottleCause,
        wait: Duration,
    ) -> Throttled {
        // A fleet outage is no refusal for pace (it is answered 503, counted as `unavailable`).
        if !matches!(cause, ThrottleCause::FleetUnavailable) {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
        }
        Throttled { authority: authority.clone(), pace, cause, retry_after: retry_after(wait) }
    }

    /// What pacing has done so far.
    pub fn stats(&self) -> PacingStats {
        let c = &self.counters;
        PacingStats {
            delayed: c.delayed.load(Ordering::Relaxed),
            total_delay: Duration::from_nanos(c.delay_nanos.load(Ordering::Relaxed)),
            refused: c.refused.load(Ordering::Relaxed),
            waiting: c.waiting.load(Ordering::Relaxed),
            sites: self.enabled.load().as_ref().map_or(0, |on| on.store.sites()),
        }
    }

    /// Requests waiting for `authority` right now.
    pub fn queue_depth(&self, authority: &Authority) -> usize {
        self.enabled.load().as_ref().map_or(0, |on| on.store.queue_depth(authority))
    }

    /// Every authority with requests waiting, and how many: for a per-authority queue-depth
    /// gauge. Reading does not keep idle state alive.
    pub fn queue_depths(&self) -> Vec<(Authority, usize)> {
        self.enabled.load().as_ref().map_or_else(Vec::new, |on| on.store.queue_depths())
    }
}

/// How long the state of an authority must be kept after its last request: longer than any
/// spacing and wait of `section` could last, plus a margin for requests still in flight.
pub fn idle_after(section: &PacingSection) -> Result<Duration, PacingError> {
    let (default, sites) = section.resolve()?;
    let longest_interval = sites
        .iter()
        .map(|(_, l)| l)
        .chain([&default])
        .filter_map(|l| l.interval)
        .max()
        .unwrap_or_default();
    let longest_spacing = longest_interval.max(section.max_crawl_delay);
    Ok(longest_spacing.saturating_add(section.max_wait).saturating_add(IDLE_MARGIN))
}

#[cfg(test)]
mod tests;
