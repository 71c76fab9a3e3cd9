//! The audit log's file: opening it, following its path, writing to it.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::super::AuditError;

/// Which file a handle or a path leads to: the device and inode numbers (`None` where the
/// platform has none to give).
pub(crate) type FileId = Option<(u64, u64)>;

pub(super) fn file_id(meta: &std::fs::Metadata) -> FileId {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// The file `path` leads to now, following symbolic links as opening it does.
pub(crate) fn path_id(path: &Path) -> io::Result<FileId> {
    std::fs::metadata(path).map(|meta| file_id(&meta))
}

/// Creates the directory, opens `path` for appending, makes sure the file ends with a
/// newline (so that the next record starts a line of its own), and syncs the directory, so
/// that the file's name (new, or new since a rotation renamed the old one) survives a power
/// failure as the records synced into it do.
pub(crate) fn open_file(path: &Path) -> Result<(File, FileId), AuditError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir)
            .map_err(|source| AuditError::CreateDir { path: dir.to_owned(), source })?;
    }
    let open = || -> io::Result<(File, FileId)> {
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        // Client addresses and URLs are personal data in many places: readable by the owner and
        // its group only, when the file is created (an existing file keeps its mode).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o640);
        let mut file = options.open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory"));
        }
        if meta.is_file() && meta.len() > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::End(-1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        if meta.is_file() {
            sync_dir(dir.unwrap_or(Path::new(".")))?;
        }
        Ok((file, file_id(&meta)))
    };
    open().map_err(|source| AuditError::Open { path: path.to_owned(), source })
}

/// Syncs a directory's entries to disk. A file system that cannot sync directories (it
/// answers `EINVAL`) has nothing more to offer, and is not an error.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir).and_then(|d| d.sync_all()) {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
        other => other,
    }
}

/// Writes as much of `bytes` as the file takes: how many bytes it took, and the error that
/// stopped it, if any. Knowing how far a failed write got is what lets each record be counted
/// once, as written or as lost.
pub(super) fn write_some(file: &mut File, bytes: &[u8]) -> (usize, Option<io::Error>) {
    let mut done = 0;
    while done < bytes.len() {
        match file.write(&bytes[done..]) {
            Ok(0) => return (done, Some(io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

pub(super) fn into_io(e: AuditError) -> io::Error {
    match e {
        AuditError::CreateDir { source, .. }
        | AuditError::Open { source, .. }
        | AuditError::Write { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}
