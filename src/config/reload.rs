//! What a reload changes: the configuration's keys compared one by one ([`changes`]), which of
//! them a running proxy applies ([`RELOADABLE`]) and why the others need a restart
//! ([`restart_reason`]), with secrets masked ([`is_secret`]).

use std::collections::{BTreeMap, BTreeSet};

use figment::value::Value;
use serde::Serialize;

use super::{Config, Schema};

/// Keys (or, ending in `.`, sections) that a running proxy applies on a reload (SIGHUP,
/// `POST /api/reload`), for requests and connections that start afterwards. Every other key
/// takes effect only after a restart; [`restart_reason`] says why.
pub const RELOADABLE: &[&str] = &[
    "policy.",
    "usage.",
    "audit.all_decisions",
    "audit.fsync",
    "audit.fsync_interval",
    "log.level",
    "upstream.response_timeout",
    "upstream.body_idle_timeout",
    "exceptions",
    "exceptions.",
    "access.users_file",
    "access.allow_clients",
    "access.allow_destinations",
    "access.client_ca",
    "access.client_certificate",
    "proxy.tls_certificate",
    "proxy.tls_key",
    "pacing.",
    "robots.max_age",
    "robots.min_age",
    "robots.give_up_after",
    "robots.retry_initial",
    "robots.retry_max",
    "robots.refresh_ahead",
    "https.mode",
    "https.connect_ports",
    "https.audit_tunnels",
    "https.tunnel_idle_timeout",
    "https.ca_cert",
    "https.ca_key",
    "signing.lifetime",
    "signing.components",
    "signing.reuse",
    "signing.keep_client_signatures",
    "signing.client_signatures",
    "signing.keys_dir",
    "signing.directory_lifetime",
    "signing.keys",
    "signing.identities",
    "disclosure.",
];

/// Whether `key` is applied on a reload (see [`RELOADABLE`]).
pub fn is_reloadable(key: &str) -> bool {
    RELOADABLE.iter().any(|r| if r.ends_with('.') { key.starts_with(r) } else { key == *r })
}

/// Why a change to `key` (one that is not [`is_reloadable`]) takes effect only after a restart.
pub fn restart_reason(key: &str) -> &'static str {
    const LISTENER: &str = "the address of a listener: binding it again would drop the \
                            connections open on it";
    match key {
        "proxy.listen" | "proxy.tls_listen" | "admin.listen" | "signing.directory_listen" => {
            LISTENER
        }
        "state_dir" => {
            "holds the robots.txt state, the archive, the default CA and the audit log, which \
             are opened at start"
        }
        "https.upstream_ca_file" => {
            "the TLS client configuration for origins is built once, shared by forwards, \
             tunnels and robots.txt fetches"
        }
        "log.format" => "the log subscriber is installed at start",
        "proxy.via"
        | "proxy.header_read_timeout"
        | "proxy.shutdown_grace"
        | "proxy.shutdown_delay" => "read by the listener when the proxy starts",
        _ if key.starts_with("fleet.") => {
            "the Redis connection, the shared robots.txt store and the shared pace are built \
             at start"
        }
        _ if key.starts_with("admin.") => "the admin listener's settings apply when it is bound",
        "limits.transparent_huge_pages" => "set for the process when it starts",
        _ if key.starts_with("limits.") => {
            "the connection gate and the listeners' HTTP settings are built when they are bound"
        }
        _ if key.starts_with("upstream.") => "the pool of origin connections is built at start",
        _ if key.starts_with("robots.") => {
            "the robots.txt fetcher, its slots and the cache's memory bound are built at start \
             (the cache is kept across reloads)"
        }
        _ if key.starts_with("audit.") => {
            "the audit log file is opened at start (a reload reopens the same path)"
        }
        _ if key.starts_with("archive.") => "the robots.txt archive is opened at start",
        _ => "applied at start only",
    }
}

/// Whether the value of `key` is a secret, shown as `***` in a reload's report: a key named
/// for a password, secret, credential or token file. (`fleet.redis` is shown with its
/// password masked, as everywhere: see `fleet::mask_redis_url`.)
pub fn is_secret(key: &str) -> bool {
    let name = key.rsplit('.').next().unwrap_or(key);
    ["password", "secret", "credential", "token_file"].iter().any(|s| name.contains(s))
}

