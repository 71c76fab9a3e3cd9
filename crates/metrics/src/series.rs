//! The status page's charts (issue 23): a ring buffer, in the process, of the last
//! [`SAMPLES`] samples of the counters, one every `admin.chart_interval` (10 s: one hour), and
//! `robots_proxy_blocks_total{cause}`, the blocks by cause the charts draw.
//!
//! A sample holds what happened since the one before: decisions (allowed, tunnelled,
//! throttled, unavailable, and blocked by cause), robots.txt fetches by outcome, and the sites
//! and tokens blocked most in that interval ([`TOP_NAMED`] of each, the rest summed). The
//! sampler (the admin listener's) reads cumulative counters; the difference between two readings is
//! [`increase`], which never goes below zero: a counter found lower than before was reset (a
//! restart, a store rebuilt) or wrapped, and counts from zero again.
//!
//! Memory is bounded whatever the traffic: [`SAMPLES`] samples of at most [`TOP_NAMED`] names
//! each, every name cut to [`MAX_NAME`] bytes, and the names of the current interval counted in
//! a [`TopCounts`] (at most [`super::TOP_TRACKED`] names). Nothing is written to disk.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Serialize;

use super::{cut, Counted, Decision, Metrics, TopCounts};
use robots_proxy_audit::{AuditAction, AuditRecord};
use robots_proxy_authority::Scheme;
use robots_proxy_sitefiles::FetchClass;

/// Samples kept: at the default `admin.chart_interval` of 10 s, one hour.
pub const SAMPLES: usize = 360;

/// Sites (and tokens) named in each sample; the others of the interval are summed.
pub const TOP_NAMED: usize = 5;

/// Sites (and tokens) named in the window's totals ([`Window`]); the others are summed.
pub const TOP_WINDOW: usize = 10;

/// Longest site or token name kept in a sample, in bytes (longer ones are cut).
pub const MAX_NAME: usize = 200;

/// The causes of a block, as `robots_proxy_blocks_total{cause}` and the charts name them: the
/// audit actions of requests counted as `disallow` or `refuse`.
pub const CAUSES: [AuditAction; 6] = [
    AuditAction::RobotsDisallow,
    AuditAction::UsageDisallow,
    AuditAction::UsageWithhold,
    AuditAction::ExceptionDisallow,
    AuditAction::ConnectRefuse,
    AuditAction::DestinationProhibited,
];

/// How much a counter rose from `before` to `now`. A counter lower than before was reset (or
/// wrapped) in between, and has counted `now` since: the increase is never negative.
pub fn increase(before: u64, now: u64) -> u64 {
    now.checked_sub(before).unwrap_or(now)
}

/// The cumulative counters one sample reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Reading {
    /// allowed, tunnelled, throttled, unavailable.
    decisions: [u64; 4],
    causes: [u64; CAUSES.len()],
    fetches: [u64; FetchClass::ALL.len()],
}

impl Reading {
    fn since(&self, before: &Reading) -> Reading {
        let each = |now: &[u64], then: &[u64], out: &mut [u64]| {
            for ((o, n), b) in out.iter_mut().zip(now).zip(then) {
                *o = increase(*b, *n);
            }
        };
        let mut d = Reading::default();
        each(&self.decisions, &before.decisions, &mut d.decisions);
        each(&self.causes, &before.causes, &mut d.causes);
        each(&self.fetches, &before.fetches, &mut d.fetches);
        d
    }
}

/// One interval, as `/api/series` lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sample {
    /// When it was taken (seconds since the Unix epoch).
    pub at: f64,
    /// The interval it covers, in seconds (measured, not configured).
    pub seconds: f64,
    /// Requests forwarded.
    pub allowed: u64,
    /// CONNECT tunnels opened.
    pub tunnelled: u64,
    /// Requests refused with 429 for the site's pace.
    pub throttled: u64,
    /// Requests answered by the proxy itself (fleet store out of reach, untrusted origin).
    pub unavailable: u64,
    /// Blocks, by cause ([`CAUSES`]).
    pub blocked: HashMap<&'static str, u64>,
    /// robots.txt fetches completed, by outcome (`2xx`, `5xx`, `network`, ...).
    pub fetches: HashMap<&'static str, u64>,
    /// The sites blocked most in the interval.
    pub sites: Vec<Counted>,
    /// Blocks in the interval at sites not in `sites`.
    pub sites_other: u64,
    /// The tokens blocked most in the interval (`(none)` for requests without one).
    pub tokens: Vec<Counted>,
    /// Blocks in the interval by tokens not in `tokens`.
    pub tokens_other: u64,
}

