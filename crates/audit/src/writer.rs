//! The audit log's writer task and its file: batches, writes, syncs and reopens (see the
//! parent module's "How records reach the disk" and "Failures").

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;

mod file;
mod manifest;
mod state;
use file::{into_io, write_some};
pub(super) use file::{open_file, path_id, FileId};

/// How long the writer gathers records into one batch before writing them (unless a caller
/// waits for its record): under load, one trip to the blocking pool and one check of the path
/// per batch rather than per record; at worst a record reaches the file this much later.
const BATCH_GATHER: Duration = Duration::from_millis(1);

/// A record queued for the file: its line, and the robots.txt version it names, which the
/// file must hold (a `robots_version` record) before it.
pub(super) struct Pending {
    pub(super) line: Vec<u8>,
    pub(super) announce: Option<super::versions::Announce>,
}

impl From<Vec<u8>> for Pending {
    fn from(line: Vec<u8>) -> Self {
        Pending { line, announce: None }
    }
}

/// The open file; moved to the blocking pool for each batch.
struct Sink {
    path: PathBuf,
    /// `None` after an error: the next batch reopens the path.
    file: Option<(File, FileId)>,
    /// The robots.txt versions written to `file` (emptied whenever a file is opened).
    versions: super::versions::Written,
    /// `service.node.name`, for the `robots_version` records.
    node: Arc<std::sync::OnceLock<String>>,
    /// The hash chain (`chain.rs`): it continues across files.
    chain: super::chain::Chain,
    /// The key that signs checkpoints (`audit.checkpoint_key`).
    key: Option<Arc<robots_proxy_identity::keys::SigningKey>>,
    /// `event.sequence` of the last checkpoint (or of the last record found at start): a
    /// closing checkpoint is written only when records came after it.
    checkpointed: u64,
    /// The last checkpoint, which the next one names (`v2`), and its line as written.
    previous: Option<super::checkpoint::Previous>,
    checkpoint_line: Option<Vec<u8>>,
    /// The chain starts again (`anchor.rs`): the record that says why, written first.
    restart: Option<super::anchor::Restart>,
    /// A checkpoint is written first thing after the start (with a key), so that the cadence
    /// of checkpoints holds across a stop.
    start_checkpoint: bool,
    /// `audit.checkpoint_interval`, named in every checkpoint.
    interval: Duration,
    /// The chain (`event.sequence`, `event.hash`) as the state file last saved it: a
    /// rotation or stop right after a checkpoint saved it does not write it again.
    saved: Option<(u64, [u8; 64])>,
    /// The last checkpoint's note, for `GET /audit/checkpoint` (`state.rs`).
    latest: super::LatestCheckpoint,
    /// The witnesses' history and tasks (`audit.witnesses`), fed every line written whole.
    witnesses: Option<Arc<super::witness::Hub>>,
    /// An `audit_manifest` line to write next (`manifest.rs`).
    manifest: Option<Vec<u8>>,
}

/// Where a line of a batch ends, and the chain after it.
struct LineEnd {
    end: usize,
    /// A caller's record (not a `robots_version` or checkpoint record of the writer's own).
    pending: bool,
    head: [u8; 64],
    sequence: u64,
    /// Its Merkle leaf hash.
    leaf: super::merkle::Hash,
    /// What the line is, when it is one of the writer's own that changes its state.
    kind: Own,
}

/// The writer's own lines that change its state once they are in the file whole.
#[derive(Clone, PartialEq)]
enum Own {
    None,
    Restart,
    Checkpoint(super::checkpoint::Previous),
}

/// What one trip to the blocking pool did.
#[derive(Default)]
struct Outcome {
    /// Records whose whole line reached the file.
    written: usize,
    /// Records that did not (each is counted once, here or in `written`).
    lost: usize,
    synced: bool,
    /// A sync failed: what was written since the last sync may not be on disk.
    sync_failed: bool,
    errors: Vec<io::Error>,
    /// The path no longer led to the open file (deleted, or replaced without a reopen), and
    /// the path was opened again.
    replaced: bool,
    /// The file open afterwards. When none, nothing written is left to sync.
    open: Option<FileId>,
}

