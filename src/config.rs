//! The proxy's configuration: built-in defaults, a TOML file, `ROBOTS_PROXY_*` environment
//! variables and command-line flags, in that order of precedence (later wins).
//!
//! Every key is documented, with its default, in `config/robots-proxy.toml`.
//!
//! # Sources
//!
//! 1. **Defaults**: [`Config::default()`].
//! 2. **File**: the TOML file given with `--config FILE`. A file that was named but cannot be
//!    read is an error; without one only the other sources apply. Unknown keys are errors.
//! 3. **Environment**: `ROBOTS_PROXY_<SECTION>__<KEY>` (two underscores between section and key),
//!    for example `ROBOTS_PROXY_PROXY__LISTEN=127.0.0.1:9000`, `ROBOTS_PROXY_ROBOTS__MAX_AGE=12h`;
//!    top-level keys have no section: `ROBOTS_PROXY_STATE_DIR=/var/lib/robots-proxy`.
//!    * Variables without the `ROBOTS_PROXY_` prefix are never looked at.
//!    * Every variable *with* the prefix must name a key ([`CONFIG_FILE_ENV`] excepted): a typo
//!      such as `ROBOTS_PROXY_PROXY__LISTN` stops start-up, naming the variable and the key it
//!      probably meant, rather than silently leaving the default in force.
//!    * Values are read according to the key's type, not guessed from their look: a text key
//!      takes the value verbatim (`ROBOTS_PROXY_ROBOTS__USER_AGENT=12345` is the string
//!      `"12345"`), a number key takes digits, a boolean key `true` or `false`, a list key a
//!      comma-separated list (`ROBOTS_PROXY_POLICY__TOKEN_SOURCES=header,default`), a decimal
//!      key a decimal number (`ROBOTS_PROXY_PACING__DEFAULT_RPS=2.5`), and an empty value
//!      unsets an optional key (`ROBOTS_PROXY_POLICY__DEFAULT_TOKEN=`). A list of tables
//!      (`pacing.sites`) cannot be written in one variable: it is set in the file only.
//! 4. **Command line**: [`Overrides`], filled by the CLI.
//!
//! After the sources are merged, [`Config`] is validated as a whole (`robots.min_age` ≤
//! `robots.max_age`, …). Every problem found is reported at once, each naming the key and where
//! its value came from ([`Origin`]), so a bad deployment is fixed in one round.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use figment::error::{Actual, Kind};
use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Empty, Map, Num, Tag, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::{Deserialize, Serialize};

use crate::robots::ProductToken;

// Sections that live with their owners, re-exported so that `config::X` names every section.
pub use crate::audit::{AuditSection, FsyncPolicy};
pub use crate::cache::RobotsSection;
pub use crate::units::ByteSize;

/// The prefix of every configuration environment variable.
pub const ENV_PREFIX: &str = "ROBOTS_PROXY_";

/// The environment variable the CLI may read the configuration file's path from
/// (`#[arg(long, env = CONFIG_FILE_ENV)]`). It has the [`ENV_PREFIX`] but names no key, so the
/// loader skips it instead of reporting it as unknown.
pub const CONFIG_FILE_ENV: &str = "ROBOTS_PROXY_CONFIG";

/// Separates the section from the key in an environment variable's name. One underscore cannot
/// do it: keys contain underscores themselves (`max_age`).
const ENV_SEPARATOR: &str = "__";

/// The name figment records for values that came from the environment.
const ENV_PROVIDER: &str = "environment";

/// Where the configuration comes from. Built by the CLI, or by hand in tests, so that loading
/// never reads the process environment behind the caller's back.
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    /// The TOML file (`--config`). `None`: defaults, environment and overrides only.
    pub file: Option<PathBuf>,
    /// Environment variables as `(name, value)` pairs. Only names starting with
    /// [`ENV_PREFIX`] are read; the others may be passed in and are ignored.
    pub env: Vec<(String, String)>,
    /// Command-line flags; they win over everything else.
    pub overrides: Overrides,
}

impl ConfigSources {
    /// Sources with the `ROBOTS_PROXY_*` variables of this process.
    ///
    /// Values that are not valid UTF-8 are converted lossily (invalid bytes become U+FFFD), which
    /// the validation then reports where it matters (header values, tokens).
    pub fn from_process_env(file: Option<PathBuf>, overrides: Overrides) -> Self {
        let env = std::env::vars_os()
            .filter_map(|(name, value)| {
                let name = name.into_string().ok()?;
                name.starts_with(ENV_PREFIX).then(|| (name, value.to_string_lossy().into_owned()))
            })
            .collect();
        ConfigSources { file, env, overrides }
    }
}

/// Values given on the command line. `None` leaves the value from the other sources in force.
///
/// These are typed already (clap parsed them), so they cannot fail to deserialize; they are
/// applied after the other sources are merged and before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `state_dir`.
    pub state_dir: Option<PathBuf>,
    /// `proxy.listen`.
    pub listen: Option<SocketAddr>,
    /// `admin.listen`.
    pub admin_listen: Option<SocketAddr>,
    /// `audit.path`.
    pub audit_path: Option<PathBuf>,
    /// `log.level`.
    pub log_level: Option<String>,
    /// `log.format`.
    pub log_format: Option<LogFormat>,
}

