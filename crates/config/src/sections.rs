//! The sections the configuration itself owns, for the listeners and connections of the
//! binary: `[proxy]`, `[admin]`, `[upstream]` and `[log]`. Each is made from its raw form by
//! `TryFrom`, which checks its bounds and rules; the rules between sections are in
//! `super::across`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use robots_proxy_units::bounds::{because, count, duration, wide, Bound, DAY, POSITIVE, SECOND};
use robots_proxy_units::{raw_section, Problems};

/// `[proxy]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct ProxySection {
    /// Address of the proxy listener.
    pub listen: SocketAddr,
    /// The pseudonym in the `Via` header added to forwarded messages.
    pub via: String,
    /// How long to wait for a client's request headers.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// On SIGTERM / SIGINT, how long in-flight requests may take to finish.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// On SIGTERM / SIGINT, how long the listeners keep accepting, with `/readyz` answering
    /// 503, before they close (load balancers and Kubernetes endpoints take the instance out
    /// meanwhile); `shutdown_grace` starts after it.
    #[serde(with = "humantime_serde")]
    pub shutdown_delay: Duration,
    /// Address of the optional TLS listener (`https://` proxy URLs): the same proxy, reached
    /// over TLS, HTTP/1.1 or HTTP/2 by ALPN.
    pub tls_listen: Option<SocketAddr>,
    /// The TLS listener's certificate chain (PEM, leaf first).
    pub tls_certificate: Option<PathBuf>,
    /// The TLS listener's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub tls_key: Option<PathBuf>,
}

impl Default for ProxySection {
    fn default() -> Self {
        ProxySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            via: "robots-proxy".to_owned(),
            header_read_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
            shutdown_delay: Duration::ZERO,
            tls_listen: None,
            tls_certificate: None,
            tls_key: None,
        }
    }
}

/// `[admin]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct AdminSection {
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`, the status page). It
    /// has no authentication: keep it on loopback or a private network.
    pub listen: SocketAddr,
    /// Names (or addresses) the listener answers for besides `localhost` and the address a
    /// client connected to: a request with another `Host` gets 421 (DNS rebinding).
    pub hosts: Vec<String>,
    /// Client addresses allowed to connect (default: loopback only); others are disconnected
    /// at once.
    pub allow_clients: Vec<robots_proxy_access::IpRange>,
    /// Most connections open at once (16 per client at most); more are closed at once.
    pub max_connections: usize,
    /// Time between two samples of the status page's charts, which keep 360 samples (one
    /// hour at the default 10 s).
    #[serde(with = "humantime_serde")]
    pub chart_interval: Duration,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 9090)),
            hosts: Vec::new(),
            allow_clients: robots_proxy_access::AccessSection::default().allow_clients,
            max_connections: 64,
            chart_interval: Duration::from_secs(10),
        }
    }
}

/// `[upstream]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct UpstreamSection {
    /// Time allowed to open a TCP connection to an origin.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Time allowed from sending a request to receiving the response headers.
    #[serde(with = "humantime_serde")]
    pub response_timeout: Duration,
    /// Longest wait for the next piece of a response body; then the response is cut off and
    /// the origin connection dropped.
    #[serde(with = "humantime_serde")]
    pub body_idle_timeout: Duration,
    /// Idle pooled connections are closed after this long.
    #[serde(with = "humantime_serde")]
    pub pool_idle_timeout: Duration,
    /// Most idle pooled connections kept per origin.
    pub pool_max_idle_per_host: usize,
    /// Most idle pooled connections to `http` origins kept in all, whatever the number of
    /// origins: past it the longest idle is closed.
    pub pool_max_idle: usize,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        UpstreamSection {
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(60),
            body_idle_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_max_idle_per_host: 256,
            pool_max_idle: 16_384,
        }
    }
}

/// Format of operational logs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct LogSection {
    /// `text` or `json`.
    pub format: LogFormat,
    /// A tracing filter (`info`, `robots_proxy=debug`); `RUST_LOG` overrides it.
    pub level: String,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection { format: LogFormat::Text, level: "info".to_owned() }
    }
}

raw_section!(ProxySection, RawProxySection, "proxy");
raw_section!(AdminSection, RawAdminSection, "admin");
raw_section!(UpstreamSection, RawUpstreamSection, "upstream");
raw_section!(LogSection, RawLogSection, "log");

