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

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use figment::providers::{Format, Serialized, Toml};
use figment::value::Tag;
use figment::Figment;
use serde::{Deserialize, Serialize};

// Sections that live with their owners, re-exported so that `config::X` names every section.
pub use crate::audit::{AuditSection, FsyncPolicy};
pub use crate::cache::RobotsSection;
pub use crate::policy::{PolicySection, TokenHeader, TokenSource};
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

/// The value a variable that is not valid UTF-8 is passed on with, for [`load`] to refuse
/// naming the variable: no key's value can contain NUL, so it cannot be a real value.
const NOT_UTF8: &str = "\0not UTF-8";

impl ConfigSources {
    /// Sources with the `ROBOTS_PROXY_*` variables of this process.
    ///
    /// A value that is not valid UTF-8 is refused by [`load`], naming the variable, rather than
    /// altered (`state-\xff` would have become another directory, `state-\u{FFFD}`); so is a
    /// variable with the prefix whose name is not UTF-8.
    pub fn from_process_env(file: Option<PathBuf>, overrides: Overrides) -> Self {
        let env = std::env::vars_os()
            .filter_map(|(name, value)| {
                let name = match name.into_string() {
                    Ok(name) => name,
                    Err(raw) => {
                        let shown = raw.to_string_lossy().into_owned();
                        return shown.starts_with(ENV_PREFIX).then(|| (shown, NOT_UTF8.to_owned()));
                    }
                };
                let value = value.into_string().unwrap_or_else(|_| NOT_UTF8.to_owned());
                name.starts_with(ENV_PREFIX).then_some((name, value))
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

    let (mut config, complete) = match figment.extract::<Config>() {
        Ok(config) => (config, true),
        Err(error) => {
            let (found, rest) = extraction_problems(error, &figment, &env);
            problems.extend(found);
            match rest {
                // The keys that did deserialize are checked too: every problem at once.
                Some(rest) => (rest, false),
                None => return Err(ConfigError::Invalid(problems)),
            }
        }
    };
    let overridden = sources.overrides.apply(&mut config);
    let unreadable: BTreeSet<String> = problems.iter().filter_map(|p| p.key.clone()).collect();
    for (key, message) in config.check() {
        if !complete && unreadable.contains(key) {
            // Its default stands in for the value that could not be read.
            continue;
        }
        let origin = if overridden.contains(key) {
            Some(Origin::CommandLine)
        } else {
            figment.find_metadata(key).map(|m| Origin::from_metadata(m, Some(key), &env))
        };
        problems.push(Problem { key: Some(key.to_owned()), origin, message });
    }
    let origin = figment.find_metadata("exceptions").map(|m| Origin::from_metadata(m, None, &env));
    for (key, message) in config.exception_problems() {
        problems.push(Problem { key: Some(key), origin: origin.clone(), message });
    }
    let directory = config.signing.directory_listen.is_some();
    for (key, message) in config.disclosure.problems(directory) {
        let origin = figment.find_metadata(&key).map(|m| Origin::from_metadata(m, None, &env));
        let origin = origin.or_else(|| {
            figment.find_metadata("disclosure").map(|m| Origin::from_metadata(m, None, &env))
        });
        problems.push(Problem { key: Some(key), origin, message });
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid(problems))
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
    /// The archive of robots.txt versions under `state_dir/robots-archive/`.
    pub archive: crate::archive::ArchiveSection,
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
    /// Sharing robots.txt and the pace with other instances through Redis.
    pub fleet: crate::fleet::FleetSection,
    /// Web Bot Auth signatures on forwarded requests, and the key directory.
    pub signing: crate::signing::SigningSection,
    /// The public disclosure of the organisation's crawlers (on the key directory listener).
    pub disclosure: crate::disclosure::DisclosureSection,
    /// `[[exceptions]]`: recorded, expiring exceptions to robots.txt (configuration file only).
    pub exceptions: Vec<crate::policy::ExceptionEntry>,
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
            archive: crate::archive::ArchiveSection::default(),
            log: LogSection::default(),
            https: crate::tls::HttpsSection::default(),
            pacing: crate::pacing::PacingSection::default(),
            usage: crate::usage::UsageSection::default(),
            access: crate::access::AccessSection::default(),
            limits: crate::limits::LimitsSection::default(),
            fleet: crate::fleet::FleetSection::default(),
            signing: crate::signing::SigningSection::default(),
            disclosure: crate::disclosure::DisclosureSection::default(),
            exceptions: Vec::new(),
        }
    }
}

impl Config {
    /// The destination guard of this configuration: `access.allow_destinations`, and
    /// `proxy.listen`, `admin.listen` and `signing.directory_listen` as the proxy's own
    /// addresses (the admin listener has no authentication: clients must not reach it through
    /// the proxy).
    pub fn destination_guard(&self) -> crate::guard::DestinationGuard {
        let mut own = vec![self.proxy.listen, self.admin.listen];
        own.extend(self.signing.directory_listen);
        crate::guard::DestinationGuard::new(&self.access.allow_destinations, &own)
    }

