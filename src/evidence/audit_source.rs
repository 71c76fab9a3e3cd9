//! Versions from audit files alone: each file holds a `robots_version` record (the body) before
//! the first record that names a version, and every record decided on robots.txt names its
//! version (`robots.sha256`, `robots.fetched_at`) at its `@timestamp`.
//!
//! What a file gives ([`super::history`]):
//!
//! * a `robots_version` record: the body (checked against its digest), and a fetch at its
//!   `robots.fetched_at`;
//! * a record naming a version: the version in force at its `@timestamp`, and fetched at its
//!   `robots.fetched_at`;
//! * a `robots_allow` or `robots_disallow` record naming no version: no file in force at its
//!   `@timestamp`, everything allowed (`robots.state` `unavailable`, or a verdict to allow) or
//!   disallowed (`unreachable`).
//!
//! Each observation names the instance whose record it is (`service.node.name`, in a fleet).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64ct::Encoding;
use serde_json::Value;

use super::history::{Body, History, InForce, Observation};
use super::time::parse_time;
use super::EvidenceError;

/// One audit record kept for the answer, with its bytes unchanged.
#[derive(Debug, Clone)]
pub struct Kept {
    /// The file it came from.
    pub file: PathBuf,
    /// Its line number, from 1.
    pub line: usize,
    /// Its bytes, without the newline.
    pub raw: Vec<u8>,
    /// Parsed.
    pub value: Value,
    /// Its `@timestamp`.
    pub at: SystemTime,
}

/// Reads `path` into `history`, and keeps the records `keep` accepts (given each parsed record
/// and its time) in `kept`.
pub(super) fn read_file(
    path: &Path,
    history: &mut History,
    keep: &dyn Fn(&Value, SystemTime) -> bool,
    kept: &mut Vec<Kept>,
) -> Result<(), EvidenceError> {
    let unreadable = |source| EvidenceError::Unreadable { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    if file.metadata().map_err(unreadable)?.is_dir() {
        return Err(EvidenceError::Unreadable {
            path: path.to_owned(),
            source: std::io::Error::other("it is a directory"),
        });
    }
    let mut reader = BufReader::new(file);
    let mut raw = Vec::new();
    let mut number = 0;
    loop {
        raw.clear();
        if reader.read_until(b'\n', &mut raw).map_err(unreadable)? == 0 {
            return Ok(());
        }
        number += 1;
        while matches!(raw.last(), Some(b'\n' | b'\r')) {
            raw.pop();
        }
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let bad =
            |reason: String| EvidenceError::BadLine { path: path.to_owned(), line: number, reason };
        let value: Value = match serde_json::from_slice(&raw) {
            Ok(value) => value,
            // A record cut short (the input ends inside it): a torn line, what a crash while
            // writing leaves (the writer ends it with a newline when it opens the file again).
            // Not tampering and not bad input: `audit verify` reports it, evidence skips it.
            Err(e) if e.is_eof() && raw.first() == Some(&b'{') => continue,
            Err(e) => return Err(bad(format!("not JSON: {e}"))),
        };
        if !value.is_object() {
            return Err(bad("not a JSON object".to_owned()));
        }
        let Some(at) = value.get("@timestamp") else { continue };
        let at = at
            .as_str()
            .ok_or_else(|| bad("@timestamp is not a string".to_owned()))
            .and_then(|s| parse_time(s).map_err(|e| bad(format!("@timestamp: {e}"))))?;
        let instance = history.audit_record_at(at, text(&value, "service.node.name"));
        take(&value, at, instance, history).map_err(bad)?;
        if keep(&value, at) {
            kept.push(Kept { file: path.to_owned(), line: number, raw: raw.clone(), value, at });
        }
    }
}

/// A string field of a record.
fn text<'v>(record: &'v Value, field: &str) -> Option<&'v str> {
    record.get(field).and_then(Value::as_str)
}

