//! The bounds of every duration, size and count of the configuration, in one table that the
//! validation reads ([`BOUNDS`]).
//!
//! A value past these bounds is refused by `config check`, by `serve` and by a reload (SIGHUP)
//! alike, naming the key and the bound. Without them, values that deserialize fine crashed the
//! proxy later: a duration added to an `Instant` overflows past about 2.9e11 years, a queue of
//! 2^63 slots is more than a semaphore holds, and a header count sizes an allocation on every
//! connection (issue 27 §8, §9). The bounds are far beyond any sensible setting and far below
//! anything that overflows.
//!
//! Relations between keys (`robots.min_age` ≤ `robots.max_age`, …) are checked in
//! [`Config::check`](super::Config) and the sections' own checks; ranges are checked here only.
//! A unit test requires every duration, size and integer key of the schema to be listed.

use std::time::Duration;

use super::{ByteSize, Config};
use crate::signing::section::MAX_LIFETIME;

/// The range a key's value must lie in.
#[derive(Clone, Copy)]
pub(crate) enum Range {
    /// A duration in `min..=max`.
    Duration { get: fn(&Config) -> Duration, min: Duration, max: Duration },
    /// A size in `min..=max`.
    Size { get: fn(&Config) -> ByteSize, min: ByteSize, max: ByteSize },
    /// A count in `min..=max`.
    Count { get: fn(&Config) -> u64, min: u64, max: u64 },
}

/// One key's bound.
#[derive(Clone, Copy)]
pub(crate) struct Bound {
    /// The key, dotted.
    pub(crate) key: &'static str,
    pub(crate) range: Range,
    /// Why the bound is what it is, when it is not only a guard against overflow; added to the
    /// message of a value out of range.
    pub(crate) why: &'static str,
}

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(24 * 3600);
/// A year as humantime counts it (365.25 days), so the bound reads "1year".
const YEAR: Duration = Duration::from_secs(31_557_600);
/// A hundred such years (the longest archive retention).
const CENTURY: Duration = Duration::from_secs(3_155_760_000);
/// The shortest duration that is "longer than zero".
const POSITIVE: Duration = Duration::from_nanos(1);
const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

const fn duration(
    key: &'static str,
    get: fn(&Config) -> Duration,
    min: Duration,
    max: Duration,
) -> Bound {
    Bound { key, range: Range::Duration { get, min, max }, why: "" }
}

const fn count(key: &'static str, get: fn(&Config) -> u64, min: u64, max: u64) -> Bound {
    Bound { key, range: Range::Count { get, min, max }, why: "" }
}

const fn size(key: &'static str, get: fn(&Config) -> ByteSize, min: u64, max: u64) -> Bound {
    Bound { key, range: Range::Size { get, min: ByteSize(min), max: ByteSize(max) }, why: "" }
}

const fn because(bound: Bound, why: &'static str) -> Bound {
    Bound { why, ..bound }
}

/// `usize` counts as `u64` (lossless on every platform Rust supports).
const fn wide(n: usize) -> u64 {
    n as u64
}

