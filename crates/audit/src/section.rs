//! `[audit]`: where and how the audit log is written, the audit log's own section.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use robots_proxy_units::bounds::{because, count, duration, wide, Bound, DAY, SECOND};
use robots_proxy_units::{raw_section, Problems};

/// When the audit log is synced to disk.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FsyncPolicy {
    /// Never: the OS decides.
    Never,
    /// Every `audit.fsync_interval`.
    Interval,
    /// After every batch of records written; a request's answer waits for its record's sync
    /// (up to [`super::SYNC_WAIT`]).
    Always,
}

/// `[audit]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct AuditSection {
    /// The audit log file (JSON lines). Relative paths are under `state_dir`.
    pub path: PathBuf,
    /// Record every decision, not only blocks.
    pub all_decisions: bool,
    /// When to fsync.
    pub fsync: FsyncPolicy,
    /// The interval for `fsync = "interval"`.
    #[serde(with = "humantime_serde")]
    pub fsync_interval: Duration,
    /// Records that may wait for the writer. When the queue is full, requests wait for room:
    /// a record is never dropped, so a stalled disk slows the proxy down instead.
    pub queue_capacity: usize,
    /// An Ed25519 private key (PKCS#8 PEM, as `robots-proxy keys new` writes it) that signs
    /// checkpoints of the audit log's hash chain; none: no checkpoints.
    pub checkpoint_key: Option<PathBuf>,
    /// How soon after a record a signed checkpoint follows it (with `checkpoint_key`).
    #[serde(with = "humantime_serde")]
    pub checkpoint_interval: Duration,
    /// Witnesses (C2SP tlog-witness submission prefixes, `https://`, or `http://` to a
    /// loopback address) that each checkpoint is pushed to, for their cosignatures.
    pub witnesses: Vec<String>,
    /// The witnesses' public keys (C2SP vkeys, `name+keyid+base64`), one per URL of
    /// `witnesses`, in the same order.
    pub witness_keys: Vec<String>,
}

impl Default for AuditSection {
    fn default() -> Self {
        AuditSection {
            path: PathBuf::from("audit.jsonl"),
            all_decisions: false,
            fsync: FsyncPolicy::Interval,
            fsync_interval: Duration::from_secs(1),
            queue_capacity: 4096,
            checkpoint_key: None,
            checkpoint_interval: super::checkpoint::DEFAULT_INTERVAL,
            witnesses: Vec::new(),
            witness_keys: Vec::new(),
        }
    }
}

raw_section!(AuditSection, RawAuditSection, "audit");

/// The bounds of `[audit]`.
pub const AUDIT_BOUNDS: &[Bound<AuditSection>] = &[
    duration("audit.fsync_interval", |c| c.fsync_interval, Duration::ZERO, DAY),
    count("audit.queue_capacity", |c| wide(c.queue_capacity), 1, 1 << 20),
    because(
        duration("audit.checkpoint_interval", |c| c.checkpoint_interval, SECOND, DAY),
        "a checkpoint is a signed record: more than one a second only fills the log",
    ),
];

impl TryFrom<RawAuditSection> for AuditSection {
    type Error = Problems;

    /// The bounds, the path, the fsync interval, and the witnesses with their keys.
    fn try_from(raw: RawAuditSection) -> Result<Self, Problems> {
        let a = raw.0;
        let mut problems = Problems::new();
        problems.bounds(AUDIT_BOUNDS, &a);
        if let Err(found) = super::witness::configured(&a) {
            problems.absorb(found.into_iter().collect());
        }
        problems.need(!a.path.as_os_str().is_empty(), "audit.path", || "must not be empty".into());
        problems.need(
            a.fsync != FsyncPolicy::Interval || !a.fsync_interval.is_zero(),
            "audit.fsync_interval",
            || "must be longer than zero".into(),
        );
        problems.or_build(|| a)
    }
}
