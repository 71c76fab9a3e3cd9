//! `robots-proxy audit verify`: checks the hash chain (and the signed checkpoints) of audit
//! files, and names the first line that breaks it. [`verify_files`] is the library's entry,
//! returning a [`Report`] that serialises to JSON.
//!
//! Files are read line by line, in the order given: each line's `event.hash` and
//! `event.sequence` follow from the one before (`chain.rs`, named on a file's first record); a
//! checkpoint names the head, count and Merkle root before it (`verify/tree.rs`) and verifies
//! with the key given. A break is named by kind ([`Kind`]), from the sequence numbers around it.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::chain::{Sealed, GENESIS};
use super::checkpoint::{Previous, PublicKey, Signed};
use super::keyset::KeySet;

mod coverage;
mod manifest;
mod range;
mod shipped;
mod tree;
pub use coverage::parse_time;
use shipped::check_shipped;
pub use shipped::read_shipped;

mod report;
pub use report::{Gap, Report};

/// Most lines read ahead to tell a reordered line from deleted ones.
const LOOK_AHEAD: usize = 1024;

/// Records remembered (sequence and hash) to tell a duplicated line.
const REMEMBERED: usize = 4096;

/// What the files are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Intact and in order (a torn last line after a crash included). Exit status 0.
    Intact,
    /// A line breaks the chain. Exit status 1.
    Tampered,
    /// A file cannot be read, or a line is not JSON (not a torn line). Exit status 2.
    Unreadable,
    /// The chain is whole, but with a key given (or shipped checkpoints) some records are not
    /// covered by a signed checkpoint where the writer would have signed them
    /// ([`Report::unproven`]): a chain restart after records no checkpoint covers, a rotated
    /// file that does not end with a checkpoint, a cadence of checkpoints that stops, no
    /// checkpoint at all, or files that start after records shipped checkpoints cover.
    /// Exit status 3.
    Unproven,
}

/// How the chain is broken (or why the input could not be checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The line does not hash to its `event.hash`: its bytes were changed.
    Changed,
    /// Records are missing before the line.
    Deleted,
    /// A line without the chain's members (`event.hash` last).
    Inserted,
    /// The line repeats an earlier record.
    Duplicated,
    /// The line's record belongs elsewhere (lines swapped or moved).
    Reordered,
    /// A file's first record does not name `event.previous_hash`: its first line(s) are gone.
    FirstLineMissing,
    /// A file does not continue the one before it: out of order, or a file is missing.
    FilesOutOfOrder,
    /// A checkpoint does not match the chain before it, or its signature does not verify.
    BadCheckpoint,
    /// A signed checkpoint given with `--checkpoints` covers records the files end before.
    TailCut,
    /// A signed checkpoint given with `--checkpoints` names a record the files do not hold.
    Rewritten,
    /// A file is shorter than the manifest (`audit_manifest`) that names it says.
    Truncated,
    /// A file's bytes are not those the manifest that names it hashed (or were added to a
    /// rotated file after it was closed).
    Replaced,
    /// With `--from`/`--to`: a record in the range that no signed checkpoint covers, or a
    /// gap in the cadence of signed checkpoints within it.
    Uncovered,
    /// A file cannot be read.
    Unreadable,
    /// A line is not JSON, and not a torn line.
    Unparsable,
}

/// A place in the files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// The file, as given.
    pub file: String,
    /// The line, from 1.
    pub line: u64,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The first problem found.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// What kind.
    pub kind: Kind,
    /// Where (the line, when there is one).
    pub file: String,
    /// The line, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// A sentence.
    pub message: String,
}

/// One file's part.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// The file, as given.
    pub file: String,
    /// Lines read.
    pub lines: u64,
    /// `event.sequence` of its first and last records.
    pub first_sequence: Option<u64>,
    /// See `first_sequence`.
    pub last_sequence: Option<u64>,
}

/// A signed checkpoint shipped elsewhere (`--checkpoints FILE`), which the files must hold.
#[derive(Debug, Clone)]
pub struct Shipped {
    /// `audit.checkpoint.head`.
    pub head: String,
    /// `audit.checkpoint.records`.
    pub records: u64,
    /// Its `@timestamp`.
    pub at: String,
    /// Where it was read.
    pub from: Location,
}