/// Every bounded key. Documented in `config/robots-proxy.toml` ("Bounds"), which a test keeps
/// in step with this table.
pub(crate) const BOUNDS: &[Bound] = &[
    // [proxy]
    // A client needs some time to send a head: below a second no request could be served.
    duration("proxy.header_read_timeout", |c| c.proxy.header_read_timeout, SECOND, DAY),
    duration("proxy.shutdown_grace", |c| c.proxy.shutdown_grace, Duration::ZERO, DAY),
    duration("proxy.shutdown_delay", |c| c.proxy.shutdown_delay, Duration::ZERO, DAY),
    // [upstream]
    duration("upstream.connect_timeout", |c| c.upstream.connect_timeout, POSITIVE, DAY),
    duration("upstream.response_timeout", |c| c.upstream.response_timeout, POSITIVE, DAY),
    duration("upstream.body_idle_timeout", |c| c.upstream.body_idle_timeout, POSITIVE, DAY),
    duration("upstream.pool_idle_timeout", |c| c.upstream.pool_idle_timeout, POSITIVE, DAY),
    count(
        "upstream.pool_max_idle_per_host",
        |c| wide(c.upstream.pool_max_idle_per_host),
        0,
        65_536,
    ),
    count("upstream.pool_max_idle", |c| wide(c.upstream.pool_max_idle), 0, 1_048_576),
    // [robots]
    duration("robots.connect_timeout", |c| c.robots.connect_timeout, POSITIVE, DAY),
    duration("robots.fetch_timeout", |c| c.robots.fetch_timeout, POSITIVE, DAY),
    because(
        size("robots.max_body", |c| c.robots.max_body, 500 * KIB, 64 * MIB),
        "RFC 9309 §2.5 requires parsing at least 500 KiB",
    ),
    // RFC 9309 §2.3.1.2: "crawlers SHOULD follow at least five consecutive redirects"; more
    // than 20 only makes redirect loops expensive.
    count("robots.max_redirects", |c| u64::from(c.robots.max_redirects), 0, 20),
    count("robots.max_concurrent_fetches", |c| wide(c.robots.max_concurrent_fetches), 1, 65_536),
    count(
        "robots.max_concurrent_fetches_per_host",
        |c| wide(c.robots.max_concurrent_fetches_per_host),
        1,
        65_536,
    ),
    duration("robots.max_age", |c| c.robots.max_age, POSITIVE, YEAR),
    duration("robots.min_age", |c| c.robots.min_age, Duration::ZERO, YEAR),
    duration("robots.give_up_after", |c| c.robots.give_up_after, Duration::ZERO, YEAR),
    duration(
        "robots.retry_initial",
        |c| c.robots.retry_initial,
        POSITIVE,
        Duration::from_secs(30 * 24 * 3600),
    ),
    duration(
        "robots.retry_max",
        |c| c.robots.retry_max,
        Duration::ZERO,
        Duration::from_secs(30 * 24 * 3600),
    ),
    size("robots.cache_memory", |c| c.robots.cache_memory, 0, 1024 * GIB),
    // [audit]
    duration("audit.fsync_interval", |c| c.audit.fsync_interval, Duration::ZERO, DAY),
    count("audit.queue_capacity", |c| wide(c.audit.queue_capacity), 1, 1 << 20),
    because(
        duration("audit.checkpoint_interval", |c| c.audit.checkpoint_interval, SECOND, DAY),
        "a checkpoint is a signed record: more than one a second only fills the log",
    ),
    // [https]
    duration("https.tunnel_idle_timeout", |c| c.https.tunnel_idle_timeout, POSITIVE, DAY),
    // [archive]
    because(
        duration("archive.retention", |c| c.archive.retention, Duration::ZERO, CENTURY),
        "0s keeps only the windows in force",
    ),
    count(
        "archive.max_versions_per_authority",
        |c| wide(c.archive.max_versions_per_authority),
        1,
        1 << 20,
    ),
    because(size("archive.max_bytes", |c| c.archive.max_bytes, 0, 64 << 40), "0 means no bound"),
    // [pacing]
    duration("pacing.max_crawl_delay", |c| c.pacing.max_crawl_delay, POSITIVE, DAY),
    duration("pacing.max_wait", |c| c.pacing.max_wait, Duration::ZERO, DAY),
    because(
        count(
            "pacing.default_concurrency",
            |c| wide(c.pacing.default_concurrency),
            0,
            wide(crate::pacing::MAX_CONCURRENCY),
        ),
        "0 means no limit",
    ),
    count("pacing.queue_limit", |c| wide(c.pacing.queue_limit), 0, 1 << 20),
    // [limits]
    count("limits.max_connections", |c| wide(c.limits.max_connections), 1, 1 << 20),
    size(
        "limits.max_request_line",
        |c| c.limits.max_request_line,
        256,
        crate::limits::MAX_HEADER_BYTES.0,
    ),
    size(
        "limits.max_header_bytes",
        |c| c.limits.max_header_bytes,
        crate::limits::MIN_HEADER_BYTES.0,
        crate::limits::MAX_HEADER_BYTES.0,
    ),
    because(
        count("limits.max_headers", |c| wide(c.limits.max_headers), 1, 8192),
        "each request head is parsed into an array of this many headers",
    ),
    // As for header_read_timeout: below a second a response could be cut off as it is written.
    duration("limits.client_write_timeout", |c| c.limits.client_write_timeout, SECOND, DAY),
    duration(
        "limits.client_body_idle_timeout",
        |c| c.limits.client_body_idle_timeout,
        POSITIVE,
        DAY,
    ),
    because(
        count(
            "limits.max_connections_per_client",
            |c| wide(c.limits.max_connections_per_client),
            0,
            1 << 20,
        ),
        "0 means no cap per client",
    ),
    // Below a second a client could not send its first request in time.
    duration("limits.auth_timeout", |c| c.limits.auth_timeout, SECOND, Duration::from_secs(3600)),
    // [admin]
    count("admin.max_connections", |c| wide(c.admin.max_connections), 1, 65_536),
    because(
        duration(
            "admin.chart_interval",
            |c| c.admin.chart_interval,
            Duration::from_millis(100),
            Duration::from_secs(600),
        ),
        "the charts keep 360 samples: one hour at the default 10s, and at most 60 hours",
    ),
    // [fleet]
    duration("fleet.timeout", |c| c.fleet.timeout, POSITIVE, MINUTE),
    duration("fleet.robots_ttl", |c| c.fleet.robots_ttl, MINUTE, YEAR),
    size("fleet.max_shared_body", |c| c.fleet.max_shared_body, 0, 64 * MIB),
    count("fleet.records_memory_percent", |c| u64::from(c.fleet.records_memory_percent), 1, 100),
    // [signing]
    because(
        duration("signing.lifetime", |c| c.signing.lifetime, POSITIVE, MAX_LIFETIME),
        "the Web Bot Auth draft recommends at most 24 hours",
    ),
    duration("signing.reuse", |c| c.signing.reuse, Duration::ZERO, DAY),
    because(
        duration(
            "signing.directory_lifetime",
            |c| c.signing.directory_lifetime,
            POSITIVE,
            MAX_LIFETIME,
        ),
        "the Web Bot Auth draft recommends at most 24 hours",
    ),
    // [disclosure]
    count(
        "disclosure.feed_entries",
        |c| wide(c.disclosure.feed_entries),
        1,
        wide(crate::disclosure::section::MAX_FEED_ENTRIES),
    ),
];

