//! The archive's files under `state_dir/robots-archive/` (see `docs/evidence.md`, "The
//! archive"):
//!
//! ```text
//! robots-archive/
//!   bodies/ab/ab12…ef        the bytes of one robots.txt, named by their SHA-256 (64 hex)
//!   authorities/9f…31.json   one authority's windows, named by the SHA-256 of its name
//! ```
//!
//! Every file is written whole or not at all: a hidden temporary file beside it, synced,
//! renamed into place, the directory synced. A process killed meanwhile leaves the old file
//! (or none) and at most a hidden `.….partial` file, which no reader looks at. A body is
//! written before the first authority file that names it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::history::History;
use super::ArchiveError;
use crate::robots_version::sha256_hex;

/// The archive's directory under `state_dir`.
pub const DIR: &str = "robots-archive";

/// Temporary files older than this are left-overs of a crash, removed when pruning.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// The archive's directory of `state_dir`.
pub(super) fn root(state_dir: &Path) -> PathBuf {
    state_dir.join(DIR)
}

/// Whether `sha256` is a digest as the archive names bodies: 64 lowercase hex digits.
pub(super) fn is_digest(sha256: &str) -> bool {
    sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Where the body of `sha256` (a checked digest) is kept.
pub(super) fn body_path(root: &Path, sha256: &str) -> PathBuf {
    root.join("bodies").join(&sha256[..2]).join(sha256)
}

/// Where the windows of `authority` are kept.
pub(super) fn authority_path(root: &Path, authority: &str) -> PathBuf {
    root.join("authorities").join(format!("{}.json", sha256_hex(authority.as_bytes())))
}

/// Writes `bytes` to `path` whole or not at all, replacing what is there (the directories
/// are made when missing).
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    fs::File::open(dir)?.sync_all()
}

/// Writes the body of `sha256` unless it is there already, whole (content-addressed: the same
/// name is the same bytes). A file there whose bytes do not hash to its name is written over
/// (issue 39, L2: a corrupt body was never repaired, however often the version was fetched).
pub(super) fn write_body(root: &Path, sha256: &str, body: &[u8]) -> io::Result<()> {
    if body_intact(root, sha256) {
        return Ok(());
    }
    write_atomically(&body_path(root, sha256), body)
}

/// Whether the body of `sha256` is kept and hashes to its name. Logs a body that does not.
pub(super) fn body_intact(root: &Path, sha256: &str) -> bool {
    match read_body(root, sha256) {
        Ok(found) => found.is_some(),
        Err(e) => {
            tracing::warn!(error = %e, "robots.txt archive: a body is not what its name says; it is written again from the fetched bytes");
            false
        }
    }
}

/// Writes the windows of one authority.
pub(super) fn write_history(root: &Path, history: &History) -> io::Result<()> {
    let mut text = serde_json::to_vec_pretty(history).map_err(io::Error::other)?;
    text.push(b'\n');
    write_atomically(&authority_path(root, &history.authority), &text)
}

/// Every authority's windows kept under `root` (none when the directory does not exist), and
/// the authority files that could not be used, each named with why: one that cannot be read or
/// does not parse, and one the proxy set aside as `NAME.json.unreadable`, is skipped rather
/// than failing the whole read (issue 39, L2). Fails only on a directory that cannot be listed.
pub(super) fn read_histories(
    root: &Path,
) -> Result<(BTreeMap<String, History>, Vec<SkippedFile>), ArchiveError> {
    let dir = root.join("authorities");
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(source) => return Err(ArchiveError::Read { path: dir, source }),
    };
    let mut out = BTreeMap::new();
    let mut skipped = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ArchiveError::Read { path: dir.clone(), source })?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if name.ends_with(".json.unreadable") {
            let why = "set aside by the proxy because it did not parse".to_owned();
            skipped.push(SkippedFile { path, why });
            continue;
        }
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(e) => {
                skipped.push(SkippedFile { path, why: format!("cannot be read: {e}") });
                continue;
            }
        };
        match serde_json::from_slice::<History>(&text) {
            Ok(history) => {
                out.insert(history.authority.clone(), history);
            }
            Err(e) => skipped.push(SkippedFile { path, why: format!("does not parse: {e}") }),
        }
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((out, skipped))
}

/// An authority file a reader skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    /// The file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub why: String,
}

impl std::fmt::Display for SkippedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