/// The totals of every sample kept, as `/api/series` gives them with the samples.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Window {
    /// The time the samples cover, in seconds.
    pub seconds: f64,
    /// Requests forwarded.
    pub allowed: u64,
    /// Tunnels opened.
    pub tunnelled: u64,
    /// Requests throttled.
    pub throttled: u64,
    /// Requests answered by the proxy itself.
    pub unavailable: u64,
    /// Blocks, all causes together.
    pub blocked_total: u64,
    /// Blocks, by cause.
    pub blocked: HashMap<&'static str, u64>,
    /// robots.txt fetches, by outcome.
    pub fetches: HashMap<&'static str, u64>,
    /// The sites blocked most ([`TOP_WINDOW`]), from the samples' named sites.
    pub sites: Vec<Counted>,
    /// The other blocks: `blocked_total` less those of `sites`.
    pub sites_other: u64,
    /// The tokens blocked most ([`TOP_WINDOW`]).
    pub tokens: Vec<Counted>,
    /// The other blocks: `blocked_total` less those of `tokens`.
    pub tokens_other: u64,
}

/// What `/api/series` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// The samples kept, oldest first (at most [`SAMPLES`]).
    pub samples: Vec<Sample>,
    /// Most samples kept.
    pub capacity: usize,
    /// Their totals.
    pub window: Window,
}

/// The charts' counters and samples, one per [`Metrics`].
pub(super) struct Charts {
    causes: [Counter; CAUSES.len()],
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The reading of the last sample (zero before the first: every counter starts at zero).
    last: Reading,
    last_at: Option<Instant>,
    /// Blocks since the last sample, by site and by token, and all together.
    sites: TopCounts,
    tokens: TopCounts,
    blocks: u64,
    samples: VecDeque<Sample>,
}

impl Charts {
    /// Registers `robots_proxy_blocks_total{cause}` in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let family = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register(
            "blocks",
            "Requests blocked (decision disallow or refuse), by cause: the audit action \
             (robots_disallow, usage_disallow, usage_withhold, exception_disallow, \
             connect_refuse, destination_prohibited)",
            family.clone(),
        );
        let causes = CAUSES.map(|c| family.get_or_create_owned(&vec![("cause", c.as_str())]));
        Charts { causes, state: Mutex::new(State::default()) }
    }

    /// Blocks so far whose cause is `cause` (0 when it is not one of [`CAUSES`]).
    pub(super) fn blocks_by_cause(&self, cause: AuditAction) -> u64 {
        CAUSES.iter().position(|c| *c == cause).map_or(0, |i| self.causes[i].get())
    }

    /// Counts a refused request, if it is a block (a `disallow` or `refuse` decision).
    pub(super) fn blocked(&self, record: &AuditRecord) {
        let Some(i) = CAUSES.iter().position(|c| *c == record.action) else { return };
        self.causes[i].inc();
        let mut state = robots_proxy_sync::lock(&self.state);
        state.blocks += 1;
        state.sites.add(cut(&record.domain, MAX_NAME));
        state.tokens.add(cut(record.product_token.as_deref().unwrap_or("(none)"), MAX_NAME));
    }

    fn take(&self, reading: Reading, now: Instant, at: SystemTime) {
        let mut state = robots_proxy_sync::lock(&self.state);
        let d = reading.since(&state.last);
        let seconds = state.last_at.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
        let (sites, sites_other) = named(&state.sites, state.blocks, TOP_NAMED);
        let (tokens, tokens_other) = named(&state.tokens, state.blocks, TOP_NAMED);
        let sample = Sample {
            at: at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs_f64(),
            seconds,
            allowed: d.decisions[0],
            tunnelled: d.decisions[1],
            throttled: d.decisions[2],
            unavailable: d.decisions[3],
            blocked: CAUSES.iter().map(|c| c.as_str()).zip(d.causes).collect(),
            fetches: FetchClass::ALL.iter().map(|c| c.as_str()).zip(d.fetches).collect(),
            sites,
            sites_other,
            tokens,
            tokens_other,
        };
        if state.samples.len() == SAMPLES {
            state.samples.pop_front();
        }
        state.samples.push_back(sample);
        state.last = reading;
        state.last_at = Some(now);
        state.sites = TopCounts::default();
        state.tokens = TopCounts::default();
        state.blocks = 0;
    }

    fn series(&self) -> Series {
        let state = robots_proxy_sync::lock(&self.state);
        let samples: Vec<Sample> = state.samples.iter().cloned().collect();
        let window = window(&samples);
        Series { samples, capacity: SAMPLES, window }
    }
}