impl Overrides {
    /// Applies the overrides to `config`; returns the keys that were overridden.
    fn apply(&self, config: &mut Config) -> BTreeSet<&'static str> {
        let mut keys = BTreeSet::new();
        if let Some(dir) = &self.state_dir {
            config.state_dir = dir.clone();
            keys.insert("state_dir");
        }
        if let Some(listen) = self.listen {
            config.proxy.listen = listen;
            keys.insert("proxy.listen");
        }
        if let Some(listen) = self.admin_listen {
            config.admin.listen = listen;
            keys.insert("admin.listen");
        }
        if let Some(path) = &self.audit_path {
            config.audit.path = path.clone();
            keys.insert("audit.path");
        }
        if let Some(level) = &self.log_level {
            config.log.level = level.clone();
            keys.insert("log.level");
        }
        if let Some(format) = self.log_format {
            config.log.format = format;
            keys.insert("log.format");
        }
        keys
    }
}

/// Loads the configuration from `sources`, merges it and validates it.
///
/// On failure every problem found is returned, not only the first: unknown keys and variables,
/// values of the wrong type, and values that are individually fine but wrong together.
pub fn load(sources: ConfigSources) -> Result<Config, ConfigError> {
    let schema = Schema::new();
    let mut problems = Vec::new();

    let mut figment = Figment::from(Serialized::defaults(Config::default()));
    if let Some(path) = &sources.file {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::ReadFile { path: path.clone(), source })?;
        figment = figment.merge(FileProvider { path: path.clone(), text });
    }
    let env = EnvProvider::new(&sources.env, &schema, &mut problems);
    figment = figment.merge(env.clone());

    let mut config = match figment.extract::<Config>() {
        Ok(config) => config,
        Err(error) => {
            problems.extend(extraction_problems(error, &figment, &env));
            return Err(ConfigError::Invalid(problems));
        }
    };
    let overridden = sources.overrides.apply(&mut config);
    for (key, message) in config.check() {
        let origin = if overridden.contains(key) {
            Some(Origin::CommandLine)
        } else {
            figment.find_metadata(key).map(|m| Origin::from_metadata(m, Some(key), &env))
        };
        problems.push(Problem { key: Some(key.to_owned()), origin, message });
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// Every key that fails to deserialize, not only the first.
///
/// serde stops at the first error, so each bad key is removed from the merged values (leaving
/// its default in force) and the rest deserialized again, until nothing fails. Origins are looked
/// up in the original `figment`, which knows which source supplied each key.
fn extraction_problems(
    first: figment::Error,
    figment: &Figment,
    env: &EnvProvider,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    // A source that could not be read at all (a TOML syntax error) leaves nothing to retry.
    let Ok(Value::Dict(_, mut merged)) = figment.extract::<Value>() else {
        problems.extend(first.into_iter().map(|e| Problem::from_figment(&e, figment, env)));
        return problems;
    };
    let mut error = first;
    // Each round removes one key, so this ends; the bound is a guard, far above the key count.
    for _ in 0..256 {
        let mut removed = false;
        for e in error {
            let problem = Problem::from_figment(&e, figment, env);
            if let Some(key) = &problem.key {
                let path: Vec<&str> = key.split('.').collect();
                // The key itself, or failing that the table holding it.
                removed |= (1..=path.len()).rev().any(|n| remove(&mut merged, &path[..n]));
            }
            problems.push(problem);
        }
        if !removed {
            break;
        }
        let retry = Figment::from(Serialized::defaults(Value::Dict(Tag::Default, merged.clone())));
        match retry.extract::<Config>() {
            Ok(_) => break,
            Err(next) => error = next,
        }
    }
    problems
}

fn remove(dict: &mut Dict, path: &[&str]) -> bool {
    match path {
        [] => false,
        [last] => dict.remove(*last).is_some(),
        [first, rest @ ..] => match dict.get_mut(*first) {
            Some(Value::Dict(_, inner)) => remove(inner, rest),
            _ => false,
        },
    }
}

/// The effective configuration as TOML, every key included except unset optional ones, in the
/// format `config/robots-proxy.toml` uses, so the output can be used as a configuration file.
pub fn render(config: &Config) -> String {
    // Serialising cannot fail: every field is a string, number, bool, list or table, and the
    // tables come after the plain values in `Config`. Should that ever change, say so in the
    // output rather than panicking.
    toml::to_string(config)
        .unwrap_or_else(|e| format!("# the configuration cannot be shown as TOML: {e}\n"))
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration file that was named could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// One or more keys are unknown or have bad values.
    #[error("{}", ProblemList(.0))]
    Invalid(Vec<Problem>),
}

impl ConfigError {
    /// The individual problems (empty for [`ConfigError::ReadFile`]).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid(problems) => problems,
            ConfigError::ReadFile { .. } => &[],
        }
    }
}

struct ProblemList<'a>(&'a [Problem]);

impl fmt::Display for ProblemList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => f.write_str("invalid configuration"),
            [one] => write!(f, "invalid configuration: {one}"),
            many => {
                write!(f, "invalid configuration ({} problems):", many.len())?;
                for problem in many {
                    write!(f, "\n  {problem}")?;
                }
                Ok(())
            }
        }
    }
}