/// The windows kept under `root` for `authority`, if any; an error when the file (or its
/// directory) cannot be read. With `set_aside`, a file that does not parse is renamed
/// `NAME.unreadable` (and logged).
pub(super) fn read_history(
    root: &Path,
    authority: &str,
    set_aside: bool,
) -> io::Result<Option<History>> {
    let path = authority_path(root, authority);
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(match serde_json::from_slice::<History>(&text) {
        Ok(history) if history.authority == authority => Some(history),
        Ok(_) => None,
        Err(e) => {
            if set_aside {
                let aside = path.with_extension("json.unreadable");
                tracing::warn!(
                    path = %path.display(), error = %e, aside = %aside.display(),
                    "robots.txt archive: an authority's file does not parse; set aside"
                );
                let _ = fs::rename(&path, &aside);
            }
            None
        }
    })
}

/// The authority files a pass over the archive could not use: what [`for_each_history`] could
/// not read or parse, and the files set aside as `NAME.json.unreadable`.
#[derive(Debug, Default)]
pub(super) struct Unusable {
    /// The files, as found.
    pub(super) files: Vec<PathBuf>,
    /// Every body digest (64 lowercase hex digits) that appears in their text, parsed or not:
    /// a body any of them may name.
    pub(super) digests: BTreeSet<String>,
    /// Whether the directory of authority files itself could not be listed.
    pub(super) unlisted: bool,
    /// Whether a file's bytes could not be read (the digests it names are unknown).
    pub(super) unread: bool,
}

impl Unusable {
    /// Whether every authority file was read and parsed.
    pub(super) fn is_empty(&self) -> bool {
        self.files.is_empty() && !self.unlisted
    }

    /// Whether [`Unusable::digests`] holds every digest the unusable files may name: every
    /// file was listed and its bytes read (parsed or not).
    pub(super) fn digests_known(&self) -> bool {
        !self.unlisted && !self.unread
    }
}

/// Calls `each` with every authority's windows kept under `root`, one file at a time, so that
/// a pass over the archive holds one in memory. The files it could not use (unreadable, not
/// parsable, or set aside as `.json.unreadable`) are returned, with every digest their text
/// names: a pass that removes bodies must keep those (issue 39, C2: a corrupt file must never
/// get the bodies it names deleted), and remove none when a file could not be read at all.
pub(super) fn for_each_history(root: &Path, mut each: impl FnMut(History)) -> Unusable {
    let mut unusable = Unusable::default();
    let dir = root.join("authorities");
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return unusable,
        Err(_) => {
            unusable.unlisted = true;
            return unusable;
        }
    };
    for entry in entries {
        let Ok(entry) = entry else {
            unusable.unlisted = true;
            continue;
        };
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let set_aside = name.ends_with(".json.unreadable");
        if !set_aside && path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(_) => {
                unusable.files.push(path);
                unusable.unread = true;
                continue;
            }
        };
        if !set_aside {
            if let Ok(history) = serde_json::from_slice::<History>(&text) {
                each(history);
                continue;
            }
        }
        digests_in(&text, &mut unusable.digests);
        unusable.files.push(path);
    }
    unusable
}

/// Adds to `out` every run of exactly 64 lowercase hex digits in `text` (the digests a file
/// that does not parse may still name).
fn digests_in(text: &[u8], out: &mut BTreeSet<String>) {
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    let mut start = None;
    for (i, b) in text.iter().chain(std::iter::once(&b' ')).enumerate() {
        match (hex(b), start) {
            (true, None) => start = Some(i),
            (false, Some(from)) => {
                if i - from == 64 {
                    if let Ok(digest) = std::str::from_utf8(&text[from..i]) {
                        out.insert(digest.to_owned());
                    }
                }
                start = None;
            }
            _ => {}
        }
    }
}

/// The body of `sha256`, if kept and intact (its bytes hash to its name).
pub(super) fn read_body(root: &Path, sha256: &str) -> Result<Option<Bytes>, ArchiveError> {
    if !is_digest(sha256) {
        return Ok(None);
    }
    let path = body_path(root, sha256);
    match fs::read(&path) {
        Ok(bytes) if sha256_hex(&bytes) == sha256 => Ok(Some(Bytes::from(bytes))),
        Ok(_) => Err(ArchiveError::Corrupt { path }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ArchiveError::Read { path, source }),
    }
}

