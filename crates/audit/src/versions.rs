//! `robots_version` records: the first record in a file that names a robots.txt version
//! (`robots.sha256`) is preceded, in the same file, by one record holding that version's body,
//! so that every file is enough on its own to show which robots.txt each decision used.
//!
//! The writer's file (`writer::Sink`) keeps the set of versions already written to the file it
//! has open, and clears it whenever it opens a file (start, rotation, a file replaced under it,
//! after a write error). The record is serialised there, in the batch, just before the first
//! record that names the version, so it can never come after it or land in another file.

use std::collections::HashMap;
use std::sync::Arc;

use base64ct::Encoding;
use serde::Serialize;

use super::timestamp;
use robots_proxy_archive::robots_version::RobotsVersion;

/// The `robots.sha256` and `robots.fetched_at` fields of a record decided on a robots.txt
/// version: a shared pointer to the version, so a record copies no digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionFields(pub Arc<RobotsVersion>);

impl Serialize for VersionFields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("robots.sha256", self.0.sha256())?;
        map.serialize_entry("robots.fetched_at", self.0.fetched_at_text())?;
        map.end()
    }
}

/// Most (version, authority) pairs remembered per file. Past it the set is emptied, and the
/// versions in use are written once more: a file holds each version at least once, and more
/// than once only after this many distinct versions.
pub(super) const MAX_REMEMBERED: usize = 4096;

/// A record's version, to announce with a `robots_version` record if the file lacks it.
pub(super) struct Announce {
    pub(super) version: Arc<RobotsVersion>,
    /// `robots.state` of the first record naming it.
    pub(super) state: &'static str,
}

/// The versions written to the open file: digest → authorities.
#[derive(Default)]
pub(super) struct Written {
    seen: HashMap<Box<str>, Vec<Box<str>>>,
    count: usize,
}

impl Written {
    /// A new file: nothing written to it yet.
    pub(super) fn clear(&mut self) {
        self.seen.clear();
        self.count = 0;
    }

    /// Whether `version` is not yet in the file; remembers it as written.
    pub(super) fn first_time(&mut self, version: &RobotsVersion) -> bool {
        if let Some(authorities) = self.seen.get(version.sha256()) {
            if authorities.iter().any(|a| **a == *version.authority()) {
                return false;
            }
        }
        if self.count >= MAX_REMEMBERED {
            self.clear();
        }
        self.seen.entry(version.sha256().into()).or_default().push(version.authority().into());
        self.count += 1;
        true
    }
}

/// The `robots_version` line (newline included) announcing `announce`.
pub(super) fn line(announce: &Announce, node: Option<&str>) -> Vec<u8> {
    let v = &announce.version;
    let mut record = serde_json::Map::new();
    let mut put = |k: &str, value: serde_json::Value| {
        record.insert(k.to_owned(), value);
    };
    put("@timestamp", timestamp(std::time::SystemTime::now()).into());
    put("event.action", "robots_version".into());
    put(
        "event.reason",
        format!(
            "robots.txt of {} fetched {}: the version the following records name (sha256 {})",
            v.authority(),
            v.fetched_at_text(),
            v.sha256()
        )
        .into(),
    );
    put("robots.authority", v.authority().into());
    put("robots.url", v.url().into());
    put("robots.state", announce.state.into());
    put("robots.sha256", v.sha256().into());
    put("robots.fetched_at", v.fetched_at_text().into());
    if let Some(status) = v.status() {
        put("robots.status_code", status.into());
    }
    put("robots.body_bytes", v.body().len().into());
    match std::str::from_utf8(v.body()) {
        Ok(text) => put("robots.body", text.into()),
        Err(_) => put("robots.body_base64", base64ct::Base64::encode_string(v.body()).into()),
    }
    super::close_record(record, node)
}

/// The state words of the audit log, as `&'static str`, so a queued record carries its state
/// without a copy.
pub(super) fn state_word(state: &str) -> &'static str {
    ["fresh", "stale", "unavailable", "unreachable"]
        .into_iter()
        .find(|w| *w == state)
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(authority: &str, body: &'static [u8]) -> RobotsVersion {
        let url = format!("{authority}/robots.txt");
        RobotsVersion::new(
            authority,
            &url,
            bytes::Bytes::from_static(body),
            std::time::SystemTime::UNIX_EPOCH,
            Some(200),
        )
    }

    #[test]
    fn each_version_and_authority_once_until_cleared() {
        let mut written = Written::default();
        let a = version("http://a.test", b"x");
        assert!(written.first_time(&a));
        assert!(!written.first_time(&a));
        // The same bytes at another authority are announced for it too.
        assert!(written.first_time(&version("http://b.test", b"x")));
        written.clear();
        assert!(written.first_time(&a));
    }

    #[test]
    fn memory_is_bounded() {
        let mut written = Written::default();
        for i in 0..(MAX_REMEMBERED * 2) {
            let v = RobotsVersion::new(
                &format!("http://h{i}.test"),
                "u",
                bytes::Bytes::new(),
                std::time::SystemTime::UNIX_EPOCH,
                None,
            );
            assert!(written.first_time(&v));
            assert!(written.count <= MAX_REMEMBERED);
        }
    }

    #[test]
    fn a_body_that_is_not_utf8_is_base64() {
        let announce = Announce {
            version: Arc::new(version("http://a.test", b"Disallow: /\xff\n")),
            state: "fresh",
        };
        let line: serde_json::Value = serde_json::from_slice(&line(&announce, None)).unwrap();
        assert!(line.get("robots.body").is_none());
        let encoded = line["robots.body_base64"].as_str().unwrap();
        assert_eq!(base64ct::Base64::decode_vec(encoded).unwrap(), b"Disallow: /\xff\n");
        assert_eq!(line["robots.status_code"], 200);
    }
}
