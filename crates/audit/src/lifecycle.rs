//! Lifecycle records (issue 39, item 2): `proxy_start` when the proxy starts, `proxy_stop` at a
//! clean stop, `proxy_reconfigured` when a reload changes the configuration in force, each
//! naming the configuration (its digest) and the settings that change what the log holds;
//! `audit_key_changed` when the checkpoint key is not the one that signed the file's last
//! checkpoint. So the log itself says when it was being written, and under which rules: a gap
//! between a `proxy_stop` and the next `proxy_start` is a stopped proxy, not lost records; a
//! stretch with `audit.config.all_decisions` false holds refusals only.

use super::{timestamp, AuditError, AuditLog, Command};

/// The configuration in force as the log names it (docs/audit.md, "Lifecycle records"). Built
/// by `Config::logged_settings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedSettings {
    /// `audit.config.sha256`: SHA-256 of the effective configuration as `config check` prints
    /// it (its TOML, without the comment lines), lowercase hex.
    pub config_sha256: String,
    /// `audit.config.all_decisions`.
    pub all_decisions: bool,
    /// `audit.config.policy_mode`: `enforce` or `report`.
    pub policy_mode: String,
    /// `audit.config.exceptions`: how many `[[exceptions]]`.
    pub exceptions: usize,
    /// `audit.config.exceptions_sha256`: SHA-256 of the `[[exceptions]]` tables as `config
    /// check` prints them.
    pub exceptions_sha256: String,
    /// `audit.config.usage`: whether AI usage preferences apply (`[[usage.crawlers]]` names a
    /// crawler).
    pub usage: bool,
}

impl LoggedSettings {
    /// The names (as in `audit.config.changed`) of the settings that differ from `before`.
    pub(crate) fn changes_from(&self, before: &LoggedSettings) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.all_decisions != before.all_decisions {
            out.push("all_decisions");
        }
        if self.policy_mode != before.policy_mode {
            out.push("policy_mode");
        }
        if self.exceptions != before.exceptions
            || self.exceptions_sha256 != before.exceptions_sha256
        {
            out.push("exceptions");
        }
        if self.usage != before.usage {
            out.push("usage");
        }
        if self.config_sha256 != before.config_sha256 {
            out.push("configuration");
        }
        out
    }

    fn put(&self, record: &mut serde_json::Map<String, serde_json::Value>) {
        let mut put = |k: &str, value: serde_json::Value| {
            record.insert(k.to_owned(), value);
        };
        put("service.version", env!("CARGO_PKG_VERSION").into());
        put("process.pid", std::process::id().into());
        put("audit.config.sha256", self.config_sha256.clone().into());
        put("audit.config.all_decisions", self.all_decisions.into());
        put("audit.config.policy_mode", self.policy_mode.clone().into());
        put("audit.config.exceptions", self.exceptions.into());
        put("audit.config.exceptions_sha256", self.exceptions_sha256.clone().into());
        put("audit.config.usage", self.usage.into());
    }

    fn summary(&self) -> String {
        format!(
            "configuration sha256 {}, all_decisions {}, policy.mode {}, {} exception(s), usage \
             preferences {}",
            self.config_sha256,
            self.all_decisions,
            self.policy_mode,
            self.exceptions,
            if self.usage { "on" } else { "off" }
        )
    }
}

/// Which lifecycle record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle<'a> {
    /// `proxy_start`: the proxy started with these settings.
    Start,
    /// `proxy_stop`: a clean stop (SIGTERM, SIGINT); the closing checkpoint follows it.
    Stop,
    /// `proxy_reconfigured`: a reload changed the settings named (from `before`).
    Reconfigured(&'a LoggedSettings),
}

impl AuditLog {
    /// Queues the `proxy_start` record: the proxy starts with `settings`. Call it once the
    /// instance's name is set ([`AuditLog::set_node_name`]).
    pub async fn record_start(&self, settings: LoggedSettings) -> Result<(), AuditError> {
        let line = line(Lifecycle::Start, &settings, self.node());
        *self.shared.logged.lock().unwrap_or_else(|e| e.into_inner()) = Some(settings);
        self.queue(line).await
    }

