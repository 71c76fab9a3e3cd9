//! Reading an archive from its directory, with the proxy running or not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;

use super::disk;
use super::history::{History, Window};
use super::ArchiveError;

/// An archive read from `state_dir/robots-archive/` (see `docs/evidence.md`, "The archive").
///
/// [`ArchiveReader::open`] reads every authority's windows once; bodies are read when asked
/// for, and checked against their digest.
#[derive(Debug, Clone)]
pub struct ArchiveReader {
    root: PathBuf,
    histories: BTreeMap<String, History>,
}

impl ArchiveReader {
    /// The archive of `state_dir` (empty when it has none). Fails on a file that cannot be read
    /// or parsed, naming it.
    pub fn open(state_dir: &Path) -> Result<ArchiveReader, ArchiveError> {
        let root = disk::root(state_dir);
        let histories = disk::read_histories(&root, false)?;
        Ok(ArchiveReader { root, histories })
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