impl Sink {
    fn new(
        path: PathBuf,
        file: Option<(File, FileId)>,
        node: Arc<std::sync::OnceLock<String>>,
        key: Option<Arc<robots_proxy_identity::keys::SigningKey>>,
        interval: Duration,
    ) -> Sink {
        let mut sink = Sink {
            path,
            file: None,
            versions: super::versions::Written::default(),
            node,
            chain: super::chain::Chain::default(),
            key,
            checkpointed: 0,
            previous: None,
            checkpoint_line: None,
            restart: None,
            start_checkpoint: false,
            interval,
            saved: None,
            latest: super::LatestCheckpoint::default(),
            witnesses: None,
            manifest: None,
        };
        if let Some(file) = file {
            sink.opened(file);
        }
        sink
    }

    /// Opens the path: a new file, holding none of the versions written so far.
    fn open(&mut self) -> Result<(), AuditError> {
        let file = open_file(&self.path)?;
        self.opened(file);
        Ok(())
    }

    /// Takes `file` as the file written to. The chain continues from the last record
    /// written; on the first open, from where `anchor::resume` says (the end of the file
    /// when it can vouch for it, or a new chain that says why). The next record names the
    /// hash it continues from.
    fn opened(&mut self, mut file: (File, FileId)) {
        if !self.chain.known {
            let public = self.key.as_deref().map(super::checkpoint::PublicKey::of);
            let resumed = super::anchor::resume(&mut file.0, &self.path, public.as_ref());
            self.chain = resumed.chain;
            self.checkpointed = resumed.checkpointed;
            self.previous = resumed.previous;
            self.checkpoint_line = resumed.checkpoint_line;
            self.restart = resumed.restart;
            self.start_checkpoint = self.key.is_some();
        }
        self.chain.mark = true;
        self.file = Some(file);
        self.versions.clear();
    }

    /// Writes `lines`, then syncs if `sync` (or if nothing to write, only syncs). Before
    /// writing, makes sure the path still leads to the open file.
    /// `checkpoint`: end with a checkpoint when records came since the last; `heartbeat`:
    /// whether or not they did (the fixed cadence).
    fn write(
        &mut self,
        lines: &[Pending],
        sync: bool,
        checkpoint: bool,
        heartbeat: bool,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        if !lines.is_empty() {
            self.follow_path(&mut outcome);
        }
        self.write_inner(lines, sync, checkpoint, heartbeat, &mut outcome);
        outcome.open = self.file.as_ref().map(|(_, id)| *id);
        outcome
    }

    /// For a readiness check: makes sure the path leads to the open file, and opens it if no
    /// file is open.
    fn verify(&mut self) -> Outcome {
        let mut outcome = Outcome::default();
        self.follow_path(&mut outcome);
        if self.file.is_none() {
            if let Err(e) = self.open() {
                outcome.errors.push(into_io(e));
            }
        }
        outcome.open = self.file.as_ref().map(|(_, id)| *id);
        outcome
    }

    /// When the path no longer leads to the open file (it was deleted, or renamed and
    /// replaced, without a reopen), syncs and closes the file, so that the next write opens
    /// the path: records written to a deleted file would be lost with it.
    fn follow_path(&mut self, outcome: &mut Outcome) {
        let Some((_, open)) = &self.file else { return };
        if open.is_none() {
            return;
        }
        match path_id(&self.path) {
            Ok(now) if now == *open => return,
            // Not a question of the file's identity: the write will tell.
            Err(e) if e.kind() != io::ErrorKind::NotFound => return,
            _ => {}
        }
        outcome.replaced = true;
        if let Some((file, _)) = self.file.take() {
            if let Err(e) = file.sync_data() {
                outcome.sync_failed = true;
                outcome.errors.push(e);
            }
        }
        if let Err(e) = self.open() {
            outcome.errors.push(into_io(e));
        }
    }