/// What to verify with.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options<'a> {
    /// Check checkpoint signatures with these keys (each valid in its window).
    pub keys: Option<&'a KeySet>,
    /// Checkpoints kept elsewhere that the files must hold.
    pub shipped: &'a [Shipped],
    /// `--from`, `--to`: the range of time that signed checkpoints must cover (`range.rs`).
    pub range: Option<(std::time::SystemTime, std::time::SystemTime)>,
}

/// Verifies `files`, in order, as one chain; checkpoint signatures with `key` when given.
pub fn verify_files(files: &[PathBuf], key: Option<&PublicKey>) -> Report {
    let keys = key.cloned().map(KeySet::single);
    verify(files, Options { keys: keys.as_ref(), shipped: &[], range: None })
}

/// The fields of a line that the chain needs.
#[derive(Deserialize)]
struct Fields {
    #[serde(rename = "event.sequence")]
    sequence: Option<u64>,
    #[serde(rename = "event.previous_hash")]
    previous: Option<String>,
    #[serde(rename = "event.action")]
    action: Option<String>,
    #[serde(rename = "@timestamp")]
    timestamp: Option<String>,
    #[serde(rename = "audit.checkpoint.head")]
    head: Option<String>,
    #[serde(rename = "audit.checkpoint.records")]
    records: Option<u64>,
    #[serde(rename = "audit.restart.reason")]
    restart_reason: Option<String>,
    #[serde(rename = "event.reason")]
    reason: Option<String>,
    #[serde(rename = "event.hash_scheme")]
    scheme: Option<u64>,
}

fn parse(line: &[u8]) -> Option<Fields> {
    serde_json::from_slice(line).ok()
}

/// A file's lines, with a look-ahead.
struct Lines {
    reader: BufReader<File>,
    ahead: VecDeque<Line>,
    next: u64,
    done: bool,
}

struct Line {
    number: u64,
    bytes: Vec<u8>,
}

impl Lines {
    fn read_one(&mut self) -> io::Result<bool> {
        if self.done {
            return Ok(false);
        }
        let mut bytes = Vec::new();
        if self.reader.read_until(b'\n', &mut bytes)? == 0 {
            self.done = true;
            return Ok(false);
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        self.next += 1;
        self.ahead.push_back(Line { number: self.next, bytes });
        Ok(true)
    }

    fn next(&mut self) -> io::Result<Option<Line>> {
        if self.ahead.is_empty() {
            self.read_one()?;
        }
        Ok(self.ahead.pop_front())
    }

    /// The `n`th line after the one last taken (0: the next).
    fn peek(&mut self, n: usize) -> io::Result<Option<&Line>> {
        while self.ahead.len() <= n {
            if !self.read_one()? {
                break;
            }
        }
        Ok(self.ahead.get(n))
    }
}

/// The chain as read so far.
struct State<'a> {
    options: Options<'a>,
    report: Report,
    head: Option<[u8; 64]>,
    sequence: u64,
    last: Option<Location>,
    recent: VecDeque<(u64, [u8; 64], Location)>,
    /// Shipped checkpoints not yet found, by head.
    wanted: HashMap<String, usize>,
    found: Vec<bool>,
    first_sequence: Option<u64>,
    /// The last checkpoint in the chain since the files' start or the last restart (as the
    /// next `v2` one names it), its time and the cadence it names.
    last_checkpoint: Option<(Previous, String, Option<u64>)>,
    /// The first record after the last verified checkpoint (or from the start).
    unsigned_from: Option<Location>,
    /// The first such record later than the cadence allows.
    late: Option<Location>,
    /// With a key, an `audit_chain_restart` record (and the records counted before it) whose
    /// checkpoint must come right after it.
    restart_pending: Option<(Location, u64)>,
    /// With a key, a restart that no checkpoint vouched for right after it (and the records
    /// counted before it): the records from it on are not proven.
    unvouched: Option<(Location, u64)>,
    /// The `@timestamp` of the last checkpoint that verified with the key, across restarts:
    /// a checkpoint earlier than it (a genuine one replayed later in the files) proves nothing.
    signed_time: Option<std::time::SystemTime>,
    tree: tree::Leaves, // The Merkle tree of the chain so far, when known.
    manifests: Vec<(Location, manifest::Named)>, // `audit_manifest` records read.
    range: range::Coverage, // `--from`, `--to`.
    paths: Vec<PathBuf>, // The files given.
}

