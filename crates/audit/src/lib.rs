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
//! queued and what arrives within a millisecond (up to [`MAX_BATCH`]; no waiting when a caller
//! waits for its record), writes the batch in one write, and syncs according to `audit.fsync`:
//!
//! * `never`: the kernel writes the data back when it likes;
//! * `interval`: at most once per `audit.fsync_interval`, and within one interval of the last
//!   write even when no more records arrive;
//! * `always`: after every batch, before the next one is taken; and [`AuditLog::record`]
//!   returns only once its record is written and synced (or after [`SYNC_WAIT`]), so the
//!   answer to a request is not sent before its record is on disk.
//!
//! Each line is sealed into the log's hash chain as the batch is built (`event.sequence`,
//! `event.hash`: [`chain`]); with `audit.checkpoint_key`, signed `audit_checkpoint` records
//! follow at `audit.checkpoint_interval`, before a reopen and at shutdown ([`checkpoint`]).
//! [`verify`] checks both (`robots-proxy audit verify`).
//!
//! The file I/O runs on tokio's blocking pool, so a slow `fsync` does not stall the runtime.
//! Before each batch the writer checks that the path still leads to the file it has open
//! (device and inode): a file deleted, or renamed and replaced, without a reopen is followed
//! to the path, so records never go to a file nobody can read. Opening the file syncs its
//! directory, so that a new name survives a power failure as the records synced into it do.
//!
//! # Failures
//!
//! A write error is logged (`tracing::error`, once per episode, with a `warn` on recovery) and
//! counted in [`AuditStats`]; the records of the batch that did not reach the file whole are
//! counted as lost (each record once, as written or as lost), the file is closed, and the next
//! batch reopens the path before writing. The next [`AuditLog::flush`] returns the error.
//! Opening the file first checks that it ends with a newline and adds one if not, so a line cut
//! short by a crash or a failed write never runs into the next record.
//!
//! From a lost record until a record is written again, [`AuditLog::check_writable`] (the
//! readiness check) fails: opening the file again proves nothing on a full disk. Each check in
//! that state tries to write an `audit_records_lost` record, which says how many records were
//! lost; the first that is written ends the episode.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use section::{AuditSection, FsyncPolicy, RawAuditSection, AUDIT_BOUNDS};

/// The version of the Elastic Common Schema the field names follow, written in every line as
/// `ecs.version`.
pub const ECS_VERSION: &str = "8.11.0";

/// Written in every line as `event.dataset`, so the records can be told apart from other logs
/// once shipped to the same place.
pub(crate) const EVENT_DATASET: &str = "robots_proxy.audit";

/// The end of every record that is about no request (`robots_fetch`, `robots_version`,
/// `audit_checkpoint`, `audit_chain_restart`): the dataset, the ECS version and the node, then
/// the one JSON line, with the characters [`robots_proxy_output::json_line`] escapes, and its newline.
fn close_record(
    mut record: serde_json::Map<String, serde_json::Value>,
    node: Option<&str>,
) -> Vec<u8> {
    record.insert("event.dataset".to_owned(), EVENT_DATASET.into());
    record.insert("ecs.version".to_owned(), ECS_VERSION.into());
    if let Some(node) = node {
        record.insert("service.node.name".to_owned(), node.into());
    }
    let mut out = serde_json::Value::Object(record).to_string().into_bytes();
    robots_proxy_output::json_line(&mut out);
    out.push(b'\n');
    out
}

/// Most records written as one batch before the writer checks for control requests again.
pub const MAX_BATCH: usize = 1024;

/// With `audit.fsync = "always"`, how long [`AuditLog::record`] waits for its record to be
/// written and synced before giving up waiting (the record stays queued).
pub const SYNC_WAIT: Duration = Duration::from_secs(5);

/// How long a readiness check waits for the writer to open the path again, when the path does
/// not lead to the file being written.
const VERIFY_WAIT: Duration = Duration::from_millis(500);

