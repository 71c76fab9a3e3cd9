//! The audit log: one JSON line per blocked request (optionally per decision), written by a
//! dedicated writer so that no log-level setting can hide it and nothing is dropped silently.
//!
//! Field names follow ECS / OpenTelemetry (`@timestamp`, `http.request.method`, `url.full`,
//! `user_agent.original`, `event.action`), with a `robots.*` namespace for ours. The schema is
//! documented, with an example line, in `docs/audit.md`.
//!
//! # How records reach the disk
//!
//! [`AuditLog::record`] serialises the record on the caller's task and queues the line on a
//! bounded channel. When the queue is full the caller *waits*: a stalled disk slows the proxy
//! down rather than losing records. One writer task takes a record, drains whatever else is
//! queued (up to [`MAX_BATCH`]), writes the batch through a `BufWriter`, flushes it and syncs
//! according to `audit.fsync`:
//!
//! * `never`: the kernel writes the data back when it likes;
//! * `interval`: at most once per `audit.fsync_interval`, and within one interval of the last
//!   write even when no more records arrive;
//! * `always`: after every batch, before the next one is taken.
//!
//! The file I/O runs on tokio's blocking pool, so a slow `fsync` does not stall the runtime.
//!
//! # Failures
//!
//! A write error is logged (`tracing::error`, once per episode, with a `warn` on recovery) and
//! counted in [`AuditStats`]; the batch it hit is counted as lost, the file is closed, and the
//! next batch reopens the path before writing. The next [`AuditLog::flush`] returns the error.
//! Opening the file first checks that it ends with a newline and adds one if not, so a line cut
//! short by a crash or a failed write never runs into the next record.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::{AuditSection, FsyncPolicy};

/// The version of the Elastic Common Schema the field names follow, written in every line as
/// `ecs.version`.
pub const ECS_VERSION: &str = "8.11.0";

/// Written in every line as `event.dataset`, so the records can be told apart from other logs
/// once shipped to the same place.
pub const EVENT_DATASET: &str = "robots_proxy.audit";

/// Most records written as one batch before the writer checks for control requests again.
pub const MAX_BATCH: usize = 1024;

/// One audit record. Serialised flat, with dotted ECS field names.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditRecord {
    /// When the decision was made, RFC 3339 UTC (see [`timestamp`]).
    #[serde(rename = "@timestamp")]
    pub timestamp: String,
    /// `robots_disallow`, `robots_allow`, … (what the proxy did).
    #[serde(rename = "event.action")]
    pub action: String,
    /// `success` when the request was forwarded, `failure` when it was blocked.
    #[serde(rename = "event.outcome")]
    pub outcome: String,
    /// A sentence for a person.
    #[serde(rename = "event.reason")]
    pub reason: String,
    /// The client's address (`ip:port`).
    #[serde(rename = "client.address")]
    pub client_address: String,
    /// The request method.
    #[serde(rename = "http.request.method")]
    pub method: String,
    /// The status the proxy answered with (403 for a block), when known.
    #[serde(rename = "http.response.status_code", skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// The full URL requested.
    #[serde(rename = "url.full")]
    pub url: String,
    /// The authority (`scheme://host[:port]`), the key robots.txt is cached under. Written as
    /// `robots.authority`; the line also gets ECS `url.domain` (the host alone) from it.
    #[serde(rename = "robots.authority")]
    pub domain: String,
    /// The path and query that were checked. Written as `robots.path`; the line also gets ECS
    /// `url.path` and `url.query` (split at the first `?`) from it.
    #[serde(rename = "robots.path")]
    pub path: String,
    /// The User-Agent header, if any.
    #[serde(rename = "user_agent.original", skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The product token used, if any.
    #[serde(rename = "robots.product_token", skip_serializing_if = "Option::is_none")]
    pub product_token: Option<String>,
    /// The deciding rule (`disallow: /private`), if a rule decided.
    #[serde(rename = "robots.rule", skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The deciding rule's line, if a rule decided.
    #[serde(rename = "robots.line", skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The user-agent line of the group that decided.
    #[serde(rename = "robots.group", skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The robots.txt URL.
    #[serde(rename = "robots.url")]
    pub robots_url: String,
    /// fresh, stale, unavailable or unreachable.
    #[serde(rename = "robots.state")]
    pub state: String,
    /// Age of the robots.txt in force, in seconds.
    #[serde(rename = "robots.age_seconds")]
    pub age_seconds: u64,
    /// The reading of the path that decided (`as-sent`, `decoded`, `backslash`,
    /// `parameters`: see [`crate::policy::Reading`]), for decisions on the rules.
    #[serde(rename = "robots.reading", skip_serializing_if = "Option::is_none")]
    pub reading: Option<String>,
    /// The path and query as that reading reads it, when it differs from `robots.path`.
    #[serde(rename = "robots.read_path", skip_serializing_if = "Option::is_none")]
    pub read_path: Option<String>,
    /// The AI usage preference involved, for usage decisions (`robots.usage.*`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageAudit>,
}

