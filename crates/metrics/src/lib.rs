//! What the proxy has been doing, for whoever runs it: Prometheus metrics (through
//! `prometheus-client`) and the recent blocks the admin page shows.
//!
//! # Cost on the request path
//!
//! Every counter a request touches is created up front and kept as a field, so recording is one
//! atomic add: no label lookup, no lock, no allocation. The two latency histograms are
//! [`LatencyHistogram`]s, a fixed set of atomic buckets, because `prometheus-client`'s own
//! histogram takes a mutex on every observation. Values that other parts already count (the
//! robots cache, the audit writer) are read when `/metrics` is scraped, by a collector, instead of
//! being counted twice.
//!
//! Only blocked requests take a lock (a short one, to remember them for the admin page), and
//! blocks are the rare case.
//!
//! The root crate re-exports this crate as `robots_proxy::metrics`.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

mod activity;
mod archive;
mod latency;
mod report;
pub mod series;
pub mod text;
mod witness;

use activity::{cut, Activity};
pub use activity::{BlockSummary, BlockedRequest, Counted, TopCounts, MAX_SHOWN_URL};

pub use latency::LatencyHistogram;
pub use report::{WouldBlockSummary, WOULD_BLOCK_TOKENS};

use robots_proxy_audit::{AuditLog, AuditRecord};
use robots_proxy_authority::Scheme;
use robots_proxy_sitefiles::{FetchClass, RobotsStore};

/// The prefix of every metric name.
pub const PREFIX: &str = "robots_proxy";

/// How many blocked requests the admin page can show.
pub const RECENT_BLOCKS: usize = 100;

/// How many distinct authorities and tokens are counted for the "top blocked" lists. Beyond
/// this, the least counted one is replaced (see [`TopCounts`]), so memory stays bounded whatever
/// the traffic.
pub const TOP_TRACKED: usize = 256;

/// What the proxy did with a request, as the `decision` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// robots.txt allows it: forwarded.
    Allow,
    /// robots.txt disallows it: answered 403.
    Disallow,
    /// Refused before any path was decided: a CONNECT refused (port, mode, domain fronting, a
    /// tunnel to a site that disallows everything), or a request of any method to a
    /// destination the destination guard prohibits (`guard`). Which of the two:
    /// `robots_proxy_blocks_total{cause}` ([`Metrics::blocks_by_cause`]).
    Refuse,
    /// A CONNECT relayed as an opaque tunnel (`https.mode = "tunnel"`).
    Tunnel,
    /// Allowed by robots.txt but refused with 429 to keep the site's pace
    /// ([`robots_proxy_pace`]).
    Throttle,
    /// Neither decided nor forwarded, answered by the proxy itself: 503 when the fleet's shared
    /// store is required and out of reach, 502 when robots.txt could not be fetched because the
    /// origin's TLS certificate is not trusted.
    Unavailable,
}

impl Decision {
    /// How a request whose audit record says `action` is counted: every request is counted
    /// once, from what was finally done with it.
    pub fn of(action: robots_proxy_audit::AuditAction) -> Decision {
        use robots_proxy_audit::AuditAction as A;
        match action {
            A::RobotsDisallow | A::UsageDisallow | A::UsageWithhold | A::ExceptionDisallow => {
                Decision::Disallow
            }
            A::Throttled => Decision::Throttle,
            A::DestinationProhibited | A::ConnectRefuse => Decision::Refuse,
            A::TunnelAllow => Decision::Tunnel,
            A::FleetUnavailable => Decision::Unavailable,
            _ => Decision::Allow,
        }
    }