enum Stop {
    Tampered(Kind, Location, String),
    Unreadable(Kind, String, Option<u64>, String),
}

/// Verifies `files` with `options`.
pub fn verify(files: &[PathBuf], options: Options<'_>) -> Report {
    let report = Report {
        status: Status::Intact,
        files: Vec::new(),
        records: 0,
        checkpoints: 0,
        keyid: options.keys.map(KeySet::keyids),
        last_signed: None,
        unsigned_records: 0,
        torn: Vec::new(),
        notes: Vec::new(),
        unproven: Vec::new(),
        breaks: Vec::new(),
        problem: None,
    };
    let mut state = State {
        options,
        report,
        head: None,
        sequence: 0,
        last: None,
        recent: VecDeque::new(),
        wanted: HashMap::new(),
        found: vec![false; options.shipped.len()],
        first_sequence: None,
        last_checkpoint: None,
        unsigned_from: None,
        late: None,
        restart_pending: None,
        unvouched: None,
        signed_time: None,
        tree: tree::Leaves::default(),
        manifests: Vec::new(),
        range: range::Coverage::new(options.range),
        paths: files.to_vec(),
    };
    for (i, c) in options.shipped.iter().enumerate() {
        state.wanted.insert(c.head.clone(), i);
    }
    let stop = run(files, &mut state);
    if stop.is_ok() {
        coverage::at_end(&mut state);
        range::at_end(&mut state);
    }
    let mut report = state.report;
    match stop {
        Ok(()) => {}
        Err(Stop::Tampered(kind, at, message)) => {
            report.status = Status::Tampered;
            report.problem = Some(Problem { kind, file: at.file, line: Some(at.line), message });
        }
        Err(Stop::Unreadable(kind, file, line, message)) => {
            report.status = Status::Unreadable;
            report.problem = Some(Problem { kind, file, line, message });
        }
    }
    if report.records == 0 && report.status == Status::Intact {
        report.notes.push("the files hold no record".to_owned());
    }
    if let (Status::Intact | Status::Unproven, Some(first)) = (report.status, report.breaks.first())
    {
        report.status = Status::Tampered;
        let (file, line) = (first.from.file.clone(), Some(first.from.line));
        report.problem =
            Some(Problem { kind: Kind::Uncovered, file, line, message: first.why.clone() });
    }
    if report.status == Status::Intact && !report.unproven.is_empty() {
        report.status = Status::Unproven;
    }
    report
}

fn run(files: &[PathBuf], state: &mut State<'_>) -> Result<(), Stop> {
    let mut opened = Vec::new();
    for path in files {
        let shown = path.display().to_string();
        match File::open(path) {
            Ok(file) => opened.push((shown, file)),
            Err(e) => {
                return Err(Stop::Unreadable(
                    Kind::Unreadable,
                    shown,
                    None,
                    format!("cannot read: {e}"),
                ))
            }
        }
    }
    let count = opened.len();
    for (i, (shown, file)) in opened.into_iter().enumerate() {
        let mut lines =
            Lines { reader: BufReader::new(file), ahead: VecDeque::new(), next: 0, done: false };
        state.report.files.push(FileSummary {
            file: shown.clone(),
            lines: 0,
            first_sequence: None,
            last_sequence: None,
        });
        verify_file(&shown, &mut lines, state)?;
        if i + 1 < count {
            coverage::rotated_file_end(&shown, state);
        }
    }
    manifest::check(files, state)?;
    check_shipped(state)
}

fn unreadable(file: &str, e: io::Error) -> Stop {
    Stop::Unreadable(Kind::Unreadable, file.to_owned(), None, format!("cannot read: {e}"))
}

