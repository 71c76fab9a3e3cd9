//! Manifests of closed files (issue 39, item 2, as CloudTrail's digest files name every log
//! file with its hash): at a rotation, the new file's first record names the file just closed
//! (its name, length and SHA-256, its first and last `event.sequence`), and at a clean stop
//! the file names the bytes written to it so far, before its closing checkpoint. `audit
//! verify` checks the files given against them: a file truncated, replaced or missing (the
//! oldest one deleted, review M7) is named.

use std::fs::File;
use std::io;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{into_io, Outcome, Sink};

/// What a manifest says of a file.
struct Described {
    name: String,
    bytes: u64,
    sha256: String,
    first_sequence: Option<u64>,
}

/// Most bytes of a first line read to find its `event.sequence` (a `robots_version` record
/// holds a whole robots.txt body).
const FIRST_LINE_MAX: usize = 64 << 20;

/// Reads `file` from its start: its length, SHA-256 and the `event.sequence` of its first line.
fn describe(file: &File, name: String) -> io::Result<Described> {
    use std::os::unix::fs::FileExt;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    let mut first = Vec::new();
    let mut first_done = false;
    loop {
        let n = match file.read_at(&mut buffer, offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buffer[..n];
        hasher.update(chunk);
        if !first_done {
            match chunk.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    first.extend_from_slice(&chunk[..end]);
                    first_done = true;
                }
                None => first.extend_from_slice(chunk),
            }
            first_done |= first.len() > FIRST_LINE_MAX;
        }
        offset += n as u64;
    }
    let first_sequence = serde_json::from_slice::<serde_json::Value>(&first)
        .ok()
        .and_then(|v| v.get("event.sequence").and_then(serde_json::Value::as_u64));
    let sha256 = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(Described { name, bytes: offset, sha256, first_sequence })
}

/// The name the open file has now: where `/proc/self/fd` says it is (after a rename, its new
/// name), else the name of the path it was opened at.
fn current_name(file: &File, path: &Path) -> String {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if let Ok(link) = link {
            let text = link.to_string_lossy();
            if !text.ends_with(" (deleted)") {
                if let Some(name) = link.file_name() {
                    return name.to_string_lossy().into_owned();
                }
            }
        }
    }
    let _ = file;
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

impl Sink {
    /// The `audit_manifest` line of the open file as it is now (`closed`: `rotation` or
    /// `stop`); `None` without a checkpoint key (a manifest no checkpoint signs proves
    /// nothing), without a file, for an empty one, or when it cannot be read (logged).
    fn manifest_of_open(&self, closed: &'static str) -> Option<Vec<u8>> {
        self.key.as_ref()?;
        let (file, _) = self.file.as_ref()?;
        let name = current_name(file, &self.path);
        let described = match describe(file, name) {
            Ok(d) if d.bytes > 0 => d,
            Ok(_) => return None,
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cannot read the audit log back for its manifest");
                return None;
            }
        };
        let mut record = serde_json::Map::new();
        let mut put = |k: &str, value: serde_json::Value| {
            record.insert(k.to_owned(), value);
        };
        let what = match closed {
            "rotation" => "closed at a rotation",
            _ => "up to this record, at a clean stop",
        };
        put("@timestamp", super::timestamp(std::time::SystemTime::now()).into());
        put("event.action", "audit_manifest".into());
        put("event.outcome", "success".into());
        put(
            "event.reason",
            format!(
                "the audit file {} {what}: {} byte(s), sha256 {}",
                described.name, described.bytes, described.sha256
            )
            .into(),
        );
        put("audit.manifest.closed", closed.into());
        put("audit.manifest.file", described.name.into());
        put("audit.manifest.bytes", described.bytes.into());
        put("audit.manifest.sha256", described.sha256.into());
        if let Some(first) = described.first_sequence {
            put("audit.manifest.first_sequence", first.into());
        }
        put("audit.manifest.last_sequence", self.chain.sequence.into());
        Some(super::close_record(record, self.node.get().map(String::as_str)))
    }

    /// Writes a checkpoint (with a key, when records came since the last), syncs and closes
    /// the file, keeps the chain's state, then opens the path again; the new file starts
    /// with the manifest of the one closed (and a checkpoint that signs it, with a key).
    pub(super) fn reopen(&mut self) -> (Outcome, Result<(), io::Error>) {
        let mut outcome = self.write(&[], true, true, false);
        let closed = self.file.as_ref().map(|(_, id)| *id).filter(Option::is_some);
        let manifest = outcome.errors.is_empty().then(|| self.manifest_of_open("rotation"));
        if outcome.errors.is_empty() {
            self.save_state_unless_saved();
        }
        self.file = None;
        let opened = self.open().map_err(into_io);
        // A reopen of the same file (a SIGHUP without a rename: a reload) closed nothing.
        let same = closed.is_some() && self.file.as_ref().map(|(_, id)| *id) == closed;
        let manifest = manifest.filter(|_| !same);
        if let (Ok(()), Some(Some(line))) = (&opened, manifest) {
            self.manifest = Some(line);
            let written = self.write(&[], true, true, false);
            if written.errors.is_empty() {
                self.save_state_unless_saved();
            }
            outcome.errors.extend(written.errors);
            outcome.synced |= written.synced;
            outcome.sync_failed |= written.sync_failed;
        }
        outcome.open = self.file.as_ref().map(|(_, id)| *id);
        (outcome, opened)
    }

    /// At a clean stop, after the last records: the manifest of the file so far, then the
    /// closing checkpoint (with a key), synced.
    pub(super) fn close_with_manifest(&mut self) -> Outcome {
        // Nothing new since the last checkpoint (an idle stop): it covers the file already.
        if self.chain.sequence <= self.checkpointed {
            return Outcome::default();
        }
        self.manifest = self.manifest_of_open("stop");
        if self.manifest.is_none() {
            return Outcome::default();
        }
        self.write(&[], true, true, false)
    }
}
