//! Checkpoints shipped elsewhere (`--checkpoints FILE`): read them, and check that the files
//! hold every one within their range.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use super::{coverage, parse, Kind, Lines, Location, Problem, Shipped, State, Stop};
use crate::checkpoint::Signed;
use crate::keyset::KeySet;

/// Every shipped checkpoint within the files' range must be in them.
pub(super) fn check_shipped(state: &mut State<'_>) -> Result<(), Stop> {
    let first = state.first_sequence.unwrap_or(1);
    coverage::shipped_before(first, state);
    for (i, c) in state.options.shipped.iter().enumerate() {
        if state.found[i] || c.records < first {
            continue;
        }
        let last = state.last.clone().unwrap_or(Location { file: String::new(), line: 0 });
        if c.records > state.sequence {
            return Err(Stop::Tampered(
                Kind::TailCut,
                last,
                format!(
                    "the files end at record {} but the signed checkpoint of {} ({}) covers {} \
                     record(s): the tail was cut off",
                    state.sequence, c.at, c.from, c.records
                ),
            ));
        }
        return Err(Stop::Tampered(
            Kind::Rewritten,
            last,
            format!(
                "the files do not hold record {} with the event.hash {} that the signed \
                 checkpoint of {} ({}) names: records were rewritten or removed",
                c.records, c.head, c.at, c.from
            ),
        ));
    }
    Ok(())
}

/// Reads the checkpoints of `path` (any audit file: its `audit_checkpoint` records), checking
/// their signatures with `keys` when given.
pub fn read_shipped(path: &Path, keys: Option<&KeySet>) -> Result<Vec<Shipped>, (Problem, u8)> {
    let shown = path.display().to_string();
    let unreadable = |e: io::Error| {
        (
            Problem {
                kind: Kind::Unreadable,
                file: shown.clone(),
                line: None,
                message: format!("cannot read: {e}"),
            },
            2,
        )
    };
    let file = File::open(path).map_err(unreadable)?;
    let mut lines =
        Lines { reader: BufReader::new(file), ahead: VecDeque::new(), next: 0, done: false };
    let mut out = Vec::new();
    while let Some(line) = lines.next().map_err(unreadable)? {
        let Some(fields) = parse(&line.bytes) else {
            if lines.peek(0).map_err(unreadable)?.is_none() {
                break;
            }
            return Err((
                Problem {
                    kind: Kind::Unparsable,
                    file: shown.clone(),
                    line: Some(line.number),
                    message: "the line is not JSON".into(),
                },
                2,
            ));
        };
        if fields.action.as_deref() != Some("audit_checkpoint") {
            continue;
        }
        let from = Location { file: shown.clone(), line: line.number };
        let (Some(head), Some(records), Some(at)) =
            (&fields.head, fields.records, &fields.timestamp)
        else {
            continue;
        };
        if let Some(keys) = keys {
            let signed: Signed = serde_json::from_slice(&line.bytes).unwrap_or_default();
            let time = signed.timestamp.as_deref().and_then(coverage::parse_time);
            let problem = match keys.valid(signed.keyid.as_deref().unwrap_or(""), time) {
                Err(why) => Some(why),
                Ok(key) if !signed.verifies_with(key) => {
                    Some("the checkpoint's signature does not verify with the key given".to_owned())
                }
                Ok(_) => None,
            };
            if let Some(message) = problem {
                let at = Some(line.number);
                let kind = Kind::BadCheckpoint;
                return Err((Problem { kind, file: shown.clone(), line: at, message }, 1));
            }
        }
        out.push(Shipped { head: head.clone(), records, at: at.clone(), from });
    }
    Ok(out)
}
