//! Manifests (`audit_manifest` records, issue 39, item 2): each names a file by its first
//! record, with its length and SHA-256 (a rotated file whole, at a rotation; the bytes before
//! it, at a clean stop). The files given are checked against every manifest in them: a file
//! shorter than its manifest says is `truncated`; other bytes, or bytes added to a rotated
//! file after it was closed, `replaced`; a file named and not given (the oldest files
//! deleted, review M7) is not proven with a key (a note without one).

use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{Gap, Kind, Location, State, Stop};

/// What a manifest names.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Named {
    #[serde(rename = "audit.manifest.file", default)]
    file: String,
    #[serde(rename = "audit.manifest.bytes")]
    bytes: u64,
    #[serde(rename = "audit.manifest.sha256")]
    sha256: String,
    #[serde(rename = "audit.manifest.first_sequence")]
    first_sequence: Option<u64>,
    #[serde(rename = "audit.manifest.last_sequence")]
    last_sequence: Option<u64>,
    #[serde(rename = "audit.manifest.closed", default)]
    closed: String,
}

/// A manifest record at `at` (an unreadable one is noted: its line's hash is checked anyway).
pub(super) fn seen(line: &[u8], at: &Location, state: &mut State<'_>) {
    match serde_json::from_slice::<Named>(line) {
        Ok(named) => state.manifests.push((at.clone(), named)),
        Err(e) => state.report.notes.push(format!("{at}: a manifest without its fields ({e})")),
    }
}

/// SHA-256 (hex) of the first `bytes` bytes of `path`, and the file's length.
fn prefix_digest(path: &PathBuf, bytes: u64) -> io::Result<(String, u64)> {
    let file = File::open(path)?;
    let length = file.metadata()?.len();
    let mut hasher = Sha256::new();
    io::copy(&mut file.take(bytes), &mut hasher)?;
    Ok((hasher.finalize().iter().map(|b| format!("{b:02x}")).collect(), length))
}

/// Checks the files given against every manifest read.
pub(super) fn check(files: &[PathBuf], state: &mut State<'_>) -> Result<(), Stop> {
    for (at, named) in std::mem::take(&mut state.manifests) {
        let what = describe(&named, &at);
        let Some(first) = named.first_sequence else {
            state.report.notes.push(format!("{what}: names no first record, not checked"));
            continue;
        };
        let given = state.report.files.iter().position(|f| f.first_sequence == Some(first));
        let Some(i) = given else {
            let why = format!("{what}, was not given: its records are not proven");
            match (state.options.keys, named.last_sequence) {
                (Some(_), Some(last)) => state.report.unproven.push(Gap {
                    from: at.clone(),
                    to: at.clone(),
                    records: last.saturating_sub(first) + 1,
                    why,
                }),
                _ => state.report.notes.push(why),
            }
            continue;
        };
        compare(&named, &what, i, files, state)?;
    }
    Ok(())
}

/// A break at `line`, the first line of a file: when it is a rotation manifest that names a
/// file given (by its first record) whose bytes are not those it names, that is the finding
/// (`truncated`, `replaced`), more precise than the break in the chain it causes.
pub(super) fn explain(
    line: &[u8],
    at: &Location,
    files: &[PathBuf],
    state: &State<'_>,
) -> Option<Stop> {
    let named: Named = serde_json::from_slice(line).ok()?;
    let first = named.first_sequence?;
    let i = state.report.files.iter().position(|f| f.first_sequence == Some(first))?;
    compare(&named, &describe(&named, at), i, files, state).err()
}

fn describe(named: &Named, at: &Location) -> String {
    let range = match (named.first_sequence, named.last_sequence) {
        (Some(a), Some(b)) => format!("records {a} to {b}"),
        _ => "records unknown".to_owned(),
    };
    format!(
        "{} ({range}, {} byte(s), sha256 {}), named by the manifest at {at}",
        named.file, named.bytes, named.sha256
    )
}

/// Compares the file given `i` with what `named` says of it.
fn compare(
    named: &Named,
    what: &str,
    i: usize,
    files: &[PathBuf],
    state: &State<'_>,
) -> Result<(), Stop> {
    let shown = state.report.files[i].file.clone();
    let last_line = state.report.files[i].lines.max(1);
    let Some(path) = files.get(i) else { return Ok(()) };
    let (digest, length) = prefix_digest(path, named.bytes).map_err(|e| {
        Stop::Unreadable(Kind::Unreadable, shown.clone(), None, format!("cannot read: {e}"))
    })?;
    if length < named.bytes {
        return Err(Stop::Tampered(
            Kind::Truncated,
            Location { file: shown.clone(), line: last_line },
            format!("{shown} is {length} byte(s), shorter than {what}: it was cut short"),
        ));
    }
    if digest != named.sha256 {
        return Err(Stop::Tampered(
            Kind::Replaced,
            Location { file: shown.clone(), line: 1 },
            format!(
                "the first {} byte(s) of {shown} hash to sha256 {digest}, not as {what} says: \
                 the file was replaced or changed",
                named.bytes
            ),
        ));
    }
    if named.closed == "rotation" && length > named.bytes {
        return Err(Stop::Tampered(
            Kind::Replaced,
            Location { file: shown.clone(), line: last_line },
            format!(
                "{shown} is {length} byte(s), but {what} closed it at a rotation: bytes were \
                 added after it was closed"
            ),
        ));
    }
    Ok(())
}