    fn write_inner(
        &mut self,
        lines: &[Pending],
        sync: bool,
        checkpoint: bool,
        heartbeat: bool,
        outcome: &mut Outcome,
    ) {
        let keyed = self.key.is_some();
        let first = self.restart.is_some() || (keyed && self.start_checkpoint);
        let manifest = self.manifest.take();
        if !lines.is_empty() || (keyed && (checkpoint || heartbeat)) || first || manifest.is_some()
        {
            if self.file.is_none() {
                if let Err(e) = self.open() {
                    outcome.errors.push(into_io(e));
                    outcome.lost = lines.len();
                    return;
                }
            }
            // Each record, preceded by a `robots_version` record for a version this file does
            // not hold yet, each sealed into the chain; `ends` says where each line ends and
            // the chain after it.
            let node = self.node.get().map(String::as_str);
            // The chain's members add under 200 bytes a line.
            let size: usize = lines.iter().map(|p| p.line.len() + 200).sum();
            let mut batch = Vec::with_capacity(size);
            let mut ends = Vec::with_capacity(lines.len() + 1);
            let before = self.chain.clone();
            let mut previous = self.previous.clone();
            let mut signed_at = self.checkpointed;
            if let Some(restart) = &self.restart {
                let leaf = self.chain.seal(&mut batch, &restart.line(node));
                ends.push(self.line_end(batch.len(), leaf, Own::Restart));
            }
            if let (true, Some(key)) = (first, &self.key) {
                // First thing after a start or a restart, before any record.
                let (line, signed) = super::checkpoint::line(
                    key,
                    self.chain.head_str(),
                    self.chain.sequence,
                    previous.as_ref(),
                    self.interval,
                    node,
                    self.chain.tree.as_ref(),
                );
                let leaf = self.chain.seal(&mut batch, &line);
                ends.push(self.line_end(batch.len(), leaf, Own::Checkpoint(signed.clone())));
                previous = Some(signed);
                signed_at = self.chain.sequence;
            }
            // A key change is named after the restart's checkpoint, which must follow the
            // restart directly (`audit verify` demands it: a forger can write a restart, not its
            // checkpoint).
            if let Some((old, new)) = self.restart.as_ref().and_then(|r| r.key_change.as_ref()) {
                let line = super::lifecycle::key_changed_line(old, new, node);
                let leaf = self.chain.seal(&mut batch, &line);
                ends.push(self.line_end(batch.len(), leaf, Own::Restart));
            }
            if let Some(line) = &manifest {
                let leaf = self.chain.seal(&mut batch, line);
                let mut end = self.line_end(batch.len(), leaf, Own::None);
                end.pending = false;
                ends.push(end);
            }
            for pending in lines {
                if let Some(announce) = &pending.announce {
                    if self.versions.first_time(&announce.version) {
                        let line = super::versions::line(announce, node);
                        let leaf = self.chain.seal(&mut batch, &line);
                        let mut end = self.line_end(batch.len(), leaf, Own::None);
                        end.pending = false;
                        ends.push(end);
                    }
                }
                let leaf = self.chain.seal(&mut batch, &pending.line);
                ends.push(self.line_end(batch.len(), leaf, Own::None));
            }
            // A closing checkpoint when records came since the last one; the cadence's
            // whether or not they did (unless the start's was just written).
            let records_since = self.chain.sequence > signed_at;
            let checkpoint = (checkpoint && records_since)
                || (heartbeat && (records_since || !(first && keyed)));
            if let (true, Some(key)) = (checkpoint, &self.key) {
                let (line, signed) = super::checkpoint::line(
                    key,
                    self.chain.head_str(),
                    self.chain.sequence,
                    previous.as_ref(),
                    self.interval,
                    node,
                    self.chain.tree.as_ref(),
                );
                let leaf = self.chain.seal(&mut batch, &line);
                ends.push(self.line_end(batch.len(), leaf, Own::Checkpoint(signed)));
            }
            let Some((file, _)) = self.file.as_mut() else {
                self.chain = before;
                return;
            };
            let (done, error) = write_some(file, &batch);
            // The records that reached the file whole are written; the rest (one of them perhaps
            // torn, its start in the file and ended by the next open's newline) are lost.
            let whole = ends.iter().take_while(|line| line.end <= done);
            outcome.written = whole.clone().filter(|line| line.pending).count();
            outcome.lost = lines.len() - outcome.written;
            // The chain goes on from the last line that reached the file whole.
            match whole.last() {
                Some(last) if last.end < batch.len() => {
                    self.chain.head = last.head;
                    self.chain.sequence = last.sequence;
                    // The tree holds the lines that reached the file whole, no more.
                    self.chain.tree = before.tree.clone();
                    if let Some(segment) = &mut self.chain.tree {
                        for line in ends.iter().take_while(|line| line.end <= last.end) {
                            segment.tree.push_hash(line.leaf);
                        }
                    }
                }
                Some(_) => {}
                None => self.chain = before,
            }
            self.took_own(&batch, &ends, done);
            if let Some(e) = error {
                outcome.errors.push(e);
                // Closed: the next open starts the set of versions again, so a version whose
                // record did not make it whole is written again.
                self.file = None;
                return;
            }
        }
        if sync {
            if let Some((file, _)) = self.file.as_ref() {
                match file.sync_data() {
                    Ok(()) => outcome.synced = true,
                    Err(e) => {
                        outcome.sync_failed = true;
                        outcome.errors.push(e);
                        self.file = None;
                    }
                }
            }
        }
    }
}

