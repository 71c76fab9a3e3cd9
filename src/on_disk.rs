//! The files a configuration names, and what they hold: a reload compares contents, not paths.
//!
//! A certificate renewed by certbot or cert-manager, a rotated CA or a client CA bundle with
//! one CA taken out keeps its path; only its contents change. [`FileContents`] holds, for
//! every key that names a file read when the proxy starts or reloads, the path and a SHA-256
//! digest of the bytes read then, so that a reload can tell a file changed on disk: one a
//! reload applies is loaded again ([`FileContents::changed`]), and one read only at start is
//! reported as needing a restart (`restart_required`, [`ON_DISK`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::Config;

/// The reason a file read only at start, changed on disk at the same path, is reported under
/// `restart_required`.
pub const ON_DISK: &str = "file changed on disk; restart to apply (it is read at start only)";

/// Every key naming a file whose contents the proxy reads at start or on a reload (the users
/// file, which every reload reads again whatever changed, is not among them).
pub const FILE_KEYS: &[&str] = &[
    "access.client_ca",
    "audit.checkpoint_key",
    "https.ca_cert",
    "https.ca_key",
    "https.upstream_ca_file",
    "proxy.tls_certificate",
    "proxy.tls_key",
];

/// One file a key names: its path and the digest of its contents (`None`: it could not be
/// read).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    path: PathBuf,
    digest: Option<[u8; 32]>,
}

/// The files a configuration names, by key, with a digest of each one's contents as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileContents {
    files: BTreeMap<&'static str, Seen>,
}

impl FileContents {
    /// Reads every file `config` names ([`FILE_KEYS`]; the interception CA only with
    /// `https.mode = "intercept"`, at its default place under `state_dir` unless named).
    pub fn read(config: &Config) -> Self {
        let mut files = BTreeMap::new();
        for (key, path) in named(config) {
            let digest = digest(&path);
            files.insert(key, Seen { path, digest });
        }
        FileContents { files }
    }

    /// The keys naming, in both, the same path whose contents differ (or became readable or
    /// unreadable): files changed on disk. A key whose path changed is a configuration
    /// change, reported as such, and is not here.
    pub fn changed(&self, now: &FileContents) -> Vec<&'static str> {
        self.files
            .iter()
            .filter(|(key, seen)| {
                now.files.get(*key).is_some_and(|new| new.path == seen.path && new != *seen)
            })
            .map(|(key, _)| *key)
            .collect()
    }

    /// The path `key` names, when it names one.
    pub fn path(&self, key: &str) -> Option<&Path> {
        self.files.get(key).map(|seen| seen.path.as_path())
    }
}

/// Each key of [`FILE_KEYS`] that names a file in `config`, with the file.
fn named(config: &Config) -> Vec<(&'static str, PathBuf)> {
    let mut out = Vec::new();
    let mut add = |key: &'static str, path: Option<&PathBuf>| {
        if let Some(path) = path {
            out.push((key, path.clone()));
        }
    };
    add("access.client_ca", config.access.client_ca.as_ref());
    add("audit.checkpoint_key", config.audit.checkpoint_key.as_ref());
    add("https.upstream_ca_file", config.https.upstream_ca_file.as_ref());
    add("proxy.tls_certificate", config.proxy.tls_certificate.as_ref());
    add("proxy.tls_key", config.proxy.tls_key.as_ref());
    if config.https.mode == crate::tls::HttpsMode::Intercept {
        let (ca, _) = crate::preflight::ca_files(config);
        add("https.ca_cert", Some(&ca.cert));
        add("https.ca_key", Some(&ca.key));
    }
    debug_assert!(out.iter().all(|(key, _)| FILE_KEYS.contains(key)));
    out
}

fn digest(path: &Path) -> Option<[u8; 32]> {
    std::fs::read(path).ok().map(|bytes| Sha256::digest(bytes).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_rewritten_at_the_same_path_is_changed_a_new_path_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.pem"), dir.path().join("b.pem"));
        std::fs::write(&a, "one").unwrap();
        std::fs::write(&b, "two").unwrap();
        let mut config = Config::default();
        config.https.upstream_ca_file = Some(a.clone());
        config.proxy.tls_certificate = Some(b.clone());
        let before = FileContents::read(&config);
        assert!(before.changed(&FileContents::read(&config)).is_empty());
        std::fs::write(&a, "one, renewed").unwrap();
        let now = FileContents::read(&config);
        assert_eq!(before.changed(&now), vec!["https.upstream_ca_file"]);
        std::fs::remove_file(&b).unwrap();
        assert_eq!(
            before.changed(&FileContents::read(&config)),
            vec!["https.upstream_ca_file", "proxy.tls_certificate"]
        );
        let mut moved = config.clone();
        moved.https.upstream_ca_file = Some(b);
        assert_eq!(before.changed(&FileContents::read(&moved)), vec!["proxy.tls_certificate"]);
        assert_eq!(before.path("https.upstream_ca_file"), Some(a.as_path()));
    }
}
