//! The archive of every robots.txt version the proxy decided with (issue 19), under
//! `state_dir/robots-archive/`, kept across restarts.
//!
//! * **Bodies** are content-addressed by their SHA-256: each distinct content is kept once,
//!   byte for byte (the body as parsed, as [`RobotsVersion`](crate::robots_version) holds it).
//! * **Windows**, per authority: which result was in force from when to when (first fetched,
//!   last confirmed, replaced at). A file refetched unchanged extends its window; a fetch that
//!   gave no file (4xx: allow all; 429, 5xx, network: disallow all, or a stale copy) is a
//!   window too, with its status or error and its RFC 9309 consequence.
//! * **What is archived** is what the robots store took in and decided with: its own fetches,
//!   records taken over from a fleet (Redis) and copies read back from the disk. The store
//!   calls [`Archive::note`], which never waits: one background thread writes
//!   (`writer.rs`), and a disk that takes no writes costs no decision and no audit record.
//! * **Retention** (`archive.retention`): windows replaced longer ago are pruned, and then the
//!   bodies no kept window names. The window in force is never pruned. `archive.max_bytes`
//!   bounds the size on disk within what retention keeps (`prune.rs`).
//! * **Reading**: [`ArchiveReader`] reads the directory, with the proxy running or not;
//!   [`Archive`] answers a running proxy (the admin's `/api/robots/versions`) from memory.
//!
//! The layout is documented for people in `docs/evidence.md`, "The archive".
//!
//! Reaches only `robots_version` and the leaf `units`: the store (`cache`) feeds it, the
//! policy hands it to the admin listener.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// The crates this one stands on, under the names the project uses for them.
use robots_proxy_units as units;

mod disk;
mod history;
mod prune;
mod reader;
mod section;
mod writer;

pub mod robots_version;

use std::path::PathBuf;

pub use disk::{SkippedFile, DIR};
pub use history::{Consequence, Window};
pub use reader::ArchiveReader;
pub use section::{
    ArchiveSection, RawArchiveSection, ARCHIVE_BOUNDS, DEFAULT_MAX_VERSIONS_PER_AUTHORITY,
    DEFAULT_RETENTION,
};
pub use writer::{Archive, ArchiveStats, Observation};

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An authority's file is not what the archive writes.
    #[error("cannot parse {path}: {why}")]
    Unparsable {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A body whose bytes do not hash to its name.
    #[error("{path}: the bytes do not match the SHA-256 they are named by")]
    Corrupt {
        /// The file.
        path: PathBuf,
    },
}