/// One thing wrong with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key, dotted (`robots.max_age`); `None` when the problem is not about one key (a TOML
    /// syntax error).
    pub key: Option<String>,
    /// Where the bad value came from, when known.
    pub origin: Option<Origin>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.key, &self.origin) {
            (Some(key), Some(origin)) => write!(f, "{key} (from {origin}): {}", self.message),
            (Some(key), None) => write!(f, "{key}: {}", self.message),
            (None, Some(origin)) => write!(f, "{origin}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

/// Where a configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The built-in default.
    Default,
    /// The configuration file.
    File(PathBuf),
    /// An environment variable; its name when known.
    Env(Option<String>),
    /// A command-line flag.
    CommandLine,
}

impl Origin {
    fn from_metadata(metadata: &Metadata, key: Option<&str>, env: &EnvProvider) -> Origin {
        if metadata.name == ENV_PROVIDER {
            return Origin::Env(key.and_then(|k| env.names.get(k)).cloned());
        }
        match metadata.source.as_ref().and_then(|s| s.file_path()) {
            Some(path) => Origin::File(path.to_owned()),
            None => Origin::Default,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("the built-in default"),
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::Env(Some(name)) => write!(f, "environment variable {name}"),
            Origin::Env(None) => write!(f, "environment variables {ENV_PREFIX}*"),
            Origin::CommandLine => f.write_str("the command line"),
        }
    }
}

impl Problem {
    fn from_figment(error: &figment::Error, figment: &Figment, env: &EnvProvider) -> Problem {
        // A list item's index is not a key anyone writes: report the list
        // (`policy.token_sources`, not `policy.token_sources.1`).
        let mut path: Vec<String> = error
            .path
            .iter()
            .take_while(|p| !p.bytes().all(|b| b.is_ascii_digit()))
            .cloned()
            .collect();
        let message = match &error.kind {
            Kind::UnknownField(field, expected) => {
                // figment's path ends with the unknown key already; make sure it does.
                if path.last() != Some(field) {
                    path.push(field.clone());
                }
                let parent = path[..path.len() - 1].join(".");
                unknown_key_message(&parent, field, expected)
            }
            Kind::UnknownVariant(found, expected) => {
                format!("unknown value {found:?}; expected one of: {}", expected.join(", "))
            }
            Kind::InvalidValue(Actual::Str(text), expected) if expected.contains("duration") => {
                // humantime_serde reports only "expected a duration"; humantime says why.
                let why = humantime::parse_duration(text).err().map(|e| format!(": {e}"));
                format!(
                    "{text:?} is not a duration{}; write durations like \"30s\", \"5m\", \"24h\"",
                    why.unwrap_or_default()
                )
            }
            Kind::InvalidType(_, expected) if expected.contains("duration") => format!(
                "{}; write durations as strings with a unit, like \"30s\", \"5m\", \"24h\"",
                error.kind
            ),
            other => other.to_string(),
        };
        let key = (!path.is_empty()).then(|| path.join("."));
        // The metadata of the value at the key names the source that supplied it; the error's
        // own metadata is the fallback (for a file that does not parse, say).
        let metadata =
            key.as_deref().and_then(|k| figment.find_metadata(k)).or(error.metadata.as_ref());
        let origin = metadata.map(|m| Origin::from_metadata(m, key.as_deref(), env));
        Problem { key, origin, message }
    }
}

fn unknown_key_message(parent: &str, field: &str, expected: &[&str]) -> String {
    let mut message = "unknown key".to_owned();
    if let Some(best) = closest(field, expected.iter().copied()) {
        let best = if parent.is_empty() { best.to_owned() } else { format!("{parent}.{best}") };
        message.push_str(&format!("; did you mean {best}?"));
    }
    if !expected.is_empty() {
        let scope = if parent.is_empty() {
            "at the top level".to_owned()
        } else {
            format!("in [{parent}]")
        };
        message.push_str(&format!(" (known keys {scope}: {})", expected.join(", ")));
    }
    message
}

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where state lives (audit log by default, later the CA).
    pub state_dir: PathBuf,
    /// The proxy listener.
    pub proxy: ProxySection,
    /// The admin listener: metrics, health, the status page.
    pub admin: AdminSection,
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
    /// Politeness: Crawl-delay and a pace per authority.
    pub pacing: crate::pacing::PacingSection,
    /// AI usage preferences for crawlers' purposes.
    pub usage: crate::usage::UsageSection,
    /// Who may use the proxy and where it may connect (client access list, proxy
    /// authentication, destination guard).
    pub access: crate::access::AccessSection,
    /// Connection and request limits.
    pub limits: crate::limits::LimitsSection,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            state_dir: PathBuf::from("./state"),
            proxy: ProxySection::default(),
            admin: AdminSection::default(),
            upstream: UpstreamSection::default(),
            robots: RobotsSection::default(),
            policy: PolicySection::default(),
            audit: AuditSection::default(),
            log: LogSection::default(),
            https: crate::tls::HttpsSection::default(),
            pacing: crate::pacing::PacingSection::default(),
            usage: crate::usage::UsageSection::default(),
            access: crate::access::AccessSection::default(),
            limits: crate::limits::LimitsSection::default(),
        }
    }
}