/// What the proxy did with a request: the record's `event.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditAction {
    /// Forwarded: robots.txt allows it (written with `audit.all_decisions`).
    RobotsAllow,
    /// Refused: robots.txt disallows it.
    RobotsDisallow,
    /// Refused before forwarding: an AI usage preference in robots.txt disallows a purpose.
    UsageDisallow,
    /// The response was withheld: its `Content-Usage` header disallows a purpose.
    UsageWithhold,
    /// Forwarded with the merged `Content-Usage` preferences.
    UsageAnnotate,
    /// Refused with 429: the site's pace.
    Throttled,
    /// Refused: the destination address is prohibited (the destination guard).
    DestinationProhibited,
    /// A CONNECT refused (tunnel mode, ports, fronting).
    ConnectRefuse,
    /// A tunnel opened (tunnel mode).
    TunnelAllow,
    /// Answered 503: the fleet's shared store is required (`fleet.on_redis_error = "refuse"`)
    /// and out of reach, so the request could be neither decided nor paced.
    FleetUnavailable,
    /// Forwarded in report-only mode although enforcement would have refused it: the refusal
    /// enforcement would have made is in `robots.would_action`.
    WouldBlock,
    /// Forwarded: an allow exception (`[[exceptions]]`) let through what robots.txt disallows.
    ExceptionAllow,
    /// Refused: a disallow exception (`[[exceptions]]`).
    ExceptionDisallow,
    /// Forwarded to a crawler with a purpose that an opt-out speaks to, although one of the
    /// response's opt-out fields could not be parsed as a whole (`robots.usage.unparsed`): what
    /// could be read of it was read and did not withhold the response.
    UsageUnparsed,
}

impl AuditAction {
    /// The name written in `event.action`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::RobotsAllow => "robots_allow",
            AuditAction::RobotsDisallow => "robots_disallow",
            AuditAction::UsageDisallow => "usage_disallow",
            AuditAction::UsageWithhold => "usage_withhold",
            AuditAction::UsageAnnotate => "usage_annotate",
            AuditAction::Throttled => "throttled",
            AuditAction::DestinationProhibited => "destination_prohibited",
            AuditAction::ConnectRefuse => "connect_refuse",
            AuditAction::TunnelAllow => "tunnel_allow",
            AuditAction::FleetUnavailable => "fleet_unavailable",
            AuditAction::WouldBlock => "would_block",
            AuditAction::ExceptionAllow => "exception_allow",
            AuditAction::ExceptionDisallow => "exception_disallow",
            AuditAction::UsageUnparsed => "usage_unparsed",
        }
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the request went through: the record's `event.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// Forwarded (or the tunnel opened).
    Success,
    /// Refused or withheld.
    Failure,
}

/// One audit record. Serialised flat, with dotted ECS field names.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditRecord {
    /// When the decision was made, RFC 3339 UTC (see [`timestamp`]).
    #[serde(rename = "@timestamp")]
    pub timestamp: String,
    /// What the proxy did (`robots_disallow`, `robots_allow`, …).
    #[serde(rename = "event.action")]
    pub action: AuditAction,
    /// `success` when the request was forwarded, `failure` when it was refused.
    #[serde(rename = "event.outcome")]
    pub outcome: AuditOutcome,
    /// For `would_block` (report-only mode): the action enforcement would have taken
    /// (`robots_disallow`, `usage_disallow`, …).
    #[serde(rename = "robots.would_action", skip_serializing_if = "Option::is_none")]
    pub would_action: Option<AuditAction>,
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
    /// Where the product token came from (`header`, `user-agent`, `default`, `credentials`,
    /// `none`), when the proxy saw the request.
    #[serde(rename = "robots.token_source", skip_serializing_if = "Option::is_none")]
    pub token_source: Option<&'static str>,
    /// The authenticated proxy user (`access.users_file` or a client certificate), if any.
    #[serde(rename = "user.name", skip_serializing_if = "Option::is_none")]
    pub user_name: Option<String>,
    /// The reading of the path that decided (`as-sent`, `decoded`, `backslash`,
    /// `parameters`: see `robots_proxy::policy::Reading`), for decisions on the rules.
    #[serde(rename = "robots.reading", skip_serializing_if = "Option::is_none")]
    pub reading: Option<String>,
    /// The path and query as that reading reads it, when it differs from `robots.path`.
    #[serde(rename = "robots.read_path", skip_serializing_if = "Option::is_none")]
    pub read_path: Option<String>,
    /// The AI usage preference involved, for usage decisions (`robots.usage.*`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageAudit>,
    /// The key id (JWK thumbprint) of the Web Bot Auth signature the proxy put on the
    /// forwarded request, when it signed it (`signing`).
    #[serde(rename = "robots.signature.keyid", skip_serializing_if = "Option::is_none")]
    pub signature_keyid: Option<String>,
    /// With `signing.client_signatures = "cosign"`: the client's signature labels the proxy's
    /// signature covers, comma-separated.
    #[serde(rename = "robots.signature.cosigned", skip_serializing_if = "Option::is_none")]
    pub signature_cosigned: Option<String>,
    /// With `signing.client_signatures = "cosign"`: why the client's signature was left as it
    /// is, uncovered by the proxy's (`REASON: detail`, REASON as
    /// `robots_proxy_cosign_skipped_total` labels it).
    #[serde(rename = "robots.signature.cosign_skipped", skip_serializing_if = "Option::is_none")]
    pub signature_cosign_skipped: Option<String>,
    /// The robots.txt version the decision used: written as `robots.sha256` and
    /// `robots.fetched_at`, and announced once per file by a `robots_version` record, written
    /// just before the first record in the file that names it. `None` when no file was in force (or robots.txt was not consulted).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub robots_version: Option<VersionFields>,
    /// The exception (`[[exceptions]]`) that decided, for `exception_allow` and
    /// `exception_disallow` records.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub exception: Option<ExceptionFields>,
}

