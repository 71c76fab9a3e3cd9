//! Signed checkpoints of the audit log's chain (`audit.checkpoint_key`): an
//! `audit_checkpoint` record, itself in the chain, that signs the head hash and the number of
//! records before it with an Ed25519 key, so that records before a checkpoint cannot be
//! rewritten (even with every hash recomputed) without the key.
//!
//! The signed message is the text
//!
//! ```text
//! robots-proxy audit checkpoint v1\n<audit.checkpoint.head>\n<audit.checkpoint.records>\n<@timestamp>
//! ```
//!
//! (no newline at the end), the signature is in `audit.checkpoint.signature` (base64url,
//! no padding), the key's id (its JWK thumbprint, as `robots-proxy keys` shows it) in
//! `audit.checkpoint.keyid`.
//!
//! Checkpoints written since issue 39 (H1) are `v2`: they also name the checkpoint before
//! them in the chain (`audit.checkpoint.previous_records`, `audit.checkpoint.previous_signature`,
//! both left out on the first checkpoint of a chain) and the writer's cadence
//! (`audit.checkpoint.interval_ms`), and sign them:
//!
//! ```text
//! robots-proxy audit checkpoint v2\n<head>\n<records>\n<@timestamp>\n<previous_records>\n<previous_signature>\n<interval_ms>
//! ```
//!
//! (the previous checkpoint's members empty when there is none). A removed checkpoint is then
//! itself evidence, and `audit verify` can tell how long records may go unsigned.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64ct::{Base64UrlUnpadded, Encoding};
use ring::signature::{UnparsedPublicKey, ED25519};

use super::timestamp;
use robots_proxy_identity::keys::{Jwk, KeyError, KeyName, SigningKey};

/// The first line of every signed message.
pub(crate) const MESSAGE_TAG: &str = "robots-proxy audit checkpoint v1";

/// `audit.checkpoint_interval` by default.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The first line of every `v2` signed message.
pub(crate) const MESSAGE_TAG_V2: &str = "robots-proxy audit checkpoint v2";

/// The message a `v1` checkpoint signs.
pub fn message(head: &str, records: u64, at: &str) -> String {
    format!("{MESSAGE_TAG}\n{head}\n{records}\n{at}")
}

/// The checkpoint before another in the chain: its `audit.checkpoint.records` and signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    /// `audit.checkpoint.records`.
    pub records: u64,
    /// `audit.checkpoint.signature`.
    pub signature: String,
}

/// The message a `v2` checkpoint signs.
pub(crate) fn message_v2(
    head: &str,
    records: u64,
    at: &str,
    previous: Option<&Previous>,
    interval_ms: u64,
) -> String {
    let (pr, ps) = match previous {
        Some(p) => (p.records.to_string(), p.signature.as_str()),
        None => (String::new(), ""),
    };
    format!("{MESSAGE_TAG_V2}\n{head}\n{records}\n{at}\n{pr}\n{ps}\n{interval_ms}")
}

/// The members of an `audit_checkpoint` record that its signature covers.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Signed {
    /// `@timestamp`.
    #[serde(rename = "@timestamp")]
    pub timestamp: Option<String>,
    /// `audit.checkpoint.head`.
    #[serde(rename = "audit.checkpoint.head")]
    pub head: Option<String>,
    /// `audit.checkpoint.records`.
    #[serde(rename = "audit.checkpoint.records")]
    pub records: Option<u64>,
    /// `audit.checkpoint.keyid`.
    #[serde(rename = "audit.checkpoint.keyid")]
    pub keyid: Option<String>,
    /// `audit.checkpoint.signature`.
    #[serde(rename = "audit.checkpoint.signature")]
    pub signature: Option<String>,
    /// `audit.checkpoint.previous_records` (`v2`).
    #[serde(rename = "audit.checkpoint.previous_records")]
    pub previous_records: Option<u64>,
    /// `audit.checkpoint.previous_signature` (`v2`).
    #[serde(rename = "audit.checkpoint.previous_signature")]
    pub previous_signature: Option<String>,
    /// `audit.checkpoint.interval_ms` (`v2`: its presence makes the message `v2`).
    #[serde(rename = "audit.checkpoint.interval_ms")]
    pub interval_ms: Option<u64>,
}

impl Signed {
    /// The checkpoint this one names as the one before it (`v2`).
    pub fn previous(&self) -> Option<Previous> {
        Some(Previous {
            records: self.previous_records?,
            signature: self.previous_signature.clone()?,
        })
    }

    /// This checkpoint, as the next one names it.
    pub(crate) fn as_previous(&self) -> Option<Previous> {
        Some(Previous { records: self.records?, signature: self.signature.clone()? })
    }

