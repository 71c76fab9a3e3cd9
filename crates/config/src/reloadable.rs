//! Which keys a reload applies, and why the others need a restart: two typed tables,
//! [`RELOADABLE`] and [`RESTART_ONLY`], that every question about a key's reloadability reads
//! ([`reloadability`], [`is_reloadable`], [`restart_reason`]), so the reload's report, the
//! disclosure of what is in force (`in_force`), `config check --against-running` and the
//! documentation ([`summary`], quoted in `config/robots-proxy.toml`) cannot disagree.
//!
//! A key of the configuration that neither table covers fails a test
//! (`tests/config/shipped.rs`), and every key [`RELOADABLE`] covers is reloaded through SIGHUP
//! by one generic test (`tests/ops/reload_every_key.rs`), which needs "another valid value" for
//! it: a new reloadable key is covered by adding it here and its value there.

/// How much of the configuration one entry of a table covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Exactly the key (`robots.max_age`).
    Key,
    /// Every key of the section named (`policy`: `policy.default_token`, …), including keys
    /// added to it later.
    Section,
    /// A list of tables (`exceptions`): the list, and the fields of its tables
    /// (`exceptions.id`).
    Tables,
}

/// The part of the running proxy that puts a reloadable key in force (each one a `Reload`
/// part of the reloader, `src/reload/parts.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applier {
    /// `Proxy::reload`: the state a request or a CONNECT reads once (`Live`: policy, usage,
    /// exceptions, `[https]` mode and ports, upstream timeouts, the CA and the signer).
    Live,
    /// `[access]` in `crates/proxy/src/safety.rs`: the client list, the users, the destination guard.
    Access,
    /// `Pacer::prepare`/`apply`: the pace kept stays.
    Pacer,
    /// `RobotsCache::reconfigure`: robots.txt lifetimes; the cache is kept.
    RobotsCache,
    /// `AuditLog::reconfigure`: a message to the writer.
    AuditLog,
    /// `logging::set_filter`.
    LogFilter,
    /// The TLS listener's certificate, key and client verification, for new handshakes.
    ListenerTls,
    /// The interception CA (`Reloader::ca_for`), then `Live`.
    Ca,
    /// The Web Bot Auth signer, in `Live` and in the key directory.
    Signer,
    /// The public disclosure of the crawlers.
    Disclosure,
}

impl Applier {
    /// Every applier: each is one part of the reloader (`src/reload/parts.rs`).
    pub const ALL: [Applier; 10] = [
        Applier::Live,
        Applier::Access,
        Applier::Pacer,
        Applier::RobotsCache,
        Applier::AuditLog,
        Applier::LogFilter,
        Applier::ListenerTls,
        Applier::Ca,
        Applier::Signer,
        Applier::Disclosure,
    ];
}

/// One entry of [`RELOADABLE`]: what it covers and what applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadKey {
    /// The dotted key, or the section or list of tables it covers ([`Scope`]).
    pub key: &'static str,
    /// How much it covers.
    pub scope: Scope,
    /// What puts it in force on a reload.
    pub applier: Applier,
}

/// One entry of [`RESTART_ONLY`]: what it covers and why a reload cannot apply it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartKey {
    /// The dotted key, or the section it covers ([`Scope`]).
    pub key: &'static str,
    /// How much it covers.
    pub scope: Scope,
    /// Why a change takes effect only after a restart (shown in a reload's report).
    pub reason: &'static str,
}

impl ReloadKey {
    /// Whether this entry covers `key`.
    pub fn covers(&self, key: &str) -> bool {
        covers(self.key, self.scope, key)
    }
}

impl RestartKey {
    /// Whether this entry covers `key`.
    pub fn covers(&self, key: &str) -> bool {
        covers(self.key, self.scope, key)
    }
}

fn covers(name: &str, scope: Scope, key: &str) -> bool {
    let under = || key.strip_prefix(name).is_some_and(|rest| rest.starts_with('.'));
    match scope {
        Scope::Key => key == name,
        Scope::Section => under(),
        Scope::Tables => key == name || under(),
    }
}