/// The `n` names counted most, and the count of all the others (out of `total`).
fn named(counts: &TopCounts, total: u64, n: usize) -> (Vec<Counted>, u64) {
    let top = counts.top(n);
    let shown: u64 = top.iter().map(|c| c.count).sum();
    (top, total.saturating_sub(shown))
}

/// The totals of `samples`.
fn window(samples: &[Sample]) -> Window {
    let mut blocked: HashMap<&'static str, u64> = CAUSES.iter().map(|c| (c.as_str(), 0)).collect();
    let mut fetches: HashMap<&'static str, u64> =
        FetchClass::ALL.iter().map(|c| (c.as_str(), 0)).collect();
    let mut sites: HashMap<&str, u64> = HashMap::new();
    let mut tokens: HashMap<&str, u64> = HashMap::new();
    let mut w = Window {
        seconds: 0.0,
        allowed: 0,
        tunnelled: 0,
        throttled: 0,
        unavailable: 0,
        blocked_total: 0,
        blocked: HashMap::new(),
        fetches: HashMap::new(),
        sites: Vec::new(),
        sites_other: 0,
        tokens: Vec::new(),
        tokens_other: 0,
    };
    for s in samples {
        w.seconds += s.seconds;
        w.allowed += s.allowed;
        w.tunnelled += s.tunnelled;
        w.throttled += s.throttled;
        w.unavailable += s.unavailable;
        for (k, v) in &s.blocked {
            *blocked.entry(k).or_default() += v;
            w.blocked_total += v;
        }
        for (k, v) in &s.fetches {
            *fetches.entry(k).or_default() += v;
        }
        for c in &s.sites {
            *sites.entry(&c.name).or_default() += c.count;
        }
        for c in &s.tokens {
            *tokens.entry(&c.name).or_default() += c.count;
        }
    }
    let top = |counts: HashMap<&str, u64>| {
        let mut all: Vec<Counted> = counts
            .into_iter()
            .map(|(name, count)| Counted { name: name.to_owned(), count, error: 0 })
            .collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        all.truncate(TOP_WINDOW);
        let shown: u64 = all.iter().map(|c| c.count).sum();
        (all, shown)
    };
    let (s, shown) = top(sites);
    w.sites = s;
    w.sites_other = w.blocked_total.saturating_sub(shown);
    let (t, shown) = top(tokens);
    w.tokens = t;
    w.tokens_other = w.blocked_total.saturating_sub(shown);
    w.blocked = blocked;
    w.fetches = fetches;
    w
}

impl Metrics {
    /// Takes a sample for the charts: the counters now, against those of the last sample.
    /// `fetches` are the robots.txt fetches so far by outcome, in [`FetchClass::ALL`]'s order.
    pub fn sample_charts(&self, fetches: [u64; FetchClass::ALL.len()]) {
        let both = |d: Decision| self.requests(d, Scheme::Http) + self.requests(d, Scheme::Https);
        let reading = Reading {
            decisions: [
                Decision::Allow,
                Decision::Tunnel,
                Decision::Throttle,
                Decision::Unavailable,
            ]
            .map(both),
            causes: self.charts.causes.each_ref().map(|c| c.get()),
            fetches,
        };
        self.charts.take(reading, Instant::now(), SystemTime::now());
    }