impl Config {
    /// The destination guard of this configuration: `access.allow_destinations`, and
    /// `proxy.listen` and `admin.listen` as the proxy's own addresses (the admin listener has
    /// no authentication: clients must not reach it through the proxy).
    pub fn destination_guard(&self) -> crate::guard::DestinationGuard {
        crate::guard::DestinationGuard::new(
            &self.access.allow_destinations,
            &[self.proxy.listen, self.admin.listen],
        )
    }

    /// The audit log's path: `audit.path`, under `state_dir` when relative.
    pub fn audit_path(&self) -> PathBuf {
        // `Path::join` with an absolute path gives that path, which is what an absolute
        // `audit.path` means.
        self.state_dir.join(&self.audit.path)
    }

    /// Checks the rules that serde cannot express (ranges, relations between keys, header and
    /// token syntax). [`load`] calls this; it is public for configurations built in code.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let problems: Vec<Problem> = self
            .check()
            .into_iter()
            .map(|(key, message)| Problem { key: Some(key.to_owned()), origin: None, message })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Every rule broken, as (key, message).
    fn check(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        let mut need = |ok: bool, key: &'static str, message: &dyn Fn() -> String| {
            if !ok {
                bad.push((key, message()));
            }
        };
        let nonzero = |d: Duration| !d.is_zero();
        let zero_msg = || "must be longer than zero".to_owned();

        need(!self.state_dir.as_os_str().is_empty(), "state_dir", &|| "must not be empty".into());

        let h = &self.https;
        need(!h.connect_ports.is_empty(), "https.connect_ports", &|| {
            "must list at least one port (use https.mode = \"reject\" to refuse CONNECT)".into()
        });
        need(!h.connect_ports.contains(&0), "https.connect_ports", &|| "0 is not a port".into());
        need(nonzero(h.tunnel_idle_timeout), "https.tunnel_idle_timeout", &zero_msg);
        need(h.ca_cert.is_some() == h.ca_key.is_some(), "https.ca_cert", &|| {
            "https.ca_cert and https.ca_key must be set together".into()
        });

        let p = &self.proxy;
        need(is_token(&p.via), "proxy.via", &|| {
            format!(
                "{:?} is not a valid Via pseudonym: use letters, digits and !#$%&'*+-.^_`|~ only",
                p.via
            )
        });
        need(nonzero(p.header_read_timeout), "proxy.header_read_timeout", &zero_msg);
        need(self.admin.listen != p.listen || p.listen.port() == 0, "admin.listen", &|| {
            format!("{} is also proxy.listen; the two need their own ports", p.listen)
        });

        let u = &self.upstream;
        need(nonzero(u.connect_timeout), "upstream.connect_timeout", &zero_msg);
        need(nonzero(u.response_timeout), "upstream.response_timeout", &zero_msg);
        need(nonzero(u.body_idle_timeout), "upstream.body_idle_timeout", &zero_msg);
        need(nonzero(u.pool_idle_timeout), "upstream.pool_idle_timeout", &zero_msg);

        let r = &self.robots;
        need(!r.user_agent.trim().is_empty(), "robots.user_agent", &|| {
            "must not be empty: origins see it on every robots.txt fetch".into()
        });
        need(
            r.user_agent.trim().is_empty() || http::HeaderValue::from_str(&r.user_agent).is_ok(),
            "robots.user_agent",
            &|| format!("{:?} is not a valid header value (no control characters)", r.user_agent),
        );
        need(nonzero(r.connect_timeout), "robots.connect_timeout", &zero_msg);
        need(nonzero(r.fetch_timeout), "robots.fetch_timeout", &zero_msg);
        need(r.connect_timeout <= r.fetch_timeout, "robots.connect_timeout", &|| {
            format!(
                "{} is longer than robots.fetch_timeout ({}), which includes connecting",
                show(r.connect_timeout),
                show(r.fetch_timeout)
            )
        });
        need(r.max_body >= MIN_ROBOTS_BODY, "robots.max_body", &|| {
            format!(
                "{} is below {MIN_ROBOTS_BODY}: RFC 9309 §2.5 requires parsing at least 500 KiB",
                r.max_body
            )
        });
        need(r.max_redirects <= MAX_REDIRECTS, "robots.max_redirects", &|| {
            format!("{} is more than {MAX_REDIRECTS}", r.max_redirects)
        });
        need(nonzero(r.max_age), "robots.max_age", &zero_msg);
        need(r.min_age <= r.max_age, "robots.min_age", &|| {
            format!("{} is longer than robots.max_age ({})", show(r.min_age), show(r.max_age))
        });
        need(nonzero(r.retry_initial), "robots.retry_initial", &zero_msg);
        need(r.retry_initial <= r.retry_max, "robots.retry_initial", &|| {
            format!(
                "{} is longer than robots.retry_max ({})",
                show(r.retry_initial),
                show(r.retry_max)
            )
        });
        need(r.max_concurrent_fetches > 0, "robots.max_concurrent_fetches", &|| {
            "must be at least 1".into()
        });
        need(r.cache_memory >= r.max_body, "robots.cache_memory", &|| {
            format!(
                "{} cannot hold even one robots.txt of robots.max_body ({})",
                r.cache_memory, r.max_body
            )
        });