/// The digests of every body kept under `root`.
pub(super) fn body_digests(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(fans) = fs::read_dir(root.join("bodies")) else { return out };
    for fan in fans.flatten() {
        let Ok(files) = fs::read_dir(fan.path()) else { continue };
        for file in files.flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            if is_digest(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// What `path` takes on disk, as `du` counts it: its blocks on Unix, else its length; 0 when
/// it is not there. Symbolic links are not followed.
pub(super) fn file_bytes(path: &Path) -> u64 {
    fs::symlink_metadata(path).map(|m| on_disk(&m)).unwrap_or(0)
}

fn on_disk(meta: &fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.blocks().saturating_mul(512)
    }
    #[cfg(not(unix))]
    {
        meta.len()
    }
}

/// What the archive under `root` takes on disk, as `du -s` counts it: `root` and every
/// directory and file below it (`.partial` and `.json.unreadable` files too: they take room
/// on the volume); 0 when there is no archive.
pub(super) fn archive_bytes(root: &Path) -> u64 {
    let mut total = 0u64;
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(meta) = fs::symlink_metadata(&dir) else { continue };
        total = total.saturating_add(on_disk(&meta));
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(entry.path());
            } else {
                total = total.saturating_add(on_disk(&meta));
            }
        }
    }
    total
}

/// Removes the body of `sha256`.
pub(super) fn remove_body(root: &Path, sha256: &str) -> io::Result<()> {
    match fs::remove_file(body_path(root, sha256)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the temporary files a crash left behind (hidden `.….partial`, older than an hour).
pub(super) fn remove_stale_temporaries(root: &Path) {
    let now = SystemTime::now();
    let mut dirs = vec![root.join("authorities")];
    if let Ok(fans) = fs::read_dir(root.join("bodies")) {
        dirs.extend(fans.flatten().map(|f| f.path()));
    }
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let written = entry.metadata().and_then(|m| m.modified()).unwrap_or(now);
            let old = now.duration_since(written).unwrap_or_default() > STALE_TEMP;
            if name.starts_with('.') && name.ends_with(".partial") && old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ArchiveReader;

    /// A process killed while writing leaves hidden `.partial` files beside the real ones
    /// (never a half-written file under a real name): the archive reads back without them.
    #[test]
    fn a_write_cut_short_leaves_an_archive_that_reads_back() {
        let state = tempfile::tempdir().unwrap();
        let root = root(state.path());
        let body = b"User-agent: *\nDisallow: /x\n";
        let sha = sha256_hex(body);
        write_body(&root, &sha, body).unwrap();
        let mut history = History::new("http://a.test", "http://a.test/robots.txt");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        history.note(
            crate::Window {
                sha256: Some(sha.clone()),
                size: Some(body.len() as u64),
                status: Some(200),
                error: None,
                state: "fresh".to_owned(),
                consequence: crate::Consequence::Rules,
                first_fetched: t,
                last_confirmed: t,
                replaced_at: None,
                folds_case: false,
                expires_at: None,
                fetches: Vec::new(),
            },
            t,
        );
        write_history(&root, &history).unwrap();
        // What a kill -9 in the middle of the next writes leaves behind.
        let name = authority_path(&root, "http://a.test");
        let file = name.file_name().unwrap().to_string_lossy().into_owned();
        fs::write(root.join("authorities").join(format!(".{file}.x1.partial")), b"{\"v\":1,\"auth")
            .unwrap();
        fs::write(body_path(&root, &sha).with_file_name(format!(".{sha}.x2.partial")), b"User")
            .unwrap();
        let reader = ArchiveReader::open(state.path()).unwrap();
        assert_eq!(reader.authorities(), ["http://a.test"]);
        assert_eq!(reader.windows("http://a.test"), history.windows);
        assert_eq!(reader.body(&sha).as_deref(), Some(&body[..]));
        assert_eq!(body_digests(&root), std::slice::from_ref(&sha));
        // A body file whose bytes were changed is refused, not returned.
        fs::write(body_path(&root, &sha), b"User-agent: *\nAllow: /\n").unwrap();
        assert!(matches!(reader.body_checked(&sha), Err(ArchiveError::Corrupt { .. })));
        assert_eq!(reader.body(&sha), None);
        assert_eq!(reader.body("../../etc/passwd"), None);
    }
}
