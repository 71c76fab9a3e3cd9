//! The audit log: one JSON line per blocked request (optionally per decision), written by a
//! dedicated writer so that no log-level setting can hide it and nothing is dropped silently.
//!
//! SKELETON: the record type is the contract with the proxy; the writer (bounded channel, one
//! writer task, fsync policy, reopen on SIGHUP) is to be completed.
//!
//! Field names follow ECS / OpenTelemetry (`@timestamp`, `http.request.method`, `url.full`,
//! `user_agent.original`, `event.action`), with a `robots.*` namespace for ours.

use serde::Serialize;

use crate::config::AuditSection;

/// One audit record. Serialised flat, with dotted ECS field names.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditRecord {
    /// When the decision was made, RFC 3339 UTC.
    #[serde(rename = "@timestamp")]
    pub timestamp: String,
    /// `robots_disallow`, `robots_allow`, … (what the proxy did).
    #[serde(rename = "event.action")]
    pub action: String,
    /// `success` when the request was forwarded, `failure` when it was blocked.
    #[serde(rename = "event.outcome")]
    pub outcome: String,
    /// A sentence for a person.
    #[serde(rename = "event.reason")]
    pub reason: String,
    /// The client's address (`ip:port`).
    #[serde(rename = "client.address")]
    pub client_address: String,
    /// The request method.
    #[serde(rename = "http.request.method")]
    pub method: String,
    /// The status the proxy answered with (403 for a block), when known.
    #[serde(rename = "http.response.status_code", skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// The full URL requested.
    #[serde(rename = "url.full")]
    pub url: String,
    /// The authority (`scheme://host[:port]`).
    #[serde(rename = "url.domain")]
    pub domain: String,
    /// The path and query that were checked.
    #[serde(rename = "url.path")]
    pub path: String,
    /// The User-Agent header, if any.
    #[serde(rename = "user_agent.original", skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The product token used, if any.
    #[serde(rename = "robots.product_token", skip_serializing_if = "Option::is_none")]
    pub product_token: Option<String>,
    /// The deciding rule (`disallow: /private`), if a rule decided.
    #[serde(rename = "robots.rule", skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The deciding rule's line, if a rule decided.
    #[serde(rename = "robots.line", skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The user-agent line of the group that decided.
    #[serde(rename = "robots.group", skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The robots.txt URL.
    #[serde(rename = "robots.url")]
    pub robots_url: String,
    /// fresh, stale, unavailable or unreachable.
    #[serde(rename = "robots.state")]
    pub state: String,
    /// Age of the robots.txt in force, in seconds.
    #[serde(rename = "robots.age_seconds")]
    pub age_seconds: u64,
}

/// Why the audit log could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The file could not be opened or written.
    #[error("audit log {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The writer has stopped.
    #[error("the audit writer has stopped")]
    Closed,
}

/// A handle to the audit writer. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    _settings: AuditSection,
}

impl AuditLog {
    /// Opens (creates or appends to) the audit log at `path` and starts the writer task.
    pub fn open(path: std::path::PathBuf, settings: AuditSection) -> Result<Self, AuditError> {
        let _ = path;
        Ok(AuditLog { _settings: settings })
    }

    /// Whether every decision is recorded, not only blocks.
    pub fn all_decisions(&self) -> bool {
        self._settings.all_decisions
    }

    /// Queues a record; waits when the queue is full (never drops).
    pub async fn record(&self, _record: AuditRecord) -> Result<(), AuditError> {
        Ok(())
    }

    /// Reopens the file (after logrotate moved it).
    pub async fn reopen(&self) -> Result<(), AuditError> {
        Ok(())
    }

    /// Writes and syncs everything queued so far.
    pub async fn flush(&self) -> Result<(), AuditError> {
        Ok(())
    }
}