        let pol = &self.policy;
        need(!pol.token_sources.is_empty(), "policy.token_sources", &|| {
            "must name at least one of: header, user-agent, default".into()
        });
        let mut seen = Vec::new();
        for source in &pol.token_sources {
            need(!seen.contains(source), "policy.token_sources", &|| {
                format!("{} is listed twice", source.name())
            });
            seen.push(*source);
        }
        match http::HeaderName::from_bytes(pol.token_header.as_bytes()) {
            Err(_) => need(false, "policy.token_header", &|| {
                format!("{:?} is not a valid header name", pol.token_header)
            }),
            Ok(name) => {
                need(!RESERVED_HEADERS.contains(&name.as_str()), "policy.token_header", &|| {
                    format!(
                        "{:?} cannot be used: the proxy strips this header before forwarding, and \
                     the request needs it",
                        pol.token_header
                    )
                })
            }
        }
        if let Some(token) = &pol.default_token {
            if let Err(e) = ProductToken::new(token) {
                need(false, "policy.default_token", &|| e.to_string());
            }
        }

        let a = &self.audit;
        need(!a.path.as_os_str().is_empty(), "audit.path", &|| "must not be empty".into());
        need(
            a.fsync != FsyncPolicy::Interval || nonzero(a.fsync_interval),
            "audit.fsync_interval",
            &zero_msg,
        );
        need(a.queue_capacity > 0, "audit.queue_capacity", &|| "must be at least 1".into());

        if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&self.log.level) {
            need(false, "log.level", &|| {
                format!("{:?} is not a valid filter: {e}", self.log.level)
            });
        }

        // [access] and [limits] (see src/access.rs, src/limits.rs).
        need(!self.access.allow_clients.is_empty(), "access.allow_clients", &|| {
            "must list at least one range, or no client could use the proxy (loopback: \
             127.0.0.0/8, ::1/128)"
                .into()
        });
        bad.extend(self.limits.check());
        bad.extend(self.pacing.check());
        bad.extend(self.usage.problems());
        bad
    }
}

/// RFC 9309 §2.5: "crawlers SHOULD impose a parsing limit to protect their systems […] The
/// parsing limit MUST be at least 500 kibibytes".
const MIN_ROBOTS_BODY: ByteSize = ByteSize(500 * 1024);

/// RFC 9309 §2.3.1.2: "crawlers SHOULD follow at least five consecutive redirects"; more than 20
/// only makes redirect loops expensive.
const MAX_REDIRECTS: u32 = 20;

/// Headers that `policy.token_header` must not name: stripping them before forwarding would
/// break the request or hide it (hop-by-hop and framing headers, `Host`, `User-Agent`, `Via`).
const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "via",
];

/// RFC 9110 §5.6.2 `token`: what a `Via` pseudonym must be.
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn show(d: Duration) -> String {
    humantime::format_duration(d).to_string()
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
    /// On SIGTERM / SIGINT, how long in-flight requests may take to finish.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
}

impl Default for ProxySection {
    fn default() -> Self {
        ProxySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            via: "robots-proxy".to_owned(),
            header_read_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// `[admin]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`, the status page). It
    /// has no authentication: keep it on loopback or a private network.
    pub listen: SocketAddr,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection { listen: SocketAddr::from(([127, 0, 0, 1], 9090)) }
    }
}

/// Keys (or, ending in `.`, sections) that a running proxy applies on a reload (SIGHUP). Every
/// other key takes effect only after a restart.
pub const RELOADABLE: &[&str] = &[
    "policy.",
    "usage.",
    "audit.all_decisions",
    "audit.fsync",
    "audit.fsync_interval",
    "log.level",
    "upstream.response_timeout",
    "upstream.body_idle_timeout",
];

/// Whether `key` is applied on a reload (see [`RELOADABLE`]).
pub fn is_reloadable(key: &str) -> bool {
    RELOADABLE.iter().any(|r| if r.ends_with('.') { key.starts_with(r) } else { key == *r })
}

/// The keys whose values differ between `old` and `new` and that need a restart to take
/// effect, dotted and sorted.
pub fn needs_restart(old: &Config, new: &Config) -> Vec<String> {
    let leaves = |config: &Config| {
        let mut out = BTreeMap::new();
        if let Ok(Value::Dict(_, dict)) = Value::serialize(config) {
            Schema::leaves("", &dict, &mut out);
        }
        out.retain(|_, v| !matches!(v, Value::Dict(..)));
        out
    };
    let (old, new) = (leaves(old), leaves(new));
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter().filter(|k| old.get(*k) != new.get(*k) && !is_reloadable(k)).cloned().collect()
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
    /// Longest wait for the next piece of a response body; then the response is cut off and
    /// the origin connection dropped.
    #[serde(with = "humantime_serde")]
    pub body_idle_timeout: Duration,
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
            body_idle_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_max_idle_per_host: 256,
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

impl TokenSource {
    /// The name used in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Header => "header",
            TokenSource::UserAgent => "user-agent",
            TokenSource::Default => "default",
        }
    }
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

/// The configuration file, read once by [`load`] so that a missing file is reported as such,
/// and named in errors by its path.
struct FileProvider {
    path: PathBuf,
    text: String,
}

