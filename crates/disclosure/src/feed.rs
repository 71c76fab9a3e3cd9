//! The change feed: one entry whenever what is disclosed changes (the SHA-256 of the canonical
//! document differs from the newest entry's), at start or on a reload. Kept in
//! `state_dir/disclosure/feed.json` (written to a temporary file and renamed over, so a crash
//! leaves the old or the new file, never half of one), so the feed survives restarts; the
//! newest `disclosure.feed_entries` entries are kept. Served as Atom (RFC 4287).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::document::{crawler_digest, Document};
use super::html::escape;

/// One change of the disclosure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// 1 for the first entry ever, then one more each time.
    pub seq: u64,
    /// When the change was seen (RFC 3339).
    pub updated: String,
    /// The document's digest (hex SHA-256 of its canonical JSON).
    pub digest: String,
    /// What changed, for people.
    pub summary: String,
    /// Each crawler's name → the digest of its part.
    pub crawlers: BTreeMap<String, String>,
}

/// The entries, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Feed {
    /// Newest first.
    pub entries: Vec<Entry>,
}

impl Feed {
    /// The feed kept at `path`; empty when there is none. A file that cannot be read as a feed
    /// is logged and started anew (it is replaced at the next change).
    pub fn load(path: &Path) -> Feed {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(file = %path.display(), error = %e,
                    "the disclosure feed cannot be read; it starts anew");
                Feed::default()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Feed::default(),
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e,
                    "the disclosure feed cannot be read; it starts anew");
                Feed::default()
            }
        }
    }

    /// Writes the feed to `path` atomically (a temporary file in the same directory, renamed).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        temp.write_all(&serde_json::to_vec_pretty(self).map_err(io::Error::other)?)?;
        temp.as_file().sync_all()?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Adds an entry for `doc` at `now` if its digest differs from the newest entry's, keeping
    /// at most `keep` entries. Whether one was added.
    pub fn record(&mut self, doc: &Document, now: SystemTime, keep: usize) -> bool {
        let digest = doc.digest();
        let last = self.entries.first();
        if last.is_some_and(|e| e.digest == digest) {
            return false;
        }
        let crawlers: BTreeMap<String, String> =
            doc.crawlers.iter().map(|c| (c.name.clone(), crawler_digest(c))).collect();
        let summary = match last {
            None => format!(
                "First publication: {} crawler(s){}.",
                crawlers.len(),
                list(crawlers.keys().map(String::as_str))
            ),
            Some(last) => {
                let added: Vec<&str> = crawlers
                    .keys()
                    .filter(|k| !last.crawlers.contains_key(*k))
                    .map(String::as_str)
                    .collect();
                let removed: Vec<&str> = last
                    .crawlers
                    .keys()
                    .filter(|k| !crawlers.contains_key(*k))
                    .map(String::as_str)
                    .collect();
                let changed: Vec<&str> = crawlers
                    .iter()
                    .filter(|(k, d)| last.crawlers.get(*k).is_some_and(|l| l != *d))
                    .map(|(k, _)| k.as_str())
                    .collect();
                let mut parts = Vec::new();
                for (what, names) in [("added", added), ("removed", removed), ("changed", changed)]
                {
                    if !names.is_empty() {
                        parts.push(format!("{what}: {}", names.join(", ")));
                    }
                }
                if parts.is_empty() {
                    "The operator's details changed.".to_owned()
                } else {
                    format!("Crawlers {}.", parts.join("; "))
                }
            }
        };
        let seq = last.map_or(1, |e| e.seq + 1);
        let updated = humantime::format_rfc3339_seconds(now).to_string();
        self.entries.insert(0, Entry { seq, updated, digest, summary, crawlers });
        self.entries.truncate(keep.max(1));
        true
    }

    /// The newest entry's time, if any.
    pub fn updated(&self) -> Option<&str> {
        self.entries.first().map(|e| e.updated.as_str())
    }

    /// The feed as Atom (RFC 4287), for a disclosure at `public_url` by `operator`.
    pub fn atom(&self, public_url: &str, operator: &str) -> String {
        let base = public_url.trim_end_matches('/');
        let host = url::Url::parse(public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "localhost".into());
        let updated = self.updated().unwrap_or("1970-01-01T00:00:00Z");
        let mut out = String::with_capacity(1024 + 512 * self.entries.len());
        out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
        out.push_str("<feed xmlns=\"http://www.w3.org/2005/Atom\">\n");
        out.push_str(&format!("  <id>{}</id>\n", escape(&format!("{base}/crawlers.atom"))));
        out.push_str(&format!("  <title>{} crawlers: changes</title>\n", escape(operator)));
        out.push_str(&format!("  <updated>{}</updated>\n", escape(updated)));
        out.push_str(&format!("  <author><name>{}</name></author>\n", escape(operator)));
        out.push_str(&format!(
            "  <link rel=\"self\" type=\"application/atom+xml\" href=\"{}\"/>\n",
            escape(&format!("{base}/crawlers.atom"))
        ));
        out.push_str(&format!(
            "  <link rel=\"alternate\" type=\"text/html\" href=\"{}\"/>\n",
            escape(&format!("{base}/crawlers"))
        ));
        out.push_str("  <generator>robots-proxy</generator>\n");
        for e in &self.entries {
            let date = e.updated.get(..10).unwrap_or("1970-01-01");
            out.push_str("  <entry>\n");
            out.push_str(&format!(
                "    <id>{}</id>\n",
                escape(&format!("tag:{host},{date}:crawlers/{}", e.seq))
            ));
            out.push_str(&format!("    <title>{}</title>\n", escape(&e.summary)));
            out.push_str(&format!("    <updated>{}</updated>\n", escape(&e.updated)));
            out.push_str(&format!(
                "    <link rel=\"alternate\" type=\"text/html\" href=\"{}\"/>\n",
                escape(&format!("{base}/crawlers"))
            ));
            out.push_str(&format!(
                "    <summary type=\"text\">{} Digest of the disclosed document (SHA-256 of its \
                 canonical JSON): {}.</summary>\n",
                escape(&e.summary),
                escape(&e.digest)
            ));
            out.push_str("  </entry>\n");
        }
        out.push_str("</feed>\n");
        out
    }
}

fn list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(": {}", names.join(", "))
    }
}
