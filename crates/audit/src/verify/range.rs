//! `audit verify … --from T1 --to T2` (issue 39, item 4): coverage demanded for a range of
//! time, as CloudTrail's `validate-logs --start-time --end-time` demands a digest for every
//! hour. With a key, in the range asked:
//!
//! * every record whose `@timestamp` is in it is covered by a signed checkpoint after it in
//!   its chain (not only "the chain is whole");
//! * signed checkpoints follow each other no further apart than the cadence they name
//!   (`audit.checkpoint.interval_ms`) plus [`SLACK`], also at the range's edges: the files
//!   must hold a signed checkpoint within that of T1 (or before it) and of T2 (or after it).
//!   The gap from a closing checkpoint after a `proxy_stop` record to the next start's
//!   checkpoint is a stopped proxy, noted, not a break.
//!
//! Each break is named by its first line and reason; any break is exit status 1.

use std::time::{Duration, SystemTime};

use super::{coverage::parse_time, Fields, Gap, Location, State};

/// Slack on top of the cadence (a busy writer, clocks).
pub(super) const SLACK: Duration = Duration::from_secs(10);

/// The range asked, and what has been seen of it.
#[derive(Debug, Default)]
pub(super) struct Coverage {
    /// The range (inclusive).
    range: Option<(SystemTime, SystemTime)>,
    /// The first record in the range since the last signed checkpoint, and how many.
    uncovered: Option<(Location, String, u64)>,
    /// The last signed checkpoint: its time, place, cadence, and whether it closed a stop.
    last: Option<(SystemTime, Location, Option<Duration>, bool)>,
    /// A `proxy_stop` record since the last signed checkpoint.
    stopping: bool,
}

impl Coverage {
    pub(super) fn new(range: Option<(SystemTime, SystemTime)>) -> Coverage {
        Coverage { range, ..Coverage::default() }
    }

    fn in_range(&self, at: SystemTime) -> bool {
        self.range.is_some_and(|(from, to)| at >= from && at <= to)
    }
}

fn show(at: SystemTime) -> String {
    crate::timestamp(at)
}

/// A record that is not a checkpoint.
pub(super) fn record(fields: &Fields, at: &Location, state: &mut State<'_>) {
    let c = &mut state.range;
    if c.range.is_none() {
        return;
    }
    if fields.action.as_deref() == Some("proxy_stop") {
        c.stopping = true;
    }
    let Some(time) = fields.timestamp.as_deref().and_then(parse_time) else { return };
    if !c.in_range(time) {
        return;
    }
    match &mut c.uncovered {
        Some((_, _, n)) => *n += 1,
        None => c.uncovered = Some((at.clone(), show(time), 1)),
    }
}

/// A checkpoint at `at`, signed by a key valid at `time`, naming the cadence `interval_ms`.
pub(super) fn signed(
    time: Option<SystemTime>,
    interval_ms: Option<u64>,
    at: &Location,
    state: &mut State<'_>,
) {
    let c = &mut state.range;
    let Some((from, to)) = c.range else { return };
    c.uncovered = None;
    let Some(time) = time else { return };
    let interval = interval_ms.map(Duration::from_millis);
    let closing = std::mem::take(&mut c.stopping);
    let before = c.last.replace((time, at.clone(), interval, closing));
    let Some(allowed) = interval.map(|i| i + SLACK) else { return };
    let (start, start_at, stopped) = match before {
        Some((t, l, _, closing)) => (t, Some(l), closing),
        None => (from, None, false),
    };
    // The span between the two checkpoints (or T1 and the first) within the range.
    if start > to || time < from {
        return;
    }
    let span = time.duration_since(start.max(from)).unwrap_or_default();
    let whole = time.duration_since(start).unwrap_or_default();
    if whole <= allowed || span.is_zero() {
        return;
    }
    let since = match &start_at {
        Some(l) => format!("the signed checkpoint at {l} ({})", show(start)),
        None => format!("the start of the range ({})", show(from)),
    };
    if stopped {
        state.report.notes.push(format!(
            "{since} closed a stop (proxy_stop); the next signed checkpoint is at {at} ({}): the \
             proxy was stopped in between",
            show(time)
        ));
        return;
    }
    let why = format!(
        "no signed checkpoint between {since} and this one ({}): {} s, more than the cadence \
         ({} s) plus {} s",
        show(time),
        whole.as_secs(),
        allowed.saturating_sub(SLACK).as_secs(),
        SLACK.as_secs()
    );
    push(state, at.clone(), at.clone(), 0, why);
}

/// A chain restart: records in the range before it that no checkpoint covered.
pub(super) fn restart(state: &mut State<'_>) {
    flush_uncovered(state, "before an audit_chain_restart");
}

fn flush_uncovered(state: &mut State<'_>, when: &str) {
    let Some((first, time, n)) = state.range.uncovered.take() else { return };
    let to = state.last.clone().unwrap_or_else(|| first.clone());
    let why = format!(
        "{n} record(s) in the range, from {time}, {when}, are covered by no signed checkpoint"
    );
    push(state, first, to, n, why);
}

fn push(state: &mut State<'_>, from: Location, to: Location, records: u64, why: String) {
    state.report.breaks.push(Gap { from, to, records, why });
}

/// After the last line: records in the range not yet covered, and a range that goes on
/// past the last signed checkpoint (or that no signed checkpoint reaches).
pub(super) fn at_end(state: &mut State<'_>) {
    let Some((from, to)) = state.range.range else { return };
    flush_uncovered(state, "at the end of the files");
    let at_end = state.last.clone().unwrap_or(Location { file: String::new(), line: 0 });
    match state.range.last.clone() {
        None => push(
            state,
            at_end.clone(),
            at_end,
            0,
            format!(
                "no signed checkpoint in the files covers the range {} to {}",
                show(from),
                show(to)
            ),
        ),
        Some((time, at, interval, closing)) => {
            let Some(allowed) = interval.map(|i| i + SLACK) else { return };
            let end = to.min(SystemTime::now());
            if !closing && time < end && end.duration_since(time).unwrap_or_default() > allowed {
                let why = format!(
                    "the last signed checkpoint ({}) is more than the cadence plus {} s before \
                     the end of the range ({}): the range is not covered to its end",
                    show(time),
                    SLACK.as_secs(),
                    show(end)
                );
                push(state, at.clone(), at, 0, why);
            }
        }
    }
}
