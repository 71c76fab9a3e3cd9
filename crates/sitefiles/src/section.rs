//! `[robots]`: how robots.txt is fetched and cached, the cache's own section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use robots_proxy_units::bounds::{
    because, count, duration, size, wide, Bound, GIB, KIB, MIB, POSITIVE, YEAR,
};
use robots_proxy_units::{raw_section, ByteSize, Problems};

/// `[robots]`: the rows of `shared/spec/README.md`, "Fetching and caching".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct RobotsSection {
    /// The User-Agent the proxy fetches robots.txt with.
    pub user_agent: String,
    /// Time allowed to connect for a robots.txt fetch.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Time allowed for a whole robots.txt fetch, redirects and body included.
    #[serde(with = "humantime_serde")]
    pub fetch_timeout: Duration,
    /// Bytes of a robots.txt body that are read and parsed (at least 500 KiB); the rest is
    /// ignored.
    pub max_body: ByteSize,
    /// Redirects followed; more is treated as 404 (unavailable).
    pub max_redirects: u32,
    /// robots.txt fetches running at once, all origins together; more wait for a slot. The
    /// wait counts against `fetch_timeout`.
    pub max_concurrent_fetches: usize,
    /// robots.txt fetches running at once to one host (all its ports and schemes together),
    /// so that slow origins on one host cannot take every slot.
    pub max_concurrent_fetches_per_host: usize,
    /// How long a fetched robots.txt is used before it is fetched again.
    #[serde(with = "humantime_serde")]
    pub max_age: Duration,
    /// `Cache-Control: max-age` can shorten the lifetime, but not below this.
    #[serde(with = "humantime_serde")]
    pub min_age: Duration,
    /// After failing for this long, use the last copy, or allow everything without one.
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
    /// First wait before retrying an unreachable robots.txt; doubles on each failure.
    #[serde(with = "humantime_serde")]
    pub retry_initial: Duration,
    /// Longest wait between retries.
    #[serde(with = "humantime_serde")]
    pub retry_max: Duration,
    /// Memory the cache of compiled robots.txt may hold.
    pub cache_memory: ByteSize,
    /// The last share of a robots.txt's lifetime in which the first request that sees it
    /// starts a refetch in the background, while every request goes on with the copy still in
    /// force (0 to [`MAX_REFRESH_AHEAD`]; 0 turns it off: a request that finds the copy
    /// expired waits for the refetch).
    pub refresh_ahead: f64,
}

/// The largest `robots.refresh_ahead`: a refresh starts at half the lifetime at the earliest,
/// so a busy site's robots.txt is fetched at most twice as often as without it.
pub(crate) const MAX_REFRESH_AHEAD: f64 = 0.5;

raw_section!(RobotsSection, RawRobotsSection, "robots");

/// The bounds of `[robots]`.
pub const ROBOTS_BOUNDS: &[Bound<RobotsSection>] = &[
    duration("robots.connect_timeout", |c| c.connect_timeout, POSITIVE, DAY),
    duration("robots.fetch_timeout", |c| c.fetch_timeout, POSITIVE, DAY),
    because(
        size("robots.max_body", |c| c.max_body, 500 * KIB, 64 * MIB),
        "RFC 9309 §2.5 requires parsing at least 500 KiB",
    ),
    // RFC 9309 §2.3.1.2: "crawlers SHOULD follow at least five consecutive redirects"; more
    // than 20 only makes redirect loops expensive.
    count("robots.max_redirects", |c| u64::from(c.max_redirects), 0, 20),
    count("robots.max_concurrent_fetches", |c| wide(c.max_concurrent_fetches), 1, 65_536),
    count(
        "robots.max_concurrent_fetches_per_host",
        |c| wide(c.max_concurrent_fetches_per_host),
        1,
        65_536,
    ),
    duration("robots.max_age", |c| c.max_age, POSITIVE, YEAR),
    duration("robots.min_age", |c| c.min_age, Duration::ZERO, YEAR),
    duration("robots.give_up_after", |c| c.give_up_after, Duration::ZERO, YEAR),
    duration("robots.retry_initial", |c| c.retry_initial, POSITIVE, MONTH),
    duration("robots.retry_max", |c| c.retry_max, Duration::ZERO, MONTH),
    size("robots.cache_memory", |c| c.cache_memory, 0, 1024 * GIB),
];