const fn key(key: &'static str, applier: Applier) -> ReloadKey {
    ReloadKey { key, scope: Scope::Key, applier }
}

const fn section(key: &'static str, applier: Applier) -> ReloadKey {
    ReloadKey { key, scope: Scope::Section, applier }
}

/// What a running proxy applies on a reload (SIGHUP, `POST /api/reload`), for requests and
/// connections that start afterwards. Every other key takes effect only after a restart;
/// [`RESTART_ONLY`] says why.
pub const RELOADABLE: &[ReloadKey] = &[
    section("policy", Applier::Live),
    section("usage", Applier::Live),
    key("audit.all_decisions", Applier::AuditLog),
    key("audit.fsync", Applier::AuditLog),
    key("audit.fsync_interval", Applier::AuditLog),
    key("log.level", Applier::LogFilter),
    key("upstream.response_timeout", Applier::Live),
    key("upstream.body_idle_timeout", Applier::Live),
    ReloadKey { key: "exceptions", scope: Scope::Tables, applier: Applier::Live },
    key("access.users_file", Applier::Access),
    key("access.allow_clients", Applier::Access),
    key("access.allow_destinations", Applier::Access),
    key("access.client_ca", Applier::ListenerTls),
    key("access.client_certificate", Applier::ListenerTls),
    key("proxy.tls_certificate", Applier::ListenerTls),
    key("proxy.tls_key", Applier::ListenerTls),
    section("pacing", Applier::Pacer),
    key("robots.max_age", Applier::RobotsCache),
    key("robots.min_age", Applier::RobotsCache),
    key("robots.give_up_after", Applier::RobotsCache),
    key("robots.retry_initial", Applier::RobotsCache),
    key("robots.retry_max", Applier::RobotsCache),
    key("robots.refresh_ahead", Applier::RobotsCache),
    key("https.mode", Applier::Live),
    key("https.connect_ports", Applier::Live),
    key("https.audit_tunnels", Applier::Live),
    key("https.tunnel_idle_timeout", Applier::Live),
    key("https.ca_cert", Applier::Ca),
    key("https.ca_key", Applier::Ca),
    key("signing.lifetime", Applier::Signer),
    key("signing.components", Applier::Signer),
    key("signing.reuse", Applier::Signer),
    key("signing.keep_client_signatures", Applier::Signer),
    key("signing.client_signatures", Applier::Signer),
    key("signing.keys_dir", Applier::Signer),
    key("signing.directory_lifetime", Applier::Signer),
    key("signing.keys", Applier::Signer),
    key("signing.identities", Applier::Signer),
    section("disclosure", Applier::Disclosure),
];

const LISTENER: &str =
    "the address of a listener: binding it again would drop the connections open on it";
const AT_LISTENER_START: &str = "read by the listener when the proxy starts";

const fn restart(key: &'static str, reason: &'static str) -> RestartKey {
    RestartKey { key, scope: Scope::Key, reason }
}

const fn restart_section(key: &'static str, reason: &'static str) -> RestartKey {
    RestartKey { key, scope: Scope::Section, reason }
}

/// Why the keys a reload does not apply ([`RELOADABLE`]) need a restart. A key is looked up
/// here by itself first, then by its section.
pub const RESTART_ONLY: &[RestartKey] = &[
    restart("proxy.listen", LISTENER),
    restart("proxy.tls_listen", LISTENER),
    restart("admin.listen", LISTENER),
    restart("signing.directory_listen", LISTENER),
    restart(
        "state_dir",
        "holds the robots.txt state, the archive, the default CA and the audit log, which are \
         opened at start",
    ),
    restart(
        "https.upstream_ca_file",
        "the TLS client configuration for origins is built once, shared by forwards, tunnels \
         and robots.txt fetches",
    ),
    restart("log.format", "the log subscriber is installed at start"),
    restart("proxy.via", AT_LISTENER_START),
    restart("proxy.header_read_timeout", AT_LISTENER_START),
    restart("proxy.shutdown_grace", AT_LISTENER_START),
    restart("proxy.shutdown_delay", AT_LISTENER_START),
    restart("limits.transparent_huge_pages", "set for the process when it starts"),
    restart_section(
        "fleet",
        "the Redis connection, the shared robots.txt store and the shared pace are built at \
         start",
    ),
    restart_section("admin", "the admin listener's settings apply when it is bound"),
    restart_section(
        "limits",
        "the connection gate and the listeners' HTTP settings are built when they are bound",
    ),
    restart_section("upstream", "the pool of origin connections is built at start"),
    restart_section(
        "robots",
        "the robots.txt fetcher, its slots and the cache's memory bound are built at start \
         (the cache is kept across reloads)",
    ),
    restart_section(
        "audit",
        "the audit log file is opened at start (a reload reopens the same path)",
    ),
    restart_section("archive", "the robots.txt archive is opened at start"),
];

