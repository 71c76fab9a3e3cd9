//! `[archive]`: the archive of robots.txt versions, its own section.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units::bounds::{because, count, duration, size, wide, Bound, CENTURY};
use crate::units::{raw_section, ByteSize, Problems};

/// `[archive]`: whether every robots.txt version decided with is kept under
/// `state_dir/robots-archive/`, and for how long replaced versions are kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
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
    /// The size on disk the archive should stay under (`0`: no bound). When it is over, the
    /// writer prunes at once, not at the next hourly pass, what `retention` no longer keeps;
    /// it never removes what `evidence` needs within `retention` (the windows in force, the
    /// windows replaced less than `retention` ago, the bodies they name), so an archive whose
    /// kept part alone is over stays over, logged and shown by `robots_proxy_archive_bytes`.
    pub max_bytes: ByteSize,
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
            max_bytes: ByteSize(0),
        }
    }
}

raw_section!(ArchiveSection, RawArchiveSection, "archive");

/// The bounds of `[archive]`. (`archive.max_bytes` against `robots.max_body` is a rule between
/// sections, checked by the configuration.)
pub const ARCHIVE_BOUNDS: &[Bound<ArchiveSection>] = &[
    because(
        duration("archive.retention", |c| c.retention, Duration::ZERO, CENTURY),
        "0s keeps only the windows in force",
    ),
    count("archive.max_versions_per_authority", |c| wide(c.max_versions_per_authority), 1, 1 << 20),
    because(size("archive.max_bytes", |c| c.max_bytes, 0, 64 << 40), "0 means no bound"),
];

impl TryFrom<RawArchiveSection> for ArchiveSection {
    type Error = Problems;

    /// The bounds.
    fn try_from(raw: RawArchiveSection) -> Result<Self, Problems> {
        let mut problems = Problems::new();
        problems.bounds(ARCHIVE_BOUNDS, &raw.0);
        problems.or_build(|| raw.0)
    }
}