/// The exception part of an audit record: which exception decided, where it is written, and
/// what robots.txt decided without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExceptionFields {
    /// Its `id`.
    #[serde(rename = "robots.exception.id")]
    pub id: String,
    /// Its `reference`.
    #[serde(rename = "robots.exception.reference")]
    pub reference: String,
    /// `allow` or `disallow`: the robots.txt verdict the exception overrode (or confirmed).
    #[serde(rename = "robots.exception.robots_verdict")]
    pub robots_verdict: &'static str,
}

/// What every audit record says about the request it is about: who asked for what.
#[derive(Debug, Clone, Copy)]
pub struct AuditSubject<'a> {
    /// The client's address.
    pub client: std::net::SocketAddr,
    /// The request method (`CONNECT` for a tunnel).
    pub method: &'a str,
    /// The full URL (for a tunnel, the authority).
    pub url: &'a str,
    /// The authority, `scheme://host[:port]`.
    pub domain: &'a str,
    /// The path and query as sent.
    pub path: &'a str,
    /// The User-Agent header's bytes, as received (escaped in the record by
    /// [`escape_header_value`]).
    pub user_agent: Option<&'a [u8]>,
    /// The product token the request was decided for.
    pub token: Option<&'a str>,
    /// The authority's robots.txt URL.
    pub robots_url: &'a str,
}

impl AuditRecord {
    /// The one way an audit record is made: `action` on `subject` at `now`, with the outcome
    /// that follows from `status_code` (none or below 400: success). The robots.txt fields
    /// (rule, line, group, state, age, reading) are empty: the decision that has them fills
    /// them in, as do the usage and signing parts.
    pub fn new(
        action: AuditAction,
        now: std::time::SystemTime,
        subject: AuditSubject<'_>,
        status_code: Option<u16>,
        reason: String,
    ) -> Self {
        let failed = status_code.is_some_and(|s| s >= 400);
        AuditRecord {
            timestamp: timestamp(now),
            action,
            outcome: if failed { AuditOutcome::Failure } else { AuditOutcome::Success },
            would_action: None,
            reason,
            client_address: subject.client.to_string(),
            method: subject.method.to_owned(),
            status_code,
            url: subject.url.to_owned(),
            domain: subject.domain.to_owned(),
            path: subject.path.to_owned(),
            user_agent: subject.user_agent.map(escape_header_value),
            product_token: subject.token.map(str::to_owned),
            rule: None,
            line: None,
            group: None,
            robots_url: subject.robots_url.to_owned(),
            state: String::new(),
            age_seconds: 0,
            token_source: None,
            user_name: None,
            reading: None,
            read_path: None,
            usage: None,
            signature_keyid: None,
            signature_cosigned: None,
            signature_cosign_skipped: None,
            robots_version: None,
            exception: None,
        }
    }
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
    /// The fleet instance that wrote the record (`fleet.instance`), when in a fleet.
    #[serde(rename = "service.node.name", skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
}

