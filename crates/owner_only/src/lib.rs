//! Private keys, and the directories that hold them, must be their owner's alone: the mode
//! check shared by the interception CA's key (`robots_proxy::tls::ca`), the Web Bot Auth
//! signing keys (`robots_proxy::signing::keys`) and the fleet's key file. A file others may
//! read gives the key away; a directory others may write lets them replace a key (unlink, then
//! create) with one they know. And such files are written whole or not at all ([`write_new`]).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::path::Path;

/// The bits a private key file must not have: any permission for its group or others (as SSH
/// refuses a private key that others can read).
pub const KEY_FILE: u32 = 0o077;

/// The bits a directory of private keys must not have: write permission for its group or
/// others.
pub const KEY_DIR: u32 = 0o022;

/// The permission bits of `path` (symbolic links followed) when any of `forbidden` is among
/// them; `None` when none is.
pub fn too_open(path: &Path, forbidden: u32) -> std::io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    Ok((mode & forbidden != 0).then_some(mode))
}

/// Writes `bytes` to `path`, which must not exist, whole or not at all: into a hidden
/// temporary file beside it (`.NAME.….partial`, created with `mode`), synced, linked in under
/// its name (never over an existing file: [`std::io::ErrorKind::AlreadyExists`]), then the
/// directory synced, so that the name is durable. On an error the temporary file is removed;
/// a process killed meanwhile leaves only that hidden file, which blocks no name.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist_noclobber(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_forbidden_bits_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k");
        std::fs::write(&file, "x").unwrap();
        for (mode, file_bad, dir_bad) in [
            (0o600, false, false),
            (0o400, false, false),
            (0o640, true, false),
            (0o620, true, true),
        ] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(too_open(&file, KEY_FILE).unwrap().is_some(), file_bad, "{mode:o}");
            assert_eq!(too_open(&file, KEY_DIR).unwrap().is_some(), dir_bad, "{mode:o}");
        }
        assert_eq!(too_open(&file, KEY_DIR).unwrap(), Some(0o620));
        assert!(too_open(&dir.path().join("missing"), KEY_FILE).is_err());
    }
}
