//! `[pacing]`: the configuration of politeness, and the rules serde cannot express.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use robots_proxy_units::bounds::{because, count, duration, wide, Bound, DAY, POSITIVE};
use robots_proxy_units::{raw_section, Problems};

use super::schedule::{Limits, MAX_SPACING};
use crate::authority::Authority;

/// Most concurrent requests a limit may name: far above any polite value, and small enough
/// for a semaphore.
pub const MAX_CONCURRENCY: usize = 65_536;

/// `[pacing]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct PacingSection {
    /// Pace requests at all. Off by default: a proxy that starts to hold requests back after an
    /// upgrade would surprise its users (and its benchmarks).
    pub enabled: bool,
    /// Space the requests of a crawler by the `Crawl-delay` of the robots.txt group that
    /// applies to it.
    pub obey_crawl_delay: bool,
    /// The longest `Crawl-delay` honoured; longer ones (`Crawl-delay: 86400`) count as this.
    #[serde(with = "humantime_serde")]
    pub max_crawl_delay: Duration,
    /// Requests per second to one authority, all crawlers together; 0: no limit.
    pub default_rps: f64,
    /// Requests to one authority in flight at once, all crawlers together; 0: no limit.
    pub default_concurrency: usize,
    /// Requests that may wait in one queue of an authority at once (each robots.txt group with
    /// a Crawl-delay has its own, the requests with none share one); more get 429.
    pub queue_limit: usize,
    /// Longest a request may wait for its turn; one that would wait longer gets 429.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Per-authority `rps` and `concurrency`, replacing the defaults for that authority. Kept
    /// last: TOML writes tables after plain values.
    pub sites: Vec<SitePace>,
}

impl Default for PacingSection {
    fn default() -> Self {
        PacingSection {
            enabled: false,
            obey_crawl_delay: true,
            max_crawl_delay: Duration::from_secs(60),
            default_rps: 0.0,
            default_concurrency: 0,
            queue_limit: 64,
            max_wait: Duration::from_secs(30),
            sites: Vec::new(),
        }
    }
}

/// One entry of `pacing.sites`: the pace of one authority.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SitePace {
    /// `scheme://host[:port]`, as robots.txt is scoped (`https://example.com`).
    pub authority: String,
    /// Requests per second to this authority; 0: no limit. Unset: `default_rps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<f64>,
    /// Requests to this authority in flight at once; 0: no limit. Unset: `default_concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
}

/// Why a `pacing.sites` entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PacingError {
    /// The authority is not `scheme://host[:port]`.
    #[error("pacing.sites entry {index} ({authority:?}): {reason}")]
    Site {
        /// 1-based position in the list.
        index: usize,
        /// The authority as written.
        authority: String,
        /// What is wrong.
        reason: String,
    },
}

raw_section!(PacingSection, RawPacingSection, "pacing");

/// The bounds of `[pacing]`.
pub const PACING_BOUNDS: &[Bound<PacingSection>] = &[
    duration("pacing.max_crawl_delay", |c| c.max_crawl_delay, POSITIVE, DAY),
    duration("pacing.max_wait", |c| c.max_wait, Duration::ZERO, DAY),
    because(
        count(
            "pacing.default_concurrency",
            |c| wide(c.default_concurrency),
            0,
            wide(MAX_CONCURRENCY),
        ),
        "0 means no limit",
    ),
    count("pacing.queue_limit", |c| wide(c.queue_limit), 0, 1 << 20),
];

impl TryFrom<RawPacingSection> for PacingSection {
    type Error = Problems;

    /// The bounds, the rates, and the sites.
    fn try_from(raw: RawPacingSection) -> Result<Self, Problems> {
        let section = raw.0;
        let mut problems = Problems::new();
        problems.bounds(PACING_BOUNDS, &section);
        problems.absorb(section.rules().into_iter().collect());
        problems.or_build(|| section)
    }
}

impl PacingSection {
    /// The rates and the sites, as (key, message).
    fn rules(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        if let Err(e) = check_rps(self.default_rps) {
            bad.push(("pacing.default_rps", e));
        }
        let mut seen: Vec<Authority> = Vec::new();
        for (i, site) in self.sites.iter().enumerate() {
            let index = i + 1;
            let entry = || format!("entry {index} ({:?})", site.authority);
            match parse_authority(index, &site.authority) {
                Ok(authority) if seen.contains(&authority) => bad.push((
                    "pacing.sites",
                    format!("{}: {authority} is listed more than once", entry()),
                )),
                Ok(authority) => seen.push(authority),
                Err(e) => bad.push(("pacing.sites", e.to_string())),
            }
            if let Some(Err(e)) = site.rps.map(check_rps) {
                bad.push(("pacing.sites", format!("{}: rps {e}", entry())));
            }
            if let Some(Err(e)) = site.concurrency.map(check_concurrency) {
                bad.push(("pacing.sites", format!("{}: concurrency {e}", entry())));
            }
        }
        bad
    }

    /// The limits for an authority with `rps` and `concurrency`.
    pub fn limits(&self, rps: f64, concurrency: usize) -> Limits {
        let interval = (rps.is_finite() && rps > 0.0)
            .then(|| Duration::try_from_secs_f64(1.0 / rps).unwrap_or(MAX_SPACING));
        Limits::new(
            interval,
            Some(concurrency.min(MAX_CONCURRENCY)),
            self.queue_limit,
            self.max_wait,
        )
    }

