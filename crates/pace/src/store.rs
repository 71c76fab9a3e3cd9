//! The pace store: the seam between the pacer and wherever an authority's pace is kept.
//!
//! [`PaceStore`] reserves a request's start time and, under a concurrency limit, holds one of
//! the authority's connection slots. [`super::LocalPace`] keeps both in this process; a
//! fleet-wide store (Redis) implements the same trait, so the pacer, and the proxy above it,
//! do not change when the pace is shared.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::schedule::{Lane, Limits, Refusal};
use crate::authority::Authority;

/// A boxed future borrowed from the store, so that the trait can be used as `dyn PaceStore`.
pub type PaceFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a store needs to know to pace one request.
#[derive(Debug, Clone, Copy)]
pub struct PaceAsk<'a> {
    /// The authority the request goes to.
    pub authority: &'a Authority,
    /// The Crawl-delay lane of its robots.txt group, if the group has a delay.
    pub lane: Option<Lane>,
    /// The authority's rate, concurrency, queue limit and longest wait.
    pub limits: Limits,
}

/// A request the store let through: whether it had to wait, and the slot it holds.
pub struct Admission {
    /// Whether the request waited for its turn or for a connection slot.
    pub waited: bool,
    /// The connection slot it holds (with a concurrency limit): freed when dropped.
    pub slot: Option<Box<dyn Send + Sync>>,
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("waited", &self.waited)
            .field("slot", &self.slot.is_some())
            .finish()
    }
}

/// Why a store did not let a request through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Its start would come too late, or the queue is full (known on arrival).
    Refused(Refusal),
    /// No connection slot came free within the longest wait.
    NoConnection,
    /// The fleet's shared pace cannot be reached and is required
    /// (`fleet.on_redis_error = "refuse"`).
    Unavailable,
}

/// Where the pace of every authority is kept: reserve a start, hold a connection slot.
pub trait PaceStore: Send + Sync + 'static {
    /// Reserves the request's start (spaced by the rate and its Crawl-delay lane from every
    /// other request to the authority), waits for it and, with a concurrency limit, for a
    /// free connection slot; or refuses it. Cancel-safe: dropping the future gives its place
    /// in the queue back.
    fn admit<'a>(&'a self, ask: PaceAsk<'a>) -> PaceFuture<'a, Result<Admission, Held>>;

    /// Requests waiting for `authority` right now (as far as this instance knows).
    fn queue_depth(&self, authority: &Authority) -> usize;

    /// Every authority with requests waiting, and how many.
    fn queue_depths(&self) -> Vec<(Authority, usize)>;

    /// Authorities whose pace is kept here (approximate).
    fn sites(&self) -> u64;

    /// How long an authority's pace is kept after its last request, from now on: a reload's
    /// [`super::idle_after`]. When it grows, the pace already kept is kept for the new window
    /// too, so that a site quiet since before the reload is not forgotten before its new
    /// spacing has run.
    fn set_idle_window(&self, window: Duration);
}

/// How long an authority's pace is kept after its last request ([`super::idle_after`]), shared
/// by a store and its caches, so that a reload's window reaches all of them.
#[derive(Debug)]
pub struct IdleWindow(AtomicU64);

impl IdleWindow {
    /// A window of `window` (whole milliseconds, at least one).
    pub fn new(window: Duration) -> Arc<Self> {
        Arc::new(IdleWindow(AtomicU64::new(Self::millis(window))))
    }

    fn millis(window: Duration) -> u64 {
        u64::try_from(window.as_millis()).unwrap_or(u64::MAX).max(1)
    }

    /// The window in force.
    pub fn get(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }

    /// Puts `window` in force; true when it is longer than the one before.
    pub fn set(&self, window: Duration) -> bool {
        let new = Self::millis(window);
        self.0.swap(new, Ordering::Relaxed) < new
    }
}

/// moka's expiry for a store's caches: an entry is forgotten once it has not been used for the
/// [`IdleWindow`] in force when it was last used (moka's `time_to_idle`, which is fixed when the
/// cache is built, would keep the window of the start for good).
pub struct ForgetWhenIdle(pub Arc<IdleWindow>);

impl<K, V> moka::Expiry<K, V> for ForgetWhenIdle {
    fn expire_after_create(&self, _: &K, _: &V, _: std::time::Instant) -> Option<Duration> {
        Some(self.0.get())
    }

    fn expire_after_read(
        &self,
        _: &K,
        _: &V,
        _: std::time::Instant,
        _: Option<Duration>,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(self.0.get())
    }

    fn expire_after_update(
        &self,
        _: &K,
        _: &V,
        _: std::time::Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(self.0.get())
    }
}
