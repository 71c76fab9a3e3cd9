//! The running archive: observations in (never blocking the request path), files out, from
//! one background thread.
//!
//! Memory holds what the disk does not have yet (the windows of the authorities changed since
//! the last write, the bodies not yet written) and the windows of at most [`KEEP_WRITTEN`]
//! authorities already written. Other authorities' windows are read back from their file when
//! a new observation for them arrives (on this thread, off the request path), so the archive's
//! memory does not grow with the number of sites (issue 22: it kept every authority's windows,
//! ~1.3 KiB per site, forever). When a file cannot be read (not: does not exist), the new
//! windows are kept alone and merged into the file's when it can be read again. When a
//! write fails (a full disk, a directory that went away), the failure is logged once and
//! counted; the changes stay in memory, up to [`MAX_UNWRITTEN`] authorities and
//! [`MAX_PENDING_BYTES`] of bodies (past them new results are dropped and counted), and are
//! written on the next attempt (the next observation, or every [`RETRY`]), so archiving resumes
//! by itself when the disk takes writes again. Decisions and audit records never wait for any
//! of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

use super::disk;
use super::history::{truncate, Consequence, History, Window};
use super::prune::{over_bound, prune, Schedule};
use super::{ArchiveError, ArchiveSection};
use crate::robots_version::RobotsVersion;

/// Observations waiting for the writer; past it they are dropped and counted.
const QUEUE: usize = 4096;

/// How often failed writes are tried again while nothing new arrives.
const RETRY: Duration = Duration::from_secs(2);

/// Most bytes of bodies kept in memory while they cannot be written; past it a new body is
/// dropped (its window is kept, naming its digest) and counted.
const MAX_PENDING_BYTES: usize = 256 << 20;

/// Most authorities whose windows are kept in memory while they cannot be written; past it a
/// result for another authority is dropped and counted.
const MAX_UNWRITTEN: usize = 65_536;

/// Most authorities whose windows are kept in memory once written (the disk has them).
const KEEP_WRITTEN: usize = 1024;

/// What the robots store took in for an authority: a fetch's result, or a copy taken over from
/// the fleet or the disk.
#[derive(Debug, Clone)]
pub struct Observation {
    /// `scheme://host[:port]`.
    pub authority: String,
    /// Its robots.txt URL.
    pub url: String,
    /// The robots.txt decided with, if a file is in force.
    pub version: Option<Arc<RobotsVersion>>,
    /// The HTTP status of the fetch, if it gave one.
    pub status: Option<u16>,
    /// Why the fetch failed without a status, if it did.
    pub error: Option<String>,
    /// `fresh`, `stale`, `unavailable` or `unreachable`.
    pub state: &'static str,
    /// What decisions are made with.
    pub consequence: Consequence,
    /// When the result was fetched.
    pub at: SystemTime,
    /// When it was taken in (the store's clock).
    pub now: SystemTime,
    /// When the store is due to fetch it again (the end of its lifetime, or while fetches
    /// fail, the next retry): after this, no decision is made with it without a new fetch.
    pub expires_at: SystemTime,
    /// Whether the fetch that gave the file named a server that reads paths
    /// case-insensitively (the proxy then decides the case-folded reading for the site).
    pub folds_case: bool,
}

/// The archive's counters since the start, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveStats {
    /// Files written (bodies and authorities' windows).
    pub files_written: u64,
    /// Failed writes (each attempt).
    pub write_errors: u64,
    /// Observations or bodies dropped: the queue was full, or too many bodies waited for a
    /// disk that takes no writes.
    pub dropped: u64,
    /// Versions dropped from an authority's history past `archive.max_versions_per_authority`.
    pub versions_dropped: u64,
    /// 1 while writes fail, else 0.
    pub failing: u64,
    /// Authority files (and files set aside as `.json.unreadable`) the last pruning pass
    /// could not read or parse: their bodies are kept (all bodies, when one cannot be read).
    pub unusable_files: u64,
    /// What the archive takes on disk, as `du` counts it (counted again at each pruning pass,
    /// kept up to date by each write in between).
    pub bytes: u64,
    /// `archive.max_bytes` (0: no bound).
    pub max_bytes: u64,
    /// Bodies removed by pruning since the start (no window within `archive.retention`, nor
    /// the window in force, named them).
    pub bodies_removed: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) files_written: AtomicU64,
    write_errors: AtomicU64,
    dropped: AtomicU64,
    versions_dropped: AtomicU64,
    failing: AtomicU64,
    pub(super) unusable_files: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) bodies_removed: AtomicU64,
    /// 1 while the last pass left the archive over its bound.
    pub(super) over_bound: AtomicU64,
}

