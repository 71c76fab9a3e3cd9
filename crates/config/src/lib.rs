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
//!
//! The root crate re-exports this crate as `robots_proxy::config`.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use figment::providers::{Format, Serialized, Toml};
use figment::value::Tag;
use figment::Figment;
use serde::{Deserialize, Serialize};

// Sections that live with their owners, re-exported so that `config::X` names every section.
pub use robots_proxy_audit::{AuditSection, FsyncPolicy};
pub use robots_proxy_decide::{PolicySection, TokenHeader, TokenSource};
pub use robots_proxy_sitefiles::RobotsSection;
pub use robots_proxy_units::ByteSize;

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
    fn apply(&self, config: &mut RawConfig) -> BTreeSet<&'static str> {
        let mut keys = BTreeSet::new();
        if let Some(dir) = &self.state_dir {
            config.state_dir = dir.clone();
            keys.insert("state_dir");
        }
        if let Some(listen) = self.listen {
            config.proxy.0.listen = listen;
            keys.insert("proxy.listen");
        }
        if let Some(listen) = self.admin_listen {
            config.admin.0.listen = listen;
            keys.insert("admin.listen");
        }
        if let Some(path) = &self.audit_path {
            config.audit.0.path = path.clone();
            keys.insert("audit.path");
        }
        if let Some(level) = &self.log_level {
            config.log.0.level = level.clone();
            keys.insert("log.level");
        }
        if let Some(format) = self.log_format {
            config.log.0.format = format;
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

    let (mut raw, complete) = match figment.extract::<RawConfig>() {
        Ok(raw) => (raw, true),
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
    let overridden = sources.overrides.apply(&mut raw);
    let unreadable: BTreeSet<String> = problems.iter().filter_map(|p| p.key.clone()).collect();
    let config = match Config::try_from(raw) {
        Ok(config) => Some(config),
        Err(found) => {
            for (key, message) in found.into_vec() {
                if !complete && unreadable.contains(&key) {
                    // Its default stands in for the value that could not be read.
                    continue;
                }
                let origin = origin_of(&key, &overridden, &figment, &env);
                problems.push(Problem { key: Some(key), origin, message });
            }
            None
        }
    };
    match config {
        Some(config) if problems.is_empty() => Ok(config),
        _ => Err(ConfigError::Invalid(problems)),
    }
}

/// Where the value a problem names came from: the command line if a flag set it; for a key
/// in a list of tables (`exceptions[2].expires`, `disclosure.crawlers[1].token`) the source of
/// the list (or of its section); else the source of the key.
fn origin_of(
    key: &str,
    overridden: &BTreeSet<&'static str>,
    figment: &Figment,
    env: &EnvProvider,
) -> Option<Origin> {
    if overridden.contains(key) {
        return Some(Origin::CommandLine);
    }
    let of = |at: &str, key: Option<&str>| {
        figment.find_metadata(at).map(|m| Origin::from_metadata(m, key, env))
    };
    if key.starts_with("exceptions") {
        of("exceptions", None)
    } else if key.starts_with("disclosure.") {
        of(key, None).or_else(|| of("disclosure", None))
    } else {
        of(key, Some(key))
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

/// The whole configuration, made from a [`RawConfig`] by `TryFrom` (which deserializing
/// does too): every section checked by its own `TryFrom`, and the rules between sections.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(try_from = "RawConfig")]
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
    pub archive: robots_proxy_archive::ArchiveSection,
    /// Operational logs.
    pub log: LogSection,
    /// HTTPS through CONNECT.
    pub https: robots_proxy_net::tls::HttpsSection,
    /// Politeness: Crawl-delay and a pace per authority.
    pub pacing: robots_proxy_pace::PacingSection,
    /// AI usage preferences for crawlers' purposes.
    pub usage: robots_proxy_decide::usage::UsageSection,
    /// Who may use the proxy and where it may connect (client access list, proxy
    /// authentication, destination guard).
    pub access: robots_proxy_access::AccessSection,
    /// Connection and request limits.
    pub limits: robots_proxy_net::limits::LimitsSection,
    /// Sharing robots.txt and the pace with other instances through Redis.
    pub fleet: robots_proxy_fleet::FleetSection,
    /// Web Bot Auth signatures on forwarded requests, and the key directory.
    pub signing: robots_proxy_identity::SigningSection,
    /// The public disclosure of the organisation's crawlers (on the key directory listener).
    pub disclosure: robots_proxy_disclosure::DisclosureSection,
    /// `[[exceptions]]`: recorded, expiring exceptions to robots.txt (configuration file only).
    pub exceptions: Vec<robots_proxy_decide::ExceptionEntry>,
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
            archive: robots_proxy_archive::ArchiveSection::default(),
            log: LogSection::default(),
            https: robots_proxy_net::tls::HttpsSection::default(),
            pacing: robots_proxy_pace::PacingSection::default(),
            usage: robots_proxy_decide::usage::UsageSection::default(),
            access: robots_proxy_access::AccessSection::default(),
            limits: robots_proxy_net::limits::LimitsSection::default(),
            fleet: robots_proxy_fleet::FleetSection::default(),
            signing: robots_proxy_identity::SigningSection::default(),
            disclosure: robots_proxy_disclosure::DisclosureSection::default(),
            exceptions: Vec::new(),
        }
    }
}