impl Provider for FileProvider {
    fn metadata(&self) -> Metadata {
        Metadata::from("TOML file", self.path.as_path())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Toml::string(&self.text).data()
    }
}

/// The `ROBOTS_PROXY_*` variables, typed by the schema, as a figment provider.
///
/// figment's own `Env` guesses each value's type from its look (`123` is a number, `true` a
/// boolean), so `ROBOTS_PROXY_ROBOTS__USER_AGENT=123` fails to load as a string; it also reads
/// the process environment itself. This provider types values by the key they set instead.
#[derive(Clone)]
struct EnvProvider {
    dict: Dict,
    /// The variable that set each key (`robots.max_age` → `ROBOTS_PROXY_ROBOTS__MAX_AGE`).
    names: BTreeMap<String, String>,
}

impl EnvProvider {
    fn new(env: &[(String, String)], schema: &Schema, problems: &mut Vec<Problem>) -> Self {
        let mut provider = EnvProvider { dict: Dict::new(), names: BTreeMap::new() };
        for (name, value) in env {
            let Some(rest) = name.strip_prefix(ENV_PREFIX) else { continue };
            if name == CONFIG_FILE_ENV {
                continue;
            }
            let path: Vec<String> =
                rest.split(ENV_SEPARATOR).map(str::to_ascii_lowercase).collect();
            let key = path.join(".");
            let origin = Some(Origin::Env(Some(name.clone())));
            let problem = |message: String| Problem {
                key: Some(key.clone()),
                origin: origin.clone(),
                message,
            };
            let Some(kind) = schema.kinds.get(&key) else {
                let mut message = "unknown key".to_owned();
                if let Some(best) = closest(&key, schema.kinds.keys().map(String::as_str)) {
                    message.push_str(&format!("; did you mean {best} ({})?", env_name(best)));
                }
                problems.push(problem(message));
                continue;
            };
            if let KeyKind::Section = kind {
                problems.push(problem(format!(
                    "[{key}] is a section; set its keys one by one, like {}",
                    schema
                        .kinds
                        .keys()
                        .find(|k| k.starts_with(&format!("{key}.")))
                        .map(|k| env_name(k))
                        .unwrap_or_default()
                )));
                continue;
            }
            if let KeyKind::Tables = kind {
                problems.push(problem(format!(
                    "{key} is a list of tables: set it in the configuration file, not the \
                     environment"
                )));
                continue;
            }
            if let Some(earlier) = provider.names.get(&key) {
                problems.push(problem(format!("set twice, also by {earlier}")));
                continue;
            }
            let optional = schema.optional.contains(&key);
            insert(&mut provider.dict, &path, kind.value(value, optional));
            provider.names.insert(key, name.clone());
        }
        provider
    }
}

impl Provider for EnvProvider {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_PROVIDER)
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

/// The environment variable that sets a dotted key.
fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', ENV_SEPARATOR).to_ascii_uppercase())
}