/// The bound of `key`, if it has one.
#[cfg(test)]
pub(crate) fn bound(key: &str) -> Option<&'static Bound> {
    BOUNDS.iter().find(|b| b.key == key)
}

impl Bound {
    /// What is wrong with `config`'s value for this key, if anything.
    pub(crate) fn problem(&self, config: &Config) -> Option<String> {
        let message = match self.range {
            Range::Duration { get, min, max } => {
                let value = get(config);
                if value < min && min == POSITIVE {
                    "must be longer than zero".to_owned()
                } else if value < min {
                    format!("{} is below {}", show(value), show(min))
                } else if value > max {
                    format!("{} is more than {}", show(value), show(max))
                } else {
                    return None;
                }
            }
            Range::Size { get, min, max } => {
                let value = get(config);
                if value < min {
                    format!("{value} is below {min}")
                } else if value > max {
                    format!("{value} is more than {max}")
                } else {
                    return None;
                }
            }
            Range::Count { get, min, max } => {
                let value = get(config);
                if value < min {
                    format!("must be at least {min}")
                } else if value > max {
                    format!("{value} is more than {max}")
                } else {
                    return None;
                }
            }
        };
        Some(if self.why.is_empty() { message } else { format!("{message}: {}", self.why) })
    }

    #[cfg(test)]
    /// The range as the documentation writes it: `1ns..=1day`, `0..=65536`, `500KiB..=64MiB`.
    pub(crate) fn describe(&self) -> String {
        match self.range {
            Range::Duration { min, max, .. } if min == POSITIVE => {
                format!("more than 0, at most {}", show(max))
            }
            Range::Duration { min, max, .. } => format!("{} to {}", show(min), show(max)),
            Range::Size { min, max, .. } => format!("{min} to {max}"),
            Range::Count { min, max, .. } => format!("{min} to {max}"),
        }
    }
}

/// The "Bounds" lines of `config/robots-proxy.toml`, one a key.
#[cfg(test)]
pub(crate) fn documentation() -> String {
    BOUNDS.iter().map(|b| format!("#   {:<38} {}\n", b.key, b.describe())).collect()
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

/// One key's bound as plain numbers, for tests and tools (see [`bounds`]).
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

/// Every bounded key of the configuration with its range: every duration, size and count.
pub fn bounds() -> Vec<BoundSpec> {
    BOUNDS
        .iter()
        .map(|b| {
            let (kind, min, max) = match b.range {
                Range::Duration { min, max, .. } => {
                    (BoundKind::Duration, min.as_nanos(), max.as_nanos())
                }
                Range::Size { min, max, .. } => (BoundKind::Size, min.0.into(), max.0.into()),
                Range::Count { min, max, .. } => (BoundKind::Count, min.into(), max.into()),
            };
            BoundSpec { key: b.key, kind, min, max }
        })
        .collect()
}

/// Every value out of its bound, as (key, message).
pub(crate) fn problems(config: &Config) -> Vec<(&'static str, String)> {
    BOUNDS.iter().filter_map(|b| b.problem(config).map(|m| (b.key, m))).collect()
}

fn show(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        humantime::format_duration(d).to_string()
    }
}