/// The reason given for a key neither table covers (none of the configuration's keys: a test
/// holds that).
pub const UNCLASSIFIED: &str = "applied at start only";

/// What a reload does with one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloadability {
    /// Applied, by the entry of [`RELOADABLE`] that covers it.
    Reloaded(&'static ReloadKey),
    /// Kept at its running value until a restart, for the reason of the entry of
    /// [`RESTART_ONLY`] that covers it.
    Restart(&'static RestartKey),
    /// Neither table covers it.
    Unclassified,
}

/// What a reload does with `key`: [`RELOADABLE`] first, then [`RESTART_ONLY`].
pub fn reloadability(key: &str) -> Reloadability {
    if let Some(entry) = RELOADABLE.iter().find(|r| r.covers(key)) {
        return Reloadability::Reloaded(entry);
    }
    match restart_entry(key) {
        Some(entry) => Reloadability::Restart(entry),
        None => Reloadability::Unclassified,
    }
}

/// The entry of [`RESTART_ONLY`] that covers `key`: the key by itself before its section.
fn restart_entry(key: &str) -> Option<&'static RestartKey> {
    RESTART_ONLY
        .iter()
        .find(|r| r.scope != Scope::Section && r.covers(key))
        .or_else(|| RESTART_ONLY.iter().find(|r| r.covers(key)))
}

/// Whether `key` is applied on a reload (see [`RELOADABLE`]).
pub fn is_reloadable(key: &str) -> bool {
    matches!(reloadability(key), Reloadability::Reloaded(_))
}

/// Why a change to `key` (one that is not [`is_reloadable`]) takes effect only after a restart
/// ([`RESTART_ONLY`]; [`UNCLASSIFIED`] for a key it does not cover).
pub fn restart_reason(key: &str) -> &'static str {
    restart_entry(key).map_or(UNCLASSIFIED, |entry| entry.reason)
}

/// The keys of [`RELOADABLE`] that `applier` puts in force (sections and lists of tables by
/// their names).
pub fn applied_by(applier: Applier) -> impl Iterator<Item = &'static str> {
    RELOADABLE.iter().filter(move |r| r.applier == applier).map(|r| r.key)
}

/// What a reload applies, as `config/robots-proxy.toml` says it (its comment at the top quotes
/// this text, a test holds it): the sections whole, then the keys by section, in the order of
/// [`RELOADABLE`].
pub fn summary() -> String {
    let mut whole = Vec::new();
    let mut by_section: Vec<(&str, Vec<&str>)> = Vec::new();
    for entry in RELOADABLE {
        match entry.scope {
            Scope::Section => whole.push(format!("[{}]", entry.key)),
            Scope::Tables => whole.push(format!("[[{}]]", entry.key)),
            Scope::Key => {
                let (section, name) = entry.key.split_once('.').unwrap_or(("", entry.key));
                match by_section.iter_mut().find(|(s, _)| *s == section) {
                    Some((_, names)) => names.push(name),
                    None => by_section.push((section, vec![name])),
                }
            }
        }
    }
    let mut parts = whole;
    parts.extend(by_section.into_iter().map(|(section, names)| match section {
        "" => names.join(" / "),
        _ => format!("[{section}] {}", names.join(" / ")),
    }));
    format!("Reloaded: {}.", parts.join(", "))
}