/// The configuration in force after a reload from `running` (what the process started with)
/// to `new`: `new`, with every key that takes effect only after a restart (not
/// [`is_reloadable`]) left at its running value. What is disclosed as running
/// (`crate::disclosure`) is generated from it, so a reload never publishes a value the proxy
/// does not apply. `new` itself when the two cannot be merged (not expected: both serialise).
pub fn in_force(running: &Config, new: &Config) -> Config {
    let pending: Vec<String> =
        changes(running, new).into_iter().filter(|c| !c.reloadable).map(|c| c.key).collect();
    if pending.is_empty() {
        return new.clone();
    }
    let merged = (|| {
        let from = serde_json::to_value(running).ok()?;
        let mut into = serde_json::to_value(new).ok()?;
        for key in &pending {
            let pointer = format!("/{}", key.replace('.', "/"));
            match (from.pointer(&pointer), into.pointer_mut(&pointer)) {
                (Some(value), Some(slot)) => *slot = value.clone(),
                // A key set on one side only: the parent, as running, carries it.
                _ => {
                    let parent = &pointer[..pointer.rfind('/')?];
                    let value = from.pointer(parent)?.clone();
                    *into.pointer_mut(parent)? = value;
                }
            }
        }
        serde_json::from_value::<Config>(into).ok()
    })();
    merged.unwrap_or_else(|| new.clone())
}

/// One key whose value differs between two configurations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The dotted key (`pacing.default_rps`); a list (`pacing.sites`, `exceptions`) is one key.
    pub key: String,
    /// The value before, as JSON (`null`: unset); `"***"` for a secret.
    pub old: serde_json::Value,
    /// The value after, as JSON (`null`: unset); `"***"` for a secret.
    pub new: serde_json::Value,
    /// Whether a reload applies it ([`is_reloadable`]).
    pub reloadable: bool,
}

/// Every key whose value differs between `old` and `new`, sorted, secrets masked.
pub fn changes(old: &Config, new: &Config) -> Vec<Change> {
    let (before, after) = (leaves(old), leaves(new));
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let shown = |key: &str, value: Option<&Value>| match value {
        None => serde_json::Value::Null,
        Some(_) if is_secret(key) => serde_json::Value::from("***"),
        Some(value) => serde_json::to_value(value).unwrap_or(serde_json::Value::Null),
    };
    let mut out: Vec<Change> = keys
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| Change {
            key: k.clone(),
            old: shown(k, before.get(k)),
            new: shown(k, after.get(k)),
            reloadable: is_reloadable(k),
        })
        .collect();
    // The Redis URL is written with its password masked: a change of the password alone
    // shows no difference there, so it is said here.
    if old.fleet.redis != new.fleet.redis && !out.iter().any(|c| c.key == "fleet.redis") {
        out.push(Change {
            key: "fleet.redis".to_owned(),
            old: serde_json::Value::from("*** (credentials)"),
            new: serde_json::Value::from("*** (credentials changed)"),
            reloadable: is_reloadable("fleet.redis"),
        });
        out.sort_by(|a, b| a.key.cmp(&b.key));
    }
    out
}

/// The keys whose values differ between `old` and `new` and that need a restart to take
/// effect, dotted and sorted.
pub fn needs_restart(old: &Config, new: &Config) -> Vec<String> {
    changes(old, new).into_iter().filter(|c| !c.reloadable).map(|c| c.key).collect()
}

/// The configuration's values by dotted key, tables left out (their keys are there).
fn leaves(config: &Config) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Ok(Value::Dict(_, dict)) = Value::serialize(config) {
        Schema::leaves("", &dict, &mut out);
    }
    out.retain(|_, v| !matches!(v, Value::Dict(..)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 41 (review finding 8): what a reload puts in force keeps the running value of a
    /// restart-only key and takes the new value of a reloadable one.
    #[test]
    fn in_force_keeps_restart_only_keys_at_their_running_values() {
        let running = Config::default();
        let mut new = Config::default();
        new.robots.max_redirects = running.robots.max_redirects + 3;
        new.robots.max_age = running.robots.max_age * 2;
        new.proxy.via = "changed".into();
        let merged = in_force(&running, &new);
        assert_eq!(merged.robots.max_redirects, running.robots.max_redirects, "restart-only");
        assert_eq!(merged.proxy.via, running.proxy.via, "restart-only");
        assert_eq!(merged.robots.max_age, new.robots.max_age, "reloadable");
        assert!(changes(&merged, &new).iter().all(|c| !c.reloadable));
    }
}
