//! `audit verify --witness-key K…`: the witnesses' cosignatures in the files
//! (`audit_cosignature` records). Each cosignature of a given key must verify over the
//! checkpoint record it names (else tampering: `bad_checkpoint`, the line named); the last
//! checkpoint cosigned by the quorum of the given keys is reported, and the records after it;
//! when no checkpoint in the files has the quorum, the files are not proven (exit 3).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use super::record::Cosignature;
use super::WitnessKey;
use crate::verify::{Gap, Kind, Location, Problem, Report, Status};

/// Checks the cosignatures of `keys` in `files` (already verified as a chain into `report`),
/// requiring `quorum` of them on a checkpoint; amends `report`.
pub fn apply(report: &mut Report, files: &[PathBuf], keys: &[WitnessKey], quorum: usize) {
    if !matches!(report.status, Status::Intact | Status::Unproven) || keys.is_empty() {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Members {
        #[serde(rename = "event.sequence")]
        sequence: Option<u64>,
        #[serde(rename = "audit.checkpoint.note")]
        note: Option<String>,
        #[serde(rename = "event.action")]
        action: Option<String>,
    }
    let mut checkpoints: HashMap<u64, (String, Location)> = HashMap::new();
    let mut cosigned: Vec<(Location, Cosignature)> = Vec::new();
    let (mut first, mut last, mut last_sequence) = (None, None, 0);
    for path in files {
        let file = path.display().to_string();
        let Ok(f) = std::fs::File::open(path) else { return };
        for (n, line) in BufReader::new(f).split(b'\n').enumerate() {
            let Ok(line) = line else { return };
            let at = Location { file: file.clone(), line: n as u64 + 1 };
            let Ok(m) = serde_json::from_slice::<Members>(&line) else { continue };
            let Some(sequence) = m.sequence else { continue };
            first.get_or_insert_with(|| at.clone());
            last = Some(at.clone());
            last_sequence = sequence;
            if let Some(note) = m.note {
                checkpoints.insert(sequence, (note, at.clone()));
            }
            let cosignature = m.action.as_deref() == Some("audit_cosignature");
            if let Some(c) = cosignature.then(|| Cosignature::parse(&line)).flatten() {
                cosigned.push((at, c));
            }
        }
    }
    let mut by: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    for (at, c) in &cosigned {
        let Some((note, _)) = checkpoints.get(&c.checkpoint_sequence) else {
            report.notes.push(format!(
                "{at}: a cosignature of the checkpoint event.sequence {}, which the files do \
                 not hold (give the file before)",
                c.checkpoint_sequence
            ));
            continue;
        };
        let tamper = |report: &mut Report, message: String| {
            report.status = Status::Tampered;
            report.problem = Some(Problem {
                kind: Kind::BadCheckpoint,
                file: at.file.clone(),
                line: Some(at.line),
                message,
            });
        };
        let Some((text, _)) = c.split().filter(|_| c.note.starts_with(note.as_str())) else {
            return tamper(
                report,
                format!(
                    "the cosigned checkpoint is not the checkpoint at event.sequence {} it names",
                    c.checkpoint_sequence
                ),
            );
        };
        for key in keys {
            match key.find(text, c.witness_lines()) {
                Ok(Some(_)) => {
                    by.entry(c.checkpoint_sequence).or_default().insert(key.name());
                }
                Ok(None) => {}
                Err(e) => return tamper(report, format!("witness {}: {e}", key.name())),
            }
        }
    }
    let best = by.iter().rev().find(|(_, names)| names.len() >= quorum);
    match best {
        Some((sequence, names)) => {
            let (note, at) = &checkpoints[sequence];
            let size = note.split('\n').nth(1).unwrap_or("?");
            let names: Vec<&str> = names.iter().copied().collect();
            report.notes.push(format!(
                "witnessed: the checkpoint at {at} (tree size {size}) is cosigned by {} of the \
                 {} witness key(s) given ({}); {} record(s) after it not witnessed yet",
                names.len(),
                keys.len(),
                names.join(", "),
                last_sequence.saturating_sub(*sequence)
            ));
        }
        None => {
            if let (Some(from), Some(to)) = (first, last) {
                report.status = Status::Unproven;
                report.unproven.push(Gap {
                    from,
                    to,
                    records: report.records,
                    why: format!(
                        "no checkpoint in the files is cosigned by {quorum} of the {} witness \
                         key(s) given (--witness-key)",
                        keys.len()
                    ),
                });
            }
        }
    }
}
