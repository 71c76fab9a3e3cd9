//! The bounds of durations, sizes and counts: each section lists its own keys' ranges in a
//! table of [`Bound`]s over its raw form, checked by its `TryFrom<Raw…>`
//! ([`Problems::bounds`](crate::Problems::bounds)); `robots_proxy::config::bounds` lists them
//! all.
//!
//! A value past these bounds is refused by `config check`, by `serve` and by a reload (SIGHUP)
//! alike, naming the key and the bound. Without them, values that deserialize fine crashed the
//! proxy later: a duration added to an `Instant` overflows past about 2.9e11 years, a queue of
//! 2^63 slots is more than a semaphore holds, and a header count sizes an allocation on every
//! connection (issue 27 §8, §9). The bounds are far beyond any sensible setting and far below
//! anything that overflows.

use std::time::Duration;

use crate::ByteSize;

/// The range a key's value must lie in, with the getter of the value from the section `S`.
pub enum Range<S> {
    /// A duration in `min..=max`.
    Duration {
        /// The value.
        get: fn(&S) -> Duration,
        /// The least accepted.
        min: Duration,
        /// The greatest accepted.
        max: Duration,
    },
    /// A size in `min..=max`.
    Size {
        /// The value.
        get: fn(&S) -> ByteSize,
        /// The least accepted.
        min: ByteSize,
        /// The greatest accepted.
        max: ByteSize,
    },
    /// A count in `min..=max`.
    Count {
        /// The value.
        get: fn(&S) -> u64,
        /// The least accepted.
        min: u64,
        /// The greatest accepted.
        max: u64,
    },
}

/// One key's bound.
pub struct Bound<S> {
    /// The key, dotted.
    pub key: &'static str,
    /// Its range.
    pub range: Range<S>,
    /// Why the bound is what it is, when it is not only a guard against overflow; added to the
    /// message of a value out of range.
    pub why: &'static str,
}

/// A second.
pub const SECOND: Duration = Duration::from_secs(1);
/// A minute.
pub const MINUTE: Duration = Duration::from_secs(60);
/// A day.
pub const DAY: Duration = Duration::from_secs(24 * 3600);
/// A year as humantime counts it (365.25 days), so the bound reads "1year".
pub const YEAR: Duration = Duration::from_secs(31_557_600);
/// A hundred such years (the longest archive retention).
pub const CENTURY: Duration = Duration::from_secs(3_155_760_000);
/// The shortest duration that is "longer than zero".
pub const POSITIVE: Duration = Duration::from_nanos(1);
/// A kibibyte.
pub const KIB: u64 = 1 << 10;
/// A mebibyte.
pub const MIB: u64 = 1 << 20;
/// A gibibyte.
pub const GIB: u64 = 1 << 30;

/// A duration bound.
pub const fn duration<S>(
    key: &'static str,
    get: fn(&S) -> Duration,
    min: Duration,
    max: Duration,
) -> Bound<S> {
    Bound { key, range: Range::Duration { get, min, max }, why: "" }
}

/// A count bound.
pub const fn count<S>(key: &'static str, get: fn(&S) -> u64, min: u64, max: u64) -> Bound<S> {
    Bound { key, range: Range::Count { get, min, max }, why: "" }
}

/// A size bound.
pub const fn size<S>(key: &'static str, get: fn(&S) -> ByteSize, min: u64, max: u64) -> Bound<S> {
    Bound { key, range: Range::Size { get, min: ByteSize(min), max: ByteSize(max) }, why: "" }
}

/// `bound`, with the reason for it.
pub const fn because<S>(bound: Bound<S>, why: &'static str) -> Bound<S> {
    Bound { key: bound.key, range: bound.range, why }
}

/// `usize` counts as `u64` (lossless on every platform Rust supports).
pub const fn wide(n: usize) -> u64 {
    n as u64
}

impl<S> Bound<S> {
    /// What is wrong with `section`'s value for this key, if anything.
    pub fn problem(&self, section: &S) -> Option<String> {
        let message = match &self.range {
            Range::Duration { get, min, max } => {
                let value = get(section);
                if value < *min && *min == POSITIVE {
                    "must be longer than zero".to_owned()
                } else if value < *min {
                    format!("{} is below {}", show(value), show(*min))
                } else if value > *max {
                    format!("{} is more than {}", show(value), show(*max))
                } else {
                    return None;
                }
            }
            Range::Size { get, min, max } => {
                let value = get(section);
                if value < *min {
                    format!("{value} is below {min}")
                } else if value > *max {
                    format!("{value} is more than {max}")
                } else {
                    return None;
                }
            }
            Range::Count { get, min, max } => {
                let value = get(section);
                if value < *min {
                    format!("must be at least {min}")
                } else if value > *max {
                    format!("{value} is more than {max}")
                } else {
                    return None;
                }
            }
        };
        Some(if self.why.is_empty() { message } else { format!("{message}: {}", self.why) })
    }

    /// The bound as plain numbers.
    pub fn spec(&self) -> BoundSpec {
        let (kind, min, max) = match &self.range {
            Range::Duration { min, max, .. } => {
                (BoundKind::Duration, min.as_nanos(), max.as_nanos())
            }
            Range::Size { min, max, .. } => (BoundKind::Size, min.0.into(), max.0.into()),
            Range::Count { min, max, .. } => (BoundKind::Count, (*min).into(), (*max).into()),
        };
        BoundSpec { key: self.key, kind, min, max }
    }
}

/// What a key's values measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    /// A duration, in nanoseconds.
    Duration,
    /// A size, in bytes.
    Size,
    /// A count.
    Count,
}

/// One key's bound as plain numbers, for tests and tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundSpec {
    /// The key, dotted.
    pub key: &'static str,
    /// What the numbers measure.
    pub kind: BoundKind,
    /// The least value accepted (nanoseconds, bytes or a count).
    pub min: u128,
    /// The greatest value accepted.
    pub max: u128,
}

impl BoundSpec {
    /// The range as the documentation writes it: `more than 0, at most 1day`, `0 to 65536`,
    /// `500KiB to 64MiB`.
    pub fn describe(&self) -> String {
        let nanos = |n: u128| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX));
        let bytes = |n: u128| ByteSize(u64::try_from(n).unwrap_or(u64::MAX));
        match self.kind {
            BoundKind::Duration if nanos(self.min) == POSITIVE => {
                format!("more than 0, at most {}", show(nanos(self.max)))
            }
            BoundKind::Duration => {
                format!("{} to {}", show(nanos(self.min)), show(nanos(self.max)))
            }
            BoundKind::Size => format!("{} to {}", bytes(self.min), bytes(self.max)),
            BoundKind::Count => format!("{} to {}", self.min, self.max),
        }
    }
}

/// A duration as the messages write it (`0s`, `1day`, `30s`).
pub fn show(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        humantime::format_duration(d).to_string()
    }
}
