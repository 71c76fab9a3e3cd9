//! What RFC 9309's rules need across a restart, kept under `state_dir/robots/`: per
//! authority, its last good robots.txt (the body, capped as fetched) with its fetch time, and
//! the failure state (since when fetches fail, how many in a row). Without it, a restart
//! would lose a failing site's stale copy (disallow all instead) and start its 30 days of
//! failures (`give_up_after`) again.
//!
//! * One file per authority, named by the SHA-256 of its robots.txt URL, in the record format
//!   the fleet shares (`shared::encode`): a JSON header line (with the body's SHA-256 and the
//!   status of its fetch; files written before they existed still load), then the body. The
//!   version (digest, fetch time) is read back with the copy.
//! * Written after each fetch whose result is kept, off the request path, atomically: a
//!   temporary file in the same directory, `fsync`, `rename`, `fsync` of the directory. A crash
//!   leaves the old file or the new one, never half of one. Saves wait in a queue that keeps
//!   the newest per authority (at most [`MAX_PENDING`]; beyond, a save is skipped and the disk
//!   keeps what it had) and one blocking task writes them in turn. Nothing on the request path
//!   waits for a disk write: 10,000 first fetches used to be 10,000 blocking threads taking
//!   turns at one lock held across two `fsync`s, and every fetch waited for that lock.
//! * Read when an authority is not in memory (first request after a start, or after the memory
//!   cache let it go): a record still current is used without a fetch; otherwise it is the
//!   previous state the next fetch's result is applied to. Reads run on two threads of their
//!   own ([`readers`]), not one blocking thread each.
//! * Bounded: at most [`MAX_FILES`] files, and files not written for `give_up_after +
//!   max_age` (what the memory cache keeps) are removed; the oldest go first. Each file is at
//!   most `max_body` plus a short header.
//! * Not used with a fleet: the shared store keeps the same records.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::fetch::Fetched;
use super::shared;
use super::{Inner, RobotsSnapshot};
use robots_proxy_authority::Authority;

mod readers;

/// Most authorities kept on disk.
pub(super) const MAX_FILES: usize = 100_000;

/// How many writes between two prunes of the directory.
const PRUNE_EVERY: u64 = 1024;

/// Most saves waiting to be written (authorities; a newer save of one replaces its older).
pub(super) const MAX_PENDING: usize = 4096;

/// A save waiting for the writer.
struct Pending {
    snapshot: RobotsSnapshot,
    body: Option<Bytes>,
    body_limit: usize,
    purges: u64,
}

/// The saves waiting, and whether a writer is running.
#[derive(Default)]
struct Queue {
    pending: HashMap<Authority, Pending>,
    writing: bool,
}

/// The directory of records, with its bounds.
pub(super) struct Persist {
    dir: PathBuf,
    keep_for: Duration,
    writes: AtomicU64,
    /// Purges so far. A save carries the count it was decided under (read under the store's
    /// lock, which a purge holds too) and renames its file into place only if no purge came
    /// since. Without it, a save still queued when a purge removed the file wrote it back, and
    /// the next request used the purged copy from disk.
    purges: AtomicU64,
    /// Held by a purge while it counts itself and removes files, and by a save across its
    /// last check of `purges` and its rename (not across its `fsync`s): a purge and a rename
    /// never overlap.
    renames: std::sync::Mutex<()>,
    /// Saves waiting for the writer.
    queue: std::sync::Mutex<Queue>,
    /// The threads that read records for requests ([`readers`]).
    readers: readers::Readers,
}

impl Persist {
    /// Records in `dir` (created if missing), each kept `keep_for` after it was written.
    pub(super) fn open(dir: PathBuf, keep_for: Duration) -> io::Result<Persist> {
        fs::create_dir_all(&dir)?;
        let persist = Persist {
            dir,
            keep_for,
            writes: AtomicU64::new(0),
            purges: AtomicU64::new(0),
            renames: std::sync::Mutex::new(()),
            queue: std::sync::Mutex::new(Queue::default()),
            readers: readers::Readers::default(),
        };
        persist.prune();
        Ok(persist)
    }

    fn path(&self, authority: &Authority) -> PathBuf {
        let digest = Sha256::digest(authority.robots_url().as_bytes());
        let mut name = String::with_capacity(68);
        for byte in digest {
            name.push_str(&format!("{byte:02x}"));
        }
        name.push_str(".rec");
        self.dir.join(name)
    }