    /// The samples the charts draw, oldest first, with their totals (`/api/series`).
    pub fn series(&self) -> Series {
        self.charts.series()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_reset_or_wrapped_never_gives_a_negative_increase() {
        assert_eq!(increase(5, 12), 7);
        assert_eq!(increase(7, 7), 0);
        // Restarted: the counter counts from zero again.
        assert_eq!(increase(1_000, 3), 3);
        // Wrapped past u64::MAX.
        assert_eq!(increase(u64::MAX - 1, 4), 4);
        let before = Reading { decisions: [10, 0, 5, 0], causes: [9; 6], fetches: [4; 7] };
        let after = Reading { decisions: [2, 1, 5, 0], causes: [12; 6], fetches: [0; 7] };
        let d = after.since(&before);
        assert_eq!(d.decisions, [2, 1, 0, 0]);
        assert_eq!(d.causes, [3; 6]);
        assert_eq!(d.fetches, [0; 7]);
    }

    fn reading(allowed: u64, robots_disallow: u64) -> Reading {
        let mut r = Reading::default();
        r.decisions[0] = allowed;
        r.causes[0] = robots_disallow;
        r
    }

    #[test]
    fn samples_hold_the_increase_since_the_last_and_the_ring_is_bounded() {
        let mut registry = Registry::default();
        let charts = Charts::register(&mut registry);
        let t0 = Instant::now();
        charts.take(reading(3, 0), t0, UNIX_EPOCH);
        charts.take(reading(10, 2), t0 + Duration::from_secs(10), UNIX_EPOCH);
        // The process's counters were reset (a rebuilt store): no negative rate.
        charts.take(reading(4, 1), t0 + Duration::from_secs(20), UNIX_EPOCH);
        let s = charts.series();
        let allowed: Vec<u64> = s.samples.iter().map(|s| s.allowed).collect();
        assert_eq!(allowed, [3, 7, 4]);
        let blocked: Vec<u64> = s.samples.iter().map(|s| s.blocked["robots_disallow"]).collect();
        assert_eq!(blocked, [0, 2, 1]);
        assert_eq!(s.samples[1].seconds, 10.0);
        assert_eq!(s.window.allowed, 14);
        assert_eq!(s.window.blocked_total, 3);
        for i in 0..(SAMPLES as u64 * 2) {
            charts.take(reading(100 + i, 3), t0 + Duration::from_secs(30 + i), UNIX_EPOCH);
        }
        assert_eq!(charts.series().samples.len(), SAMPLES);
    }

    #[test]
    fn blocks_per_site_and_token_are_bounded_and_add_up() {
        let mut registry = Registry::default();
        let charts = Charts::register(&mut registry);
        let t0 = Instant::now();
        let record = |domain: &str, token: Option<&str>| {
            let subject = robots_proxy_audit::AuditSubject {
                client: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
                method: "GET",
                url: "http://x.test/p",
                domain,
                path: "/p",
                user_agent: None,
                token,
                robots_url: "http://x.test/robots.txt",
            };
            AuditRecord::new(
                AuditAction::RobotsDisallow,
                UNIX_EPOCH,
                subject,
                Some(403),
                "t".into(),
            )
        };
        for i in 0..40 {
            for _ in 0..=(i % 7) {
                charts.blocked(&record(&format!("http://site-{i}.test"), Some("Bot")));
            }
        }
        charts.blocked(&record(&"x".repeat(5000), None));
        // Throttled is not a block: counted neither here nor in robots_proxy_blocks_total.
        let mut paced = record("http://paced.test", None);
        paced.action = AuditAction::Throttled;
        charts.blocked(&paced);
        let total = charts.causes.iter().map(|c| c.get()).sum::<u64>();
        assert_eq!(total, (0..40).map(|i| i % 7 + 1).sum::<u64>() + 1);
        charts.take(
            Reading { causes: [total, 0, 0, 0, 0, 0], ..Reading::default() },
            t0,
            UNIX_EPOCH,
        );
        let s = charts.series();
        let sample = &s.samples[0];
        assert_eq!(sample.blocked["robots_disallow"], total);
        assert_eq!(sample.sites.len(), TOP_NAMED);
        assert!(sample.sites.iter().all(|c| c.name.len() <= MAX_NAME));
        let named: u64 = sample.sites.iter().map(|c| c.count).sum();
        assert_eq!(named + sample.sites_other, total);
        let tokens: u64 = sample.tokens.iter().map(|c| c.count).sum();
        assert_eq!(tokens + sample.tokens_other, total);
        assert_eq!(s.window.blocked_total, total);
        let named: u64 = s.window.sites.iter().map(|c| c.count).sum();
        assert_eq!(named + s.window.sites_other, total);
    }
}
