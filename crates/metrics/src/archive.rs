//! The archive's metrics (`robots_proxy_archive_*`), read at scrape time: zero when no
//! archive is kept (`archive.enabled = false`), so the series always exist.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use robots_proxy_archive::ArchiveStats;

/// Encodes `stats`.
pub(super) fn encode(encoder: &mut DescriptorEncoder, stats: ArchiveStats) -> fmt::Result {
    let counters = [
        (
            "archive_files_written",
            "Files the robots.txt archive wrote (bodies and authorities' windows).",
            stats.files_written,
        ),
        (
            "archive_write_errors",
            "Failed writes of the robots.txt archive (each attempt; its changes are kept in \
             memory and written when the disk takes writes again).",
            stats.write_errors,
        ),
        (
            "archive_dropped",
            "robots.txt results or bodies the archive could not keep: its queue was full, or \
             too many bodies waited for a disk that took no writes.",
            stats.dropped,
        ),
        (
            "archive_versions_dropped",
            "robots.txt versions dropped from a site's history (its windows now, its body at the \
             next prune) because the site had more than archive.max_versions_per_authority.",
            stats.versions_dropped,
        ),
        (
            "archive_bodies_removed",
            "robots.txt bodies the archive's pruning removed: no window within \
             archive.retention, nor any window in force, named them.",
            stats.bodies_removed,
        ),
    ];
    for (name, help, value) in counters {
        let metric = ConstCounter::new(value);
        metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
    }
    let wide = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let gauges = [
        (
            "archive_failing",
            "1 while the robots.txt archive cannot write, else 0.",
            stats.failing.min(1),
        ),
        (
            "archive_bytes",
            "What the robots.txt archive takes on disk, as du counts it (counted at each \
             pruning pass, and kept up to date by each write in between).",
            stats.bytes,
        ),
        (
            "archive_max_bytes",
            "archive.max_bytes, the size the robots.txt archive should stay under (0: no bound).",
            stats.max_bytes,
        ),
        (
            "archive_unusable_files",
            "Authority files of the robots.txt archive that the last pruning pass could not \
             read or parse (or set aside as .json.unreadable): the bodies they name are kept.",
            stats.unusable_files,
        ),
    ];
    for (name, help, value) in gauges {
        let metric = ConstGauge::new(wide(value));
        metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
    }
    Ok(())
}