    /// After a reload: queues a `proxy_reconfigured` record when `settings` differ from those
    /// last recorded (nothing otherwise).
    pub async fn record_settings(&self, settings: LoggedSettings) -> Result<(), AuditError> {
        let line = {
            let mut logged = self.shared.logged.lock().unwrap_or_else(|e| e.into_inner());
            let line = match logged.as_ref() {
                Some(before) => line(Lifecycle::Reconfigured(before), &settings, self.node()),
                None => line(Lifecycle::Start, &settings, self.node()),
            };
            *logged = Some(settings);
            line
        };
        match line {
            Some(line) => self.queue(Some(line)).await,
            None => Ok(()),
        }
    }

    /// Queues the `proxy_stop` record, with the settings last recorded; call it before
    /// [`AuditLog::close`], which writes the closing checkpoint after it.
    pub async fn record_stop(&self) -> Result<(), AuditError> {
        let logged = self.shared.logged.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(settings) = logged else { return Ok(()) };
        self.queue(line(Lifecycle::Stop, &settings, self.node())).await
    }

    fn node(&self) -> Option<&str> {
        self.shared.node.get().map(String::as_str)
    }

    async fn queue(&self, line: Option<Vec<u8>>) -> Result<(), AuditError> {
        let Some(line) = line else { return Ok(()) };
        let pending = super::writer::Pending::from(line);
        self.shared.tx.send(Command::Record(pending, None)).await.map_err(|_| AuditError::Closed)
    }
}

/// The record's line, newline included; `None` for a reload that changed nothing it names.
fn line(what: Lifecycle<'_>, settings: &LoggedSettings, node: Option<&str>) -> Option<Vec<u8>> {
    let mut record = serde_json::Map::new();
    let version = env!("CARGO_PKG_VERSION");
    let (action, reason) = match what {
        Lifecycle::Start => {
            ("proxy_start", format!("robots-proxy {version} started: {}", settings.summary()))
        }
        Lifecycle::Stop => (
            "proxy_stop",
            format!("robots-proxy {version} stopping (a clean stop): {}", settings.summary()),
        ),
        Lifecycle::Reconfigured(before) => {
            let changed = settings.changes_from(before);
            if changed.is_empty() {
                return None;
            }
            record.insert("audit.config.changed".to_owned(), changed.join(",").into());
            let reason = format!("a reload changed {}: {}", changed.join(", "), settings.summary());
            ("proxy_reconfigured", reason)
        }
    };
    record.insert("@timestamp".to_owned(), timestamp(std::time::SystemTime::now()).into());
    record.insert("event.action".to_owned(), action.into());
    record.insert("event.outcome".to_owned(), "success".into());
    record.insert("event.reason".to_owned(), reason.into());
    settings.put(&mut record);
    Some(super::close_record(record, node))
}

/// The `audit_key_changed` line: the checkpoint key is `new`, the file's last checkpoint was
/// signed by `old` (key ids, RFC 7638 thumbprints).
pub(super) fn key_changed_line(old: &str, new: &str, node: Option<&str>) -> Vec<u8> {
    let mut record = serde_json::Map::new();
    let mut put = |k: &str, value: serde_json::Value| {
        record.insert(k.to_owned(), value);
    };
    put("@timestamp", timestamp(std::time::SystemTime::now()).into());
    put("event.action", "audit_key_changed".into());
    put("event.outcome", "success".into());
    put(
        "event.reason",
        format!(
            "the checkpoint key changed: checkpoints are signed by key {new} from here on; the \
             file's last checkpoint was signed by key {old}"
        )
        .into(),
    );
    put("audit.key.previous_keyid", old.into());
    put("audit.key.keyid", new.into());
    super::close_record(record, node)
}