const DAY: Duration = robots_proxy_units::bounds::DAY;
const MONTH: Duration = Duration::from_secs(30 * 24 * 3600);

impl TryFrom<RawRobotsSection> for RobotsSection {
    type Error = Problems;

    /// The bounds, the User-Agent, and the durations and sizes against each other.
    fn try_from(raw: RawRobotsSection) -> Result<Self, Problems> {
        let r = raw.0;
        let mut problems = Problems::new();
        problems.bounds(ROBOTS_BOUNDS, &r);
        problems.need(!r.user_agent.trim().is_empty(), "robots.user_agent", || {
            "must not be empty: origins see it on every robots.txt fetch".into()
        });
        problems.need(
            r.user_agent.trim().is_empty() || http::HeaderValue::from_str(&r.user_agent).is_ok(),
            "robots.user_agent",
            || format!("{:?} is not a valid header value (no control characters)", r.user_agent),
        );
        problems.need(r.connect_timeout <= r.fetch_timeout, "robots.connect_timeout", || {
            format!(
                "{} is longer than robots.fetch_timeout ({}), which includes connecting",
                show(r.connect_timeout),
                show(r.fetch_timeout)
            )
        });
        problems.need(r.min_age <= r.max_age, "robots.min_age", || {
            format!("{} is longer than robots.max_age ({})", show(r.min_age), show(r.max_age))
        });
        problems.need(r.retry_initial <= r.retry_max, "robots.retry_initial", || {
            format!(
                "{} is longer than robots.retry_max ({})",
                show(r.retry_initial),
                show(r.retry_max)
            )
        });
        if let Some(problem) = refresh_ahead_problem(r.refresh_ahead) {
            problems.push("robots.refresh_ahead", problem);
        }
        problems.need(r.cache_memory >= r.max_body, "robots.cache_memory", || {
            format!(
                "{} cannot hold even one robots.txt of robots.max_body ({})",
                r.cache_memory, r.max_body
            )
        });
        problems.or_build(|| r)
    }
}

/// What is wrong with `robots.refresh_ahead`, if anything.
fn refresh_ahead_problem(share: f64) -> Option<String> {
    (!(0.0..=MAX_REFRESH_AHEAD).contains(&share)).then(|| {
        format!(
            "{share} is not a share of the lifetime from 0 (off) to {MAX_REFRESH_AHEAD} \
             (a refresh in the last half of it)"
        )
    })
}

/// A duration as the messages write it.
fn show(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

impl Default for RobotsSection {
    fn default() -> Self {
        RobotsSection {
            user_agent: concat!("robots-proxy/", env!("CARGO_PKG_VERSION")).to_owned(),
            connect_timeout: Duration::from_secs(5),
            fetch_timeout: Duration::from_secs(20),
            max_body: ByteSize(500 * 1024),
            max_redirects: 5,
            max_concurrent_fetches: 64,
            max_concurrent_fetches_per_host: 4,
            max_age: Duration::from_secs(24 * 3600),
            min_age: Duration::from_secs(60),
            give_up_after: Duration::from_secs(30 * 24 * 3600),
            retry_initial: Duration::from_secs(10),
            retry_max: Duration::from_secs(3600),
            cache_memory: ByteSize(256 * 1024 * 1024),
            refresh_ahead: 0.2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_ahead_is_a_share_from_zero_to_half() {
        let with = |refresh_ahead| {
            RobotsSection::try_from(RawRobotsSection(RobotsSection {
                refresh_ahead,
                ..RobotsSection::default()
            }))
        };
        for ok in [0.0, 0.2, 0.5] {
            assert!(with(ok).is_ok(), "{ok}");
        }
        for bad in [0.51, 1.0, -0.1, f64::NAN, f64::INFINITY] {
            let problems = with(bad).unwrap_err().into_vec();
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert_eq!(problems[0].0, "robots.refresh_ahead");
        }
    }
}
