//! Versions from a state directory's archive (`state_dir/robots-archive/`, see
//! `docs/evidence.md`, "The archive"), read with [`crate::archive::ArchiveReader`], the proxy
//! running or not.
//!
//! What an archive window gives ([`super::history`]): the result in force from its
//! `first_fetched` (a fetch, when the window is `fresh`) to its `last_confirmed` (a fetch that
//! gave the same result); and, for the window in force when the archive was read
//! (`replaced_at` null), that it is still in force: the archive is the proxy's own record of
//! what it decides with, so its last window is in force until something replaces it.

use std::path::Path;
use std::sync::Arc;

use crate::archive::{ArchiveReader, Consequence, Window};

use super::history::{History, InForce, Observation};
use super::EvidenceError;

/// Reads the archive of `state_dir` into `history`: the windows of `authority`, or of every
/// authority when `None`, and the bodies they name. `max_age` (`robots.max_age`) bounds the
/// window in force of an archive that did not keep its expiry.
pub(super) fn read_state_dir(
    state_dir: &Path,
    authority: Option<&str>,
    history: &mut History,
    max_age: std::time::Duration,
) -> Result<(), EvidenceError> {
    let unreadable = |source| EvidenceError::Unreadable { path: state_dir.to_owned(), source };
    if !std::fs::metadata(state_dir).map_err(unreadable)?.is_dir() {
        return Err(unreadable(std::io::Error::other("not a directory")));
    }
    let reader =
        ArchiveReader::open(state_dir).map_err(|e| EvidenceError::Archive(e.to_string()))?;
    let reader = Arc::new(reader);
    // A file that cannot be used is skipped and named (issue 39, L2: one bad file failed every
    // query on every authority); the file of the authority asked about says so.
    for skipped in reader.skipped() {
        let whose = match authority {
            Some(a) if reader.skipped_file_of(a) == Some(skipped) => {
                format!(" (the file of {a}: what it knew of {a} is not read)")
            }
            _ => String::new(),
        };
        history.warn(format!("archive: skipped {skipped}{whose}"));
    }
    let authorities = match authority {
        Some(a) => vec![a.to_owned()],
        None => reader.authorities(),
    };
    for name in authorities {
        let url = reader.robots_url(&name).unwrap_or_default().to_owned();
        for w in reader.windows(&name) {
            let what = match (w.consequence, &w.sha256) {
                (Consequence::Rules, Some(sha)) => InForce::File(sha.clone()),
                (Consequence::AllowAll, _) => InForce::AllowAll,
                (Consequence::DisallowAll, _) => InForce::DisallowAll,
                // A window of rules without a digest, or a consequence this build does not
                // know: nothing that can be replayed, so nothing is claimed.
                _ => continue,
            };
            if let InForce::File(sha) = &what {
                if w.folds_case {
                    history.note_folds_case(&name, sha);
                }
                // Read and checked only if the answer needs it: a body that cannot be read, or
                // does not hash to its name, fails only that answer, naming the file (issue 39,
                // L2: every window's body was checked, for any question).
                history.offer_archived_body(sha, &reader, &url, w.status);
            }
            let fetch = w.state == "fresh";
            let note = note(&w);
            // In force until replaced; the window in force, until the last result confirming
            // it was due again (windows written before that was kept: `max_age` after it),
            // not on and on (issue 39, M2: the archive answered for 2099).
            let until = w.replaced_at.or(w.expires_at).unwrap_or_else(|| {
                w.last_confirmed.checked_add(max_age).unwrap_or(w.last_confirmed)
            });
            let mut observe = |at, open| {
                let o = Observation {
                    fetch,
                    note: note.clone(),
                    open,
                    fetch_key: Some(w.first_fetched),
                    until: Some(until),
                    ..Observation::at(at, what.clone())
                };
                history.observe(&name, o);
            };
            observe(w.first_fetched, false);
            // Each fetch the window kept (L1): the copy in force at a time is the last fetched
            // before it, not the window's first.
            for fetched in &w.fetches {
                observe(*fetched, false);
            }
            observe(w.last_confirmed, w.replaced_at.is_none());
        }
    }
    Ok(())
}

/// What a window without a file says (`robots.txt answered HTTP 404 (unavailable)`), or that a
/// file was used stale.
fn note(w: &Window) -> Option<String> {
    let cause = match (&w.status, &w.error) {
        (_, Some(e)) => e.clone(),
        (Some(s), None) => format!("HTTP {s}"),
        (None, None) => "no status".to_owned(),
    };
    match w.consequence {
        Consequence::Rules if w.state == "stale" => Some(format!(
            "archive: robots.txt fetch failed ({cause}); the earlier copy was used (stale)"
        )),
        Consequence::Rules => None,
        _ => Some(format!("archive: robots.txt fetch gave {cause} ({})", w.state)),
    }
}