/// The writer task's state.
pub(super) struct Writer {
    /// `None` only while the sink is on the blocking pool.
    sink: Option<Sink>,
    path: PathBuf,
    fsync: FsyncPolicy,
    fsync_interval: Duration,
    counters: Arc<Counters>,
    /// `service.node.name`, shared with the sink.
    node: Arc<std::sync::OnceLock<String>>,
    /// Records taken from the queue, not yet written.
    pending: Vec<Pending>,
    /// Callers waiting until the pending records are written and synced (`fsync = "always"`).
    acks: Vec<Reply>,
    /// Callers of `close`, answered when the queue is empty.
    closers: Vec<Reply>,
    last_sync: Instant,
    /// Written since the last sync.
    dirty: bool,
    /// In an episode of lost records (logged once).
    failing: bool,
    lost_while_failing: u64,
    /// The last error, for the next `flush`.
    error: Option<io::Error>,
    /// The key that signs checkpoints, and how soon after a record a checkpoint follows.
    key: Option<Arc<robots_proxy_identity::keys::SigningKey>>,
    checkpoint_interval: Duration,
    /// When the next checkpoint is due (records were written since the last).
    checkpoint_due: Option<Instant>,
    /// The next write ends with a checkpoint.
    checkpoint_now: bool,
    /// That checkpoint is the cadence's: written whether or not records came since the last.
    heartbeat: bool,
}

