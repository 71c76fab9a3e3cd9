//! The audit log's writer task and its file: batches, flushes, syncs and reopens (see the
//! parent module's "How records reach the disk" and "Failures").

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;

/// Creates the directory, opens `path` for appending and makes sure the file ends with a
/// newline, so that the next record starts a line of its own.
pub(super) fn open_file(path: &Path) -> Result<BufWriter<File>, AuditError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|source| AuditError::CreateDir { path: dir.to_owned(), source })?;
    }
    let open = || -> io::Result<File> {
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        // Client addresses and URLs are personal data in many places: readable by the owner and
        // its group only, when the file is created (an existing file keeps its mode).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o640);
        let mut file = options.open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory"));
        }
        if meta.is_file() && meta.len() > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::End(-1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(file)
    };
    let file = open().map_err(|source| AuditError::Open { path: path.to_owned(), source })?;
    Ok(BufWriter::with_capacity(64 * 1024, file))
}

/// The open file; moved to the blocking pool for each batch.
struct Sink {
    path: PathBuf,
    /// `None` after an error: the next batch reopens the path.
    file: Option<BufWriter<File>>,
}

/// What one trip to the blocking pool did.
#[derive(Default)]
struct Outcome {
    written: usize,
    lost: usize,
    synced: bool,
    errors: Vec<io::Error>,
    /// Whether a file is open afterwards. When not, nothing written is left to sync.
    open: bool,
}

impl Sink {
    /// Writes `lines`, then syncs if `sync` (or if nothing to write, only syncs).
    fn write(&mut self, lines: &[Vec<u8>], sync: bool) -> Outcome {
        let mut outcome = self.write_inner(lines, sync);
        outcome.open = self.file.is_some();
        outcome
    }

    fn write_inner(&mut self, lines: &[Vec<u8>], sync: bool) -> Outcome {
        let mut outcome = Outcome::default();
        if !lines.is_empty() {
            if self.file.is_none() {
                match open_file(&self.path) {
                    Ok(file) => self.file = Some(file),
                    Err(e) => {
                        outcome.errors.push(into_io(e));
                        outcome.lost = lines.len();
                        return outcome;
                    }
                }
            }
            let Some(file) = self.file.as_mut() else { return outcome };
            let written = lines.iter().try_for_each(|line| file.write_all(line));
            match written.and_then(|()| file.flush()) {
                Ok(()) => outcome.written = lines.len(),
                Err(e) => {
                    // Some lines of the batch may have reached the file; counting the whole
                    // batch as lost errs on the side of saying so.
                    outcome.errors.push(e);
                    outcome.lost = lines.len();
                    self.discard();
                    return outcome;
                }
            }
        }
        if sync {
            if let Some(file) = self.file.as_mut() {
                match file.flush().and_then(|()| file.get_ref().sync_data()) {
                    Ok(()) => outcome.synced = true,
                    Err(e) => {
                        outcome.errors.push(e);
                        self.discard();
                    }
                }
            }
        }
        outcome
    }

    /// Syncs and closes the file, then opens the path again.
    fn reopen(&mut self) -> (Outcome, Result<(), io::Error>) {
        let outcome = self.write(&[], true);
        self.discard();
        match open_file(&self.path) {
            Ok(file) => {
                self.file = Some(file);
                (Outcome { open: true, ..outcome }, Ok(()))
            }
            Err(e) => (Outcome { open: false, ..outcome }, Err(into_io(e))),
        }
    }

    /// Drops the file without writing what is buffered (after an error, writing it again could
    /// duplicate or tear lines).
    fn discard(&mut self) {
        if let Some(file) = self.file.take() {
            let (_file, _unwritten) = file.into_parts();
        }
    }
}