    /// The record kept for `authority`, if any and readable: a save still waiting for the
    /// writer first, then the file. Blocking.
    pub(super) fn load(
        &self,
        authority: &Authority,
        body_limit: usize,
    ) -> Option<(RobotsSnapshot, Option<Bytes>)> {
        let waiting =
            self.queue().pending.get(authority).map(|p| (p.snapshot.clone(), p.body.clone()));
        match waiting {
            Some((snapshot, Some(body))) => Some((snapshot, Some(body))),
            // The rules came from the body already on disk.
            Some((snapshot, None)) => Some((snapshot, self.load_file(authority, body_limit)?.1)),
            None => self.load_file(authority, body_limit),
        }
    }

    /// [`Self::load`] on one of the threads that read records ([`readers`]).
    async fn load_off_runtime(
        self: Arc<Self>,
        authority: Authority,
        body_limit: usize,
    ) -> Option<(RobotsSnapshot, Option<Bytes>)> {
        let (sender, loaded) = tokio::sync::oneshot::channel();
        let persist = self.clone();
        self.readers.run(Box::new(move || {
            let _ = sender.send(persist.load(&authority, body_limit));
        }));
        loaded.await.ok().flatten()
    }

    fn load_file(
        &self,
        authority: &Authority,
        body_limit: usize,
    ) -> Option<(RobotsSnapshot, Option<Bytes>)> {
        let record = fs::read(self.path(authority)).ok()?;
        shared::decode(authority, &record, body_limit, robots_proxy_clock::StoreClock::local())
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Purges so far (see the field).
    pub(super) fn purges(&self) -> u64 {
        self.purges.load(Ordering::Acquire)
    }

    /// Queues a save (see [`Self::save`]); true when no writer runs and the caller must start
    /// one ([`Self::write_queued`]). A newer save of an authority replaces the one waiting;
    /// with [`MAX_PENDING`] authorities waiting, a save of another is skipped.
    fn enqueue(
        &self,
        snapshot: RobotsSnapshot,
        body: Option<Bytes>,
        body_limit: usize,
        purges: u64,
    ) -> bool {
        let mut queue = self.queue();
        let authority = snapshot.authority.clone();
        let body = match (body, queue.pending.get(&authority)) {
            // `None` means "the body already kept": the one still waiting, if it is.
            (None, Some(waiting)) if snapshot.rules.parsed().is_some() => waiting.body.clone(),
            (body, _) => body,
        };
        if queue.pending.len() >= MAX_PENDING && !queue.pending.contains_key(&authority) {
            tracing::debug!(%authority, "robots.txt state not kept on disk: too many saves waiting");
            return false;
        }
        queue.pending.insert(authority, Pending { snapshot, body, body_limit, purges });
        !std::mem::replace(&mut queue.writing, true)
    }

    /// The writer: writes the saves waiting, oldest batch first, until none is left. Blocking.
    fn write_queued(&self) {
        loop {
            let batch = {
                let mut queue = self.queue();
                if queue.pending.is_empty() {
                    queue.writing = false;
                    return;
                }
                std::mem::take(&mut queue.pending)
            };
            for (_, p) in batch {
                self.save(&p.snapshot, p.body, p.body_limit, p.purges);
            }
        }
    }

    /// Keeps `snapshot`, whose parsed rules came from `body` (`None`: from the body already
    /// kept, as for a stale copy), unless a purge came after the `purges` count it was decided
    /// under. Blocking.
    pub(super) fn save(
        &self,
        snapshot: &RobotsSnapshot,
        body: Option<Bytes>,
        body_limit: usize,
        purges: u64,
    ) {
        if self.purges() != purges {
            return;
        }
        let path = self.path(&snapshot.authority);
        let body = match (snapshot.rules.parsed(), body) {
            (Some(_), Some(body)) => Some(body),
            (Some(_), None) => match self.load_file(&snapshot.authority, body_limit) {
                Some((_, Some(kept))) => Some(kept),
                // A copy whose body is not on disk cannot be kept truthfully.
                _ => return,
            },
            (None, _) => None,
        };
        let record =
            shared::encode(snapshot, body.as_ref(), robots_proxy_clock::StoreClock::local());
        let still_wanted = || self.purges() == purges;
        if let Err(e) = write_atomically(&path, &record, &self.renames, still_wanted) {
            tracing::warn!(
                authority = %snapshot.authority, path = %path.display(), error = %e,
                "cannot keep the robots.txt state on disk"
            );
        }
        if self.writes.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            self.prune();
        }
    }

