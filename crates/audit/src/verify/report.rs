//! What `audit verify` found, and its rendering for a person.

use serde::Serialize;

use super::{FileSummary, Location, Problem, Status};

/// What `audit verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Intact, tampered, or unreadable.
    pub status: Status,
    /// The files, in the order given (those read).
    pub files: Vec<FileSummary>,
    /// Records verified.
    pub records: u64,
    /// `audit_checkpoint` records verified.
    pub checkpoints: u64,
    /// The key id the signatures were checked with; none: not checked.
    pub keyid: Option<String>,
    /// The last checkpoint whose signature verified.
    pub last_signed: Option<Location>,
    /// Records after it (all records, when none verified): not covered by a signature.
    pub unsigned_records: u64,
    /// Torn lines (a crash while writing): not tampering; the chain resumes after them.
    pub torn: Vec<Location>,
    /// Remarks that are not problems (each chain restart among them).
    pub notes: Vec<String>,
    /// With a key (or shipped checkpoints): the records no checkpoint in the files vouches
    /// for where the writer would have signed them (status `unproven`).
    pub unproven: Vec<Gap>,
    /// With `--from`/`--to`: each break in the coverage of the range (the first is the
    /// problem; status `tampered`).
    pub breaks: Vec<Gap>,
    /// The first problem, when not intact.
    pub problem: Option<Problem>,
}

impl Report {
    /// The exit status: 0 intact, 1 tampered, 2 unreadable.
    pub(crate) fn exit_code(&self) -> u8 {
        match self.status {
            Status::Intact => 0,
            Status::Tampered => 1,
            Status::Unreadable => 2,
            Status::Unproven => 3,
        }
    }

    /// The report for a person.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        if let Some(p) = &self.problem {
            let at = match p.line {
                Some(line) => format!("{}:{line}", p.file),
                None => p.file.clone(),
            };
            let what = serde_json::to_value(p.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let _ = writeln!(out, "{at}: {}: {}", what.replace('_', " "), p.message);
        }
        for torn in &self.torn {
            let _ = writeln!(
                out,
                "{torn}: torn line (a crash while writing): not tampering; the chain verifies up \
                 to it and resumes after it"
            );
        }
        for gap in &self.unproven {
            let _ = writeln!(out, "{gap}");
        }
        for gap in self.breaks.iter().skip(1) {
            let _ = writeln!(out, "{}: uncovered: {}", gap.from, gap.why);
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let first = self.files.iter().find_map(|f| f.first_sequence);
        let last = self.files.iter().rev().find_map(|f| f.last_sequence);
        let range = match (first, last) {
            (Some(a), Some(b)) => format!(", event.sequence {a} to {b}"),
            _ => String::new(),
        };
        let verdict = match self.status {
            Status::Intact => "intact",
            Status::Tampered => "TAMPERED",
            Status::Unreadable => "cannot verify",
            Status::Unproven => "NOT PROVEN",
        };
        let _ = write!(
            out,
            "{verdict}: {} record(s) verified in {} file(s){range}; {} checkpoint(s)",
            self.records,
            self.files.len(),
            self.checkpoints
        );
        match (&self.keyid, &self.last_signed) {
            (None, _) => {
                let _ = writeln!(out, " (signatures not checked: no public key given)");
            }
            (Some(keyid), Some(at)) => {
                let _ = writeln!(
                    out,
                    ", signatures checked with key {keyid}; last signed at {at}, {} record(s) \
                     after it not yet signed",
                    self.unsigned_records
                );
            }
            (Some(keyid), None) => {
                let _ = writeln!(
                    out,
                    ", signatures checked with key {keyid}; no signed checkpoint in the files"
                );
            }
        }
        out
    }
}

/// Records that no signed checkpoint covers where the writer would have signed them: before a
/// chain restart, at the end of a rotated file, after the cadence of checkpoints stopped, in a
/// log with none, or before the files' first record when shipped checkpoints cover it.
#[derive(Debug, Clone, Serialize)]
pub struct Gap {
    /// The first record of the span (or the first line of the files).
    pub from: Location,
    /// The last record of the span.
    pub to: Location,
    /// Records in it.
    pub records: u64,
    /// Why they are not proven.
    pub why: String,
}

impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} to {}: not proven: {} record(s) no signed checkpoint covers: {}",
            self.from, self.to, self.records, self.why
        )
    }
}