fn verify_file(file: &str, lines: &mut Lines, state: &mut State<'_>) -> Result<(), Stop> {
    let mut first_in_file = true;
    let previous_file = state.last.as_ref().map(|l| l.file.clone());
    while let Some(line) = lines.next().map_err(|e| unreadable(file, e))? {
        let at = Location { file: file.to_owned(), line: line.number };
        if let Some(summary) = state.report.files.last_mut() {
            summary.lines = line.number;
        }
        let Some(fields) = parse(&line.bytes) else {
            // A chained line whose bytes no longer hash right is a changed line, JSON or not.
            if let (Some(sealed), Some(head)) = (Sealed::parse(&line.bytes), state.head) {
                if !sealed.follows(&head, &sealed.leaf()) {
                    return Err(Stop::Tampered(
                        Kind::Changed,
                        at,
                        "the line does not hash to its event.hash (and is no longer JSON)".into(),
                    ));
                }
            }
            let next = lines.peek(0).map_err(|e| unreadable(file, e))?;
            let resumed = next.and_then(|n| parse(&n.bytes)).is_some_and(|n| n.previous.is_some());
            if next.is_none() || resumed {
                state.report.torn.push(at);
                continue;
            }
            return Err(Stop::Unreadable(
                Kind::Unparsable,
                file.to_owned(),
                Some(line.number),
                "the line is not JSON (and not a torn line: records follow it)".into(),
            ));
        };
        let Some(sealed) = Sealed::parse(&line.bytes) else {
            return Err(Stop::Tampered(
                Kind::Inserted,
                at,
                "the line does not end with event.hash: it was inserted (or written before the \
                 chain existed)"
                    .into(),
            ));
        };
        // The line's scheme is its bytes' (`event.hash_scheme` right before `event.hash`); a
        // member that says otherwise elsewhere in the line is not the writer's.
        if fields.scheme != sealed.scheme.member() {
            let message = "event.hash_scheme is not where the writer puts it: the line was changed";
            return Err(Stop::Tampered(Kind::Changed, at, message.into()));
        }
        // Its leaf, hashed once: the chain's step (scheme 2) and the Merkle tree take it.
        let leaf = sealed.leaf();
        let (hash, hash_arr) = (sealed.hash, sealed.hash_array());
        let sequence = fields.sequence;
        // A declared new chain (the writer could not vouch for the tail it found at start):
        // it continues from nothing; what came before it is accounted for by `coverage`.
        let restart = fields.action.as_deref() == Some("audit_chain_restart")
            && fields.previous.as_deref().map(str::as_bytes) == Some(&GENESIS[..]);
        if restart && state.head.is_some() {
            coverage::restart(&fields, &at, state);
            range::restart(state);
            state.head = None;
        }
        // The hash this record continues from.
        let previous: [u8; 64] = match (&fields.previous, state.head) {
            (Some(p), _) => {
                let mut out = [0u8; 64];
                if p.len() != 64 {
                    return Err(Stop::Tampered(
                        Kind::Changed,
                        at,
                        "event.previous_hash is not a hash".into(),
                    ));
                }
                out.copy_from_slice(p.as_bytes());
                // A line that does not hash from the hash it names itself was changed, wherever
                // it is (issue 39, L3: not "files out of order" or "records missing").
                if !sealed.follows(&out, &leaf) {
                    return Err(Stop::Tampered(
                        Kind::Changed,
                        at,
                        "the line does not hash to its event.hash from the event.previous_hash it \
                         names: it was changed"
                            .into(),
                    ));
                }
                if let Some(head) = state.head {
                    if out != head {
                        if let Some(stop) = explain(&line.bytes, first_in_file, &at, state) {
                            return Err(stop);
                        }
                        return Err(break_at(
                            file,
                            first_in_file,
                            previous_file.as_deref(),
                            at,
                            sequence,
                            &hash_arr,
                            lines,
                            state,
                        ));
                    }
                }
                out
            }
            (None, Some(head)) if !first_in_file => head,
            (None, _) => {
                return Err(Stop::Tampered(
                    Kind::FirstLineMissing,
                    at,
                    "the first record of every file names event.previous_hash; this one does \
                     not: the file's first line(s) were removed"
                        .into(),
                ));
            }
        };
        if !sealed.follows(&previous, &leaf)
            || (state.head.is_some() && !restart && sequence != Some(state.sequence + 1))
        {
            return Err(break_at(
                file,
                first_in_file,
                previous_file.as_deref(),
                at,
                sequence,
                &hash_arr,
                lines,
                state,
            ));
        }
        let sequence = sequence.unwrap_or(0);
        if restart {
            state.report.notes.push(format!(
                "{at}: the chain starts again ({}): {}",
                fields.restart_reason.as_deref().unwrap_or("no reason given"),
                fields.reason.as_deref().unwrap_or("")
            ));
        }
        let checkpoint = fields.action.as_deref() == Some("audit_checkpoint");
        if fields.action.as_deref() == Some("audit_manifest") {
            manifest::seen(&line.bytes, &at, state);
        }
        tree::leaf(&line.bytes, leaf, previous == GENESIS, checkpoint, &at, state)?;
        let proven = if checkpoint {
            check_checkpoint(&line.bytes, &previous, sequence, &at, state)?
        } else {
            state.report.unsigned_records += 1;
            coverage::unsigned(&fields, &at, state);
            range::record(&fields, &at, state);
            false
        };
        // With a key, a restart is vouched for by the checkpoint right after it (its head the
        // restart's hash, the restart the new chain's first record), as the writer signs.
        coverage::settle_restart(proven, state);
        if restart {
            coverage::restarted(&at, state);
        }
        if let Some(&i) = state.wanted.get(std::str::from_utf8(hash).unwrap_or("")) {
            state.found[i] = true;
        }
        state.report.records += 1;
        if let Some(summary) = state.report.files.last_mut() {
            summary.first_sequence.get_or_insert(sequence);
            summary.last_sequence = Some(sequence);
        }
        state.first_sequence.get_or_insert(sequence);
        state.head = Some(hash_arr);
        state.sequence = sequence;
        if state.recent.len() >= REMEMBERED {
            state.recent.pop_front();
        }
        state.recent.push_back((sequence, hash_arr, at.clone()));
        state.last = Some(at);
        first_in_file = false;
    }
    Ok(())
}