    /// Forgets the record of `authority` (every record with `None`): a purge, which a save
    /// decided before it no longer writes. Blocking.
    pub(super) fn forget(&self, authority: Option<&Authority>) {
        let _renames = self.renames.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.purges.fetch_add(1, Ordering::AcqRel) + 1;
        match authority {
            Some(a) => {
                let mut queue = self.queue();
                queue.pending.remove(a);
                // The others waiting are not about `a`: this purge does not undo them.
                for waiting in queue.pending.values_mut() {
                    waiting.purges = now;
                }
                drop(queue);
                let _ = fs::remove_file(self.path(a));
            }
            None => {
                self.queue().pending.clear();
                self.remove_all();
            }
        }
    }

    /// Removes every record (a purge of all).
    fn remove_all(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "rec") {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Removes records older than `keep_for`, then the oldest beyond [`MAX_FILES`], and
    /// temporary files a crash left behind.
    fn prune(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        let now = SystemTime::now();
        let mut records = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let written = entry.metadata().and_then(|m| m.modified()).unwrap_or(now);
            let age = now.duration_since(written).unwrap_or_default();
            let is_record = path.extension().is_some_and(|e| e == "rec");
            let is_temp = path.extension().is_some_and(|e| e == "tmp");
            if (is_temp && age > Duration::from_secs(3600)) || (is_record && age > self.keep_for) {
                let _ = fs::remove_file(&path);
            } else if is_record {
                records.push((written, path));
            }
        }
        if records.len() > MAX_FILES {
            records.sort_unstable();
            let excess = records.len() - MAX_FILES;
            for (_, path) in records.into_iter().take(excess) {
                let _ = fs::remove_file(path);
            }
        }
    }
}