    /// The message its signature covers (`v2` when it names its interval, else `v1`).
    pub fn message(&self) -> String {
        let head = self.head.as_deref().unwrap_or("");
        let records = self.records.unwrap_or(0);
        let at = self.timestamp.as_deref().unwrap_or("");
        match self.interval_ms {
            Some(interval) => message_v2(head, records, at, self.previous().as_ref(), interval),
            None => message(head, records, at),
        }
    }

    /// Whether it is signed by `key` (its key id, and its signature over [`Signed::message`]).
    pub(crate) fn verifies_with(&self, key: &PublicKey) -> bool {
        self.keyid.as_deref() == Some(key.keyid())
            && key.verifies(self.message().as_bytes(), self.signature.as_deref().unwrap_or(""))
    }
}

/// Loads the checkpoint key at `path` (a PKCS#8 PEM Ed25519 key, readable by its owner only,
/// as `robots-proxy keys new` writes it).
pub fn load_key(path: &Path) -> Result<SigningKey, KeyError> {
    let stem = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<KeyName>().ok());
    let name = match stem {
        Some(name) => name,
        None => "audit-checkpoint".parse().map_err(KeyError::Name)?,
    };
    SigningKey::load(&name, path)
}

/// The `audit_checkpoint` line (newline included, without the chain's members) for the chain
/// at `head` after `records` records, naming the checkpoint before it in the chain (`v2`),
/// and that checkpoint as the next one names it.
pub(super) fn line(
    key: &SigningKey,
    head: &str,
    records: u64,
    previous: Option<&Previous>,
    interval: Duration,
    node: Option<&str>,
    tree: Option<&super::chain::Segment>,
) -> (Vec<u8>, Previous) {
    let at = timestamp(std::time::SystemTime::now());
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    let signature = key.sign(message_v2(head, records, &at, previous, interval_ms).as_bytes());
    let signature = Base64UrlUnpadded::encode_string(&signature);
    let mut record = serde_json::Map::new();
    let mut put = |k: &str, value: serde_json::Value| {
        record.insert(k.to_owned(), value);
    };
    put("@timestamp", at.into());
    put("event.action", "audit_checkpoint".into());
    put("event.outcome", "success".into());
    put(
        "event.reason",
        format!("signed checkpoint: {records} record(s) up to event.hash {head}").into(),
    );
    put("audit.checkpoint.head", head.into());
    put("audit.checkpoint.records", records.into());
    put("audit.checkpoint.keyid", key.keyid().into());
    put("audit.checkpoint.signature", signature.clone().into());
    if let Some(previous) = previous {
        put("audit.checkpoint.previous_records", previous.records.into());
        put("audit.checkpoint.previous_signature", previous.signature.clone().into());
    }
    put("audit.checkpoint.interval_ms", interval_ms.into());
    if let Some(segment) = tree {
        // The Merkle tree over the lines before this one (issue 39, item 1).
        let root = segment.tree.root();
        let edge: Vec<serde_json::Value> =
            segment.tree.edge().iter().map(|h| super::merkle::encode(h).into()).collect();
        put("audit.checkpoint.tree_size", segment.tree.size().into());
        put("audit.checkpoint.root", super::merkle::encode(&root).into());
        put("audit.checkpoint.tree_edge", edge.into());
        let note = super::note::sign(key, &segment.origin, segment.tree.size(), &root);
        put("audit.checkpoint.note", note.into());
    }
    let out = super::close_record(record, node);
    (out, Previous { records, signature })
}

/// A public key that checks checkpoint signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    raw: [u8; 32],
    keyid: String,
}

/// Why a public key file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct PublicKeyError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

