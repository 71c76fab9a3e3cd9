//! `robots_fetch` records: one per robots.txt result the store takes in and decides with (a
//! fetch, a copy taken over from the fleet or read back from the disk), whatever
//! `audit.all_decisions` says (issue 39, H2). With blocks alone in the log, a version that only
//! allowed requests were decided on never reached it, and `evidence --audit` named the wrong
//! version and decision for that time. One record per fetch, not per decision; the version's
//! body comes before it, in its file, as for every record that names a version
//! (`versions.rs`).
//!
//! Each record names when the result stops being used without a new fetch
//! (`robots.expires_at`), so `evidence` tells a time the proxy was deciding with it from a time
//! it was not (stopped, or idle past the expiry: the next request would have fetched again).

use robots_proxy_archive::Observation;

use super::{timestamp, versions, writer, AuditError, AuditLog, Command};

impl AuditLog {
    /// Queues the `robots_fetch` record of `seen`; waits when the queue is full (never drops).
    pub async fn record_fetch(&self, seen: &Observation) -> Result<(), AuditError> {
        let node = self.shared.node.get().map(String::as_str);
        let line = line(seen, node);
        let announce = seen
            .version
            .clone()
            .map(|version| versions::Announce { version, state: versions::state_word(seen.state) });
        let pending = writer::Pending { line, announce };
        self.shared.tx.send(Command::Record(pending, None)).await.map_err(|_| AuditError::Closed)
    }
}

/// The record's line, newline included.
pub(super) fn line(seen: &Observation, node: Option<&str>) -> Vec<u8> {
    let mut record = serde_json::Map::new();
    let mut put = |k: &str, value: serde_json::Value| {
        record.insert(k.to_owned(), value);
    };
    let cause = match (seen.status, &seen.error) {
        (_, Some(e)) => e.clone(),
        (Some(s), None) => format!("HTTP {s}"),
        (None, None) => "no status".to_owned(),
    };
    let what = match &seen.version {
        Some(v) => format!("the rules of version sha256 {}", v.sha256()),
        None => format!("no file: {}", seen.consequence.as_str().replace('_', " ")),
    };
    put("@timestamp", timestamp(seen.now).into());
    put("event.action", "robots_fetch".into());
    put("event.outcome", "success".into());
    put(
        "event.reason",
        format!(
            "robots.txt of {} taken in ({cause}, {}): decisions use {what} until a new fetch, \
             due at {}",
            seen.authority,
            seen.state,
            timestamp(seen.expires_at)
        )
        .into(),
    );
    put("robots.authority", seen.authority.as_str().into());
    put("robots.url", seen.url.as_str().into());
    put("robots.state", seen.state.into());
    put("robots.consequence", seen.consequence.as_str().into());
    if let Some(status) = seen.status {
        put("robots.status_code", status.into());
    }
    if let Some(error) = &seen.error {
        put("robots.error", error.as_str().into());
    }
    match &seen.version {
        Some(v) => {
            put("robots.sha256", v.sha256().into());
            put("robots.fetched_at", v.fetched_at_text().into());
        }
        None => put("robots.fetched_at", timestamp(seen.at).into()),
    }
    put("robots.expires_at", timestamp(seen.expires_at).into());
    if seen.folds_case {
        put("robots.folds_case", true.into());
    }
    super::close_record(record, node)
}
