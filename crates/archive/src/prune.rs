//! Pruning the archive: the windows `archive.retention` no longer keeps, then the bodies no
//! kept window names; and the size bound, `archive.max_bytes`.
//!
//! **The bound's rule.** What `evidence` needs to answer for any time within `retention` is
//! never removed for size: the window in force of every authority, every window replaced less
//! than `retention` ago, and every body one of them names (and, as for any pass, every body an
//! unusable authority file may name). Everything else is what a pass removes. A pass runs at
//! the start, then every hour (every `retention`, when shorter); while the archive is over
//! `max_bytes`, one runs as soon as [`OVER_BOUND_EVERY`] has passed since the last, so what
//! left retention goes at once, not within the hour. When what is kept alone is over the
//! bound, the archive keeps writing (a new version is evidence too), logs it once, and
//! `robots_proxy_archive_bytes` above `robots_proxy_archive_max_bytes` says so (the shipped
//! alert `RobotsProxyArchiveOverMaxBytes`): shorten `retention` or grow the volume.
//!
//! Removals are not audit records: the audit log records what was decided with
//! (`robots_fetch`, `robots_version`), not the archive's upkeep. Each pass that removes bodies
//! logs how many, and `robots_proxy_archive_bodies_removed_total` counts them.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use super::disk;
use super::writer::{failed, flush, Shared};

/// The longest time between two passes.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// The shortest time between two passes while the archive is over `archive.max_bytes`.
pub(super) const OVER_BOUND_EVERY: Duration = Duration::from_secs(300);

/// When pruning passes are due: at the start, every [`PRUNE_EVERY`] (every `retention`, when
/// shorter, but not more often than every second), and every [`OVER_BOUND_EVERY`] (or sooner,
/// with a short retention) while the archive is over its bound.
#[derive(Debug)]
pub(super) struct Schedule {
    every: Duration,
    last: Option<Instant>,
}

impl Schedule {
    /// The schedule for `retention`; the first pass is due at once.
    pub(super) fn new(retention: Duration) -> Schedule {
        Schedule { every: PRUNE_EVERY.min(retention).max(Duration::from_secs(1)), last: None }
    }

    /// How long after `now` the next pass is due (zero: now), `over` the archive's bound.
    pub(super) fn wait(&self, now: Instant, over: bool) -> Duration {
        let Some(last) = self.last else { return Duration::ZERO };
        let every = if over { OVER_BOUND_EVERY.min(self.every) } else { self.every };
        (last + every).saturating_duration_since(now)
    }

    /// Notes a pass run at `now`.
    pub(super) fn ran(&mut self, now: Instant) {
        self.last = Some(now);
    }
}

/// Whether the archive is over `archive.max_bytes` (never, without a bound), by the bytes last
/// counted.
pub(super) fn over_bound(shared: &Shared) -> bool {
    shared.max_bytes > 0 && shared.counters.bytes.load(Ordering::Relaxed) > shared.max_bytes
}

/// One pruning pass at `now` (see the [module documentation](self)), then the archive's size
/// counted again from the disk.
pub(super) fn prune(shared: &Shared, now: SystemTime) {
    let removed = pass(shared, now);
    if removed > 0 {
        shared.counters.bodies_removed.fetch_add(removed, Ordering::Relaxed);
    }
    let bytes = disk::archive_bytes(&shared.root);
    shared.counters.bytes.store(bytes, Ordering::Relaxed);
    if removed > 0 {
        tracing::info!(
            removed,
            bytes,
            "robots.txt archive: pruned the bodies no window within archive.retention names"
        );
    }
    let over = over_bound(shared);
    if shared.counters.over_bound.swap(u64::from(over), Ordering::Relaxed) != u64::from(over) {
        if over {
            tracing::warn!(
                bytes,
                max_bytes = shared.max_bytes,
                dir = %shared.root.display(),
                "robots.txt archive: over archive.max_bytes with only what evidence needs \
                 within archive.retention; nothing more is removed and new versions are still \
                 archived: shorten archive.retention or grow the volume (and the bound)",
            );
        } else {
            tracing::info!(
                bytes,
                max_bytes = shared.max_bytes,
                "robots.txt archive: under archive.max_bytes again"
            );
        }
    }
}

