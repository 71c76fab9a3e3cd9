//! Checkpoints as C2SP `tlog-checkpoint` signed notes (c2sp.org/tlog-checkpoint,
//! c2sp.org/signed-note), the text witnesses and transparency-log verifiers read:
//!
//! ```text
//! <origin>\n<tree size>\n<base64 root hash>\n\n— <key name> <base64(key ID || Ed25519 signature)>\n
//! ```
//!
//! The signature is over the note text (the three lines, final newline included); the key
//! name is the origin (tlog-checkpoint: it SHOULD match); the key ID is the first four bytes
//! of SHA-256(key name || 0x0A || 0x01 || the 32-byte public key) (signed-note, Ed25519).
//! The origin names one tree of the log: `robots-proxy/audit/<16 hex digits>`, drawn at
//! random when a tree starts (a new chain), so that no two trees share an origin and a log
//! never signs two inconsistent checkpoints under one origin.

use base64ct::{Base64, Encoding};
use sha2::{Digest, Sha256};

use super::checkpoint::PublicKey;
use super::merkle::{self, Hash};
use robots_proxy_identity::keys::SigningKey;

/// The signature type byte of Ed25519 in a signed note.
const ED25519: u8 = 0x01;

/// What a checkpoint says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The first line.
    pub origin: String,
    /// The number of leaves.
    pub size: u64,
    /// The root hash.
    pub root: Hash,
}