    const ALL: [Decision; 6] = [
        Decision::Allow,
        Decision::Disallow,
        Decision::Refuse,
        Decision::Tunnel,
        Decision::Throttle,
        Decision::Unavailable,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Disallow => "disallow",
            Decision::Refuse => "refuse",
            Decision::Tunnel => "tunnel",
            Decision::Throttle => "throttle",
            Decision::Unavailable => "unavailable",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The upstream failure kinds counted in `robots_proxy_upstream_errors_total`: the RFC 9209
/// error types the proxy answers with.
pub const UPSTREAM_ERROR_KINDS: [&str; 9] = [
    "connection_read_timeout",
    "connection_refused",
    "connection_timeout",
    "destination_unavailable",
    "dns_error",
    "http_protocol_error",
    "http_response_incomplete",
    "http_response_timeout",
    "tls_certificate_error",
];

/// How many sites `robots_proxy_pacing_queue_depth` names, those with the longest queues; the
/// others are summed under `authority="other"`.
pub(crate) const QUEUE_DEPTH_SERIES: usize = 20;

/// The proxy's metrics and recent activity. One per process, shared by the proxy and the admin
/// listener.
pub struct Metrics {
    registry: Registry,
    /// `[decision][scheme]`, scheme 0 = http, 1 = https.
    requests: [[Counter; 2]; 6],
    upstream_errors: Family<Vec<(&'static str, &'static str)>, Counter>,
    open_connections: Gauge,
    decision_latency: LatencyHistogram,
    upstream_latency: LatencyHistogram,
    reloads_applied: Counter,
    reloads_refused: Counter,
    /// `config_last_reload_successful`: 1 at start and after an applied reload, 0 after a
    /// refused one (the file on disk is not what runs), until a reload is applied.
    last_reload_ok: Gauge,
    signing_refused: Counter,
    signing_unsigned: Counter,
    cosign_skipped: Family<Vec<(&'static str, &'static str)>, Counter>,
    would_block: report::WouldBlocks,
    charts: series::Charts,
    /// `exception_expiry_seconds{id}`, set at scrape time ([`Metrics::set_exception_expiry`]).
    exception_expiry: Family<Vec<(&'static str, String)>, Gauge>,
    /// `exceptions_expired`: entries of the configuration in force whose `expires` passed.
    exceptions_expired: Gauge,
    listening: AtomicBool,
    /// Stopping (`proxy.shutdown_delay`): still accepting, but `/readyz` answers 503.
    draining: AtomicBool,
    started: SystemTime,
    activity: Mutex<Activity>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Metrics for a proxy using `cache` and `audit`, whose own counters are read at scrape time.
    pub fn new(cache: Arc<dyn RobotsStore>, audit: AuditLog) -> Self {
        Self::with_pacer(cache, audit, None, None)
    }

    /// Like [`Metrics::new`], also reporting the pacer's statistics ([`robots_proxy_pace`]).
    /// With a fleet, also `fleet_up` and the Redis round trip.
    pub fn with_pacer(
        cache: Arc<dyn RobotsStore>,
        audit: AuditLog,
        pacer: Option<Arc<robots_proxy_pace::Pacer>>,
        fleet: Option<Arc<robots_proxy_fleet::Fleet>>,
    ) -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let requests_family = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, each once, by decision (allow, disallow, refuse, tunnel, throttle, \
             unavailable) and scheme",
            requests_family.clone(),
        );
        let requests = Decision::ALL.map(|d| {
            ["http", "https"].map(|scheme| {
                requests_family
                    .get_or_create_owned(&vec![("decision", d.as_str()), ("scheme", scheme)])
            })
        });
        let upstream_errors = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register(
            "upstream_errors",
            "Requests that could not be forwarded, by kind (the Proxy-Status error type)",
            upstream_errors.clone(),
        );
        for kind in UPSTREAM_ERROR_KINDS {
            // Created at zero, so that rate() works from the first error on.
            let _ = upstream_errors.get_or_create_owned(&vec![("kind", kind)]);
        }
        let open_connections = Gauge::default();
        registry.register(
            "open_connections",
            "Client connections open now",
            open_connections.clone(),
        );
        let decision_latency = LatencyHistogram::default();
        registry.register_with_unit(
            "decision_duration",
            "Time from receiving a request to its decision, robots.txt fetch included",
            Unit::Seconds,
            decision_latency.clone(),
        );
        let upstream_latency = LatencyHistogram::default();
        registry.register_with_unit(
            "upstream_duration",
            "Time from sending a request to its origin to receiving the response head",
            Unit::Seconds,
            upstream_latency.clone(),
        );
        let reloads = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register(
            "config_reloads",
            "Configuration reloads (SIGHUP), by result (applied, refused)",
            reloads.clone(),
        );
        let reloads_applied = reloads.get_or_create_owned(&vec![("result", "applied")]);
        let reloads_refused = reloads.get_or_create_owned(&vec![("result", "refused")]);
        let last_reload_ok = Gauge::default();
        last_reload_ok.set(1);
        registry.register(
            "config_last_reload_successful",
            "Whether the last configuration reload was applied (1; also at start) or refused (0: \
             the configuration on disk is not what runs, and a restart would fail with it)",
            last_reload_ok.clone(),
        );
        let signing_refused = Counter::default();
        registry.register(
            "signing_refused",
            "Requests not signed as the crawler whose token they named: with access.users_file, \
             their user is neither tied to that token nor listed in the identity's users",
            signing_refused.clone(),
        );
        let signing_unsigned = Counter::default();
        registry.register(
            "signing_unsigned",
            "Requests of a signing identity forwarded unsigned because none of its keys signs at \
             that moment (a gap between the keys' sign_from/sign_until windows)",
            signing_unsigned.clone(),
        );
        let cosign_skipped = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register(
            "cosign_skipped",
            "Requests whose client signature the proxy's could not cover (signing.client_signatures \
             = \"cosign\"), by reason: the proxy signed them on its own terms only",
            cosign_skipped.clone(),
        );
        let exception_expiry = Family::<Vec<(&'static str, String)>, Gauge>::default();
        registry.register_with_unit(
            "exception_expiry",
            "Time until each [[exceptions]] entry with an expiry expires, by id (negative once \
             expired)",
            Unit::Seconds,
            exception_expiry.clone(),
        );
        let exceptions_expired = Gauge::default();
        registry.register(
            "exceptions_expired",
            "[[exceptions]] entries of the configuration in force whose expires has passed: \
             loaded inert, they decide nothing (remove or renew them)",
            exceptions_expired.clone(),
        );
        registry.register(
            "build",
            "The running version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let would_block = report::WouldBlocks::register(&mut registry);
        let charts = series::Charts::register(&mut registry);
        registry.register_collector(Box::new(ScrapeTime { cache, audit, pacer, fleet }));
        Metrics {
            registry,
            requests,
            upstream_errors,
            open_connections,
            decision_latency,
            upstream_latency,
            reloads_applied,
            reloads_refused,
            last_reload_ok,
            signing_refused,
            signing_unsigned,
            cosign_skipped,
            would_block,
            charts,
            exception_expiry,
            exceptions_expired,
            listening: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            started: SystemTime::now(),
            activity: Mutex::new(Activity::default()),
        }
    }

    /// Sets `robots_proxy_exception_expiry_seconds{id}` to `(id, seconds)` for exactly the
    /// exceptions given (those of the configuration in force).
    pub fn set_exception_expiry(&self, expiry: &[(String, i64)]) {
        self.exception_expiry.clear();
        for (id, seconds) in expiry {
            self.exception_expiry.get_or_create(&vec![("id", id.clone())]).set(*seconds);
        }
        let expired = expiry.iter().filter(|(_, seconds)| *seconds <= 0).count();
        self.exceptions_expired.set(i64::try_from(expired).unwrap_or(i64::MAX));
    }

    /// Records how long a decision took since `started` (the request's arrival).
    pub fn decision_time(&self, started: std::time::Instant) {
        self.decision_latency.observe(started.elapsed());
    }

    /// Counts what was done with a request.
    pub fn count(&self, decision: Decision, scheme: Scheme) {
        let scheme = usize::from(scheme == Scheme::Https);
        self.requests[decision.index()][scheme].inc();
    }

    /// Requests counted so far with this decision and scheme.
    pub fn requests(&self, decision: Decision, scheme: Scheme) -> u64 {
        self.requests[decision.index()][usize::from(scheme == Scheme::Https)].get()
    }

    /// Counts an upstream failure of `kind` (one of [`UPSTREAM_ERROR_KINDS`]).
    pub fn upstream_error(&self, kind: &'static str) {
        self.upstream_errors.get_or_create(&vec![("kind", kind)]).inc();
    }

    /// Records the time to an origin's response head.
    pub fn upstream_round_trip(&self, elapsed: Duration) {
        self.upstream_latency.observe(elapsed);
    }

    /// Counts an open client connection until the returned guard is dropped.
    pub fn connection_opened(self: &Arc<Self>) -> ConnectionGuard {
        self.open_connections.inc();
        ConnectionGuard { metrics: self.clone() }
    }

    /// Client connections open now.
    pub fn open_connections(&self) -> i64 {
        self.open_connections.get()
    }

    /// Counts a configuration reload.
    pub fn reloaded(&self, applied: bool) {
        if applied {
            self.reloads_applied.inc();
        } else {
            self.reloads_refused.inc();
        }
        self.last_reload_ok.set(i64::from(applied));
    }

    /// Counts a request not signed as the crawler it named (`signing`); how many so far.
    pub fn signing_refused(&self) -> u64 {
        self.signing_refused.inc() + 1
    }

    /// Counts a request of an identity left unsigned for want of a key; how many so far.
    pub fn signing_unsigned(&self) -> u64 {
        self.signing_unsigned.inc() + 1
    }

    /// Counts a client signature not cosigned, for `reason`; how many so far for it.
    pub fn cosign_skipped(&self, reason: &'static str) -> u64 {
        self.cosign_skipped.get_or_create(&vec![("reason", reason)]).inc() + 1
    }

    /// Whether the proxy listener is accepting connections (for `/readyz`).
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// The proxy is stopping: `/readyz` answers 503 from now on, while the listeners may
    /// still accept for `proxy.shutdown_delay`.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Whether the proxy is stopping (see [`Metrics::set_draining`]).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Records whether the proxy listener accepts connections (`/readyz`).
    pub fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::Relaxed);
    }

    /// When these metrics were made (about when the process started).
    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// Requests allowed (forwarded or tunnelled) and blocked (everything else) since the
    /// start, both schemes together: what an instance announces to its fleet.
    pub fn totals(&self) -> (u64, u64) {
        let mut allowed = 0;
        let mut blocked = 0;
        for decision in Decision::ALL {
            let n = self.requests(decision, Scheme::Http) + self.requests(decision, Scheme::Https);
            match decision {
                Decision::Allow | Decision::Tunnel => allowed += n,
                _ => blocked += n,
            }
        }
        (allowed, blocked)
    }

    /// Blocks so far whose audit action is `cause` (`robots_proxy_blocks_total{cause}`; 0 for
    /// an action that is not a block). The admin page's refusal tiles count from these, so
    /// that "CONNECT refused" counts CONNECTs and not the requests the destination guard
    /// refused, which the `refuse` decision counts too.
    pub fn blocks_by_cause(&self, cause: robots_proxy_audit::AuditAction) -> u64 {
        self.charts.blocks_by_cause(cause)
    }

    /// Remembers a blocked request for the admin page and counts it by cause ([`series`]).
    /// Records of allowed requests, and of requests held back by pacing (429: they may come
    /// again), are ignored.
    pub fn blocked(&self, record: &AuditRecord) {
        self.charts.blocked(record);
        if record.outcome != robots_proxy_audit::AuditOutcome::Failure
            || record.action == robots_proxy_audit::AuditAction::Throttled
            || record.action == robots_proxy_audit::AuditAction::FleetUnavailable
        {
            return;
        }
        let mut activity = robots_proxy_sync::lock(&self.activity);
        activity.push(record);
    }

    /// What the admin page shows about blocks: the most recent first, and the top `top`
    /// authorities and tokens.
    pub fn blocks(&self, top: usize) -> BlockSummary {
        let activity = robots_proxy_sync::lock(&self.activity);
        BlockSummary {
            total: activity.total,
            recent: activity.recent.iter().rev().cloned().collect(),
            top_authorities: activity.authorities.top(top),
            top_tokens: activity.tokens.top(top),
        }
    }

    /// Counts a request forwarded in report-only mode that enforcement would have refused (its
    /// `would_block` record), for `robots_proxy_would_block_total` and the admin page.
    pub fn would_block(&self, record: &AuditRecord) {
        self.would_block.count(record);
    }

    /// What the admin page shows about would-blocks: the total and the top `top` tokens.
    pub fn would_blocks(&self, top: usize) -> WouldBlockSummary {
        self.would_block.summary(top)
    }

    /// The metrics in the OpenMetrics text format (what Prometheus scrapes).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail, and every metric encodes infallibly.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        out
    }
}