/// Drops the windows replaced more than `retention` before `now`, writes the authorities that
/// changed, then removes the bodies no window names any more; answers how many it removed. One
/// pass over the files, one authority in memory at a time (and the digests still named).
fn pass(shared: &Shared, now: SystemTime) -> u64 {
    let cutoff = now.checked_sub(shared.retention).unwrap_or(SystemTime::UNIX_EPOCH);
    if !flush(shared) {
        // An authority file may still name a body: remove none until it is written.
        return 0;
    }
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut failed_write = false;
    let unusable = disk::for_each_history(&shared.root, |mut history| {
        if history.prune(cutoff) {
            if let Err(e) = disk::write_history(&shared.root, &history) {
                failed_write = !failed(shared, &e);
            } else {
                shared.counters.files_written.fetch_add(1, Ordering::Relaxed);
            }
        }
        named.extend(history.windows.into_iter().filter_map(|w| w.sha256));
    });
    if failed_write {
        return 0;
    }
    let files: Vec<String> = unusable.files.iter().map(|p| p.display().to_string()).collect();
    shared.counters.unusable_files.store(files.len() as u64, Ordering::Relaxed);
    if !unusable.digests_known() {
        // An authority file whose bytes cannot be read (or a directory that cannot be listed)
        // may name any body: this pass removes none.
        tracing::warn!(
            unusable = files.len(),
            files = %files.join(", "),
            listed = !unusable.unlisted,
            "robots.txt archive: authority file(s) cannot be read; no robots.txt body is \
             removed while they are there",
        );
        disk::remove_stale_temporaries(&shared.root);
        return 0;
    }
    if !unusable.is_empty() {
        // A file that does not parse (or was set aside) keeps every body its text names (the
        // files stay where they are, for a person to repair or restore); the rest are pruned.
        tracing::warn!(
            unusable = files.len(),
            files = %files.join(", "),
            digests_named = unusable.digests.len(),
            "robots.txt archive: authority file(s) cannot be parsed; the robots.txt bodies \
             they name are kept",
        );
    }
    named.extend(unusable.digests);
    // The windows kept in memory were written before the pass; drop them, the pass may have
    // pruned their files.
    {
        let mut guard = shared.lock();
        let state = &mut *guard;
        state.histories.retain(|authority, _| state.dirty.contains(authority));
    }
    let unused: Vec<String> = {
        let state = shared.lock();
        disk::body_digests(&shared.root)
            .into_iter()
            .filter(|sha| !named.contains(sha) && !state.pending.contains_key(sha))
            .collect()
    };
    let mut removed = 0;
    for sha in unused {
        match disk::remove_body(&shared.root, &sha) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::debug!(%sha, error = %e, "robots.txt archive: cannot remove a pruned body")
            }
        }
    }
    disk::remove_stale_temporaries(&shared.root);
    removed
}

#[cfg(test)]
mod tests {
    use super::super::writer::take_in;
    use super::super::writer::tests::{observation, shared};
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    fn sha(body: &[u8]) -> String {
        crate::robots_version::sha256_hex(body)
    }

    /// The bound's rule: over `archive.max_bytes`, a pass removes what retention no longer
    /// keeps and nothing else; the window in force, the windows replaced within retention and
    /// their bodies stay, even though the archive stays over. The size is what `du` counts.
    #[test]
    fn over_the_bound_only_what_left_retention_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = shared(dir.path(), 10 * DAY);
        s.max_bytes = 1;
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // a, b, c, then a again: a's first window and b's left retention by day 35; c's
        // window was replaced on day 30, within it; a is in force.
        take_in(&s, observation(b"a", t0));
        take_in(&s, observation(b"b", t0 + DAY));
        take_in(&s, observation(b"c", t0 + 2 * DAY));
        take_in(&s, observation(b"a", t0 + 30 * DAY));
        assert!(flush(&s));
        assert!(s.counters.bytes.load(Ordering::Relaxed) > 0, "writes are counted");
        prune(&s, t0 + 35 * DAY);
        let kept = |b: &[u8]| disk::body_path(&s.root, &sha(b)).is_file();
        assert!(kept(b"a") && kept(b"c"), "in force, and within retention: kept");
        assert!(!kept(b"b"), "out of retention: removed");
        assert_eq!(s.counters.bodies_removed.load(Ordering::Relaxed), 1);
        let bytes = s.counters.bytes.load(Ordering::Relaxed);
        assert_eq!(bytes, disk::archive_bytes(&s.root));
        let du = std::process::Command::new("du").arg("-sB1").arg(&s.root).output().unwrap();
        let du: u64 =
            String::from_utf8_lossy(&du.stdout).split_whitespace().next().unwrap().parse().unwrap();
        assert_eq!(bytes, du, "the archive's size as du counts it");
        assert!(over_bound(&s), "what evidence needs stays, over the bound");
        assert_eq!(s.counters.over_bound.load(Ordering::Relaxed), 1);
        // A bound the kept part fits in: under again.
        s.max_bytes = bytes;
        prune(&s, t0 + 36 * DAY);
        assert!(!over_bound(&s));
        assert_eq!(s.counters.over_bound.load(Ordering::Relaxed), 0);
        assert!(kept(b"a") && kept(b"c"));
    }

    /// Over the bound a pass comes after [`OVER_BOUND_EVERY`], not after the hour.
    #[test]
    fn passes_come_sooner_while_over_the_bound() {
        let mut schedule = Schedule::new(400 * DAY);
        let now = Instant::now();
        assert_eq!(schedule.wait(now, false), Duration::ZERO, "the first pass is at once");
        schedule.ran(now);
        assert_eq!(schedule.wait(now, false), PRUNE_EVERY);
        assert_eq!(schedule.wait(now, true), OVER_BOUND_EVERY);
        let later = now + OVER_BOUND_EVERY;
        assert!(schedule.wait(later, true).is_zero() && !schedule.wait(later, false).is_zero());
        // A retention shorter than both sets the pace either way.
        let mut short = Schedule::new(Duration::from_secs(2));
        short.ran(now);
        assert_eq!(short.wait(now, true), Duration::from_secs(2));
    }
}