    /// The default limits and the per-authority ones.
    pub fn resolve(&self) -> Result<(Limits, Vec<(Authority, Limits)>), PacingError> {
        let default = self.limits(self.default_rps, self.default_concurrency);
        let mut sites = Vec::with_capacity(self.sites.len());
        for (i, site) in self.sites.iter().enumerate() {
            let authority = parse_authority(i + 1, &site.authority)?;
            let limits = self.limits(
                site.rps.unwrap_or(self.default_rps),
                site.concurrency.unwrap_or(self.default_concurrency),
            );
            sites.push((authority, limits));
        }
        Ok((default, sites))
    }
}

/// A rate is a finite number of requests per second, 0 for none, and at least one a day (so
/// that the spacing stays within what the scheduler handles).
fn check_rps(rps: f64) -> Result<(), String> {
    let one_a_day = 1.0 / MAX_SPACING.as_secs_f64();
    if !rps.is_finite() || rps < 0.0 {
        Err(format!("{rps} is not a rate: use a number of requests per second, 0 for no limit"))
    } else if rps > 0.0 && rps < one_a_day {
        Err(format!("{rps} is less than one request a day ({one_a_day:.6}); 0 means no limit"))
    } else {
        Ok(())
    }
}

fn check_concurrency(n: usize) -> Result<(), String> {
    if n > MAX_CONCURRENCY {
        Err(format!("{n} is more than {MAX_CONCURRENCY}; 0 means no limit"))
    } else {
        Ok(())
    }
}

/// `scheme://host[:port]`, nothing else (a trailing `/` is tolerated).
fn parse_authority(index: usize, text: &str) -> Result<Authority, PacingError> {
    let error = |reason: String| PacingError::Site {
        index,
        authority: text.to_owned(),
        reason: format!("{reason}; write it as scheme://host[:port], like \"https://example.com\""),
    };
    let uri: http::Uri = text.parse().map_err(|e| error(format!("not a URL: {e}")))?;
    if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
        return Err(error("has a path or query".to_owned()));
    }
    Authority::from_uri(&uri).map_err(|e| error(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(authority: &str, rps: Option<f64>, concurrency: Option<usize>) -> SitePace {
        SitePace { authority: authority.to_owned(), rps, concurrency }
    }

    #[test]
    fn defaults_pass_and_limit_nothing() {
        let section = PacingSection::default();
        assert!(PacingSection::try_from(RawPacingSection(section.clone())).is_ok());
        let (default, sites) = section.resolve().unwrap();
        assert!(default.is_unlimited());
        assert!(sites.is_empty());
    }

    #[test]
    fn bad_values_are_named() {
        let section = PacingSection {
            max_crawl_delay: Duration::ZERO,
            max_wait: Duration::from_secs(2 * 86400),
            default_rps: -1.0,
            default_concurrency: MAX_CONCURRENCY + 1,
            sites: vec![
                site("https://example.com", Some(f64::NAN), None),
                site("https://EXAMPLE.com:443/", None, Some(1)),
                site("example.org", None, None),
                site("http://example.net/path", None, None),
                site("http://example.net", Some(0.000_001), Some(1 << 20)),
            ],
            ..PacingSection::default()
        };
        let bad =
            PacingSection::try_from(RawPacingSection(section.clone())).unwrap_err().into_vec();
        let keys: Vec<_> = bad.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "pacing.max_crawl_delay",
                "pacing.max_wait",
                "pacing.default_concurrency",
                "pacing.default_rps",
                "pacing.sites",
                "pacing.sites",
                "pacing.sites",
                "pacing.sites",
                "pacing.sites",
                "pacing.sites",
            ],
            "{bad:#?}"
        );
        let text = format!("{bad:?}");
        assert!(text.contains("listed more than once"), "{text}");
        assert!(text.contains("entry 3"), "{text}");
        assert!(text.contains("has a path"), "{text}");
        assert!(text.contains("less than one request a day"), "{text}");
        assert!(section.resolve().is_err());
    }

    #[test]
    fn sites_override_the_defaults_field_by_field() {
        let section = PacingSection {
            default_rps: 4.0,
            default_concurrency: 2,
            sites: vec![
                site("https://a.example", Some(0.5), None),
                site("http://b.example:8080", None, Some(0)),
            ],
            ..PacingSection::default()
        };
        let checked = PacingSection::try_from(RawPacingSection(section.clone()));
        assert!(checked.is_ok(), "{checked:?}");
        let (default, sites) = section.resolve().unwrap();
        assert_eq!(default.interval, Some(Duration::from_millis(250)));
        assert_eq!(default.concurrency, Some(2));
        assert_eq!(sites[0].0.to_string(), "https://a.example");
        assert_eq!(sites[0].1.interval, Some(Duration::from_secs(2)));
        assert_eq!(sites[0].1.concurrency, Some(2));
        assert_eq!(sites[1].1.interval, Some(Duration::from_millis(250)));
        assert_eq!(sites[1].1.concurrency, None);
    }
}