/// Why a note is not a checkpoint signed by the key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NoteError {
    /// Not in the signed-note form.
    #[error("not a signed note: {0}")]
    Form(&'static str),
    /// Not a checkpoint's text.
    #[error("not a tlog-checkpoint: {0}")]
    Checkpoint(&'static str),
    /// No signature line of the key.
    #[error("no signature by key {0} (key name {1}): signed by another key, or not signed")]
    NoSignature(String, String),
    /// The key's signature does not verify.
    #[error("the signature of key {0} does not verify: the note was changed or forged")]
    BadSignature(String),
}

/// A fresh origin for a new tree.
pub(crate) fn new_origin() -> String {
    let mut bytes = [0u8; 8];
    // No randomness (never seen): the time still tells trees apart.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        bytes = now.map(|d| d.as_nanos() as u64).unwrap_or(0).to_be_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("robots-proxy/audit/{hex}")
}

/// The note text of a checkpoint.
pub fn text(origin: &str, size: u64, root: &Hash) -> String {
    format!("{origin}\n{size}\n{}\n", merkle::encode(root))
}

/// The signed-note key ID of an Ed25519 key under `name`.
pub(crate) fn key_id(name: &str, public: &[u8]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', ED25519]);
    h.update(public);
    let digest = h.finalize();
    [digest[0], digest[1], digest[2], digest[3]]
}

/// The checkpoint signed by `key` (the key name is the origin).
pub fn sign(key: &SigningKey, origin: &str, size: u64, root: &Hash) -> String {
    let text = text(origin, size, root);
    let mut signature = key_id(origin, key.public_key()).to_vec();
    signature.extend_from_slice(&key.sign(text.as_bytes()));
    format!("{text}\n\u{2014} {origin} {}\n", Base64::encode_string(&signature))
}

/// The checkpoint in `note`, when a signature line of `key` (under the origin as its key
/// name) verifies; other signatures (witnesses' cosignatures) are left alone.
pub fn open(note: &str, key: &PublicKey) -> Result<Checkpoint, NoteError> {
    let at = note.rfind("\n\n").ok_or(NoteError::Form("no blank line before the signatures"))?;
    let (text, signatures) = (&note[..at + 1], &note[at + 2..]);
    if note.bytes().any(|b| b < 0x20 && b != b'\n') {
        return Err(NoteError::Form("a control character"));
    }
    let checkpoint = parse_text(text)?;
    let name = checkpoint.origin.as_str();
    let id = key_id(name, key.raw());
    let mut found = false;
    for line in signatures.lines() {
        let rest = line.strip_prefix("\u{2014} ").ok_or(NoteError::Form("a signature line"))?;
        let (signer, b64) = rest.split_once(' ').ok_or(NoteError::Form("a signature line"))?;
        let Ok(bytes) = Base64::decode_vec(b64) else {
            return Err(NoteError::Form("a signature that is not base64"));
        };
        if signer != name || bytes.len() < 4 || bytes[..4] != id {
            continue;
        }
        found = true;
        if !key.verifies_raw(text.as_bytes(), &bytes[4..]) {
            return Err(NoteError::BadSignature(key.keyid().to_owned()));
        }
    }
    if found {
        Ok(checkpoint)
    } else {
        Err(NoteError::NoSignature(key.keyid().to_owned(), name.to_owned()))
    }
}

/// The checkpoint a note's text says, unverified.
pub(crate) fn parse_text(text: &str) -> Result<Checkpoint, NoteError> {
    let mut lines = text.strip_suffix('\n').ok_or(NoteError::Form("no final newline"))?.split('\n');
    let origin = lines.next().filter(|l| !l.is_empty());
    let origin = origin.ok_or(NoteError::Checkpoint("no origin line"))?.to_owned();
    let size = lines.next().ok_or(NoteError::Checkpoint("no tree size line"))?;
    let leading_zero = size.len() > 1 && size.starts_with('0');
    let digits = size.bytes().all(|b| b.is_ascii_digit());
    let size: u64 = match size.parse::<u64>() {
        Ok(size) if !leading_zero && digits => size,
        _ => return Err(NoteError::Checkpoint("the tree size is not a decimal number")),
    };
    let root = lines.next().ok_or(NoteError::Checkpoint("no root hash line"))?;
    let root =
        merkle::decode(root).ok_or(NoteError::Checkpoint("the root is not 32 bytes of base64"))?;
    Ok(Checkpoint { origin, size, root })
}

#[cfg(test)]
mod tests {
    use super::*;
    use robots_proxy_identity::keys::KeyName;

    #[test]
    fn a_signed_checkpoint_opens_with_its_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let name: KeyName = "audit".parse().unwrap();
        let key = SigningKey::create(&name, &name.file_in(dir.path())).unwrap();
        let other_name: KeyName = "other".parse().unwrap();
        let other = SigningKey::create(&other_name, &other_name.file_in(dir.path())).unwrap();
        let root = merkle::leaf_hash(b"x");
        let origin = new_origin();
        assert!(origin.starts_with("robots-proxy/audit/") && origin.len() == 35);
        let note = sign(&key, &origin, 5, &root);
        let lines: Vec<&str> = note.split('\n').collect();
        assert_eq!(lines[..4], [origin.as_str(), "5", &merkle::encode(&root), ""]);
        assert!(lines[4].starts_with(&format!("\u{2014} {origin} ")));
        let public = PublicKey::of(&key);
        let got = open(&note, &public).unwrap();
        assert_eq!(got, Checkpoint { origin: origin.clone(), size: 5, root });
        // A witness's cosignature after it is ignored.
        let cosigned = format!("{note}\u{2014} witness.example AAAAAAAA\n");
        assert_eq!(open(&cosigned, &public).unwrap().size, 5);
        assert!(matches!(open(&note, &PublicKey::of(&other)), Err(NoteError::NoSignature(..))));
        let forged = note.replacen("\n5\n", "\n6\n", 1);
        assert!(matches!(open(&forged, &public), Err(NoteError::BadSignature(_))));
        assert!(open("nonsense", &public).is_err());
        // The key ID is the one signed-note defines.
        let mut h = Sha256::new();
        h.update(format!("{origin}\n\x01").as_bytes());
        h.update(key.public_key());
        assert_eq!(key_id(&origin, key.public_key()), h.finalize()[..4]);
    }
}