impl<'a> Line<'a> {
    fn new(record: &'a AuditRecord, node: Option<&'a str>) -> Self {
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
            node,
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

/// A header value's bytes as record text (`user_agent.original`): visible ASCII, space and tab
/// as they are; a backslash as `\\`; every other byte (controls, and obs-text ≥ 0x80 such as a
/// Latin-1 `\xE9`) as `\xHH` with upper-case hex. The escape is unambiguous and reversible, so
/// a value with bytes that are not text keeps all of them, and a value in plain ASCII without a
/// backslash is unchanged.
pub fn escape_header_value(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' | b' '..=b'~' => out.push(char::from(b)),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push_str("\\x");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
    }
    out
}

/// `at` as RFC 3339 UTC with milliseconds (`2026-11-22T04:33:16.123Z`), for `@timestamp`.
///
/// Times outside what RFC 3339 can show (before 1970, after 9999) are clamped to its range
/// instead of panicking, as formatting them directly with humantime would.
pub fn timestamp(at: SystemTime) -> String {
    // One format for `@timestamp` and `robots.fetched_at`.
    robots_proxy_archive::robots_version::rfc3339_millis(at)
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
    /// Times the path was found not to lead to the open file any more (deleted, or renamed
    /// and replaced, without a reopen), and was opened again.
    pub file_replaced: u64,
}

#[derive(Debug, Default)]
struct Counters {
    records_written: AtomicU64,
    records_lost: AtomicU64,
    write_errors: AtomicU64,
    syncs: AtomicU64,
    file_replaced: AtomicU64,
    /// Records have been lost (or a sync failed) since the last record written.
    losing: AtomicBool,
    /// The file the writer has open (`None`: none).
    open: Mutex<Option<writer::FileId>>,
    /// The last write or open error, for the readiness check.
    last_error: Mutex<Option<String>>,
}

impl Counters {
    fn set_open(&self, id: Option<writer::FileId>) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = id;
    }

    fn open(&self) -> Option<writer::FileId> {
        *self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_last_error(&self, error: &io::Error) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error.to_string());
    }

    fn last_error(&self) -> String {
        let last = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        last.clone().unwrap_or_else(|| "unknown error".to_owned())
    }
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
    /// `audit.fsync = "always"`: [`AuditLog::record`] waits for its record's sync.
    fsync_always: AtomicBool,
    counters: Arc<Counters>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// `service.node.name` of every record, in a fleet (the writer reads it too, for the
    /// records it writes itself).
    node: Arc<std::sync::OnceLock<String>>,
    latest: Option<LatestCheckpoint>,
    /// The witnesses checkpoints are pushed to (`audit.witnesses`).
    witnesses: Option<Arc<witness::Hub>>,
    /// The settings the last lifecycle record named (`lifecycle.rs`).
    logged: Mutex<Option<LoggedSettings>>,
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
    /// A serialised record, newline included (and the version it names, to announce), and
    /// who waits for it to be written and synced.
    Record(writer::Pending, Option<Reply>),
    Flush(Reply),
    Reopen(Reply),
    /// Make sure the path leads to the open file, and open it if not (for a readiness check,
    /// answered when done).
    Verify(oneshot::Sender<()>),
    /// While records are being lost, write an `audit_records_lost` record saying how many
    /// (for a readiness check, with the instance's name; answered once it is written and
    /// synced, or failed). Answered at once when nothing is being lost.
    Resume(Option<String>, Reply),
    Close(Reply),
    /// New `fsync` and `fsync_interval`.
    Configure(FsyncPolicy, Duration),
}

