//! Wall-clock time behind a seam, so tests can move time instead of waiting for it.
//!
//! robots.txt freshness (RFC 9309 §2.4) is computed by our own code from the fetch time; the
//! cache asks a [`Clock`] for "now" and never reads the system clock itself.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// The crate this one stands on, under the name the project uses for it.
use robots_proxy_sync as sync;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// The clock the process runs on: the system clock.
///
/// Debug builds only (what `cargo test` runs; never a release build, whatever its environment):
/// `ROBOTSPROXY_DEBUG_CLOCK_SKEW_MS` (signed milliseconds) moves it by that much, so the
/// fleet's tests can run an instance whose clock is wrong.
pub fn process_clock() -> std::sync::Arc<dyn Clock> {
    #[cfg(debug_assertions)]
    if let Some(skew_ms) =
        std::env::var("ROBOTSPROXY_DEBUG_CLOCK_SKEW_MS").ok().and_then(|v| v.parse::<i64>().ok())
    {
        return std::sync::Arc::new(SkewedClock { skew_ms });
    }
    std::sync::Arc::new(SystemClock)
}

/// The system clock moved by a fixed amount (debug builds' tests: [`process_clock`]).
#[cfg(debug_assertions)]
#[derive(Debug, Clone, Copy)]
struct SkewedClock {
    skew_ms: i64,
}

#[cfg(debug_assertions)]
impl Clock for SkewedClock {
    fn now(&self) -> SystemTime {
        let by = Duration::from_millis(self.skew_ms.unsigned_abs());
        let now = SystemTime::now();
        if self.skew_ms >= 0 {
            now.checked_add(by).unwrap_or(now)
        } else {
            now.checked_sub(by).unwrap_or(now)
        }
    }
}

/// The shared store's clock (Redis `TIME`) as seen from this instance: the times written into
/// shared records are the store's, never this instance's own, so that an instance whose clock
/// is wrong neither keeps a record past its expiry nor expires the others' early.
///
/// It holds the last offset measured (the store's time when an answer came, minus this
/// instance's clock then; off by at most the one-way latency), 0 within [`AGREE_WITHIN_MS`]. Before any measurement, and
/// without a shared store, the offset is 0: the store's clock is taken to be this instance's.
#[derive(Debug, Default)]
pub struct StoreClock {
    offset_ms: AtomicI64,
}

impl StoreClock {
    /// A store clock taken to agree with this instance's until it is measured.
    pub const fn new() -> Self {
        StoreClock { offset_ms: AtomicI64::new(0) }
    }

    /// The store answered at `store_ms` (its clock, milliseconds since the epoch) when this
    /// instance's clock read `local`.
    pub fn observe(&self, store_ms: u64, local: SystemTime) {
        let store = i64::try_from(store_ms).unwrap_or(i64::MAX);
        let offset = store.saturating_sub(epoch_millis(local));
        // Within the tolerance, the clocks agree: every instance with a synchronised clock
        // then names the very times a record carries (its evidence, the archive), instead of
        // each moving them by its own measurement's jitter.
        let offset = if offset.unsigned_abs() < AGREE_WITHIN_MS { 0 } else { offset };
        self.offset_ms.store(offset, Ordering::Relaxed);
    }

    /// The clock of a store that has none of its own (a file on this instance's disk): this
    /// instance's, never measured.
    pub fn local() -> &'static StoreClock {
        static LOCAL: StoreClock = StoreClock::new();
        &LOCAL
    }

    /// The store's clock minus this instance's (milliseconds), as last measured.
    pub(crate) fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// `local` (this instance's clock) on the store's clock, in milliseconds since the epoch.
    pub fn to_store(&self, local: SystemTime) -> u64 {
        let ms = epoch_millis(local).saturating_add(self.offset_ms());
        u64::try_from(ms).unwrap_or(0)
    }

    /// `store_ms` (the store's clock) on this instance's clock, clamped to `0..=max_ms`.
    pub fn from_store(&self, store_ms: u64, max_ms: u64) -> SystemTime {
        let store = i64::try_from(store_ms.min(max_ms)).unwrap_or(i64::MAX);
        let ms = u64::try_from(store.saturating_sub(self.offset_ms())).unwrap_or(0).min(max_ms);
        UNIX_EPOCH.checked_add(Duration::from_millis(ms)).unwrap_or(UNIX_EPOCH)
    }
}

/// A store's clock within this of an instance's (milliseconds) is taken to agree with it
/// ([`StoreClock::observe`]): a measurement is off by up to the one-way latency anyway, and a
/// second is small beside any robots.txt lifetime.
pub const AGREE_WITHIN_MS: u64 = 1000;

/// `t` in milliseconds since the epoch (negative before it).
fn epoch_millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
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
        let mut now = crate::sync::lock(&self.now);
        *now += by;
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: SystemTime) {
        *crate::sync::lock(&self.now) = to;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(SystemTime::now())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *crate::sync::lock(&self.now)
    }
}

/// `now + d` for timers, without the panic of `Instant + Duration` on overflow: a deadline that
/// cannot be represented is a century away (in practice, never). The configuration bounds every
/// duration (`config::bounds`), so this is a second line of defence, not the rule.
pub fn deadline_after(now: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    now.checked_add(d).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_clock_converts_both_ways_with_the_measured_offset() {
        let clock = StoreClock::new();
        let local = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // Unmeasured: the store's clock is this instance's.
        assert_eq!(clock.to_store(local), 1_800_000_000_000);
        // This instance runs 60 s fast: the store's clock reads 60 s less.
        clock.observe(1_800_000_000_000 - 60_000, local);
        assert_eq!(clock.offset_ms(), -60_000);
        assert_eq!(clock.to_store(local), 1_800_000_000_000 - 60_000);
        assert_eq!(clock.from_store(1_800_000_000_000 - 60_000, u64::MAX), local);
        // Clocks within a second agree: no conversion (the same times on every instance).
        clock.observe(1_800_000_000_000 + 400, local);
        assert_eq!((clock.offset_ms(), clock.to_store(local)), (0, 1_800_000_000_000));
        clock.observe(1_800_000_000_000 - 60_000, local);
        // Hostile values stay within bounds, no panic.
        assert_eq!(clock.from_store(u64::MAX, 5_000), UNIX_EPOCH + Duration::from_millis(5_000));
        assert_eq!(clock.from_store(0, u64::MAX), UNIX_EPOCH + Duration::from_secs(60));
        clock.observe(u64::MAX, UNIX_EPOCH);
        assert_eq!(clock.to_store(local), u64::try_from(i64::MAX).unwrap());
    }
}