/// What the writer keeps in memory: what is not on disk yet, and a few written windows.
#[derive(Default)]
pub(super) struct State {
    /// Windows by authority: those in `dirty`, and at most `keep_written` others.
    pub(super) histories: BTreeMap<String, History>,
    /// Authorities whose file is behind their windows.
    pub(super) dirty: BTreeSet<String>,
    /// Authorities whose file could not be read when their windows were taken in: merged with
    /// it before it is written.
    unread: BTreeSet<String>,
    /// Bodies not yet written.
    pub(super) pending: BTreeMap<String, Bytes>,
    pending_bytes: usize,
}

pub(super) struct Shared {
    pub(super) root: PathBuf,
    pub(super) retention: Duration,
    /// `archive.max_versions_per_authority`.
    max_versions: usize,
    /// `archive.max_bytes` (0: no bound).
    pub(super) max_bytes: u64,
    state: Mutex<State>,
    pub(super) counters: Counters,
    /// [`MAX_UNWRITTEN`], smaller in tests.
    max_unwritten: usize,
    /// [`KEEP_WRITTEN`], smaller in tests.
    keep_written: usize,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a file written over one that took `before` bytes on disk (0: none) and now
    /// takes `after`.
    fn resized(&self, before: u64, after: u64) {
        let bytes = &self.counters.bytes;
        if after >= before {
            bytes.fetch_add(after - before, Ordering::Relaxed);
        } else {
            let less = before - after;
            let _ = bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(less))
            });
        }
    }
}

/// The archive of robots.txt versions of a running proxy (see the [module
/// documentation](super)). Cheap to share: wrap it in an `Arc`.
pub struct Archive {
    queue: SyncSender<Observation>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive").field("root", &self.shared.root).finish_non_exhaustive()
    }
}

impl Archive {
    /// The archive under `state_dir` (`robots-archive/`), read back from what is there, with
    /// its writer thread started. Fails only on a directory that cannot be read (a file that
    /// does not parse is set aside as `NAME.unreadable`); a directory that cannot be written
    /// is a write failure like any other (logged once, and retried).
    pub fn open(state_dir: &Path, section: &ArchiveSection) -> Result<Archive, ArchiveError> {
        let root = disk::root(state_dir);
        if let Err(source) = std::fs::read_dir(&root) {
            if source.kind() != std::io::ErrorKind::NotFound {
                return Err(ArchiveError::Read { path: root, source });
            }
        }
        let shared = Arc::new(Shared {
            root,
            retention: section.retention,
            max_versions: section.max_versions_per_authority,
            max_bytes: section.max_bytes.0,
            state: Mutex::new(State::default()),
            counters: Counters::default(),
            max_unwritten: MAX_UNWRITTEN,
            keep_written: KEEP_WRITTEN,
        });
        let (queue, arrivals) = mpsc::sync_channel(QUEUE);
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("robots-archive".to_owned())
            .spawn(move || run(&writer, &arrivals))
            .map_err(|source| ArchiveError::Read { path: shared.root.clone(), source })?;
        Ok(Archive { queue, shared })
    }