impl PublicKey {
    /// The key of raw 32 bytes.
    pub(crate) fn from_raw(raw: [u8; 32]) -> PublicKey {
        let jwk = Jwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            kid: None,
            x: Base64UrlUnpadded::encode_string(&raw),
            use_: None,
        };
        PublicKey { raw, keyid: jwk.thumbprint() }
    }

    /// The public half of a signing key.
    pub fn of(key: &SigningKey) -> PublicKey {
        let mut raw = [0u8; 32];
        raw.copy_from_slice(key.public_key());
        PublicKey::from_raw(raw)
    }

    /// The key id (JWK thumbprint).
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The key as a JWK.
    pub fn jwk(&self) -> Jwk {
        Jwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            kid: Some(self.keyid.clone()),
            x: Base64UrlUnpadded::encode_string(&self.raw),
            use_: Some("sig".into()),
        }
    }

    /// The 32 bytes of the key.
    pub fn raw(&self) -> &[u8; 32] {
        &self.raw
    }

    /// Whether `signature` (64 raw bytes) signs `message`.
    pub(crate) fn verifies_raw(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.raw).verify(message, signature).is_ok()
    }

    /// Whether `signature` (base64url) signs `message`.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Ok(signature) = Base64UrlUnpadded::decode_vec(signature) else { return false };
        UnparsedPublicKey::new(&ED25519, &self.raw).verify(message, &signature).is_ok()
    }

    /// Reads a public key file: a JWK (`{"kty":"OKP","crv":"Ed25519","x":…}`, as
    /// `robots-proxy audit public-key` prints it), a JWK Set holding one Ed25519 key, or a PEM
    /// `PUBLIC KEY` (`openssl pkey -pubout`).
    pub fn read(path: &Path) -> Result<PublicKey, PublicKeyError> {
        let fail = |reason: String| PublicKeyError { path: path.to_owned(), reason };
        let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read: {e}")))?;
        Self::parse(&bytes).map_err(fail)
    }

    pub(super) fn parse(bytes: &[u8]) -> Result<PublicKey, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not text".to_owned())?.trim();
        if text.starts_with('{') {
            let value: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
            let jwk = match value.get("keys").and_then(|k| k.as_array()) {
                Some(keys) if keys.len() == 1 => keys[0].clone(),
                Some(keys) => {
                    return Err(format!("a JWK Set of {} keys: give the one key", keys.len()))
                }
                None => value,
            };
            let jwk: Jwk =
                serde_json::from_value(jwk).map_err(|e| format!("not an Ed25519 JWK: {e}"))?;
            if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
                return Err("not an Ed25519 JWK (kty OKP, crv Ed25519)".into());
            }
            let raw = Base64UrlUnpadded::decode_vec(&jwk.x)
                .map_err(|_| "the JWK's x is not base64url".to_owned())?;
            return raw_key(&raw);
        }
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::SubjectPublicKeyInfoDer::from_pem_slice(text.as_bytes())
            .map_err(|e| format!("neither a JWK nor a PEM PUBLIC KEY: {e}"))?;
        // SubjectPublicKeyInfo of Ed25519 (RFC 8410): the algorithm 1.3.101.112, then the key.
        const PREFIX: [u8; 12] =
            [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
        let der = der.as_ref();
        match der.strip_prefix(&PREFIX[..]) {
            Some(raw) => raw_key(raw),
            None => Err("the PEM PUBLIC KEY is not an Ed25519 key".into()),
        }
    }
}

fn raw_key(raw: &[u8]) -> Result<PublicKey, String> {
    let raw: [u8; 32] =
        raw.try_into().map_err(|_| format!("an Ed25519 key has 32 bytes, not {}", raw.len()))?;
    Ok(PublicKey::from_raw(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_verifies_with_its_public_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let name: KeyName = "audit".parse().unwrap();
        let key = SigningKey::create(&name, &name.file_in(&keys)).unwrap();
        let loaded = load_key(&name.file_in(&keys)).unwrap();
        assert_eq!(loaded.keyid(), key.keyid());
        let public = PublicKey::of(&key);
        assert_eq!(public.keyid(), key.keyid());
        let head = "ab".repeat(32);
        let (line1, first) = line(&key, &head, 7, None, DEFAULT_INTERVAL, None, None);
        let v: serde_json::Value = serde_json::from_slice(&line1).unwrap();
        let at = v["@timestamp"].as_str().unwrap();
        let msg = message_v2(&head, 7, at, None, 60_000);
        let sig = v["audit.checkpoint.signature"].as_str().unwrap();
        assert!(public.verifies(msg.as_bytes(), sig));
        assert!(!public.verifies(message(&head, 7, at).as_bytes(), sig));
        let signed: Signed = serde_json::from_slice(&line1).unwrap();
        assert!(signed.verifies_with(&public) && signed.previous().is_none());
        // The next one names it, and signs that.
        let (line2, _) = line(&key, &head, 9, Some(&first), DEFAULT_INTERVAL, None, None);
        let mut signed: Signed = serde_json::from_slice(&line2).unwrap();
        assert_eq!(signed.previous(), Some(first.clone()));
        assert!(signed.verifies_with(&public));
        signed.previous_records = Some(6);
        assert!(!signed.verifies_with(&public), "the previous checkpoint is signed");
        // The JWK round-trips through a file.
        let jwk = dir.path().join("pub.jwk");
        std::fs::write(&jwk, serde_json::to_string(&public.jwk()).unwrap()).unwrap();
        assert_eq!(PublicKey::read(&jwk).unwrap(), public);
        std::fs::write(&jwk, "nonsense").unwrap();
        assert!(PublicKey::read(&jwk).is_err());
    }
}