/// The AI usage preference part of an audit record: which category, what the site said, where
/// it said it, and what the crawler fetched for. Lets a compliance team answer "which
/// opted-out pages did we fetch for training, and when".
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageAudit {
    /// The category (`train-ai`, `ai-use`, `search`).
    #[serde(rename = "robots.usage.category")]
    pub category: String,
    /// The effective value: `y`, `n` or `unknown`.
    #[serde(rename = "robots.usage.value")]
    pub value: String,
    /// `robots.txt line N`, `response header`, or both.
    #[serde(rename = "robots.usage.source")]
    pub source: String,
    /// The crawler's purposes, comma-separated.
    #[serde(rename = "robots.usage.purpose")]
    pub purpose: String,
    /// Every known preference, merged from all sources, as a `Content-Usage` dictionary.
    #[serde(rename = "robots.usage.preferences", skip_serializing_if = "Option::is_none")]
    pub preferences: Option<String>,
}

/// A line of the audit log: the record, the ECS `url.*` parts derived from it, and the fields
/// that are the same in every line.
#[derive(Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    record: &'a AuditRecord,
    #[serde(rename = "url.domain")]
    url_domain: &'a str,
    #[serde(rename = "url.path")]
    url_path: &'a str,
    #[serde(rename = "url.query", skip_serializing_if = "Option::is_none")]
    url_query: Option<&'a str>,
    #[serde(rename = "event.dataset")]
    dataset: &'static str,
    #[serde(rename = "ecs.version")]
    ecs_version: &'static str,
}

impl<'a> Line<'a> {
    fn new(record: &'a AuditRecord) -> Self {
        let (url_path, url_query) = match record.path.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (record.path.as_str(), None),
        };
        Line {
            record,
            url_domain: host_of(&record.domain),
            url_path,
            url_query,
            dataset: EVENT_DATASET,
            ecs_version: ECS_VERSION,
        }
    }
}

/// The host of `scheme://host[:port]`: what ECS calls `url.domain` (an IPv6 literal keeps its
/// brackets, as ECS asks).
fn host_of(authority: &str) -> &str {
    let rest = authority.split_once("://").map_or(authority, |(_, rest)| rest);
    if rest.starts_with('[') {
        return rest.find(']').map_or(rest, |end| &rest[..=end]);
    }
    rest.rsplit_once(':').map_or(rest, |(host, _)| host)
}

/// `at` as RFC 3339 UTC with milliseconds (`2026-11-22T04:33:16.123Z`), for `@timestamp`.
///
/// Times outside what RFC 3339 can show (before 1970, after 9999) are clamped to its range
/// instead of panicking, as formatting them directly with humantime would.
pub fn timestamp(at: SystemTime) -> String {
    // The last millisecond of 9999-12-31.
    let last = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999);
    let at = at.clamp(UNIX_EPOCH, last);
    humantime::format_rfc3339_millis(at).to_string()
}