    /// Takes `seen` in, without waiting: queued for the writer, or dropped and counted when
    /// the queue is full.
    pub fn note(&self, seen: Observation) {
        if let Err(e) = self.queue.try_send(seen) {
            let first = self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed) == 0;
            if first {
                let why = match e {
                    TrySendError::Full(_) => "its queue is full",
                    TrySendError::Disconnected(_) => "its writer has stopped",
                };
                tracing::warn!(
                    "robots.txt archive: a result was not archived because {why} \
                     (counted in robots_proxy_archive_dropped_total)"
                );
            }
        }
    }

    /// The archive's directory (`state_dir/robots-archive`).
    pub fn dir(&self) -> &Path {
        &self.shared.root
    }

    /// Every authority with a history, sorted (read from the disk: a pass over the archive).
    pub fn authorities(&self) -> Vec<String> {
        let mut all: BTreeSet<String> = self.shared.lock().histories.keys().cloned().collect();
        disk::for_each_history(&self.shared.root, |h| {
            all.insert(h.authority);
        });
        all.into_iter().collect()
    }

    /// The windows of `authority`, oldest first, as this instance knows them now (including
    /// what could not be written yet).
    pub fn windows(&self, authority: &str) -> Vec<Window> {
        self.history(authority).map(|h| h.windows).unwrap_or_default()
    }

    /// The window of `authority` in force at `at`, if any.
    pub fn in_force_at(&self, authority: &str, at: SystemTime) -> Option<Window> {
        self.history(authority)?.in_force_at(at).cloned()
    }

    /// The windows of `authority`: from memory when they are not written yet, else its file.
    fn history(&self, authority: &str) -> Option<History> {
        if let Some(h) = self.shared.lock().histories.get(authority) {
            return Some(h.clone());
        }
        disk::read_history(&self.shared.root, authority, false).ok().flatten()
    }

    /// The bytes of the robots.txt whose SHA-256 is `sha256`, if kept (on disk, or still
    /// waiting to be written).
    pub fn body(&self, sha256: &str) -> Option<Bytes> {
        if let Some(body) = self.shared.lock().pending.get(sha256) {
            return Some(body.clone());
        }
        disk::read_body(&self.shared.root, sha256).ok().flatten()
    }

    /// Counters since the start.
    pub fn stats(&self) -> ArchiveStats {
        let c = &self.shared.counters;
        ArchiveStats {
            files_written: c.files_written.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            versions_dropped: c.versions_dropped.load(Ordering::Relaxed),
            failing: c.failing.load(Ordering::Relaxed),
            unusable_files: c.unusable_files.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            max_bytes: self.shared.max_bytes,
            bodies_removed: c.bodies_removed.load(Ordering::Relaxed),
        }
    }
}

