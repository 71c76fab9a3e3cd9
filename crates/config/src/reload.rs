//! What a reload changes: the configuration's keys compared one by one ([`changes`]), which of
//! them a running proxy applies ([`super::RELOADABLE`]) and why the others need a restart
//! ([`super::restart_reason`]), with secrets masked ([`is_secret`]).

use std::collections::{BTreeMap, BTreeSet};

use figment::value::Value;
use serde::Serialize;

use super::{is_reloadable, Config, Schema};

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
/// (`robots_proxy_disclosure`) is generated from it, so a reload never publishes a value the proxy
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
