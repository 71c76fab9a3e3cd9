//! What a reload of the configuration did (or, in a preview, would do): the report SIGHUP logs
//! and the admin listener's `POST /api/reload` and `GET /api/reload/preview` answer with. The
//! reloader itself is the root package's (`robots_proxy::reload::Reloader`); the report lives
//! here, beside [`crate::changes`], so that the admin listener can answer with it without
//! reaching the reloader's collaborators.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use crate::Change;

/// What the admin listener asks of the process's one reloader, which SIGHUP uses too: one
/// reload (or preview), its report once it is done. Implemented by the root package's
/// `Reloader`, so the admin listener needs nothing of what a reload applies.
pub trait Reloads: Send + Sync {
    /// Reloads (or previews, with [`Trigger::Preview`]) and reports.
    fn reload(&self, trigger: Trigger) -> Pin<Box<dyn Future<Output = ReloadReport> + Send + '_>>;
}

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Trigger {
    /// SIGHUP.
    #[serde(rename = "SIGHUP")]
    Signal,
    /// `POST /api/reload` on the admin listener.
    #[serde(rename = "POST /api/reload")]
    Api,
    /// `GET /api/reload/preview`: nothing is applied.
    #[serde(rename = "GET /api/reload/preview")]
    Preview,
}

impl Trigger {
    /// How the logs name it.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Signal => "SIGHUP",
            Trigger::Api => "POST /api/reload",
            Trigger::Preview => "GET /api/reload/preview",
        }
    }
}

/// What became of a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The new configuration is in force.
    Applied,
    /// The new configuration has errors: the running one stays.
    Refused,
    /// A preview: the configuration is valid and nothing was applied.
    Preview,
}

/// A key that differs from the value the process runs with and takes effect only after a
/// restart.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    /// The dotted key.
    pub key: String,
    /// The value in force (the one the process started with); secrets masked.
    pub running: serde_json::Value,
    /// The value configured now; secrets masked.
    pub configured: serde_json::Value,
    /// Why a reload cannot apply it.
    pub reason: &'static str,
}

/// One reason the configuration is refused.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadError {
    /// The dotted key, when the error is about one.
    pub key: Option<String>,
    /// Where the bad value came from (file, environment variable, flag), when known.
    pub origin: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// What became of `access.users_file` in a reload.
#[derive(Debug, Clone, Serialize)]
pub struct UsersReport {
    /// The users file.
    pub file: String,
    /// Whether its users are in force now; `false`: the users in force before stay.
    pub reloaded: bool,
    /// Why the file was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The answer to a reload: JSON for `POST /api/reload`, log lines for SIGHUP.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadReport {
    /// What asked for it.
    pub trigger: Trigger,
    /// Applied, refused, or a preview.
    pub outcome: Outcome,
    /// The reloadable keys whose values change (or, in a preview, would change), compared
    /// with the configuration in force; secrets masked.
    pub changed: Vec<Change>,
    /// The keys configured differently from what the process runs with that need a restart.
    pub restart_required: Vec<Pending>,
    /// Every error, when the configuration is refused.
    pub errors: Vec<ReloadError>,
    /// The users file, when there is one.
    pub users_file: Option<UsersReport>,
    /// Whether the audit log was reopened (`null` in a preview).
    pub audit_reopened: Option<bool>,
}

impl ReloadReport {
    /// A report for `trigger`, refused until something says otherwise.
    pub fn new(trigger: Trigger) -> Self {
        ReloadReport {
            trigger,
            outcome: Outcome::Refused,
            changed: Vec::new(),
            restart_required: Vec::new(),
            errors: Vec::new(),
            users_file: None,
            audit_reopened: None,
        }
    }

    /// The report with `error` (about `key`, when it names one) added, refused.
    pub fn refuse(mut self, key: Option<&str>, error: &dyn std::fmt::Display) -> Self {
        self.errors.push(ReloadError {
            key: key.map(str::to_owned),
            origin: None,
            message: error.to_string(),
        });
        self.outcome = Outcome::Refused;
        self
    }

    /// Logs the report: each change, the keys that need a restart, each error. A preview
    /// changes nothing, so what it would change is logged at debug only.
    pub fn log(&self) {
        let who = self.trigger.name();
        let preview = self.trigger == Trigger::Preview;
        for change in &self.changed {
            if preview {
                tracing::debug!(key = %change.key, old = %change.old, new = %change.new, "{who}: would change");
            } else {
                tracing::info!(key = %change.key, old = %change.old, new = %change.new, "{who}: changed");
            }
        }
        if !self.restart_required.is_empty() && !preview {
            let keys: Vec<&str> = self.restart_required.iter().map(|p| p.key.as_str()).collect();
            tracing::warn!(
                keys = %keys.join(", "),
                "{who}: these changes take effect only after a restart; the running values stay"
            );
        }
        for error in &self.errors {
            tracing::error!(
                key = error.key.as_deref().unwrap_or("-"),
                origin = error.origin.as_deref().unwrap_or("-"),
                error = %error.message,
                "{who}: configuration error"
            );
        }
    }
}