/// The writer thread: until every [`Archive`] handle is gone.
fn run(shared: &Shared, arrivals: &mpsc::Receiver<Observation>) {
    let mut schedule = Schedule::new(shared.retention);
    loop {
        let now = Instant::now();
        if schedule.wait(now, over_bound(shared)).is_zero() {
            prune(shared, SystemTime::now());
            schedule.ran(now);
        }
        let behind = {
            let state = shared.lock();
            !state.dirty.is_empty() || !state.pending.is_empty()
        };
        let wait = schedule.wait(now, over_bound(shared));
        let wait = if behind { wait.min(RETRY) } else { wait };
        match arrivals.recv_timeout(wait) {
            Ok(seen) => {
                take_in(shared, seen);
                while let Ok(more) = arrivals.try_recv() {
                    take_in(shared, more);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                flush(shared);
                return;
            }
        }
        flush(shared);
    }
}

/// Applies one observation to the windows in memory.
pub(super) fn take_in(shared: &Shared, seen: Observation) {
    let at = truncate(seen.at);
    let window = Window {
        sha256: seen.version.as_ref().map(|v| v.sha256().to_owned()),
        size: seen.version.as_ref().map(|v| v.body().len() as u64),
        status: seen.status,
        error: seen.error,
        state: seen.state.to_owned(),
        consequence: seen.consequence,
        first_fetched: at,
        last_confirmed: at,
        replaced_at: None,
        folds_case: seen.folds_case,
        expires_at: Some(truncate(seen.expires_at)),
        fetches: vec![at],
    };
    let known = shared.lock().histories.contains_key(&seen.authority);
    // Not in memory: its file, read on this thread (only it writes the files).
    let from_disk = if known {
        None
    } else {
        let new = || History::new(&seen.authority, &seen.url);
        Some(match disk::read_history(&shared.root, &seen.authority, true) {
            Ok(history) => (history.unwrap_or_else(new), false),
            Err(_) => (new(), true),
        })
    };
    let mut guard = shared.lock();
    let state = &mut *guard;
    if let Some((history, unread)) = from_disk {
        if state.dirty.len() >= shared.max_unwritten {
            shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if unread {
            state.unread.insert(seen.authority.clone());
        }
        state.histories.insert(seen.authority.clone(), history);
    }
    let Some(history) = state.histories.get_mut(&seen.authority) else { return };
    if history.note(window, seen.now) {
        state.dirty.insert(seen.authority.clone());
    }
    let capped = history.cap_versions(shared.max_versions);
    if capped > 0 {
        shared.counters.versions_dropped.fetch_add(capped as u64, Ordering::Relaxed);
        state.dirty.insert(seen.authority.clone());
    }
    if let Some(version) = seen.version {
        let sha = version.sha256();
        // Checked by its hash, not by its name alone: a corrupt body is written again (L2).
        let on_disk = || disk::body_intact(&shared.root, sha);
        if !state.pending.contains_key(sha) && !on_disk() {
            let body = version.body();
            if state.pending_bytes + body.len() > MAX_PENDING_BYTES {
                shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                state.pending_bytes += body.len();
                state.pending.insert(sha.to_owned(), body.clone());
            }
        }
    }
}

/// Writes what memory holds ahead of the disk: bodies first, then the authorities' files that
/// name them. Stops at the first failure (the rest is tried again later).
pub(super) fn flush(shared: &Shared) -> bool {
    let (bodies, files): (Vec<(String, Bytes)>, Vec<History>) = {
        let state = shared.lock();
        (
            state.pending.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            state.dirty.iter().filter_map(|a| state.histories.get(a).cloned()).collect(),
        )
    };
    if bodies.is_empty() && files.is_empty() {
        return true;
    }
    for (sha, body) in bodies {
        let before = disk::file_bytes(&disk::body_path(&shared.root, &sha));
        if let Err(e) = disk::write_body(&shared.root, &sha, &body) {
            return failed(shared, &e);
        }
        shared.resized(before, disk::file_bytes(&disk::body_path(&shared.root, &sha)));
        shared.counters.files_written.fetch_add(1, Ordering::Relaxed);
        let mut state = shared.lock();
        state.pending.remove(&sha);
        state.pending_bytes = state.pending_bytes.saturating_sub(body.len());
    }
    for mut history in files {
        let unread = shared.lock().unread.contains(&history.authority);
        if unread {
            match disk::read_history(&shared.root, &history.authority, true) {
                Ok(Some(mut on_disk)) => {
                    merge(&mut on_disk, &history);
                    history = on_disk;
                }
                Ok(None) => {}
                Err(e) => return failed(shared, &e),
            }
        }
        let path = disk::authority_path(&shared.root, &history.authority);
        let before = disk::file_bytes(&path);
        if let Err(e) = disk::write_history(&shared.root, &history) {
            return failed(shared, &e);
        }
        shared.resized(before, disk::file_bytes(&path));
        shared.counters.files_written.fetch_add(1, Ordering::Relaxed);
        let mut state = shared.lock();
        // Only this thread changes the windows: what was written is what memory holds.
        state.dirty.remove(&history.authority);
        state.unread.remove(&history.authority);
        state.histories.insert(history.authority.clone(), history);
    }
    forget_written(shared);
    if shared.counters.failing.swap(0, Ordering::Relaxed) == 1 {
        tracing::info!(dir = %shared.root.display(), "robots.txt archive: writing again");
    }
    true
}

/// Keeps at most `keep_written` authorities' windows that the disk has (the others in `dirty`).
fn forget_written(shared: &Shared) {
    let mut guard = shared.lock();
    let state = &mut *guard;
    let mut written = state.histories.len() - state.dirty.len();
    if written <= shared.keep_written {
        return;
    }
    state.histories.retain(|authority, _| {
        if written > shared.keep_written && !state.dirty.contains(authority) {
            written -= 1;
            return false;
        }
        true
    });
}

/// Replays `newer` (windows taken in while `into`'s file could not be read) onto `into`, each
/// window as the observations that made it: its first fetch, and its last confirmation.
fn merge(into: &mut History, newer: &History) {
    for w in &newer.windows {
        let mut first = w.clone();
        first.last_confirmed = w.first_fetched;
        into.note(first, w.first_fetched);
        if w.last_confirmed > w.first_fetched {
            let mut last = w.clone();
            last.first_fetched = w.last_confirmed;
            into.note(last, w.last_confirmed);
        }
    }
}

/// Counts a failed write, and logs it when writes were going well until now.
pub(super) fn failed(shared: &Shared, error: &std::io::Error) -> bool {
    shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
    if shared.counters.failing.swap(1, Ordering::Relaxed) == 0 {
        tracing::warn!(
            dir = %shared.root.display(), %error,
            "robots.txt archive: cannot write; decisions and audit records go on, the archive's \
             changes are kept in memory and written when the disk takes writes again"
        );
    }
    false
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn observation(body: &'static [u8], at: SystemTime) -> Observation {
        let version = RobotsVersion::new(
            "http://a.test",
            "http://a.test/robots.txt",
            Bytes::from_static(body),
            at,
            Some(200),
        );
        Observation {
            authority: "http://a.test".to_owned(),
            url: "http://a.test/robots.txt".to_owned(),
            version: Some(Arc::new(version)),
            status: Some(200),
            error: None,
            state: "fresh",
            consequence: Consequence::Rules,
            at,
            now: at,
            expires_at: at,
            folds_case: false,
        }
    }

    pub(crate) fn shared(dir: &Path, retention: Duration) -> Shared {
        Shared {
            root: disk::root(dir),
            retention,
            max_versions: 1000,
            max_bytes: 0,
            state: Mutex::new(State::default()),
            counters: Counters::default(),
            max_unwritten: 3,
            keep_written: 2,
        }
    }

    /// An origin that serves a new robots.txt at each fetch: past
    /// `archive.max_versions_per_authority`, the oldest versions go (counted), the newest stay.
    #[test]
    fn versions_per_authority_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = shared(dir.path(), Duration::from_secs(3600));
        s.max_versions = 3;
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let bodies: [&'static [u8]; 6] = [b"a", b"b", b"a", b"c", b"d", b"e"];
        for (i, body) in bodies.into_iter().enumerate() {
            take_in(&s, observation(body, t0 + Duration::from_secs(60 * i as u64)));
        }
        let state = s.lock();
        let windows = &state.histories["http://a.test"].windows;
        let named: Vec<Option<&str>> = windows.iter().map(|w| w.sha256.as_deref()).collect();
        let sha = |b: &[u8]| Some(crate::robots_version::sha256_hex(b));
        let want = [sha(b"c"), sha(b"d"), sha(b"e")];
        assert_eq!(named, want.iter().map(Option::as_deref).collect::<Vec<_>>());
        assert_eq!(s.counters.versions_dropped.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn pruning_removes_old_replaced_bodies_but_not_named_ones() {
        let dir = tempfile::tempdir().unwrap();
        let day = Duration::from_secs(24 * 3600);
        let s = shared(dir.path(), 10 * day);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // a, then b, then a again: a's first window and b are replaced; a is in force.
        take_in(&s, observation(b"a", t0));
        take_in(&s, observation(b"b", t0 + day));
        take_in(&s, observation(b"c", t0 + 2 * day));
        take_in(&s, observation(b"a", t0 + 30 * day));
        assert!(flush(&s));
        let sha = |b: &[u8]| crate::robots_version::sha256_hex(b);
        let kept = |b: &[u8]| disk::body_path(&s.root, &sha(b)).is_file();
        assert!(kept(b"a") && kept(b"b") && kept(b"c"));
        // 10 days after c was replaced: b's and the first a's windows are older than that.
        prune(&s, t0 + 40 * day + Duration::from_secs(1));
        let reader = super::super::ArchiveReader::open(dir.path()).unwrap();
        let windows = reader.windows("http://a.test");
        let digests: Vec<_> = windows.iter().map(|w| w.sha256.clone().unwrap()).collect();
        assert_eq!(digests, [sha(b"a")], "{windows:?}");
        assert!(kept(b"a"), "the body of the window in force stays");
        assert!(!kept(b"b") && !kept(b"c"), "bodies no kept window names are gone");
        assert_eq!(reader.body(&sha(b"a")).as_deref(), Some(&b"a"[..]));
    }

    /// Issue 39, C2: one authority file that does not parse (a disk error, a partial
    /// restore, a newer build's variant) must not get the bodies it names deleted at the next
    /// pruning pass (which runs at start), nor any other body; a file already set aside as
    /// `.json.unreadable` protects its bodies too.
    #[test]
    fn a_corrupt_authority_file_gets_no_body_removed() {
        let dir = tempfile::tempdir().unwrap();
        let day = Duration::from_secs(24 * 3600);
        let s = shared(dir.path(), 10 * day);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        take_in(&s, observation(b"a", t0));
        take_in(&s, observation(b"b", t0 + day));
        take_in(&s, observation_of("http://other.test", b"o", t0));
        assert!(flush(&s));
        let sha = |b: &[u8]| crate::robots_version::sha256_hex(b);
        let kept = |b: &[u8]| disk::body_path(&s.root, &sha(b)).is_file();
        let file = disk::authority_path(&s.root, "http://a.test");
        let text = std::fs::read(&file).unwrap();
        std::fs::write(&file, &text[..text.len() - 3]).unwrap();
        // Long after b replaced a, which pruning would remove if the file parsed.
        prune(&s, t0 + 40 * day);
        assert!(kept(b"a") && kept(b"b") && kept(b"o"), "no body is removed");
        assert_eq!(s.counters.unusable_files.load(Ordering::Relaxed), 1);
        assert_eq!(std::fs::read(&file).unwrap(), &text[..text.len() - 3], "left as it was");
        // Set aside (as the next result for the authority does): its bodies stay protected.
        disk::read_history(&s.root, "http://a.test", true).unwrap();
        assert!(!file.exists());
        prune(&s, t0 + 41 * day);
        assert!(kept(b"a") && kept(b"b"), "a set-aside file still protects its bodies");
        // Repaired (the file parses again): pruning works as before.
        std::fs::remove_file(file.with_extension("json.unreadable")).unwrap();
        std::fs::write(&file, &text).unwrap();
        prune(&s, t0 + 42 * day);
        assert!(kept(b"b") && !kept(b"a"), "a's replaced window is pruned once readable");
        assert_eq!(s.counters.unusable_files.load(Ordering::Relaxed), 0);
    }

    /// A file that does not parse keeps the bodies its text names, not every body: the other
    /// authorities' replaced windows are still pruned. A file that cannot be read at all
    /// (digests unknown) keeps every body.
    #[test]
    fn a_corrupt_authority_file_keeps_only_the_bodies_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let day = Duration::from_secs(24 * 3600);
        let s = shared(dir.path(), 10 * day);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        take_in(&s, observation(b"a", t0));
        take_in(&s, observation(b"b", t0 + day));
        take_in(&s, observation_of("http://other.test", b"o", t0));
        take_in(&s, observation_of("http://other.test", b"p", t0 + day));
        assert!(flush(&s));
        let sha = |b: &[u8]| crate::robots_version::sha256_hex(b);
        let kept = |b: &[u8]| disk::body_path(&s.root, &sha(b)).is_file();
        let file = disk::authority_path(&s.root, "http://a.test");
        let text = std::fs::read(&file).unwrap();
        std::fs::write(&file, &text[..text.len() - 3]).unwrap();
        prune(&s, t0 + 40 * day);
        assert!(kept(b"a") && kept(b"b"), "the bodies the corrupt file names are kept");
        assert!(kept(b"p") && !kept(b"o"), "the other authority's replaced body is pruned");
        assert_eq!(s.counters.unusable_files.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_failed_write_is_kept_and_written_later() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path(), Duration::from_secs(3600));
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // A file where the archive's directory should be: every write fails.
        std::fs::write(&s.root, b"in the way").unwrap();
        take_in(&s, observation(b"x", t0));
        assert!(!flush(&s));
        assert!(!flush(&s));
        assert_eq!(s.counters.write_errors.load(Ordering::Relaxed), 2);
        assert_eq!(s.counters.failing.load(Ordering::Relaxed), 1);
        std::fs::remove_file(&s.root).unwrap();
        assert!(flush(&s));
        assert_eq!(s.counters.failing.load(Ordering::Relaxed), 0);
        let reader = super::super::ArchiveReader::open(dir.path()).unwrap();
        assert_eq!(reader.windows("http://a.test").len(), 1);
    }

    fn observation_of(authority: &str, body: &'static [u8], at: SystemTime) -> Observation {
        let url = format!("{authority}/robots.txt");
        let version = RobotsVersion::new(authority, &url, Bytes::from_static(body), at, Some(200));
        Observation { authority: authority.to_owned(), url, ..observation(body, at) }
            .with_version(version)
    }

    impl Observation {
        fn with_version(mut self, version: RobotsVersion) -> Observation {
            self.version = Some(Arc::new(version));
            self
        }
    }

    #[test]
    fn written_windows_leave_memory_and_are_read_back_when_needed() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path(), Duration::from_secs(3600));
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let sites: Vec<String> = (0..10).map(|i| format!("http://s{i}.test")).collect();
        for site in &sites {
            take_in(&s, observation_of(site, b"same", t0));
            assert!(flush(&s));
        }
        assert_eq!(s.lock().histories.len(), s.keep_written, "a few written windows stay");
        assert!(!s.lock().histories.contains_key(&sites[0]));
        // A new result for a site whose windows are only on disk replaces its window there.
        take_in(&s, observation_of(&sites[0], b"changed", t0 + Duration::from_secs(60)));
        assert!(flush(&s));
        assert_eq!(s.lock().histories.len(), s.keep_written);
        let reader = super::super::ArchiveReader::open(dir.path()).unwrap();
        let windows = reader.windows(&sites[0]);
        assert_eq!(windows.len(), 2, "{windows:?}");
        assert!(windows[0].replaced_at.is_some() && windows[1].replaced_at.is_none());
        assert_eq!(reader.windows(&sites[9]).len(), 1);
        // The same result again only extends the window on disk.
        take_in(&s, observation_of(&sites[9], b"same", t0 + Duration::from_secs(120)));
        assert!(flush(&s));
        let reader = super::super::ArchiveReader::open(dir.path()).unwrap();
        assert_eq!(reader.windows(&sites[9]).len(), 1);
    }

    #[test]
    fn unwritten_windows_stay_within_their_bound_while_the_disk_fails() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path(), Duration::from_secs(3600));
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        std::fs::write(&s.root, b"in the way").unwrap();
        for i in 0..5 {
            take_in(&s, observation_of(&format!("http://s{i}.test"), b"x", t0));
            assert!(!flush(&s));
        }
        assert_eq!(s.lock().histories.len(), s.max_unwritten);
        assert_eq!(s.counters.dropped.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn windows_taken_in_while_the_file_cannot_be_read_are_merged_into_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = shared(dir.path(), Duration::from_secs(3600));
        s.keep_written = 0;
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let site = "http://s.test";
        take_in(&s, observation_of(site, b"a", t0));
        assert!(flush(&s));
        assert!(s.lock().histories.is_empty());
        // The authorities' directory is in the way of reads and writes alike.
        let windows_dir = s.root.join("authorities");
        let aside = dir.path().join("aside");
        std::fs::rename(&windows_dir, &aside).unwrap();
        std::fs::write(&windows_dir, b"in the way").unwrap();
        take_in(&s, observation_of(site, b"b", t0 + Duration::from_secs(60)));
        take_in(&s, observation_of(site, b"b", t0 + Duration::from_secs(90)));
        assert!(!flush(&s));
        std::fs::remove_file(&windows_dir).unwrap();
        std::fs::rename(&aside, &windows_dir).unwrap();
        assert!(flush(&s));
        let reader = super::super::ArchiveReader::open(dir.path()).unwrap();
        let windows = reader.windows(site);
        let sha = |b: &[u8]| Some(crate::robots_version::sha256_hex(b));
        assert_eq!(windows.len(), 2, "{windows:?}");
        assert_eq!((&windows[0].sha256, &windows[1].sha256), (&sha(b"a"), &sha(b"b")));
        assert_eq!(windows[0].replaced_at, Some(truncate(t0 + Duration::from_secs(60))));
        assert_eq!(windows[1].last_confirmed, truncate(t0 + Duration::from_secs(90)));
    }
}
