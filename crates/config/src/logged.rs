//! The settings the audit log names in its lifecycle records (`proxy_start`, `proxy_stop`,
//! `proxy_reconfigured`; docs/audit.md, "Lifecycle records").

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{render, Config};
use robots_proxy_audit::LoggedSettings;

/// Lowercase hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The `[[exceptions]]` tables alone, as [`render`] writes them at the end of the whole.
#[derive(Serialize)]
struct Exceptions<'a> {
    exceptions: &'a [robots_proxy_decide::ExceptionEntry],
}

/// The text [`Config::logged_settings`] digests as the exceptions: the `[[exceptions]]` tables
/// as `config check` prints them (empty without exceptions).
pub fn exceptions_text(config: &Config) -> String {
    if config.exceptions.is_empty() {
        return String::new();
    }
    toml::to_string(&Exceptions { exceptions: &config.exceptions })
        .unwrap_or_else(|e| format!("# the exceptions cannot be shown as TOML: {e}\n"))
}

impl Config {
    /// The digest of this configuration as `config check` prints it (its TOML, before the
    /// comment lines), lowercase hex: `audit.config.sha256`.
    pub fn digest(&self) -> String {
        sha256_hex(render(self).as_bytes())
    }

    /// What the audit log's lifecycle records name of this configuration.
    pub fn logged_settings(&self) -> LoggedSettings {
        let mode = serde_json::to_value(self.policy.mode).ok();
        LoggedSettings {
            config_sha256: self.digest(),
            all_decisions: self.audit.all_decisions,
            policy_mode: mode.as_ref().and_then(|m| m.as_str()).unwrap_or("enforce").to_owned(),
            exceptions: self.exceptions.len(),
            exceptions_sha256: sha256_hex(exceptions_text(self).as_bytes()),
            usage: !self.usage.crawlers.is_empty(),
        }
    }
}