fn into_io(e: AuditError) -> io::Error {
    match e {
        AuditError::CreateDir { source, .. }
        | AuditError::Open { source, .. }
        | AuditError::Write { source, .. } => source,
        other => io::Error::other(other.to_string()),
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
    /// Records taken from the queue, not yet written.
    pending: Vec<Vec<u8>>,
    /// Callers of `close`, answered when the queue is empty.
    closers: Vec<Reply>,
    last_sync: Instant,
    /// Written since the last sync.
    dirty: bool,
    /// In an episode of errors (logged once).
    failing: bool,
    lost_while_failing: u64,
    /// The last error, for the next `flush`.
    error: Option<io::Error>,
}

impl Writer {
    /// The writer of the file `path`, already open as `file`.
    pub(super) fn new(
        path: PathBuf,
        file: BufWriter<File>,
        settings: &AuditSection,
        counters: Arc<Counters>,
    ) -> Writer {
        Writer {
            sink: Some(Sink { path: path.clone(), file: Some(file) }),
            path,
            fsync: settings.fsync,
            fsync_interval: settings.fsync_interval,
            counters,
            pending: Vec::new(),
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
            while self.pending.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(command) => self.handle(command, &mut rx).await,
                    Err(_) => break,
                }
            }
            self.write_pending(false).await;
        }
        // Every handle is gone, or `close` was called and the queue is drained.
        self.write_pending(true).await;
        let error = self.error.take();
        for closer in std::mem::take(&mut self.closers) {
            let result = match &error {
                None => Ok(()),
                Some(e) => Err(self.write_error(io::Error::new(e.kind(), e.to_string()))),
            };
            let _ = closer.send(result);
        }
    }

    /// The next command; with `fsync = "interval"` and unsynced data, syncs when the interval
    /// is up while waiting.
    async fn next(&mut self, rx: &mut mpsc::Receiver<Command>) -> Option<Command> {
        loop {
            if !(self.dirty && self.fsync == FsyncPolicy::Interval) {
                return rx.recv().await;
            }
            let deadline = crate::clock::deadline_after(self.last_sync, self.fsync_interval);
            tokio::select! {
                command = rx.recv() => return command,
                () = tokio::time::sleep_until(deadline) => self.write_pending(true).await,
            }
        }
    }

    async fn handle(&mut self, command: Command, rx: &mut mpsc::Receiver<Command>) {
        match command {
            Command::Record(line) => self.pending.push(line),
            Command::Flush(reply) => {
                self.write_pending(true).await;
                let _ = reply.send(self.take_error());
            }
            Command::Reopen(reply) => {
                self.write_pending(false).await;
                let result = self.reopen().await;
                let _ = reply.send(result);
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

    /// Writes the pending records and syncs if `force` or the policy says so.
    async fn write_pending(&mut self, force: bool) {
        let sync = force
            || match self.fsync {
                FsyncPolicy::Never => false,
                FsyncPolicy::Always => true,
                FsyncPolicy::Interval => {
                    Instant::now()
                        >= crate::clock::deadline_after(self.last_sync, self.fsync_interval)
                }
            };
        if self.pending.is_empty() && !(sync && self.dirty) {
            return;
        }
        let lines = std::mem::take(&mut self.pending);
        let count = lines.len();
        match self.on_blocking_pool(move |sink| sink.write(&lines, sync)).await {
            Some(outcome) => self.account(outcome),
            None => self.account(Outcome { lost: count, open: false, ..Outcome::default() }),
        }
    }

    async fn reopen(&mut self) -> Result<(), AuditError> {
        let Some((outcome, opened)) = self.on_blocking_pool(Sink::reopen).await else {
            return Err(self.write_error(io::Error::other("the audit writer's I/O task failed")));
        };
        self.account(outcome);
        if opened.is_ok() {
            // Whether writes work again is known only at the next write; until then the file
            // opens, which is what a readiness check can ask for.
            self.counters.failing.store(false, Ordering::Relaxed);
        }
        opened.map_err(|source| {
            self.error_episode(&source);
            self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
            AuditError::Open { path: self.path.clone(), source }
        })
    }

    /// Runs `work` on the sink on the blocking pool and puts the sink back. `None` if the work
    /// did not complete.
    async fn on_blocking_pool<T, F>(&mut self, work: F) -> Option<T>
    where
        F: FnOnce(&mut Sink) -> T + Send + 'static,
        T: Send + 'static,
    {
        let path = self.path.clone();
        let mut sink = self.sink.take().unwrap_or(Sink { path: path.clone(), file: None });
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
                self.sink = Some(Sink { path, file: None });
                None
            }
        }
    }

    fn account(&mut self, outcome: Outcome) {
        let c = &self.counters;
        c.records_written.fetch_add(outcome.written as u64, Ordering::Relaxed);
        c.records_lost.fetch_add(outcome.lost as u64, Ordering::Relaxed);
        c.write_errors.fetch_add(outcome.errors.len() as u64, Ordering::Relaxed);
        if outcome.written > 0 {
            self.dirty = true;
        }
        if outcome.synced {
            c.syncs.fetch_add(1, Ordering::Relaxed);
            self.dirty = false;
            self.last_sync = Instant::now();
        }
        if !outcome.open {
            // The file was closed after an error: what was written to it cannot be synced any
            // more, and waiting to sync it would wake the writer for nothing.
            self.dirty = false;
        }
        if outcome.errors.is_empty() {
            if outcome.written > 0 && self.failing {
                tracing::warn!(
                    path = %self.path.display(),
                    lost = self.lost_while_failing,
                    "audit log is writable again",
                );
                self.failing = false;
                self.lost_while_failing = 0;
            }
            if outcome.written > 0 {
                self.counters.failing.store(false, Ordering::Relaxed);
            }
            return;
        }
        self.lost_while_failing += outcome.lost as u64;
        for error in outcome.errors {
            self.error_episode(&error);
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
        self.counters.failing.store(true, Ordering::Relaxed);
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
