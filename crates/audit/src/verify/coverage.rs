//! Coverage by signed checkpoints (issue 39, C1, H1, M7): with a public key, records that no
//! checkpoint vouches for where the writer would have signed them are reported as not proven
//! ([`Gap`], status `unproven`), not as intact. The writer signs (with `audit.checkpoint_key`):
//!
//! * on a fixed cadence, idle or not (`audit.checkpoint_interval`, which each `v2` checkpoint
//!   names): a record later than twice the interval (plus 10 s) after the last checkpoint, with
//!   none after it, shows checkpoints removed from the end;
//! * before it reopens the file: a rotated file ends with a checkpoint;
//! * never across a chain restart: records before an `audit_chain_restart` record that no
//!   checkpoint covers are the tail it could not vouch for;
//! * at all: files with records and no checkpoint that verifies are not proven;
//! * from the chain's first record: checkpoints shipped elsewhere (`--checkpoints`) that cover
//!   records before the files' first show that the oldest files are missing.

use std::time::Duration;

use super::{Fields, Gap, Location, State};

/// Slack on top of twice the cadence (a busy writer, clocks).
const SLACK: Duration = Duration::from_secs(10);

fn keyed(state: &State<'_>) -> bool {
    state.options.keys.is_some()
}

/// Pushes the span of unsigned records up to `to`, if any.
fn gap(state: &mut State<'_>, to: &Location, why: String) {
    let records = state.report.unsigned_records;
    if records == 0 {
        return;
    }
    let from = state.unsigned_from.clone().unwrap_or_else(|| to.clone());
    state.report.unproven.push(Gap { from, to: to.clone(), records, why });
}

/// A record that is not a checkpoint, not (yet) covered by one.
pub(super) fn unsigned(fields: &Fields, at: &Location, state: &mut State<'_>) {
    if state.unsigned_from.is_none() {
        state.unsigned_from = Some(at.clone());
    }
    if state.late.is_some() || !keyed(state) {
        return;
    }
    let Some((_, checkpoint_at, Some(interval))) = &state.last_checkpoint else { return };
    let (Some(record), Some(checkpoint)) =
        (fields.timestamp.as_deref().and_then(parse_time), parse_time(checkpoint_at))
    else {
        return;
    };
    let allowed = Duration::from_millis(interval.saturating_mul(2)) + SLACK;
    if record.duration_since(checkpoint).is_ok_and(|d| d > allowed) {
        state.late = Some(at.clone());
    }
}

/// An `audit_chain_restart` record at `at` after records.
pub(super) fn restart(fields: &Fields, at: &Location, state: &mut State<'_>) {
    settle_restart(false, state);
    if keyed(state) {
        let last = state.last.clone().unwrap_or_else(|| at.clone());
        if !unvouched_gap(state, &last) {
            let why = format!(
                "they come before a chain restart ({}) at {at}: the writer could not vouch for \
                 them",
                fields.restart_reason.as_deref().unwrap_or("no reason given")
            );
            gap(state, &last, why);
        }
    }
    state.last_checkpoint = None;
    state.report.unsigned_records = 0;
    state.unsigned_from = None;
    state.late = None;
}

/// With a key, the `audit_chain_restart` record at `at` just taken in: the checkpoint right
/// after it must verify and name its hash as the head (the restart, from the genesis hash,
/// the first record of the new chain).
pub(super) fn restarted(at: &Location, state: &mut State<'_>) {
    if keyed(state) {
        state.restart_pending = Some((at.clone(), state.report.records));
    }
}

/// The record after a restart was taken in (`proven`: a checkpoint that verified with the key,
/// whose head is the restart's hash), or none comes: a restart without its checkpoint leaves
/// the records from it on not proven (a forger can write a restart, not its checkpoint).
pub(super) fn settle_restart(proven: bool, state: &mut State<'_>) {
    let Some(pending) = state.restart_pending.take() else { return };
    if !proven && state.unvouched.is_none() {
        state.unvouched = Some(pending);
    }
}

/// Pushes the span from a restart no checkpoint vouched for up to `to`; whether there was one.
fn unvouched_gap(state: &mut State<'_>, to: &Location) -> bool {
    let Some((from, before)) = state.unvouched.take() else { return false };
    let records = state.report.records.saturating_sub(before);
    let why = format!(
        "they come from a chain restart at {from} that no checkpoint verifying with the key \
         follows directly, as the writer signs one: the restart was not written by the writer"
    );
    state.report.unproven.push(Gap { from, to: to.clone(), records, why });
    true
}

/// The end of a file that is not the last: it ends with a checkpoint.
pub(super) fn rotated_file_end(file: &str, state: &mut State<'_>) {
    if !keyed(state) || state.unvouched.is_some() {
        return;
    }
    let Some(last) = state.last.clone().filter(|l| l.file == file) else { return };
    let why = format!(
        "{file} does not end with a checkpoint, as a rotated file does: checkpoints were \
         removed, or the proxy stopped without one"
    );
    gap(state, &last, why);
    state.report.unsigned_records = 0;
    state.unsigned_from = None;
    state.late = None;
}

/// After the last line: no checkpoint at all, or a cadence that stopped.
pub(super) fn at_end(state: &mut State<'_>) {
    settle_restart(false, state);
    if !keyed(state) || state.report.records == 0 {
        return;
    }
    let Some(last) = state.last.clone() else { return };
    if unvouched_gap(state, &last) {
        return;
    }
    if state.report.last_signed.is_none() {
        gap(
            state,
            &last,
            "the files hold no checkpoint that verifies with the key given".to_owned(),
        );
    } else if let Some(late) = state.late.clone() {
        state.unsigned_from = Some(late.clone());
        let why = format!(
            "from {late} on, records come later than the checkpoint cadence allows after the \
             last checkpoint, and no checkpoint follows them: checkpoints were removed from the \
             end"
        );
        gap(state, &last, why);
    }
}

/// Shipped checkpoints (`--checkpoints`) that cover records before the files' first.
pub(super) fn shipped_before(first: u64, state: &mut State<'_>) {
    let before: Vec<_> =
        state.options.shipped.iter().filter(|c| c.records + 1 < first).cloned().collect();
    let (Some(oldest), Some(file)) = (before.first(), state.report.files.first()) else {
        return;
    };
    let from = Location { file: file.file.clone(), line: 1 };
    state.report.unproven.push(Gap {
        from: from.clone(),
        to: from,
        records: first - 1,
        why: format!(
            "the files start at record {first}, but {} shipped checkpoint(s) cover records \
             before it (the oldest, of {}, at {}): the files before are missing",
            before.len(),
            oldest.at,
            oldest.from
        ),
    });
}

/// An RFC 3339 time (with its offset), as `@timestamp` is written.
pub fn parse_time(text: &str) -> Option<std::time::SystemTime> {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(text, &Rfc3339).ok().map(std::time::SystemTime::from)
}
