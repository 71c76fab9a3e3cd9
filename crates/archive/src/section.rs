//! `[archive]`: the archive of robots.txt versions, its own section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[archive]`: whether every robots.txt version decided with is kept under
/// `state_dir/robots-archive/`, and for how long replaced versions are kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ArchiveSection {
    /// Keep the archive.
    pub enabled: bool,
    /// How long a window is kept after it was replaced; the window in force, and every body
    /// a kept window names, stay whatever their age.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Most distinct robots.txt versions kept per authority: past it, the windows of the oldest
    /// versions are dropped (the window in force never is), and their bodies at the next prune.
    /// An origin that serves a new robots.txt at each fetch otherwise piles up one version a
    /// `robots.min_age`.
    pub max_versions_per_authority: usize,
}

/// The default of `archive.max_versions_per_authority`.
pub const DEFAULT_MAX_VERSIONS_PER_AUTHORITY: usize = 500;

/// The default retention: 400 days, a year and a month of slack.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(400 * 24 * 3600);

impl Default for ArchiveSection {
    fn default() -> Self {
        ArchiveSection {
            enabled: true,
            retention: DEFAULT_RETENTION,
            max_versions_per_authority: DEFAULT_MAX_VERSIONS_PER_AUTHORITY,
        }
    }
}