    /// What the disclosure of the crawlers is generated from (`crate::disclosure`).
    pub fn disclosure_inputs(&self) -> crate::disclosure::Inputs<'_> {
        crate::disclosure::Inputs {
            section: &self.disclosure,
            signing: &self.signing,
            robots: &self.robots,
            policy: &self.policy,
            pacing: &self.pacing,
            usage: &self.usage,
            exceptions: &self.exceptions,
            https: &self.https,
        }
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
            .map(|(key, message)| (key.to_owned(), message))
            .chain(self.exception_problems())
            .chain(self.disclosure.problems(self.signing.directory_listen.is_some()))
            .map(|(key, message)| Problem { key: Some(key), origin: None, message })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Every problem with `[[exceptions]]`, each key naming the entry and the field
    /// (`exceptions[2].expires`). An expiry already past is no problem: expiry is a normal
    /// event, the entry is inert, and `config check` warns ([`Config::warnings`]).
    pub fn exception_problems(&self) -> Vec<(String, String)> {
        crate::policy::exceptions::problems(&self.exceptions)
    }

    /// Every rule broken, as (key, message): the ranges of the table of bounds
    /// ([`bounds::BOUNDS`]) first, then the rules between keys and the syntax of values.
    fn check(&self) -> Vec<(&'static str, String)> {
        let mut bad = bounds::problems(self);
        if let Err(problems) = crate::audit::witness::configured(&self.audit) {
            bad.extend(problems);
        }
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
        need(h.ca_cert.is_some() == h.ca_key.is_some(), "https.ca_cert", &|| {
            "https.ca_cert and https.ca_key must be set together".into()
        });
        need(h.ca_cert.is_none() || h.ca_cert != h.ca_key, "https.ca_key", &|| {
            "names the same file as https.ca_cert; the CA certificate and its key need files of \
             their own"
                .into()
        });

        let p = &self.proxy;
        need(is_token(&p.via), "proxy.via", &|| {
            format!(
                "{:?} is not a valid Via pseudonym: use letters, digits and !#$%&'*+-.^_`|~ only",
                p.via
            )
        });
        need(self.admin.listen != p.listen || p.listen.port() == 0, "admin.listen", &|| {
            format!("{} is also proxy.listen; the two need their own ports", p.listen)
        });
        for entry in &self.admin.hosts {
            let ok = crate::authority::host_and_port(entry).is_some_and(|(name, _)| {
                name.parse::<std::net::IpAddr>().is_ok()
                    || name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
            });
            need(ok, "admin.hosts", &|| {
                format!("{entry:?} is not a host name or IP address, with an optional :port")
            });
        }
        if let Some(tls) = p.tls_listen {
            let taken = tls.port() != 0 && (tls == p.listen || tls == self.admin.listen);
            need(!taken, "proxy.tls_listen", &|| {
                format!(
                    "{tls} is also proxy.listen or admin.listen; each listener needs its own port"
                )
            });
            need(p.tls_certificate.is_some() && p.tls_key.is_some(), "proxy.tls_listen", &|| {
                "needs proxy.tls_certificate and proxy.tls_key (PEM files)".into()
            });
        } else {
            let key =
                if p.tls_certificate.is_some() { "proxy.tls_certificate" } else { "proxy.tls_key" };
            need(p.tls_certificate.is_none() && p.tls_key.is_none(), key, &|| {
                "the TLS listener's files are set but proxy.tls_listen is not".into()
            });
        }
        if let Some(directory) = self.signing.directory_listen {
            let taken = [p.listen, self.admin.listen];
            need(
                directory.port() == 0 || !taken.contains(&directory),
                "signing.directory_listen",
                &|| {
                    format!(
                        "{directory} is also proxy.listen or admin.listen; it needs its own port"
                    )
                },
            );
        }

        let r = &self.robots;
        need(!r.user_agent.trim().is_empty(), "robots.user_agent", &|| {
            "must not be empty: origins see it on every robots.txt fetch".into()
        });
        need(
            r.user_agent.trim().is_empty() || http::HeaderValue::from_str(&r.user_agent).is_ok(),
            "robots.user_agent",
            &|| format!("{:?} is not a valid header value (no control characters)", r.user_agent),
        );
        need(r.connect_timeout <= r.fetch_timeout, "robots.connect_timeout", &|| {
            format!(
                "{} is longer than robots.fetch_timeout ({}), which includes connecting",
                show(r.connect_timeout),
                show(r.fetch_timeout)
            )
        });
        need(r.min_age <= r.max_age, "robots.min_age", &|| {
            format!("{} is longer than robots.max_age ({})", show(r.min_age), show(r.max_age))
        });
        need(r.retry_initial <= r.retry_max, "robots.retry_initial", &|| {
            format!(
                "{} is longer than robots.retry_max ({})",
                show(r.retry_initial),
                show(r.retry_max)
            )
        });
        if let Some(problem) = r.check_refresh_ahead() {
            need(false, "robots.refresh_ahead", &|| problem.clone());
        }
        need(r.cache_memory >= r.max_body, "robots.cache_memory", &|| {
            format!(
                "{} cannot hold even one robots.txt of robots.max_body ({})",
                r.cache_memory, r.max_body
            )
        });
        let a = &self.archive;
        need(a.max_bytes.0 == 0 || a.max_bytes >= r.max_body, "archive.max_bytes", &|| {
            format!(
                "{} cannot hold even one robots.txt of robots.max_body ({}); 0 means no bound",
                a.max_bytes, r.max_body
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
        // Parsed already (a header name, a product token); what is left is how they combine
        // with the rest of the request.
        need(
            !RESERVED_HEADERS.contains(&pol.token_header.name().as_str()),
            "policy.token_header",
            &|| {
                format!(
                    "{:?} cannot be used: the proxy strips this header before forwarding, and the \
                 request needs it",
                    pol.token_header.to_string()
                )
            },
        );

        for site in &pol.fold_case_sites {
            need(is_site(site), "policy.fold_case_sites", &|| {
                format!(
                    "{site:?} is not a site: write a host or host:port, such as \
                         \"shop.example.com\" or \"10.0.0.5:8080\""
                )
            });
        }

        for token in &pol.report_tokens {
            need(crate::robots::ProductToken::new(token).is_ok(), "policy.report_tokens", &|| {
                format!(
                    "{token:?} is not a product token (letters, digits, \"_\", \"-\" and \".\", \
                     in words separated by single spaces)"
                )
            });
        }
        for user in &pol.report_users {
            need(!user.trim().is_empty(), "policy.report_users", &|| {
                "a user name must not be empty".into()
            });
        }

        let a = &self.audit;
        need(!a.path.as_os_str().is_empty(), "audit.path", &|| "must not be empty".into());
        need(
            a.fsync != FsyncPolicy::Interval || nonzero(a.fsync_interval),
            "audit.fsync_interval",
            &zero_msg,
        );

        need(!self.log.level.trim().is_empty(), "log.level", &|| {
            "must not be empty (an empty filter would cut logging to errors only); write a level \
             like \"info\""
                .into()
        });
        if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&self.log.level) {
            need(false, "log.level", &|| {
                format!("{:?} is not a valid filter: {e}", self.log.level)
            });
        }

        // [access] and [limits] (see crates/access/src/lib.rs, crates/net/src/limits.rs).
        need(!self.access.allow_clients.is_empty(), "access.allow_clients", &|| {
            "must list at least one range, or no client could use the proxy (loopback: \
             127.0.0.0/8, ::1/128)"
                .into()
        });
        need(
            self.access.client_ca.is_none() || p.tls_listen.is_some(),
            "access.client_ca",
            &|| {
                "client certificates are asked for on the TLS listener only: set proxy.tls_listen"
                    .into()
            },
        );
        need(
            self.access.client_certificate != crate::access::ClientCertificate::Required
                || self.access.client_ca.is_some(),
            "access.client_certificate",
            &|| {
                "\"required\" needs access.client_ca, the CAs that certificates are verified against".into()
            },
        );
        bad.extend(self.limits.check());
        bad.extend(self.pacing.check());
        bad.extend(self.fleet.check());
        bad.extend(self.usage.problems());
        bad.extend(self.signing.check());
        bad
    }
}

/// Whether `s` is a host or `host:port` as `policy.fold_case_sites` takes them: nothing more
/// (no scheme, user, path or query), the host normalised as a request's
/// ([`crate::authority::SiteName`]).
fn is_site(s: &str) -> bool {
    crate::authority::SiteName::parse(s).is_ok()
}

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
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`, the status page). It
    /// has no authentication: keep it on loopback or a private network.
    pub listen: SocketAddr,
    /// Names (or addresses) the listener answers for besides `localhost` and the address a
    /// client connected to: a request with another `Host` gets 421 (DNS rebinding).
    pub hosts: Vec<String>,
    /// Client addresses allowed to connect (default: loopback only); others are disconnected
    /// at once.
    pub allow_clients: Vec<crate::access::IpRange>,
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
            allow_clients: crate::access::AccessSection::default().allow_clients,
            max_connections: 64,
            chart_interval: Duration::from_secs(10),
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

mod bounds;
mod layers;
mod logged;
pub use logged::exceptions_text;
mod problems;
mod reload;
mod reloadable;
#[cfg(test)]
mod tests;
mod warnings;

pub use bounds::{bounds, BoundKind, BoundSpec};
use layers::*;
use problems::*;
pub use problems::{ConfigError, Origin, Problem};
pub use reload::{changes, in_force, is_secret, needs_restart, Change};
pub use reloadable::{
    applied_by, is_reloadable, reloadability, restart_reason, summary as reload_summary, Applier,
    ReloadKey, Reloadability, RestartKey, Scope, RELOADABLE, RESTART_ONLY, UNCLASSIFIED,
};