/// Why the audit log could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The directory for the file could not be created.
    #[error("cannot create directory {path} for the audit log: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file could not be opened.
    #[error("cannot open audit log {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Records could not be written or synced.
    #[error("cannot write audit log {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A record could not be serialised (not expected: every field is a string or a number).
    #[error("cannot serialise an audit record: {0}")]
    Encode(#[from] serde_json::Error),
    /// [`AuditLog::open`] was called outside a tokio runtime, which the writer task needs.
    #[error("the audit log must be opened inside a tokio runtime")]
    NoRuntime,
    /// The writer has stopped ([`AuditLog::close`] was called, or the task died).
    #[error("the audit writer has stopped")]
    Closed,
}

/// Counters of the writer's work since [`AuditLog::open`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditStats {
    /// Records written to the file (and flushed to the OS).
    pub records_written: u64,
    /// Records lost because their batch could not be written.
    pub records_lost: u64,
    /// Failed opens, writes and syncs.
    pub write_errors: u64,
    /// Successful fsyncs.
    pub syncs: u64,
}

#[derive(Debug, Default)]
struct Counters {
    records_written: AtomicU64,
    records_lost: AtomicU64,
    write_errors: AtomicU64,
    syncs: AtomicU64,
    /// In an episode of write errors (set with the first, cleared when a write succeeds).
    failing: AtomicBool,
}

/// A handle to the audit writer. Cheap to clone; the writer stops when [`AuditLog::close`] is
/// called or the last handle is dropped (after writing and syncing what was queued).
#[derive(Clone)]
pub struct AuditLog {
    shared: Arc<Shared>,
}

struct Shared {
    tx: mpsc::Sender<Command>,
    path: PathBuf,
    /// Changed by [`AuditLog::reconfigure`] on a reload; read once per request.
    all_decisions: AtomicBool,
    counters: Arc<Counters>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.shared.path)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

type Reply = oneshot::Sender<Result<(), AuditError>>;

enum Command {
    /// A serialised record, newline included.
    Record(Vec<u8>),
    Flush(Reply),
    Reopen(Reply),
    Close(Reply),
    /// New `fsync` and `fsync_interval`.
    Configure(FsyncPolicy, Duration),
}