/// Decrements the open-connections gauge when the connection ends, however it ends.
#[derive(Debug)]
pub struct ConnectionGuard {
    metrics: Arc<Metrics>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.metrics.open_connections.dec();
    }
}

/// Counters kept elsewhere, read at scrape time.
struct ScrapeTime {
    cache: Arc<dyn RobotsStore>,
    audit: AuditLog,
    pacer: Option<Arc<robots_proxy_pace::Pacer>>,
    fleet: Option<Arc<robots_proxy_fleet::Fleet>>,
}

impl fmt::Debug for ScrapeTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScrapeTime").finish_non_exhaustive()
    }
}

impl ScrapeTime {
    fn counter(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        value: u64,
    ) -> Result<(), fmt::Error> {
        let metric = ConstCounter::new(value);
        metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
    }

    fn gauge(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        value: i64,
    ) -> Result<(), fmt::Error> {
        let metric = ConstGauge::new(value);
        metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
    }
}

impl Collector for ScrapeTime {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let store = self.cache.stats_now();
        let stats = store.counters;
        let gauge_value = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        Self::gauge(
            &mut encoder,
            "cache_entries",
            "Authorities whose robots.txt state is cached.",
            None,
            gauge_value(store.entries),
        )?;
        Self::gauge(
            &mut encoder,
            "cache_memory",
            "Memory the cached robots.txt entries weigh, against robots.cache_memory.",
            Some(&Unit::Bytes),
            gauge_value(store.memory_bytes),
        )?;
        Self::counter(
            &mut encoder,
            "cache_hits",
            "Lookups answered from the robots cache without waiting for a fetch.",
            stats.hits,
        )?;
        Self::counter(
            &mut encoder,
            "cache_misses",
            "Lookups that waited for a robots.txt fetch (first fetch or refetch).",
            stats.misses,
        )?;
        Self::counter(
            &mut encoder,
            "cache_refreshes",
            "robots.txt refetches started ahead of expiry (robots.refresh_ahead); no request \
             waits for them.",
            stats.refreshes,
        )?;
        {
            let metric_type = MetricType::Counter;
            let mut family = encoder.encode_descriptor(
                "robots_fetches",
                "robots.txt fetches completed, by outcome (2xx, 3xx, 4xx, 429, 5xx, network, \
                 redirect_limit).",
                None,
                metric_type,
            )?;
            for class in FetchClass::ALL {
                let labels = [("outcome", class.as_str())];
                let counter = ConstCounter::new(stats.fetches(class));
                counter.encode(family.encode_family(&labels)?)?;
            }
        }
        let audit = self.audit.stats();
        Self::counter(
            &mut encoder,
            "audit_records_written",
            "Audit records written to the audit log.",
            audit.records_written,
        )?;
        Self::counter(
            &mut encoder,
            "audit_records_failed",
            "Audit records lost because the audit log could not be written.",
            audit.records_lost,
        )?;
        Self::counter(
            &mut encoder,
            "audit_write_errors",
            "Failed opens, writes and syncs of the audit log.",
            audit.write_errors,
        )?;
        Self::counter(
            &mut encoder,
            "audit_file_replaced",
            "Times the audit log's path was found to lead to another file than the one being \
             written (deleted, or moved away without SIGHUP), and was opened again.",
            audit.file_replaced,
        )?;
        witness::encode(&mut encoder, &self.audit.witness_counts())?;
        let kept = self.cache.archive().map(|a| a.stats()).unwrap_or_default();
        archive::encode(&mut encoder, kept)?;
        if let Some(fleet) = &self.fleet {
            let up = ConstGauge::new(i64::from(fleet.is_up()));
            up.encode(encoder.encode_descriptor(
                "fleet_up",
                "1 while this instance shares robots.txt and the pace through Redis, 0 while \
                 Redis is out of reach.",
                None,
                up.metric_type(),
            )?)?;
            let rtt = ConstGauge::new(fleet.round_trip().as_secs_f64());
            rtt.encode(encoder.encode_descriptor(
                "fleet_redis_round_trip_seconds",
                "The last heartbeat's round trip to Redis.",
                None,
                rtt.metric_type(),
            )?)?;
            Self::counter(
                &mut encoder,
                "fleet_purge_gaps",
                "Times the purge subscription was lost (it ended, or did not answer a PING \
                 within fleet.timeout) and made again; every local robots.txt copy is dropped \
                 each time.",
                fleet.purge_gaps(),
            )?;
            {
                let mut family = encoder.encode_descriptor(
                    "fleet_records_refused",
                    "Shared records read from Redis and not used, by kind (robots, tdmrep, purge) \
                 and reason (unsealed, bad_seal, older): the instance fetched for itself.",
                    None,
                    MetricType::Counter,
                )?;
                for kind in robots_proxy_fleet::seal::Kind::ALL {
                    for why in robots_proxy_fleet::seal::Refusal::ALL {
                        let labels = [("kind", kind.as_str()), ("reason", why.as_str())];
                        let counter = ConstCounter::new(fleet.records_refused(kind, why));
                        counter.encode(family.encode_family(&labels)?)?;
                    }
                }
            }
            {
                let mut family = encoder.encode_descriptor(
                    "fleet_pace_restores",
                    "Times this instance put back into Redis the pace it knows (the starts it \
                     made, the concurrency slots it holds) after the heartbeat found the store's \
                     state lost or Redis back after an outage, by outcome (whole, cut_short: \
                     Redis out of reach again meanwhile).",
                    None,
                    MetricType::Counter,
                )?;
                for (outcome, whole) in [("whole", true), ("cut_short", false)] {
                    let counter = ConstCounter::new(fleet.pace_restores(whole));
                    counter.encode(family.encode_family(&[("outcome", outcome)])?)?;
                }
            }
        }
        if let Some(pacer) = &self.pacer {
            let p = pacer.stats();
            Self::counter(
                &mut encoder,
                "pacing_delayed",
                "Requests that waited for a site's pace (Crawl-delay, rate or concurrency).",
                p.delayed,
            )?;
            let waited = ConstCounter::new(p.total_delay.as_secs_f64());
            waited.encode(encoder.encode_descriptor(
                "pacing_delay_seconds",
                "Time requests waited for a site's pace, all together, in seconds.",
                None,
                waited.metric_type(),
            )?)?;
            Self::counter(
                &mut encoder,
                "pacing_refused",
                "Requests answered 429 for pace (queue full or wait beyond pacing.max_wait).",
                p.refused,
            )?;
            let mut family = encoder.encode_descriptor(
                "pacing_queue_depth",
                "Requests waiting for their site's pace now: the sites with the longest queues, \
                 each by authority, the rest together as authority=\"other\".",
                None,
                MetricType::Gauge,
            )?;
            // Hostnames are the client's to choose: a series for each would let clients grow
            // the scrape without bound. The longest queues get one each; the rest are summed.
            let mut depths = pacer.queue_depths();
            depths.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let other: usize = depths.iter().skip(QUEUE_DEPTH_SERIES).map(|(_, d)| d).sum();
            let named = depths.iter().take(QUEUE_DEPTH_SERIES);
            let named = named.map(|(authority, depth)| (authority.to_string(), *depth));
            let other = (depths.len() > QUEUE_DEPTH_SERIES).then(|| ("other".to_owned(), other));
            for (name, depth) in named.chain(other) {
                let labels = [("authority", name.as_str())];
                let gauge = ConstGauge::new(i64::try_from(depth).unwrap_or(i64::MAX));
                gauge.encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_in_the_text() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(10));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(100));
        assert_eq!(h.count(), 3);
        let mut registry = Registry::default();
        registry.register_with_unit("t", "test", Unit::Seconds, h.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("# TYPE t_seconds histogram"), "{text}");
        assert!(text.contains("t_seconds_count 3"), "{text}");
        assert!(text.contains("t_seconds_bucket{le=\"0.00005\"} 1"), "{text}");
        assert!(text.contains("t_seconds_bucket{le=\"0.0025\"} 1"), "{text}");
        assert!(text.contains("t_seconds_bucket{le=\"0.005\"} 2"), "{text}");
        assert!(text.contains("t_seconds_bucket{le=\"30.0\"} 2"), "{text}");
        assert!(text.contains("t_seconds_bucket{le=\"+Inf\"} 3"), "{text}");
        assert!(text.contains("t_seconds_sum 100.00301"), "{text}");
    }
}