/// Writes `bytes` to `path` in one step: a temporary file beside it, synced, renamed over it
/// (under `renames`, and only if `still_wanted` says so then), and the directory synced.
/// False when it was no longer wanted (the temporary file is removed).
fn write_atomically(
    path: &Path,
    bytes: &[u8],
    renames: &std::sync::Mutex<()>,
    still_wanted: impl Fn() -> bool,
) -> io::Result<bool> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let temp = path.with_extension(format!("{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        {
            let _renames = renames.lock().unwrap_or_else(|e| e.into_inner());
            if !still_wanted() {
                return Ok(false);
            }
            fs::rename(&temp, path)?;
        }
        fs::File::open(dir)?.sync_all()?;
        Ok(true)
    })();
    if !matches!(result, Ok(true)) {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// The record kept on disk for `authority`, when records are kept ([`super::RobotsCache::persist_in`]).
pub(super) async fn load(inner: &Arc<Inner>, authority: &Authority) -> Option<RobotsSnapshot> {
    let persist = inner.persist.get()?.clone();
    let loaded = persist.load_off_runtime(authority.clone(), inner.body_limit).await;
    loaded.map(|(snapshot, _)| snapshot)
}

/// Keeps `snapshot` on disk (off the request path), `fetched` being what the fetch gave.
/// Called under the store's lock, after the store took the snapshot in: a purge after this
/// point (it takes the lock too) wins over the write, whenever the write runs.
pub(super) fn save(inner: &Arc<Inner>, snapshot: &RobotsSnapshot, fetched_body: Option<Bytes>) {
    let Some(persist) = inner.persist.get().cloned() else { return };
    let purges = persist.purges();
    if persist.enqueue(snapshot.clone(), fetched_body, inner.body_limit, purges) {
        drop(tokio::task::spawn_blocking(move || persist.write_queued()));
    }
}

/// Forgets what is kept for `authority` (every authority with `None`): a purge.
pub(super) async fn forget(inner: &Arc<Inner>, authority: Option<&Authority>) {
    let Some(persist) = inner.persist.get().cloned() else { return };
    let authority = authority.cloned();
    let _ = tokio::task::spawn_blocking(move || persist.forget(authority.as_ref())).await;
}

/// The body a fetch gave, if it gave one.
pub(super) fn body_of(fetched: &Fetched) -> Option<Bytes> {
    match fetched {
        Fetched::Robots { body, .. } => Some(body.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FetchOutcome, RobotsRules, RobotsState};
    use robots_proxy_authority::Scheme;
    use robots_proxy_engine::RobotsTxt;

    #[test]
    fn a_stale_copy_keeps_its_body_across_saves() {
        let dir = std::env::temp_dir().join(format!("robots-persist-{}", std::process::id()));
        let persist = Persist::open(dir.clone(), Duration::from_secs(3600)).unwrap();
        let a = Authority::new(Scheme::Http, "a.test", 8080).unwrap();
        let body = Bytes::from_static(b"User-agent: *\nDisallow: /x\n");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut snapshot = RobotsSnapshot {
            authority: a.clone(),
            robots_url: a.robots_url(),
            rules: RobotsRules::Parsed(Arc::new(RobotsTxt::parse(&body))),
            state: RobotsState::Fresh,
            last_outcome: FetchOutcome::Status(200),
            fetched_at: t,
            expires_at: t + Duration::from_secs(60),
            failing_since: None,
            failures: 0,
            version: Some(Arc::new(robots_proxy_archive::robots_version::RobotsVersion::new(
                &a.to_string(),
                &a.robots_url(),
                body.clone(),
                t,
                Some(200),
            ))),
            refresh: Default::default(),
        };
        persist.save(&snapshot, Some(body.clone()), 1 << 20, 0);
        // The origin fails: the copy goes on, stale, with the failure state.
        snapshot.state = RobotsState::Stale;
        snapshot.failing_since = Some(t + Duration::from_secs(100));
        snapshot.failures = 2;
        persist.save(&snapshot, None, 1 << 20, 0);
        let (back, back_body) = persist.load(&a, 1 << 20).unwrap();
        assert_eq!(back_body.as_deref(), Some(&body[..]));
        assert_eq!((back.state, back.failures), (RobotsState::Stale, 2));
        assert_eq!(back.failing_since, snapshot.failing_since);
        assert_eq!(back.fetched_at, t);
        assert_eq!(back.version, snapshot.version);
        assert!(!back.rules.allows(None, "/x"));
        let other = Authority::new(Scheme::Http, "a.test", 8081).unwrap();
        assert!(persist.load(&other, 1 << 20).is_none());

        // A save decided before a purge, run after it, writes nothing: the purge wins (a
        // save still queued used to put the purged copy back on disk).
        let decided = persist.purges();
        persist.forget(Some(&a));
        persist.save(&snapshot, Some(body.clone()), 1 << 20, decided);
        assert!(persist.load(&a, 1 << 20).is_none(), "a purged copy came back from disk");
        persist.save(&snapshot, Some(body.clone()), 1 << 20, persist.purges());
        assert!(persist.load(&a, 1 << 20).is_some());
        let _ = fs::remove_dir_all(dir);
    }

    fn snapshot_of(a: &Authority, body: &Bytes, failures: u32) -> RobotsSnapshot {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        RobotsSnapshot {
            authority: a.clone(),
            robots_url: a.robots_url(),
            rules: RobotsRules::Parsed(Arc::new(RobotsTxt::parse(body))),
            state: RobotsState::Fresh,
            last_outcome: FetchOutcome::Status(200),
            fetched_at: t,
            expires_at: t + Duration::from_secs(60),
            failing_since: None,
            failures,
            version: None,
            refresh: Default::default(),
        }
    }

    /// The store reads the purge count on a runtime thread: it must not wait for a save in
    /// progress, which holding the rename lock stands for here.
    #[test]
    fn the_purge_count_is_read_without_waiting_for_a_write() {
        let dir = std::env::temp_dir().join(format!("robots-persist-w-{}", std::process::id()));
        let persist = Arc::new(Persist::open(dir.clone(), Duration::from_secs(3600)).unwrap());
        let renaming = persist.renames.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = persist.clone();
        std::thread::spawn(move || {
            let _ = tx.send(reader.purges());
        });
        let read = rx.recv_timeout(Duration::from_secs(10));
        drop(renaming);
        assert_eq!(read, Ok(0), "the purge count waited for the write in progress");
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn queued_saves_keep_the_newest_per_authority_and_a_purge_drops_them() {
        let dir = std::env::temp_dir().join(format!("robots-persist-queue-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let persist = Persist::open(dir.clone(), Duration::from_secs(3600)).unwrap();
        let a = Authority::new(Scheme::Http, "a.test", 8080).unwrap();
        let b = Authority::new(Scheme::Http, "b.test", 8080).unwrap();
        let body = Bytes::from_static(b"User-agent: *\nDisallow: /x\n");
        // The first save starts the writer; the next ones wait for it.
        assert!(persist.enqueue(snapshot_of(&a, &body, 0), Some(body.clone()), 1 << 20, 0));
        assert!(!persist.enqueue(snapshot_of(&b, &body, 0), Some(body.clone()), 1 << 20, 0));
        // A newer state of `a` with the body "already kept" replaces the waiting one and
        // keeps its body, which is not on disk yet.
        assert!(!persist.enqueue(snapshot_of(&a, &body, 3), None, 1 << 20, 0));
        // What is waiting is what a load sees, before anything is on disk.
        let (waiting, waiting_body) = persist.load(&a, 1 << 20).unwrap();
        assert_eq!(waiting.failures, 3);
        assert_eq!(waiting_body.as_deref(), Some(&body[..]));
        assert!(persist.load_file(&a, 1 << 20).is_none());
        // A purge of `b` drops its waiting save.
        persist.forget(Some(&b));
        persist.write_queued();
        let (kept, kept_body) = persist.load_file(&a, 1 << 20).unwrap();
        assert_eq!(kept.failures, 3, "the newer save of `a` is the one written");
        assert_eq!(kept_body.as_deref(), Some(&body[..]));
        assert!(persist.load(&b, 1 << 20).is_none(), "a purged save was written");
        // The writer stopped: the next save starts one again.
        assert!(persist.enqueue(
            snapshot_of(&b, &body, 0),
            Some(body.clone()),
            1 << 20,
            persist.purges()
        ));
        persist.write_queued();
        assert!(persist.load_file(&b, 1 << 20).is_some());
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn at_most_max_pending_saves_wait() {
        let dir = std::env::temp_dir().join(format!("robots-persist-bound-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let persist = Persist::open(dir.clone(), Duration::from_secs(3600)).unwrap();
        let body = Bytes::from_static(b"User-agent: *\nDisallow: /x\n");
        for port in 0..MAX_PENDING + 10 {
            let a = Authority::new(Scheme::Http, "a.test", 1000 + port as u16).unwrap();
            persist.enqueue(snapshot_of(&a, &body, 0), Some(body.clone()), 1 << 20, 0);
        }
        assert_eq!(persist.queue().pending.len(), MAX_PENDING);
        // One already waiting is still replaced.
        let first = Authority::new(Scheme::Http, "a.test", 1000).unwrap();
        persist.enqueue(snapshot_of(&first, &body, 7), Some(body.clone()), 1 << 20, 0);
        assert_eq!(persist.queue().pending.get(&first).map(|p| p.snapshot.failures), Some(7));
        persist.forget(None);
        assert!(persist.queue().pending.is_empty());
        let _ = fs::remove_dir_all(dir);
    }

    /// Threads of this process whose name starts with `prefix` (Linux: `/proc/self/task`).
    fn threads_named(prefix: &str) -> usize {
        fs::read_dir("/proc/self/task")
            .map(|tasks| {
                tasks
                    .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|name| name.starts_with(prefix))
                    .count()
            })
            .unwrap_or(0)
    }

    /// Many misses served from disk at once take none of the runtime's blocking threads: every
    /// read here waits on the queue's lock (held by the test), so a read run on the blocking
    /// pool would hold a thread of it until the lock is let go. On the pool, the 64 reads took
    /// 64 threads.
    #[test]
    #[cfg(target_os = "linux")]
    fn reads_from_disk_take_no_blocking_thread_of_the_runtime() {
        let dir = std::env::temp_dir().join(format!("robots-persist-loads-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let persist = Arc::new(Persist::open(dir.clone(), Duration::from_secs(3600)).unwrap());
        let body = Bytes::from_static(b"User-agent: *\nDisallow: /x\n");
        let authorities: Vec<_> =
            (0..64).map(|i| Authority::new(Scheme::Http, "a.test", 2000 + i).unwrap()).collect();
        for a in &authorities {
            persist.save(&snapshot_of(a, &body, 0), Some(body.clone()), 1 << 20, 0);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rp-loads-test")
            .build()
            .unwrap();
        let held = persist.queue();
        let reads: Vec<_> = authorities
            .iter()
            .map(|a| runtime.spawn(persist.clone().load_off_runtime(a.clone(), 1 << 20)))
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let threads = threads_named("rp-loads-test");
        drop(held);
        for read in reads {
            let (back, _) = runtime.block_on(read).unwrap().expect("a kept record");
            assert!(!back.rules.allows(None, "/x"));
        }
        // The runtime's one worker, and no blocking thread.
        assert_eq!(threads, 1, "{threads} threads of the runtime while 64 reads from disk wait");
        drop(runtime);
        let _ = fs::remove_dir_all(dir);
    }
}
