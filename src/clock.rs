//! Wall-clock time behind a seam, so tests can move time instead of waiting for it.
//!
//! robots.txt freshness (RFC 9309 §2.4) is computed by our own code from the fetch time; the
//! cache asks a [`Clock`] for "now" and never reads the system clock itself.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to. For tests.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: SystemTime) -> Self {
        ManualClock { now: Mutex::new(start) }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: SystemTime) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(SystemTime::now())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `now + d` for timers, without the panic of `Instant + Duration` on overflow: a deadline that
/// cannot be represented is a century away (in practice, never). The configuration bounds every
/// duration (`config::bounds`), so this is a second line of defence, not the rule.
pub fn deadline_after(now: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    now.checked_add(d).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}
