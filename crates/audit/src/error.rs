//! Why the audit log could not be opened or written.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

#[allow(unused_imports)]
use super::{AuditLog, SYNC_WAIT};

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
    /// `audit.checkpoint_key` cannot be loaded.
    #[error("cannot load the audit checkpoint key (audit.checkpoint_key) {path}: {source}")]
    CheckpointKey {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: robots_proxy_identity::keys::KeyError,
    },
    /// `audit.witnesses` or `audit.witness_keys` cannot be used.
    #[error("audit witnesses: {0}")]
    Witnesses(String),
    /// A record could not be serialised (not expected: every field is a string or a number).
    #[error("cannot serialise an audit record: {0}")]
    Encode(#[from] serde_json::Error),
    /// [`AuditLog::open`] was called outside a tokio runtime, which the writer task needs.
    #[error("the audit log must be opened inside a tokio runtime")]
    NoRuntime,
    /// The writer has stopped ([`AuditLog::close`] was called, or the task died).
    #[error("the audit writer has stopped")]
    Closed,
    /// Records have been lost since the last record written (a readiness check's answer).
    #[error("audit records are being lost: the last write to {path} failed ({cause}); writable again once a record is written")]
    Losing {
        /// The file.
        path: PathBuf,
        /// The last error.
        cause: String,
    },
    /// The path does not lead to the file the writer has open, or no file is open (a
    /// readiness check's answer; the writer is asked to open the path).
    #[error("audit log {path} is not the file being written: {cause}")]
    NotOpen {
        /// The file.
        path: PathBuf,
        /// What was found.
        cause: String,
    },
    /// With `audit.fsync = "always"`, the record was not confirmed written and synced within
    /// [`SYNC_WAIT`]; it is still queued.
    #[error("audit record not yet synced to {path} after {waited:?}")]
    Unconfirmed {
        /// The file.
        path: PathBuf,
        /// How long the caller waited.
        waited: Duration,
    },
}