/// A break at the first line of a file that is a rotation manifest: the file it names,
/// checked against it (`manifest.rs`).
fn explain(line: &[u8], first_in_file: bool, at: &Location, state: &State<'_>) -> Option<Stop> {
    let manifest = first_in_file && line.windows(16).any(|w| w == b"\"audit_manifest\"");
    manifest.then(|| manifest::explain(line, at, &state.paths, state)).flatten()
}

/// Checks a checkpoint record; `Ok(true)` when it verifies with the key given and vouches for
/// the records before it.
fn check_checkpoint(
    line: &[u8],
    previous: &[u8; 64],
    sequence: u64,
    at: &Location,
    state: &mut State<'_>,
) -> Result<bool, Stop> {
    let bad = |message: String| Err(Stop::Tampered(Kind::BadCheckpoint, at.clone(), message));
    let signed: Signed = serde_json::from_slice(line).unwrap_or_default();
    let head = signed.head.as_deref().unwrap_or("");
    if head.as_bytes() != previous || signed.records != Some(sequence.saturating_sub(1)) {
        return bad(format!(
            "the checkpoint names head {head} after {:?} record(s), but the chain before it is \
             at {} after {} record(s): records before it were rewritten",
            signed.records,
            std::str::from_utf8(previous).unwrap_or(""),
            sequence.saturating_sub(1)
        ));
    }
    // A `v2` checkpoint names the one before it in the chain: one removed (or replaced) in
    // between shows.
    if signed.interval_ms.is_some() {
        let before = state.last_checkpoint.as_ref().map(|(p, _, _)| p);
        match (signed.previous(), before) {
            (Some(named), Some(before)) if named != *before => {
                return bad(format!(
                    "the checkpoint names the checkpoint of record {} as the one before it, but \
                     the one before it in the files is that of record {}: a checkpoint was \
                     removed or replaced",
                    named.records, before.records
                ))
            }
            (None, Some(before)) => {
                return bad(format!(
                    "the checkpoint names no checkpoint before it, but the checkpoint of record \
                     {} comes before it in the same chain",
                    before.records
                ))
            }
            _ => {}
        }
    }
    state.report.checkpoints += 1;
    let this = signed
        .as_previous()
        .map(|p| (p, signed.timestamp.clone().unwrap_or_default(), signed.interval_ms));
    let Some(keys) = state.options.keys else {
        state.last_checkpoint = this;
        return Ok(false);
    };
    // A key of the set, valid at the checkpoint's time (a key change is no tampering; an
    // unknown key, or one outside its window, is).
    let time = signed.timestamp.as_deref().and_then(coverage::parse_time);
    let key = match keys.valid(signed.keyid.as_deref().unwrap_or(""), time) {
        Ok(key) => key,
        Err(why) => return bad(why),
    };
    if !signed.verifies_with(key) {
        return bad("the checkpoint's signature does not verify: it was forged or changed".into());
    }
    state.last_checkpoint = this;
    // The writer's checkpoints never go back in time, across restarts too: one that does is a
    // genuine checkpoint (and restart) copied later into the files.
    if let (Some(time), Some(before)) = (time, state.signed_time) {
        if time < before {
            state.report.notes.push(format!(
                "{at}: the checkpoint's @timestamp ({}) comes before that of a checkpoint \
                 earlier in the files: it vouches for nothing (replayed?)",
                signed.timestamp.as_deref().unwrap_or("")
            ));
            return Ok(false);
        }
    }
    if time.is_some() {
        state.signed_time = time;
    }
    range::signed(time, signed.interval_ms, at, state);
    state.report.last_signed = Some(at.clone());
    state.report.unsigned_records = 0;
    state.unsigned_from = None;
    state.late = None;
    Ok(true)
}

