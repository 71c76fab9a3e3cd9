//! `[robots]`: how robots.txt is fetched and cached, the cache's own section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units::ByteSize;

/// `[robots]`: the rows of `shared/spec/README.md`, "Fetching and caching".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
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

impl RobotsSection {
    /// What is wrong with `refresh_ahead`, if anything.
    pub(crate) fn check_refresh_ahead(&self) -> Option<String> {
        let share = self.refresh_ahead;
        (!(0.0..=MAX_REFRESH_AHEAD).contains(&share)).then(|| {
            format!(
                "{share} is not a share of the lifetime from 0 (off) to {MAX_REFRESH_AHEAD} \
                 (a refresh in the last half of it)"
            )
        })
    }
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
        let with = |refresh_ahead| RobotsSection { refresh_ahead, ..RobotsSection::default() };
        for ok in [0.0, 0.2, 0.5] {
            assert_eq!(with(ok).check_refresh_ahead(), None, "{ok}");
        }
        for bad in [0.51, 1.0, -0.1, f64::NAN, f64::INFINITY] {
            assert!(with(bad).check_refresh_ahead().is_some(), "{bad}");
        }
    }
}
