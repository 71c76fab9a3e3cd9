//! The store's side of the archive ([`crate::archive`]): every result the store takes in and
//! decides with (its own fetch, a fleet's record, a copy read back from the disk) is handed to
//! the archive, which never makes the store wait.

use std::sync::Arc;

use super::{state, FetchOutcome, Inner, RobotsCache, RobotsRules, RobotsSnapshot, RobotsState};
use crate::archive::{Archive, Consequence, Observation};

impl RobotsCache {
    /// Archives every result taken in from now on in `archive`. Only the first call counts.
    pub fn archive_to(&self, archive: Arc<Archive>) {
        let _ = self.inner.archive.set(archive);
    }

    /// The archive results are handed to, if any.
    pub fn archive(&self) -> Option<Arc<Archive>> {
        self.inner.archive.get().cloned()
    }
}

/// A fetch's result (or a record taken over) was handed to its requests: logged, and archived
/// when it is one the store keeps (`keep`; not a fetch that found no slot, nor a fleet error).
pub(super) fn taken_in(inner: &Inner, snapshot: &RobotsSnapshot, keep: bool, stored: bool) {
    state::log_outcome(snapshot, stored);
    if let (true, Some(archive)) = (keep, inner.archive.get()) {
        archive.note(observation(snapshot, inner.clock.now()));
    }
}

/// What the archive keeps of `snapshot`, taken in at `now`.
fn observation(snapshot: &RobotsSnapshot, now: std::time::SystemTime) -> Observation {
    let (status, error) = match &snapshot.last_outcome {
        FetchOutcome::Status(code) => (Some(*code), None),
        FetchOutcome::RedirectLimit => (None, Some("more than robots.max_redirects redirects")),
        FetchOutcome::Network(e) | FetchOutcome::Prohibited(e) | FetchOutcome::Fleet(e) => {
            (None, Some(e.as_str()))
        }
    };
    let consequence = match snapshot.rules {
        RobotsRules::Parsed(_) => Consequence::Rules,
        RobotsRules::AllowAll => Consequence::AllowAll,
        RobotsRules::DisallowAll => Consequence::DisallowAll,
    };
    let state = match snapshot.state {
        RobotsState::Fresh => "fresh",
        RobotsState::Stale => "stale",
        RobotsState::Unavailable => "unavailable",
        RobotsState::Unreachable => "unreachable",
    };
    // When the result was fetched: a file's fetch time (also for a record fetched by another
    // instance, or read back from the disk), a 4xx's; while fetches fail, the snapshot keeps
    // the first failure, so the latest is the time it was taken in.
    let at = match (snapshot.state, snapshot.failing_since) {
        (RobotsState::Fresh, _) => {
            snapshot.version.as_ref().map_or(snapshot.fetched_at, |v| v.fetched_at())
        }
        (RobotsState::Unavailable, None) => snapshot.fetched_at,
        _ => now,
    };
    Observation {
        authority: snapshot.authority.to_string(),
        url: snapshot.robots_url.clone(),
        version: snapshot.version.clone(),
        status,
        error: error.map(str::to_owned),
        state,
        consequence,
        at,
        now,
    }
}