/// Names the break at `at`: a record that does not continue the chain.
#[allow(clippy::too_many_arguments)]
fn break_at(
    file: &str,
    first_in_file: bool,
    previous_file: Option<&str>,
    at: Location,
    sequence: Option<u64>,
    hash: &[u8; 64],
    lines: &mut Lines,
    state: &State<'_>,
) -> Stop {
    let expected = state.sequence + 1;
    let last = state.last.as_ref().map(|l| l.to_string()).unwrap_or_default();
    if first_in_file {
        let before = previous_file.unwrap_or("the file before");
        let message = match sequence {
            Some(1) => format!(
                "{file} starts a new chain (record 1) but follows {before}, which ends at record \
                 {}: the files are out of order (or the proxy started on an empty file: verify \
                 from {file} on separately)",
                state.sequence
            ),
            Some(s) if s <= state.sequence => format!(
                "{file} starts at record {s}, which comes before the end of {before} (record {}): \
                 the files are out of order",
                state.sequence
            ),
            Some(s) if s > expected => format!(
                "records {expected} to {} are missing between {before} and {file}: a file is \
                 missing, or the files are out of order",
                s - 1
            ),
            _ => format!("{file} does not continue {before} (which ends at {last})"),
        };
        return Stop::Tampered(Kind::FilesOutOfOrder, at, message);
    }
    match sequence {
        Some(s) if s == expected => Stop::Tampered(
            Kind::Changed,
            at,
            "the line does not hash to its event.hash from the line before: it was changed".into(),
        ),
        Some(s) if s <= state.sequence => {
            let copy = state.recent.iter().find(|(seq, h, _)| *seq == s && h == hash);
            match copy {
                Some((_, _, original)) => Stop::Tampered(
                    Kind::Duplicated,
                    at,
                    format!("the line repeats record {s} ({original})"),
                ),
                None => Stop::Tampered(
                    Kind::Reordered,
                    at,
                    format!(
                        "record {s} comes after record {} ({last}): lines are out of order",
                        state.sequence
                    ),
                ),
            }
        }
        Some(s) => {
            // Further on, the record that should be here: lines were moved, not deleted.
            let mut later = None;
            for n in 0..LOOK_AHEAD {
                let Ok(Some(line)) = lines.peek(n) else { break };
                if parse(&line.bytes).and_then(|f| f.sequence) == Some(expected) {
                    later = Some(line.number);
                    break;
                }
            }
            match later {
                Some(line) => Stop::Tampered(
                    Kind::Reordered,
                    at,
                    format!(
                        "record {s} comes before record {expected} ({file}:{line}): lines are out \
                         of order"
                    ),
                ),
                None => Stop::Tampered(
                    Kind::Deleted,
                    at,
                    format!(
                        "{} record(s) missing before this line (records {expected} to {}): lines \
                         were deleted",
                        s - expected,
                        s - 1
                    ),
                ),
            }
        }
        None => Stop::Tampered(
            Kind::Changed,
            at,
            "the line has no event.sequence and does not hash to its event.hash: it was changed"
                .into(),
        ),
    }
}
