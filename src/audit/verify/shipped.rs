//! `audit verify --checkpoints FILE`: the checkpoints kept elsewhere, which the files must hold.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use super::{parse, Kind, Lines, Location, Problem, Shipped};
use crate::audit::checkpoint::{PublicKey, Signed};

/// Reads the checkpoints of `path` (any audit file: its `audit_checkpoint` records), checking
/// their signatures with `key` when given.
pub fn read_shipped(path: &Path, key: Option<&PublicKey>) -> Result<Vec<Shipped>, (Problem, u8)> {
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
        if let Some(key) = key {
            let signed: Signed = serde_json::from_slice(&line.bytes).unwrap_or_default();
            if !signed.verifies_with(key) {
                return Err((
                    Problem {
                        kind: Kind::BadCheckpoint,
                        file: shown.clone(),
                        line: Some(line.number),
                        message: "the checkpoint's signature does not verify with the key given"
                            .into(),
                    },
                    1,
                ));
            }
        }
        out.push(Shipped { head: head.clone(), records, at: at.clone(), from });
    }
    Ok(out)
}