/// The bounds of `[proxy]`.
pub(crate) const PROXY_BOUNDS: &[Bound<ProxySection>] = &[
    // A client needs some time to send a head: below a second no request could be served.
    duration("proxy.header_read_timeout", |c| c.header_read_timeout, SECOND, DAY),
    duration("proxy.shutdown_grace", |c| c.shutdown_grace, Duration::ZERO, DAY),
    duration("proxy.shutdown_delay", |c| c.shutdown_delay, Duration::ZERO, DAY),
];

/// The bounds of `[upstream]`.
pub(crate) const UPSTREAM_BOUNDS: &[Bound<UpstreamSection>] = &[
    duration("upstream.connect_timeout", |c| c.connect_timeout, POSITIVE, DAY),
    duration("upstream.response_timeout", |c| c.response_timeout, POSITIVE, DAY),
    duration("upstream.body_idle_timeout", |c| c.body_idle_timeout, POSITIVE, DAY),
    duration("upstream.pool_idle_timeout", |c| c.pool_idle_timeout, POSITIVE, DAY),
    count("upstream.pool_max_idle_per_host", |c| wide(c.pool_max_idle_per_host), 0, 65_536),
    count("upstream.pool_max_idle", |c| wide(c.pool_max_idle), 0, 1_048_576),
];

/// The bounds of `[admin]`.
pub(crate) const ADMIN_BOUNDS: &[Bound<AdminSection>] = &[
    count("admin.max_connections", |c| wide(c.max_connections), 1, 65_536),
    because(
        duration(
            "admin.chart_interval",
            |c| c.chart_interval,
            Duration::from_millis(100),
            Duration::from_secs(600),
        ),
        "the charts keep 360 samples: one hour at the default 10s, and at most 60 hours",
    ),
];

impl TryFrom<RawProxySection> for ProxySection {
    type Error = Problems;

    /// The bounds, the `Via` pseudonym, and the TLS listener's files. Which ports the
    /// listeners share is a rule between sections (`super::across`).
    fn try_from(raw: RawProxySection) -> Result<Self, Problems> {
        let p = raw.0;
        let mut problems = Problems::new();
        problems.bounds(PROXY_BOUNDS, &p);
        problems.need(is_token(&p.via), "proxy.via", || {
            format!(
                "{:?} is not a valid Via pseudonym: use letters, digits and !#$%&'*+-.^_`|~ only",
                p.via
            )
        });
        if p.tls_listen.is_some() {
            problems.need(
                p.tls_certificate.is_some() && p.tls_key.is_some(),
                "proxy.tls_listen",
                || "needs proxy.tls_certificate and proxy.tls_key (PEM files)".into(),
            );
        } else {
            let key =
                if p.tls_certificate.is_some() { "proxy.tls_certificate" } else { "proxy.tls_key" };
            problems.need(p.tls_certificate.is_none() && p.tls_key.is_none(), key, || {
                "the TLS listener's files are set but proxy.tls_listen is not".into()
            });
        }
        problems.or_build(|| p)
    }
}

impl TryFrom<RawAdminSection> for AdminSection {
    type Error = Problems;

    /// The bounds and the host names.
    fn try_from(raw: RawAdminSection) -> Result<Self, Problems> {
        let a = raw.0;
        let mut problems = Problems::new();
        problems.bounds(ADMIN_BOUNDS, &a);
        for entry in &a.hosts {
            let ok = robots_proxy_authority::host_and_port(entry).is_some_and(|(name, _)| {
                name.parse::<std::net::IpAddr>().is_ok()
                    || name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
            });
            problems.need(ok, "admin.hosts", || {
                format!("{entry:?} is not a host name or IP address, with an optional :port")
            });
        }
        problems.or_build(|| a)
    }
}

impl TryFrom<RawUpstreamSection> for UpstreamSection {
    type Error = Problems;

    /// The bounds.
    fn try_from(raw: RawUpstreamSection) -> Result<Self, Problems> {
        let mut problems = Problems::new();
        problems.bounds(UPSTREAM_BOUNDS, &raw.0);
        problems.or_build(|| raw.0)
    }
}

impl TryFrom<RawLogSection> for LogSection {
    type Error = Problems;

    /// The level, a tracing filter.
    fn try_from(raw: RawLogSection) -> Result<Self, Problems> {
        let log = raw.0;
        let mut problems = Problems::new();
        problems.need(!log.level.trim().is_empty(), "log.level", || {
            "must not be empty (an empty filter would cut logging to errors only); write a level \
             like \"info\""
                .into()
        });
        if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&log.level) {
            problems.push("log.level", format!("{:?} is not a valid filter: {e}", log.level));
        }
        problems.or_build(|| log)
    }
}

/// RFC 9110 §5.6.2 `token`: what a `Via` pseudonym must be.
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