fn insert(dict: &mut Dict, path: &[String], value: Value) {
    match path {
        [] => {}
        [last] => {
            dict.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry =
                dict.entry(first.clone()).or_insert_with(|| Value::Dict(Tag::Default, Dict::new()));
            if let Value::Dict(_, inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

/// What kind of value each key takes, derived from the serialised defaults so that it cannot
/// drift from the structs.
struct Schema {
    kinds: BTreeMap<String, KeyKind>,
    /// Keys that may be unset (`Option`).
    optional: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Text,
    Integer,
    /// A number that may have a fraction (`pacing.default_rps`).
    Float,
    Boolean,
    List,
    /// A list of tables (`[[pacing.sites]]`): file only, a comma-separated list cannot say it.
    Tables,
    Section,
}

impl KeyKind {
    /// The environment variable's value as this kind of value. A value that does not fit is
    /// passed on as text, for the deserializer to reject with a message naming the expected type.
    fn value(self, raw: &str, optional: bool) -> Value {
        if optional && raw.is_empty() {
            return Value::from(Empty::None);
        }
        let trimmed = raw.trim();
        match self {
            KeyKind::Integer => {
                if let Ok(n) = trimmed.parse::<u64>() {
                    Value::from(n)
                } else if let Ok(n) = trimmed.parse::<i64>() {
                    Value::from(n)
                } else {
                    Value::from(raw.to_owned())
                }
            }
            KeyKind::Float => match trimmed.parse::<f64>() {
                Ok(n) => Value::from(n),
                Err(_) => Value::from(raw.to_owned()),
            },
            KeyKind::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Value::from(true),
                "false" => Value::from(false),
                _ => Value::from(raw.to_owned()),
            },
            // `a, b` or `[a, b]`; items that are whole numbers are numbers (`connect_ports`),
            // since no list of the configuration holds digit-only strings.
            KeyKind::List => Value::Array(
                Tag::Default,
                trimmed
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .split(',')
                    .map(|item| item.trim().trim_matches('"'))
                    .filter(|item| !item.is_empty())
                    .map(|item| match item.parse::<u64>() {
                        Ok(n) => Value::from(n),
                        Err(_) => Value::from(item.to_owned()),
                    })
                    .collect(),
            ),
            KeyKind::Text | KeyKind::Tables | KeyKind::Section => Value::from(raw.to_owned()),
        }
    }
}

impl Schema {
    fn new() -> Schema {
        let mut schema = Schema { kinds: BTreeMap::new(), optional: BTreeSet::new() };
        if let Ok(Value::Dict(_, dict)) = Value::serialize(schema_sample()) {
            schema.walk("", &dict);
        }
        if let Ok(Value::Dict(_, defaults)) = Value::serialize(Config::default()) {
            let mut present = BTreeMap::new();
            Schema::leaves("", &defaults, &mut present);
            for key in schema.kinds.keys() {
                let unset = matches!(present.get(key), None | Some(Value::Empty(..)));
                if unset && schema.kinds[key] != KeyKind::Section {
                    schema.optional.insert(key.clone());
                }
            }
        }
        schema
    }

    fn walk(&mut self, prefix: &str, dict: &Dict) {
        for (name, value) in dict {
            let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            let kind = match value {
                Value::Dict(_, inner) => {
                    self.walk(&key, inner);
                    KeyKind::Section
                }
                Value::Num(_, Num::F32(_) | Num::F64(_)) => KeyKind::Float,
                Value::Num(..) => KeyKind::Integer,
                Value::Bool(..) => KeyKind::Boolean,
                Value::Array(_, items) if matches!(items.first(), Some(Value::Dict(..))) => {
                    KeyKind::Tables
                }
                Value::Array(..) => KeyKind::List,
                Value::String(..) | Value::Char(..) | Value::Empty(..) => KeyKind::Text,
            };
            self.kinds.insert(key, kind);
        }
    }

    fn leaves(prefix: &str, dict: &Dict, out: &mut BTreeMap<String, Value>) {
        for (name, value) in dict {
            let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            if let Value::Dict(_, inner) = value {
                Schema::leaves(&key, inner, out);
            }
            out.insert(key, value.clone());
        }
    }
}

/// A configuration with every optional key set, so that serialising it shows every key and its
/// type. A new `Option` field must be set here (a unit test checks that none is left unset), and
/// a list of tables needs one entry to be told from a plain list.
fn schema_sample() -> Config {
    let mut config = Config::default();
    config.pacing.sites = vec![crate::pacing::SitePace {
        authority: String::new(),
        rps: Some(0.0),
        concurrency: Some(0),
    }];
    config.policy.default_token = Some(String::new());
    config.usage.crawlers = vec![crate::usage::UsageCrawler {
        token: Some(String::new()),
        user: Some(String::new()),
        purposes: vec![String::new()],
    }];
    config.https.ca_cert = Some(PathBuf::new());
    config.https.ca_key = Some(PathBuf::new());
    config.https.upstream_ca_file = Some(PathBuf::new());
    config.access.users_file = Some(PathBuf::new());
    config
}

/// The candidate nearest to `word` by edit distance, if near enough to be a likely typo.
fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.len() / 3).clamp(1, 3);
    candidates
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over bytes (keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_listeners_of_a_configuration_are_its_own() {
        let mut config = Config::default();
        config.access.allow_destinations = vec!["127.0.0.0/8".parse().unwrap()];
        let guard = config.destination_guard();
        for own in [config.proxy.listen, config.admin.listen] {
            assert!(guard.check(own).is_err(), "{own}");
        }
        assert_eq!(guard.check("127.0.0.1:1".parse().unwrap()), Ok(()));
    }

    use super::*;

    #[test]
    fn schema_sample_sets_every_optional_key() {
        let Ok(Value::Dict(_, dict)) = Value::serialize(schema_sample()) else {
            panic!("the configuration serialises to a table");
        };
        let mut leaves = BTreeMap::new();
        Schema::leaves("", &dict, &mut leaves);
        let unset: Vec<_> =
            leaves.iter().filter(|(_, v)| matches!(v, Value::Empty(..))).map(|(k, _)| k).collect();
        assert!(unset.is_empty(), "set these in schema_sample(): {unset:?}");
    }

    #[test]
    fn schema_kinds() {
        let schema = Schema::new();
        assert_eq!(schema.kinds["proxy"], KeyKind::Section);
        assert_eq!(schema.kinds["state_dir"], KeyKind::Text);
        assert_eq!(schema.kinds["proxy.listen"], KeyKind::Text);
        assert_eq!(schema.kinds["robots.user_agent"], KeyKind::Text);
        assert_eq!(schema.kinds["robots.max_age"], KeyKind::Text);
        assert_eq!(schema.kinds["robots.max_body"], KeyKind::Text);
        assert_eq!(schema.kinds["robots.max_redirects"], KeyKind::Integer);
        assert_eq!(schema.kinds["audit.all_decisions"], KeyKind::Boolean);
        assert_eq!(schema.kinds["policy.token_sources"], KeyKind::List);
        assert_eq!(schema.kinds["policy.default_token"], KeyKind::Text);
        assert_eq!(schema.kinds["https.connect_ports"], KeyKind::List);
        assert_eq!(schema.kinds["access.allow_clients"], KeyKind::List);
        assert_eq!(schema.kinds["access.allow_destinations"], KeyKind::List);
        assert_eq!(schema.kinds["limits.max_connections"], KeyKind::Integer);
        assert_eq!(schema.kinds["limits.when_full"], KeyKind::Text);
        assert_eq!(schema.kinds["pacing.default_rps"], KeyKind::Float);
        assert_eq!(schema.kinds["pacing.default_concurrency"], KeyKind::Integer);
        assert_eq!(schema.kinds["pacing.max_wait"], KeyKind::Text);
        assert_eq!(schema.kinds["pacing.sites"], KeyKind::Tables);
        assert_eq!(
            schema.optional.iter().collect::<Vec<_>>(),
            [
                "access.users_file",
                "https.ca_cert",
                "https.ca_key",
                "https.upstream_ca_file",
                "policy.default_token"
            ]
        );
    }

    #[test]
    fn env_values_typed_by_key() {
        let v = |kind: KeyKind, raw: &str| kind.value(raw, false);
        assert!(matches!(v(KeyKind::Text, "123"), Value::String(_, s) if s == "123"));
        assert!(matches!(v(KeyKind::Text, "true"), Value::String(_, s) if s == "true"));
        assert!(matches!(v(KeyKind::Text, " a b "), Value::String(_, s) if s == " a b "));
        assert!(matches!(v(KeyKind::Integer, " 7 "), Value::Num(..)));
        assert!(matches!(v(KeyKind::Integer, "-7"), Value::Num(..)));
        assert!(matches!(v(KeyKind::Integer, "seven"), Value::String(..)));
        assert!(matches!(v(KeyKind::Boolean, "TRUE"), Value::Bool(_, true)));
        assert!(matches!(v(KeyKind::Float, " 2.5 "), Value::Num(_, Num::F64(n)) if n == 2.5));
        assert!(matches!(v(KeyKind::Float, "2"), Value::Num(_, Num::F64(n)) if n == 2.0));
        assert!(matches!(v(KeyKind::Float, "fast"), Value::String(..)));
        assert!(matches!(v(KeyKind::Boolean, "yes"), Value::String(..)));
        let Value::Array(_, items) = v(KeyKind::List, "header, user-agent,,") else {
            panic!("a list");
        };
        assert_eq!(items.len(), 2);
        let Value::Array(_, ports) = v(KeyKind::List, "[443, 8443]") else { panic!("a list") };
        assert!(matches!(ports[0], Value::Num(..)), "{ports:?}");
        assert!(matches!(KeyKind::Text.value("", true), Value::Empty(..)));
        assert!(matches!(KeyKind::Text.value("", false), Value::String(_, s) if s.is_empty()));
    }

    #[test]
    fn byte_size_shows_and_parses_back() {
        for (n, text) in [
            (512_000, "500KiB"),
            (256 << 20, "256MiB"),
            (3 << 30, "3GiB"),
            (1000, "1000B"),
            (0, "0B"),
        ] {
            assert_eq!(ByteSize(n).to_string(), text);
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(n)));
        }
        // 1.5 KiB is not a whole number of KiB: shown in bytes.
        assert_eq!(ByteSize(1536).to_string(), "1536B");
        assert!("1.5MiB".parse::<ByteSize>().is_err());
        assert!("99999999999999GiB".parse::<ByteSize>().unwrap_err().contains("too large"));
    }

    #[test]
    fn closest_finds_typos_only() {
        let keys = ["proxy.listen", "proxy.via", "robots.max_age"];
        assert_eq!(closest("proxy.listn", keys.iter().copied()), Some("proxy.listen"));
        assert_eq!(closest("proxy_listen", keys.iter().copied()), Some("proxy.listen"));
        assert_eq!(closest("completely.else", keys.iter().copied()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn env_name_round_trip() {
        assert_eq!(env_name("proxy.listen"), "ROBOTS_PROXY_PROXY__LISTEN");
        assert_eq!(env_name("state_dir"), "ROBOTS_PROXY_STATE_DIR");
    }

    #[test]
    fn reloadable_keys_and_restart_changes() {
        assert!(is_reloadable("policy.default_token"));
        assert!(is_reloadable("audit.all_decisions"));
        assert!(!is_reloadable("audit.path"));
        assert!(!is_reloadable("policyx.default_token"));
        let old = Config::default();
        let mut new = Config::default();
        new.policy.default_token = Some("ExampleBot".into());
        new.audit.all_decisions = true;
        new.log.level = "debug".into();
        assert!(needs_restart(&old, &new).is_empty(), "{:?}", needs_restart(&old, &new));
        new.robots.max_age = Duration::from_secs(60);
        new.admin.listen = SocketAddr::from(([127, 0, 0, 1], 9999));
        new.https.ca_cert = Some(PathBuf::from("/ca.pem"));
        assert_eq!(needs_restart(&old, &new), ["admin.listen", "https.ca_cert", "robots.max_age"]);
    }

    #[test]
    fn admin_and_proxy_need_their_own_ports() {
        let mut config = Config::default();
        config.admin.listen = config.proxy.listen;
        let bad = config.check();
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].0, "admin.listen");
        // Port 0 (any free port) on both is fine: the two get different ports.
        config.proxy.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.admin.listen = config.proxy.listen;
        assert!(config.check().is_empty());
    }

    #[test]
    fn defaults_are_valid() {
        assert!(Config::default().check().is_empty(), "{:?}", Config::default().check());
    }
}
