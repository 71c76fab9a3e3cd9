//! The proxy's configuration: built-in defaults, a TOML file, `ROBOTS_PROXY_*` environment
//! variables and command-line flags, in that order of precedence (later wins).
//!
//! Every key is documented, with its default, in `config/robots-proxy.toml`.
//!
//! SKELETON: the section structs below are the contract between modules. Loading (figment),
//! validation and error messages are to be completed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where state lives (audit log by default, later the CA).
    pub state_dir: PathBuf,
    /// The proxy listener.
    pub proxy: ProxySection,
    /// Connections to origins.
    pub upstream: UpstreamSection,
    /// Fetching and caching robots.txt.
    pub robots: RobotsSection,
    /// How the product token is found.
    pub policy: PolicySection,
    /// The audit log of decisions.
    pub audit: AuditSection,
    /// Operational logs.
    pub log: LogSection,
    /// HTTPS through CONNECT.
    pub https: crate::tls::HttpsSection,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            state_dir: PathBuf::from("./state"),
            proxy: ProxySection::default(),
            upstream: UpstreamSection::default(),
            robots: RobotsSection::default(),
            policy: PolicySection::default(),
            audit: AuditSection::default(),
            log: LogSection::default(),
            https: crate::tls::HttpsSection::default(),
        }
    }
}

/// `[proxy]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySection {
    /// Address of the proxy listener.
    pub listen: SocketAddr,
    /// The pseudonym in the `Via` header added to forwarded messages.
    pub via: String,
    /// How long to wait for a client's request headers.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
}

impl Default for ProxySection {
    fn default() -> Self {
        ProxySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            via: "robots-proxy".to_owned(),
            header_read_timeout: Duration::from_secs(30),
        }
    }
}

/// `[upstream]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamSection {
    /// Time allowed to open a TCP connection to an origin.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Time allowed from sending a request to receiving the response headers.
    #[serde(with = "humantime_serde")]
    pub response_timeout: Duration,
    /// Idle pooled connections are closed after this long.
    #[serde(with = "humantime_serde")]
    pub pool_idle_timeout: Duration,
    /// Most idle pooled connections kept per origin.
    pub pool_max_idle_per_host: usize,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        UpstreamSection {
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_max_idle_per_host: 64,
        }
    }
}

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
}

impl Default for RobotsSection {
    fn default() -> Self {
        RobotsSection {
            user_agent: concat!("robots-proxy/", env!("CARGO_PKG_VERSION")).to_owned(),
            connect_timeout: Duration::from_secs(5),
            fetch_timeout: Duration::from_secs(20),
            max_body: ByteSize(500 * 1024),
            max_redirects: 5,
            max_age: Duration::from_secs(24 * 3600),
            min_age: Duration::from_secs(60),
            give_up_after: Duration::from_secs(30 * 24 * 3600),
            retry_initial: Duration::from_secs(10),
            retry_max: Duration::from_secs(3600),
            cache_memory: ByteSize(256 * 1024 * 1024),
        }
    }
}

/// Where the product token comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// The request header named by `policy.token_header`, stripped before forwarding.
    Header,
    /// The User-Agent header, by the engine's heuristic.
    UserAgent,
    /// `policy.default_token`.
    Default,
}

/// `[policy]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySection {
    /// Sources of the product token, tried in order; the first that gives one wins.
    pub token_sources: Vec<TokenSource>,
    /// The request header that names the token explicitly.
    pub token_header: String,
    /// The token used when no other source gives one (none: only `*` groups apply).
    pub default_token: Option<String>,
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            token_sources: vec![TokenSource::Header, TokenSource::UserAgent, TokenSource::Default],
            token_header: "X-Robots-Product-Token".to_owned(),
            default_token: None,
        }
    }
}

/// When the audit log is synced to disk.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FsyncPolicy {
    /// Never: the OS decides.
    Never,
    /// Every `audit.fsync_interval`.
    Interval,
    /// After every batch of records written.
    Always,
}

/// `[audit]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuditSection {
    /// The audit log file (JSON lines). Relative paths are under `state_dir`.
    pub path: PathBuf,
    /// Record every decision, not only blocks.
    pub all_decisions: bool,
    /// When to fsync.
    pub fsync: FsyncPolicy,
    /// The interval for `fsync = "interval"`.
    #[serde(with = "humantime_serde")]
    pub fsync_interval: Duration,
}

impl Default for AuditSection {
    fn default() -> Self {
        AuditSection {
            path: PathBuf::from("audit.jsonl"),
            all_decisions: false,
            fsync: FsyncPolicy::Interval,
            fsync_interval: Duration::from_secs(1),
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
#[serde(default, deny_unknown_fields)]
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

/// A size in bytes, written as a number or the human way (`"500KiB"`, `"256MiB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u64")]
pub struct ByteSize(pub u64);

impl From<ByteSize> for u64 {
    fn from(b: ByteSize) -> u64 {
        b.0
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size like \"500KiB\""))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kib" | "k" => 1 << 10,
            "mib" | "m" => 1 << 20,
            "gib" | "g" => 1 << 30,
            "kb" => 1000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            other => {
                return Err(format!("unknown size unit {other:?} in {s:?} (use B, KiB, MiB, GiB)"))
            }
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("{s:?} is too large"))
    }
}
