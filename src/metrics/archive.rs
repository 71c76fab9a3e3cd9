//! The archive's metrics (`robots_proxy_archive_*`), read at scrape time: zero when no
//! archive is kept (`archive.enabled = false`), so the series always exist.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::archive::ArchiveStats;

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
    ];
    for (name, help, value) in counters {
        let metric = ConstCounter::new(value);
        metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
    }
    let failing = ConstGauge::new(i64::from(stats.failing > 0));
    failing.encode(encoder.encode_descriptor(
        "archive_failing",
        "1 while the robots.txt archive cannot write, else 0.",
        None,
        failing.metric_type(),
    )?)
}