impl AuditLog {
    /// Opens (creates or appends to) the audit log at `path`, creating its directory, and starts
    /// the writer task on the current tokio runtime.
    ///
    /// The file is opened here, not in the task, so that a bad path stops start-up with an error
    /// naming it. Use [`crate::config::Config::audit_path`] for `path`.
    pub fn open(path: PathBuf, settings: AuditSection) -> Result<Self, AuditError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| AuditError::NoRuntime)?;
        let file = open_file(&path)?;
        let (tx, rx) = mpsc::channel(settings.queue_capacity.max(1));
        let counters = Arc::new(Counters::default());
        let writer = Writer {
            sink: Some(Sink { path: path.clone(), file: Some(file) }),
            path: path.clone(),
            fsync: settings.fsync,
            fsync_interval: settings.fsync_interval,
            counters: counters.clone(),
            pending: Vec::new(),
            closers: Vec::new(),
            last_sync: Instant::now(),
            dirty: false,
            failing: false,
            lost_while_failing: 0,
            error: None,
        };
        let handle = runtime.spawn(writer.run(rx));
        Ok(AuditLog {
            shared: Arc::new(Shared {
                tx,
                path,
                all_decisions: AtomicBool::new(settings.all_decisions),
                counters,
                writer: Mutex::new(Some(handle)),
            }),
        })
    }

    /// Whether every decision is recorded, not only blocks.
    pub fn all_decisions(&self) -> bool {
        self.shared.all_decisions.load(Ordering::Relaxed)
    }

    /// Applies the options of `settings` that can change while running (on a configuration
    /// reload): `all_decisions`, `fsync` and `fsync_interval`. `path` and `queue_capacity` are
    /// fixed when the log is opened.
    pub async fn reconfigure(&self, settings: &AuditSection) -> Result<(), AuditError> {
        self.shared.all_decisions.store(settings.all_decisions, Ordering::Relaxed);
        let command = Command::Configure(settings.fsync, settings.fsync_interval);
        self.shared.tx.send(command).await.map_err(|_| AuditError::Closed)
    }

    /// Whether records can be written now, for a readiness check: the writer is running and the
    /// file can be opened for appending (which creates it if log rotation has just moved it
    /// away). After a write error, the file is reopened, as [`AuditLog::reopen`] does.
    pub async fn check_writable(&self) -> Result<(), AuditError> {
        if self.shared.tx.is_closed() {
            return Err(AuditError::Closed);
        }
        if self.shared.counters.failing.load(Ordering::Relaxed) {
            // The last write failed. Without new records the writer would not try again, so a
            // proxy taken out of service for it would stay out: try to reopen the file now.
            return self.reopen().await;
        }
        let path = self.shared.path.clone();
        let probe = tokio::task::spawn_blocking(move || {
            let mut options = OpenOptions::new();
            options.append(true).create(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o640);
            options.open(&path).map(drop).map_err(|source| AuditError::Open { path, source })
        });
        probe.await.map_err(|_| AuditError::Closed)?
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Queues a record; waits when the queue is full (never drops).
    ///
    /// `Ok` means the record is queued: it is written unless the disk fails, which is counted
    /// in [`AuditStats::records_lost`] and reported by the next [`AuditLog::flush`].
    pub async fn record(&self, record: AuditRecord) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(&Line::new(&record))?;
        line.push(b'\n');
        self.shared.tx.send(Command::Record(line)).await.map_err(|_| AuditError::Closed)
    }

    /// Closes the file and opens the path again, for log rotation: after the file has been
    /// renamed away, records queued before this call go to the old file and later ones to a new
    /// file at the path. Call it on `SIGHUP` (what logrotate's `postrotate` usually sends).
    pub async fn reopen(&self) -> Result<(), AuditError> {
        self.request(Command::Reopen).await
    }

    /// Waits until every record queued before this call is written and synced to disk,
    /// whatever `audit.fsync` says. Returns the last write error since the previous `flush`, if
    /// any.
    pub async fn flush(&self) -> Result<(), AuditError> {
        self.request(Command::Flush).await
    }

    /// Stops the writer, for shutdown: no more records are accepted (then [`AuditLog::record`]
    /// returns [`AuditError::Closed`]), those already queued are written, and the file is synced
    /// and closed. Returns the last write error, like [`AuditLog::flush`].
    pub async fn close(&self) -> Result<(), AuditError> {
        let result = self.request(Command::Close).await;
        let handle = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            // The writer has answered, so it is about to return; a panic has been logged by
            // the runtime and changes nothing for the caller.
            let _ = handle.await;
        }
        result
    }

    /// The writer's counters.
    pub fn stats(&self) -> AuditStats {
        let c = &self.shared.counters;
        AuditStats {
            records_written: c.records_written.load(Ordering::Relaxed),
            records_lost: c.records_lost.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
        }
    }

    async fn request(&self, command: fn(Reply) -> Command) -> Result<(), AuditError> {
        let (reply, answer) = oneshot::channel();
        self.shared.tx.send(command(reply)).await.map_err(|_| AuditError::Closed)?;
        answer.await.map_err(|_| AuditError::Closed)?
    }
}

/// Creates the directory, opens `path` for appending and makes sure the file ends with a
/// newline, so that the next record starts a line of its own.
fn open_file(path: &Path) -> Result<BufWriter<File>, AuditError> {
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
struct Writer {
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
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
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
            let deadline = self.last_sync + self.fsync_interval;
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
                FsyncPolicy::Interval => Instant::now() >= self.last_sync + self.fsync_interval,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_authority() {
        assert_eq!(host_of("http://example.com"), "example.com");
        assert_eq!(host_of("https://example.com:8443"), "example.com");
        assert_eq!(host_of("http://[::1]:8080"), "[::1]");
        assert_eq!(host_of("http://[::1]"), "[::1]");
        assert_eq!(host_of("example.com:80"), "example.com");
    }

    #[test]
    fn timestamp_is_rfc3339_utc_millis() {
        let at = UNIX_EPOCH + Duration::from_millis(1_795_321_996_123);
        assert_eq!(timestamp(at), "2026-11-22T04:33:16.123Z");
        assert_eq!(timestamp(UNIX_EPOCH - Duration::from_secs(5)), "1970-01-01T00:00:00.000Z");
        let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        assert_eq!(timestamp(far), "9999-12-31T23:59:59.999Z");
    }
}