impl Writer {
    /// The writer of the file `path`, already open as `file`.
    pub(super) fn new(
        path: PathBuf,
        file: (File, FileId),
        settings: &AuditSection,
        counters: Arc<Counters>,
        node: Arc<std::sync::OnceLock<String>>,
        key: Option<Arc<robots_proxy_identity::keys::SigningKey>>,
    ) -> Writer {
        counters.set_open(Some(file.1));
        Writer {
            sink: Some(Sink::new(
                path.clone(),
                Some(file),
                node.clone(),
                key.clone(),
                settings.checkpoint_interval,
            )),
            // With a key, checkpoints come on a fixed cadence, idle or not, the first at once.
            checkpoint_due: key.is_some().then(Instant::now),
            key,
            checkpoint_interval: settings.checkpoint_interval,
            checkpoint_now: false,
            heartbeat: false,
            node,
            path,
            fsync: settings.fsync,
            fsync_interval: settings.fsync_interval,
            counters,
            pending: Vec::new(),
            acks: Vec::new(),
            closers: Vec::new(),
            last_sync: Instant::now(),
            dirty: false,
            failing: false,
            lost_while_failing: 0,
            error: None,
        }
    }

    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        while let Some(command) = self.next(&mut rx).await {
            self.handle(command, &mut rx).await;
            self.take_queued(&mut rx).await;
            // Records that come one by one would each pay a trip to the blocking pool and a
            // check of the path: gather what arrives within BATCH_GATHER into one batch. Not
            // when a caller waits for its record (`fsync = "always"`), nor when closing.
            if !self.pending.is_empty()
                && self.pending.len() < MAX_BATCH
                && self.acks.is_empty()
                && self.closers.is_empty()
            {
                tokio::time::sleep(BATCH_GATHER).await;
                self.take_queued(&mut rx).await;
            }
            self.write_pending(false).await;
        }
        // Every handle is gone, or `close` was called and the queue is drained: the last
        // records, the file's manifest, and a checkpoint that covers them.
        self.write_pending(false).await;
        if let Some(outcome) = self.on_blocking_pool(Sink::close_with_manifest).await {
            self.account(outcome);
        }
        self.checkpoint_now = self.key.is_some();
        self.write_pending(true).await;
        let _ = self.on_blocking_pool(|sink| sink.save_state_unless_saved()).await;
        let error = self.error.take();
        for closer in std::mem::take(&mut self.closers) {
            let result = match &error {
                None => Ok(()),
                Some(e) => Err(self.write_error(io::Error::new(e.kind(), e.to_string()))),
            };
            let _ = closer.send(result);
        }
    }

    /// Handles the commands already queued, up to a batch of [`MAX_BATCH`] records.
    async fn take_queued(&mut self, rx: &mut mpsc::Receiver<Command>) {
        while self.pending.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(command) => self.handle(command, rx).await,
                Err(_) => break,
            }
        }
    }

    /// The next command; with `fsync = "interval"` and unsynced data, syncs when the interval
    /// is up while waiting.
    async fn next(&mut self, rx: &mut mpsc::Receiver<Command>) -> Option<Command> {
        loop {
            let sync = (self.dirty && self.fsync == FsyncPolicy::Interval)
                .then(|| robots_proxy_clock::deadline_after(self.last_sync, self.fsync_interval));
            let deadline = match (sync, self.checkpoint_due) {
                (None, None) => return rx.recv().await,
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
            };
            tokio::select! {
                command = rx.recv() => return command,
                () = tokio::time::sleep_until(deadline) => {
                    if self.checkpoint_due.is_some_and(|due| due <= Instant::now()) {
                        self.checkpoint_now = true;
                        self.heartbeat = true;
                    }
                    // A checkpoint is synced at once: one sync per interval at most.
                    let force =
                        self.checkpoint_now || sync.is_some_and(|due| due <= Instant::now());
                    self.write_pending(force).await
                }
            }
        }
    }

    async fn handle(&mut self, command: Command, rx: &mut mpsc::Receiver<Command>) {
        match command {
            Command::Record(line, ack) => {
                self.pending.push(line);
                self.acks.extend(ack);
            }
            Command::Flush(reply) => {
                self.write_pending(true).await;
                let _ = reply.send(self.take_error());
            }
            Command::Reopen(reply) => {
                self.write_pending(false).await;
                let result = self.reopen().await;
                let _ = reply.send(result);
            }
            Command::Verify(done) => {
                self.write_pending(false).await;
                self.verify().await;
                let _ = done.send(());
            }
            Command::Resume(node, reply) => {
                if !self.counters.losing.load(Ordering::Relaxed) {
                    let _ = reply.send(Ok(()));
                    return;
                }
                let line = self.records_lost_line(node.as_deref());
                self.pending.push(line.into());
                self.acks.push(reply);
                self.write_pending(true).await;
            }
            Command::Configure(fsync, interval) => {
                self.fsync = fsync;
                self.fsync_interval = interval;
            }
            Command::Close(reply) => {
                // No new records; those already queued are still received, then `recv` ends.
                rx.close();
                self.closers.push(reply);
            }
        }
    }

    /// Writes the pending records and syncs if `force`, the policy says so, or a caller waits
    /// for the sync; then answers those callers.
    async fn write_pending(&mut self, force: bool) {
        let sync = force
            || !self.acks.is_empty()
            || match self.fsync {
                FsyncPolicy::Never => false,
                FsyncPolicy::Always => true,
                FsyncPolicy::Interval => {
                    Instant::now()
                        >= robots_proxy_clock::deadline_after(self.last_sync, self.fsync_interval)
                }
            };
        let checkpoint = std::mem::take(&mut self.checkpoint_now);
        let heartbeat = std::mem::take(&mut self.heartbeat);
        if heartbeat {
            self.checkpoint_due = Some(Instant::now() + self.checkpoint_interval);
        }
        if self.pending.is_empty() && !(sync && self.dirty) && !checkpoint {
            return;
        }
        let lines = std::mem::take(&mut self.pending);
        let count = lines.len();
        let work = move |sink: &mut Sink| sink.write(&lines, sync, checkpoint, heartbeat);
        let outcome = match self.on_blocking_pool(work).await {
            Some(outcome) => outcome,
            None => Outcome {
                lost: count,
                errors: vec![io::Error::other("the audit writer's I/O task failed")],
                ..Outcome::default()
            },
        };
        let confirmed = match outcome.errors.first() {
            None if outcome.written == count && (outcome.synced || count == 0) => Ok(()),
            None => Err(io::ErrorKind::WriteZero.into()),
            Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        for ack in std::mem::take(&mut self.acks) {
            let result = match &confirmed {
                Ok(()) => Ok(()),
                Err(e) => Err(self.write_error(io::Error::new(e.kind(), e.to_string()))),
            };
            let _ = ack.send(result);
        }
        self.account(outcome);
    }

    /// The `audit_records_lost` record: how many records were lost in this episode (the count
    /// includes earlier such records that could not be written either) and the last error.
    fn records_lost_line(&self, node: Option<&str>) -> Vec<u8> {
        let lost = self.lost_while_failing;
        let mut record = serde_json::json!({
            "@timestamp": timestamp(std::time::SystemTime::now()),
            "event.action": "audit_records_lost",
            "event.outcome": "failure",
            "event.reason": format!(
                "{lost} audit record(s) could not be written to {} before this one ({})",
                self.path.display(),
                self.counters.last_error()
            ),
            "audit.records_lost": lost,
            "event.dataset": EVENT_DATASET,
            "ecs.version": ECS_VERSION,
        });
        if let (Some(node), Some(map)) = (node, record.as_object_mut()) {
            map.insert("service.node.name".to_owned(), node.into());
        }
        let mut line = record.to_string().into_bytes();
        robots_proxy_output::json_line(&mut line);
        line.push(b'\n');
        line
    }

    async fn reopen(&mut self) -> Result<(), AuditError> {
        let Some((outcome, opened)) = self.on_blocking_pool(Sink::reopen).await else {
            return Err(self.write_error(io::Error::other("the audit writer's I/O task failed")));
        };
        // Opening the file says nothing about whether records can be written to it: only a
        // write does. A failed open loses no record by itself (the next batch would), so it is
        // the caller's to report.
        self.account(outcome);
        opened.map_err(|source| {
            self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
            AuditError::Open { path: self.path.clone(), source }
        })
    }

    /// For a readiness check that found the path no longer leads to the open file, or no
    /// file open: follows the path.
    async fn verify(&mut self) {
        let Some(mut outcome) = self.on_blocking_pool(Sink::verify).await else { return };
        // An open that fails here loses no record: counted, and shown by the next check.
        for error in std::mem::take(&mut outcome.errors) {
            tracing::debug!(path = %self.path.display(), %error, "cannot open the audit log");
            self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
            self.counters.set_last_error(&error);
        }
        self.account(outcome);
    }

    /// Runs `work` on the sink on the blocking pool and puts the sink back. `None` if the work
    /// did not complete.
    async fn on_blocking_pool<T, F>(&mut self, work: F) -> Option<T>
    where
        F: FnOnce(&mut Sink) -> T + Send + 'static,
        T: Send + 'static,
    {
        let path = self.path.clone();
        let node = self.node.clone();
        let key = self.key.clone();
        let interval = self.checkpoint_interval;
        let mut sink = self
            .sink
            .take()
            .unwrap_or_else(|| Sink::new(path.clone(), None, node.clone(), key.clone(), interval));
        match tokio::task::spawn_blocking(move || {
            let result = work(&mut sink);
            (sink, result)
        })
        .await
        {
            Ok((sink, result)) => {
                self.sink = Some(sink);
                Some(result)
            }
            Err(e) => {
                // The closure panicked (or the runtime is shutting down): the file handle is
                // gone; the next batch opens the path again.
                tracing::error!(path = %path.display(), error = %e, "audit writer I/O task failed");
                self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                self.counters.set_open(None);
                self.sink = Some(Sink::new(path, None, node, key, interval));
                None
            }
        }
    }

    fn account(&mut self, outcome: Outcome) {
        let c = &self.counters;
        c.records_written.fetch_add(outcome.written as u64, Ordering::Relaxed);
        c.records_lost.fetch_add(outcome.lost as u64, Ordering::Relaxed);
        c.write_errors.fetch_add(outcome.errors.len() as u64, Ordering::Relaxed);
        c.set_open(outcome.open);
        if outcome.replaced {
            c.file_replaced.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                path = %self.path.display(),
                "the audit log's file was deleted or replaced without a reopen; opened the path again",
            );
        }
        if outcome.written > 0 {
            self.dirty = true;
        }
        if outcome.synced {
            c.syncs.fetch_add(1, Ordering::Relaxed);
            self.dirty = false;
            self.last_sync = Instant::now();
        }
        if outcome.open.is_none() {
            // The file was closed after an error: what was written to it cannot be synced any
            // more, and waiting to sync it would wake the writer for nothing.
            self.dirty = false;
        }
        if outcome.errors.is_empty() {
            if outcome.written > 0 {
                if self.failing {
                    tracing::warn!(
                        path = %self.path.display(),
                        lost = self.lost_while_failing,
                        "audit log is writable again",
                    );
                    self.failing = false;
                    self.lost_while_failing = 0;
                }
                self.counters.losing.store(false, Ordering::Relaxed);
            }
            return;
        }
        self.lost_while_failing += outcome.lost as u64;
        let losing = outcome.lost > 0 || outcome.sync_failed;
        for error in outcome.errors {
            self.counters.set_last_error(&error);
            if losing {
                self.error_episode(&error);
            }
            self.error = Some(error);
        }
    }

    /// Logs the first error of an episode at `error`, the rest at `debug`, so that a full disk
    /// does not flood the operational log.
    fn error_episode(&mut self, error: &io::Error) {
        if self.failing {
            tracing::debug!(path = %self.path.display(), %error, "audit log write failed again");
        } else {
            tracing::error!(
                path = %self.path.display(),
                %error,
                "cannot write the audit log; records are being lost until it recovers",
            );
            self.failing = true;
        }
        self.counters.losing.store(true, Ordering::Relaxed);
    }

    fn take_error(&mut self) -> Result<(), AuditError> {
        match self.error.take() {
            None => Ok(()),
            Some(source) => Err(self.write_error(source)),
        }
    }

    fn write_error(&self, source: io::Error) -> AuditError {
        AuditError::Write { path: self.path.clone(), source }
    }
}

#[cfg(test)]
mod tests;