/// What one record (written by `instance`) tells of the history.
fn take(
    record: &Value,
    at: SystemTime,
    instance: Option<std::sync::Arc<str>>,
    history: &mut History,
) -> Result<(), String> {
    let Some(authority) = text(record, "robots.authority") else { return Ok(()) };
    // A `would_block` (report-only mode) tells what its refusal would have: the action
    // enforcement would have taken.
    let action = match text(record, "event.action").unwrap_or("") {
        "would_block" => text(record, "robots.would_action").unwrap_or(""),
        action => action,
    };
    let time = |field: &str| match text(record, field) {
        Some(s) => parse_time(s).map(Some).map_err(|e| format!("{field}: {e}")),
        None => Ok(None),
    };
    let fetched_at = time("robots.fetched_at")?;
    // What the record says was in force at `at`, from `at` on.
    let seen = |what: InForce| Observation {
        fetch_key: fetched_at,
        from_audit: true,
        instance: instance.clone(),
        ..Observation::at(at, what)
    };
    match text(record, "robots.sha256") {
        Some(digest) => {
            if digest.len() != 64 || !digest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            {
                return Err(format!("robots.sha256 {digest:?} is not a lowercase hex SHA-256"));
            }
            let what = InForce::File(digest.to_owned());
            match action {
                "robots_version" => {
                    let body = version_body(record)?;
                    let actual = crate::robots_version::sha256_hex(&body);
                    if actual != digest {
                        return Err(format!(
                            "the body's SHA-256 is {actual}, not robots.sha256 {digest}: the \
                             record was altered"
                        ));
                    }
                    let url = text(record, "robots.url").unwrap_or("").to_owned();
                    let status = record
                        .get("robots.status_code")
                        .and_then(Value::as_u64)
                        .and_then(|s| u16::try_from(s).ok());
                    history.add_body(digest, Body { bytes: body, url, status });
                }
                // A fetch taken in (issue 39, H2): in force from `at` to its expiry.
                "robots_fetch" => {
                    let until = time("robots.expires_at")?;
                    history.observe(authority, Observation { until, ..seen(what.clone()) });
                }
                _ => history.observe(authority, seen(what.clone())),
            }
            if let Some(fetched) = fetched_at {
                history.observe(authority, Observation { at: fetched, fetch: true, ..seen(what) });
            }
        }
        None if action == "robots_fetch" => {
            let what = match text(record, "robots.consequence") {
                Some("allow_all") => InForce::AllowAll,
                Some("disallow_all") => InForce::DisallowAll,
                other => {
                    return Err(format!(
                        "robots_fetch without robots.sha256: consequence {other:?}"
                    ))
                }
            };
            let note = text(record, "event.reason").map(str::to_owned);
            let until = time("robots.expires_at")?;
            history.observe(authority, Observation { until, note, ..seen(what) });
        }
        None if matches!(action, "robots_allow" | "robots_disallow") => {
            let state = text(record, "robots.state").unwrap_or("");
            let what = match (state, action) {
                ("unavailable", _) | ("unreachable", "robots_allow") => InForce::AllowAll,
                ("unreachable", _) => InForce::DisallowAll,
                _ => return Ok(()),
            };
            let note = text(record, "event.reason").map(str::to_owned);
            history.observe(authority, Observation { note, ..seen(what) });
        }
        None => {}
    }
    Ok(())
}

/// The body of a `robots_version` record: `robots.body`, or `robots.body_base64` decoded.
fn version_body(record: &Value) -> Result<Vec<u8>, String> {
    if let Some(body) = text(record, "robots.body") {
        return Ok(body.as_bytes().to_vec());
    }
    match text(record, "robots.body_base64") {
        Some(encoded) => base64ct::Base64::decode_vec(encoded)
            .map_err(|e| format!("robots.body_base64 is not base64: {e}")),
        None => Err("a robots_version record without robots.body or robots.body_base64".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<usize, EvidenceError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, text).unwrap();
        let mut kept = Vec::new();
        read_file(&path, &mut History::default(), &|_, _| true, &mut kept)?;
        Ok(kept.len())
    }

    #[test]
    fn a_torn_line_is_skipped_and_other_bad_lines_refused() {
        let whole = |n: u8| {
            format!("{{\"@timestamp\":\"2026-11-26T00:00:0{n}.000Z\",\"event.action\":\"x\"}}\n")
        };
        // A record cut short by a crash, then ended by the writer's newline at its next open.
        let torn = "{\"@timestamp\":\"2026-11-26T00:00:01.0\n";
        assert_eq!(read(&format!("{}{torn}{}", whole(0), whole(2))).unwrap(), 2);
        // At the very end, without its newline.
        assert_eq!(read(&format!("{}{}", whole(0), torn.trim_end())).unwrap(), 1);
        // Anything else that does not parse is bad input, named by its line.
        for bad in ["hello\n", "{\"a\":1}}\n", "[1,\n"] {
            match read(&format!("{}{bad}", whole(0))) {
                Err(EvidenceError::BadLine { line: 2, .. }) => {}
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