impl AuditLog {
    /// Opens (creates or appends to) the audit log at `path`, creating its directory, and starts
    /// the writer task on the current tokio runtime.
    ///
    /// The file is opened here, not in the task, so that a bad path stops start-up with an error
    /// naming it. Use `robots_proxy::config::Config::audit_path` for `path`.
    pub fn open(path: PathBuf, settings: AuditSection) -> Result<Self, AuditError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| AuditError::NoRuntime)?;
        let key = match &settings.checkpoint_key {
            None => None,
            Some(key) => Some(Arc::new(
                checkpoint::load_key(key)
                    .map_err(|source| AuditError::CheckpointKey { path: key.clone(), source })?,
            )),
        };
        let file = writer::open_file(&path)?;
        let (tx, rx) = mpsc::channel(settings.queue_capacity.max(1));
        let counters = Arc::new(Counters::default());
        let node = Arc::new(std::sync::OnceLock::new());
        let latest = key.is_some().then(LatestCheckpoint::default);
        let witnesses = witness::hub(&settings, &path)?;
        let mut writer =
            Writer::new(path.clone(), file, &settings, counters.clone(), node.clone(), key);
        if let Some(latest) = &latest {
            writer.publish_to(latest);
        }
        if let Some(hub) = &witnesses {
            writer.feed(hub.clone());
        }
        let handle = runtime.spawn(writer.run(rx));
        Ok(AuditLog {
            shared: Arc::new(Shared {
                tx,
                path,
                all_decisions: AtomicBool::new(settings.all_decisions),
                fsync_always: AtomicBool::new(settings.fsync == FsyncPolicy::Always),
                counters,
                writer: Mutex::new(Some(handle)),
                node,
                latest,
                witnesses,
                logged: Mutex::new(None),
            }),
        })
    }

    /// Names the instance that writes this log in every record (`service.node.name`), so
    /// the merged logs of a fleet tell instances apart. Only the first call counts.
    pub fn set_node_name(&self, name: &str) {
        let _ = self.shared.node.set(name.to_owned());
    }

    /// The latest checkpoint (`GET /audit/checkpoint`); `None` without a checkpoint key.
    pub fn latest_checkpoint(&self) -> Option<LatestCheckpoint> {
        self.shared.latest.clone()
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
        let always = settings.fsync == FsyncPolicy::Always;
        self.shared.fsync_always.store(always, Ordering::Relaxed);
        let command = Command::Configure(settings.fsync, settings.fsync_interval);
        self.shared.tx.send(command).await.map_err(|_| AuditError::Closed)
    }

    /// Whether records are being written, for a readiness check: the writer is running, no
    /// record has been lost since the last one written, and the path leads to the file the
    /// writer has open. When it does not (the file was deleted or moved away without a reopen,
    /// or an open failed), the writer is asked to open the path, and the check waits for that
    /// (up to half a second) and looks again.
    ///
    /// After lost records, only a record written makes the check pass again: on a full disk
    /// the file opens, and the next write fails all the same. So the check has the writer
    /// write an `audit_records_lost` record (how many records were lost since the last one
    /// written, and the last error), and passes when that record is written and synced.
    pub async fn check_writable(&self) -> Result<(), AuditError> {
        if self.shared.tx.is_closed() {
            return Err(AuditError::Closed);
        }
        let counters = &self.shared.counters;
        let path = self.shared.path.clone();
        if counters.losing.load(Ordering::Relaxed) {
            // Only a record written shows that records can be written again: the writer writes
            // one that says how many were lost, so that a proxy out of service (no requests, no
            // records) can come back, and the log itself shows the gap.
            let (ack, written) = oneshot::channel();
            let node = self.shared.node.get().cloned();
            let resumed = self.shared.tx.try_send(Command::Resume(node, ack)).is_ok()
                && matches!(tokio::time::timeout(VERIFY_WAIT, written).await, Ok(Ok(Ok(()))));
            if !resumed || counters.losing.load(Ordering::Relaxed) {
                return Err(AuditError::Losing { path, cause: counters.last_error() });
            }
        }
        let mut cause = self.file_at_path().await?;
        if cause.is_some() {
            // Ask the writer to open the path, and look again once it has. With a full queue
            // the writer is busy, and checks the path before its next batch anyway.
            let (done, opened) = oneshot::channel();
            if self.shared.tx.try_send(Command::Verify(done)).is_ok()
                && tokio::time::timeout(VERIFY_WAIT, opened).await.is_ok_and(|r| r.is_ok())
            {
                cause = self.file_at_path().await?;
            }
        }
        match cause {
            None => Ok(()),
            Some(cause) => Err(AuditError::NotOpen { path, cause }),
        }
    }

    /// Whether the path leads to the file the writer has open: `None` if so, else what was
    /// found.
    async fn file_at_path(&self) -> Result<Option<String>, AuditError> {
        let counters = &self.shared.counters;
        let open = counters.open();
        let probe = self.shared.path.clone();
        let now = tokio::task::spawn_blocking(move || writer::path_id(&probe))
            .await
            .map_err(|_| AuditError::Closed)?;
        Ok(match (open, now) {
            (Some(open), Ok(now)) if open == now => None,
            (None, _) => Some(format!("no file open ({})", counters.last_error())),
            (Some(_), Ok(_)) => Some("the path leads to another file".to_owned()),
            (Some(_), Err(e)) => Some(e.to_string()),
        })
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Queues a record; waits when the queue is full (never drops).
    ///
    /// `Ok` means the record is queued: it is written unless the disk fails, which is counted
    /// in [`AuditStats::records_lost`] and reported by the next [`AuditLog::flush`]. With
    /// `audit.fsync = "always"`, `Ok` means the record is written and synced: the call waits
    /// for that, up to [`SYNC_WAIT`] ([`AuditError::Unconfirmed`] after that), and returns the
    /// write error if its batch failed.
    pub async fn record(&self, record: AuditRecord) -> Result<(), AuditError> {
        let node = self.shared.node.get().map(String::as_str);
        let mut line = serde_json::to_vec(&Line::new(&record, node))?;
        robots_proxy_output::json_line(&mut line); // U+2028, U+2029, C1 as `\uXXXX` (docs/audit.md)
        line.push(b'\n');
        let announce = record.robots_version.map(|VersionFields(version)| versions::Announce {
            version,
            state: versions::state_word(&record.state),
        });
        let line = writer::Pending { line, announce };
        let tx = &self.shared.tx;
        if !self.shared.fsync_always.load(Ordering::Relaxed) {
            return tx.send(Command::Record(line, None)).await.map_err(|_| AuditError::Closed);
        }
        let (ack, synced) = oneshot::channel();
        tx.send(Command::Record(line, Some(ack))).await.map_err(|_| AuditError::Closed)?;
        match tokio::time::timeout(SYNC_WAIT, synced).await {
            Ok(answer) => answer.map_err(|_| AuditError::Closed)?,
            Err(_) => {
                Err(AuditError::Unconfirmed { path: self.shared.path.clone(), waited: SYNC_WAIT })
            }
        }
    }

    /// Closes the file and opens the path again, for log rotation: after the file has been
    /// renamed away, records queued before this call go to the old file and later ones to a new
    /// file at the path. Called on `SIGUSR1` (logrotate's `postrotate`) and on `SIGHUP`.
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
            file_replaced: c.file_replaced.load(Ordering::Relaxed),
        }
    }

    async fn request(&self, command: fn(Reply) -> Command) -> Result<(), AuditError> {
        let (reply, answer) = oneshot::channel();
        self.shared.tx.send(command(reply)).await.map_err(|_| AuditError::Closed)?;
        answer.await.map_err(|_| AuditError::Closed)?
    }
}

mod error;
mod fetches;
pub use error::AuditError;
mod lifecycle;
pub use lifecycle::LoggedSettings;
mod anchor;
pub mod chain;
pub mod checkpoint;
pub mod commands;
pub mod keyset;
pub mod merkle;
pub mod note;
pub mod proof;
mod section;
mod usage;
pub mod verify;
pub use usage::UsageAudit;
mod versions;

pub use versions::VersionFields;
mod writer;

pub mod witness;
pub use published::{CheckpointPage, LatestCheckpoint, CHECKPOINT_PATH};
mod published;

use writer::Writer;

#[cfg(test)]
mod tests;
