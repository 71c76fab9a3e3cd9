//! Reading an archive from its directory, with the proxy running or not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;

use super::disk::{self, SkippedFile};
use super::history::{History, Window};
use super::ArchiveError;

/// An archive read from `state_dir/robots-archive/` (see `docs/evidence.md`, "The archive").
///
/// [`ArchiveReader::open`] reads every authority's windows once; bodies are read when asked
/// for, and checked against their digest then, one at a time.
#[derive(Debug, Clone)]
pub struct ArchiveReader {
    root: PathBuf,
    histories: BTreeMap<String, History>,
    skipped: Vec<SkippedFile>,
}

impl ArchiveReader {
    /// The archive of `state_dir` (empty when it has none). An authority file that cannot be
    /// read or parsed (or that the proxy set aside as `.json.unreadable`) is skipped and named
    /// in [`ArchiveReader::skipped`]: the other authorities read as usual (issue 39, L2: one
    /// bad file failed every query). Fails only when the directory cannot be listed.
    pub fn open(state_dir: &Path) -> Result<ArchiveReader, ArchiveError> {
        let root = disk::root(state_dir);
        let (histories, skipped) = disk::read_histories(&root)?;
        Ok(ArchiveReader { root, histories, skipped })
    }

    /// The authority files [`ArchiveReader::open`] skipped, each with why, by path.
    pub fn skipped(&self) -> &[SkippedFile] {
        &self.skipped
    }

    /// Whether the file that would hold `authority`'s windows is among the skipped ones (its
    /// name is the SHA-256 of the authority): what the archive knew of it cannot be read.
    pub fn skipped_file_of(&self, authority: &str) -> Option<&SkippedFile> {
        let file = disk::authority_path(&self.root, authority);
        let aside = file.with_extension("json.unreadable");
        self.skipped.iter().find(|s| s.path == file || s.path == aside)
    }

    /// The archive's directory (`state_dir/robots-archive`).
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// Every authority with a history, `scheme://host[:port]`, sorted.
    pub fn authorities(&self) -> Vec<String> {
        self.histories.keys().cloned().collect()
    }

    /// The robots.txt URL of `authority`, if it has a history.
    pub fn robots_url(&self, authority: &str) -> Option<&str> {
        self.histories.get(authority).map(|h| h.url.as_str())
    }

    /// The windows of `authority`, oldest first (empty when it has no history).
    pub fn windows(&self, authority: &str) -> Vec<Window> {
        self.histories.get(authority).map(|h| h.windows.clone()).unwrap_or_default()
    }

    /// The window of `authority` in force at `at`, if any: `None` before its first fetch (or
    /// before the oldest window retention kept).
    pub fn in_force_at(&self, authority: &str, at: SystemTime) -> Option<Window> {
        self.histories.get(authority)?.in_force_at(at).cloned()
    }

    /// The bytes of the robots.txt whose SHA-256 is `sha256` (lowercase hex), if kept. `None`
    /// also for a file that does not hash to its name (see [`ArchiveReader::body_checked`]).
    pub fn body(&self, sha256: &str) -> Option<Bytes> {
        self.body_checked(sha256).ok().flatten()
    }

    /// [`ArchiveReader::body`], saying why a body could not be read: a read error, or
    /// [`ArchiveError::Corrupt`] for bytes that do not hash to their name.
    pub fn body_checked(&self, sha256: &str) -> Result<Option<Bytes>, ArchiveError> {
        disk::read_body(&self.root, sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39, L2: one authority file that does not parse, and one set aside, are skipped
    /// and named; the others read as usual.
    #[test]
    fn a_bad_authority_file_is_skipped_and_named() {
        let state = tempfile::tempdir().unwrap();
        let root = disk::root(state.path());
        let good = crate::history::History::new("http://a.test", "http://a.test/robots.txt");
        disk::write_history(&root, &good).unwrap();
        let bad = disk::authority_path(&root, "http://b.test");
        std::fs::write(&bad, b"{\"v\":1,\"authori").unwrap();
        let aside = disk::authority_path(&root, "http://c.test").with_extension("json.unreadable");
        std::fs::write(&aside, b"{").unwrap();
        let reader = ArchiveReader::open(state.path()).unwrap();
        assert_eq!(reader.authorities(), ["http://a.test"]);
        let mut want = vec![bad.clone(), aside.clone()];
        want.sort();
        let paths: Vec<_> = reader.skipped().iter().map(|s| s.path.clone()).collect();
        assert_eq!(paths, want);
        assert!(reader.skipped_file_of("http://b.test").unwrap().why.contains("does not parse"));
        assert!(reader.skipped_file_of("http://c.test").unwrap().why.contains("set aside"));
        assert!(reader.skipped_file_of("http://a.test").is_none());
    }
}
