//! Key sets with validity periods for `audit verify --public-key` (issue 39, item 4; review
//! M3): the checkpoint key changes (a restart with another `audit.checkpoint_key`, which the
//! log names in an `audit_key_changed` record), and an intact log then holds checkpoints of
//! several keys. Each key may carry a window (`valid_from`, `valid_until`, RFC 3339, members
//! of its JWK); a checkpoint verifies when the key its `audit.checkpoint.keyid` names is in
//! the set and valid at the checkpoint's `@timestamp`. A key not in the set, or one outside
//! its window, is tampering, named at the checkpoint's line.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::checkpoint::{PublicKey, PublicKeyError};

/// One key of a set, with its window.
#[derive(Debug, Clone)]
pub struct KeyEntry {
    /// The key.
    pub key: PublicKey,
    /// Checkpoints signed before this time are not its (`valid_from`).
    pub valid_from: Option<(SystemTime, String)>,
    /// Checkpoints signed at or after this time are not its (`valid_until`).
    pub valid_until: Option<(SystemTime, String)>,
}

/// The keys `audit verify` accepts checkpoints of.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    entries: Vec<KeyEntry>,
}

impl KeySet {
    /// A set of one key, valid at any time.
    pub fn single(key: PublicKey) -> KeySet {
        KeySet { entries: vec![KeyEntry { key, valid_from: None, valid_until: None }] }
    }

    /// Reads every file (`--public-key`, repeated): a JWK, a PEM `PUBLIC KEY`, or a JWK Set
    /// (`{"keys": [...]}`) of any number of Ed25519 keys; a JWK may carry `valid_from` and
    /// `valid_until` (RFC 3339).
    pub fn read(paths: &[PathBuf]) -> Result<KeySet, PublicKeyError> {
        let mut set = KeySet::default();
        for path in paths {
            set.read_one(path)
                .map_err(|reason| PublicKeyError { path: path.to_owned(), reason })?;
        }
        Ok(set)
    }

    fn read_one(&mut self, path: &Path) -> Result<(), String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
        let value = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
        let Some(value) = value.filter(serde_json::Value::is_object) else {
            // A PEM public key: valid at any time.
            let key = PublicKey::parse(&bytes)?;
            self.entries.push(KeyEntry { key, valid_from: None, valid_until: None });
            return Ok(());
        };
        let jwks = match value.get("keys") {
            Some(serde_json::Value::Array(keys)) if !keys.is_empty() => keys.clone(),
            Some(_) => return Err("a JWK Set whose \"keys\" is not a list of keys".into()),
            None => vec![value],
        };
        for (i, jwk) in jwks.iter().enumerate() {
            let which = if jwks.len() > 1 { format!("key {}: ", i + 1) } else { String::new() };
            let key =
                PublicKey::parse(jwk.to_string().as_bytes()).map_err(|e| format!("{which}{e}"))?;
            let time = |name: &str| -> Result<Option<(SystemTime, String)>, String> {
                match jwk.get(name) {
                    None | Some(serde_json::Value::Null) => Ok(None),
                    Some(serde_json::Value::String(text)) => {
                        humantime::parse_rfc3339(text).map(|t| Some((t, text.clone()))).map_err(
                            |e| format!("{which}{name} {text:?} is not an RFC 3339 time: {e}"),
                        )
                    }
                    Some(other) => Err(format!("{which}{name} is not a string: {other}")),
                }
            };
            let (valid_from, valid_until) = (time("valid_from")?, time("valid_until")?);
            if let (Some((a, at)), Some((b, bt))) = (&valid_from, &valid_until) {
                if b <= a {
                    return Err(format!("{which}valid_until {bt} is not after valid_from {at}"));
                }
            }
            self.entries.push(KeyEntry { key, valid_from, valid_until });
        }
        Ok(())
    }

    /// The key ids of the set, comma-separated (the report's `keyid`).
    pub(crate) fn keyids(&self) -> String {
        let mut ids: Vec<&str> = self.entries.iter().map(|e| e.key.keyid()).collect();
        ids.dedup();
        ids.join(",")
    }

    /// Any key of the set with this key id (to read a note before its window is checked).
    pub(crate) fn by_keyid(&self, keyid: &str) -> Option<&PublicKey> {
        self.entries.iter().map(|e| &e.key).find(|k| k.keyid() == keyid)
    }

    /// The key that signs a checkpoint of `keyid` at `at` (its `@timestamp`), or why none
    /// does: not in the set, or outside its window.
    pub fn valid(&self, keyid: &str, at: Option<SystemTime>) -> Result<&PublicKey, String> {
        let mut windows = Vec::new();
        for entry in self.entries.iter().filter(|e| e.key.keyid() == keyid) {
            let after_start = match (&entry.valid_from, at) {
                (None, _) => true,
                (Some((from, _)), Some(at)) => at >= *from,
                (Some(_), None) => false,
            };
            let before_end = match (&entry.valid_until, at) {
                (None, _) => true,
                (Some((until, _)), Some(at)) => at < *until,
                (Some(_), None) => false,
            };
            if after_start && before_end {
                return Ok(&entry.key);
            }
            let from = entry.valid_from.as_ref().map_or("any time", |(_, t)| t.as_str());
            let until = entry.valid_until.as_ref().map_or("any time", |(_, t)| t.as_str());
            windows.push(format!("from {from} until {until}"));
        }
        if windows.is_empty() {
            return Err(format!(
                "the checkpoint is signed by key {keyid:?}, which is not in the key set given \
                 ({}): an unknown key",
                self.keyids()
            ));
        }
        Err(format!(
            "the checkpoint is signed by key {keyid:?} at a time outside its validity ({}): \
             the key was not valid then",
            windows.join("; ")
        ))
    }
}