impl Config {
    /// The destination guard of this configuration: `access.allow_destinations`, and
    /// `proxy.listen`, `admin.listen` and `signing.directory_listen` as the proxy's own
    /// addresses (the admin listener has no authentication: clients must not reach it through
    /// the proxy).
    pub fn destination_guard(&self) -> robots_proxy_net::guard::DestinationGuard {
        let mut own = vec![self.proxy.listen, self.admin.listen];
        own.extend(self.signing.directory_listen);
        robots_proxy_net::guard::DestinationGuard::new(&self.access.allow_destinations, &own)
    }

    /// What the disclosure of the crawlers is generated from (`robots_proxy_disclosure`).
    pub fn disclosure_inputs(&self) -> robots_proxy_disclosure::Inputs<'_> {
        robots_proxy_disclosure::Inputs {
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
    /// token syntax) on a configuration built in code, through the very conversion [`load`]
    /// and every reload use: the configuration is turned back into its raw form and converted
    /// again ([`RawConfig`], `TryFrom`). The problems have no origin.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let raw = Figment::from(Serialized::defaults(self)).extract::<RawConfig>();
        let problems = match raw {
            Ok(raw) => match Config::try_from(raw) {
                Ok(_) => return Ok(()),
                Err(found) => found.into_vec(),
            },
            // Not expected: every section serialises to what it deserializes from.
            Err(e) => vec![(String::new(), format!("the configuration does not read back: {e}"))],
        };
        let problems = problems
            .into_iter()
            .map(|(key, message)| Problem {
                key: (!key.is_empty()).then_some(key),
                origin: None,
                message,
            })
            .collect();
        Err(ConfigError::Invalid(problems))
    }
}

mod across;
mod bounds;
mod layers;
mod logged;
pub use logged::exceptions_text;
mod problems;
mod raw;
pub use raw::RawConfig;
mod reload;
pub mod report;
mod sections;
pub use sections::*;
mod reloadable;
#[cfg(test)]
mod tests;
mod warnings;

pub use bounds::bounds;
use layers::*;
use problems::*;
pub use problems::{ConfigError, Origin, Problem};
pub use reload::{changes, in_force, is_secret, needs_restart, Change};
pub use reloadable::{
    applied_by, is_reloadable, reloadability, restart_reason, summary as reload_summary, Applier,
    ReloadKey, Reloadability, RestartKey, Scope, RELOADABLE, RESTART_ONLY, UNCLASSIFIED,
};
pub use robots_proxy_units::bounds::{BoundKind, BoundSpec};
