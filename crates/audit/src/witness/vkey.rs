//! A witness's public key as C2SP signed-note writes it (a *vkey*,
//! `<key name>+<hex key ID>+<base64(signature type || public key)>`), and the check of its
//! cosignatures (C2SP tlog-cosignature, `cosignature/v1`: timestamped Ed25519, signature type
//! `0x04`).
//!
//! A cosignature line is `— <key name> base64(key ID || timestamp (u64, big-endian) ||
//! Ed25519 signature)`; the signed message is `cosignature/v1\n`, `time <timestamp>\n`, then
//! the checkpoint's note text (its lines, final newline included, no signature line).

use std::fmt;
use std::str::FromStr;

use base64ct::{Base64, Encoding};
use ring::signature::{UnparsedPublicKey, ED25519};
use sha2::{Digest, Sha256};

/// The signature type of timestamped Ed25519 cosignatures (`cosignature/v1`).
pub(crate) const COSIGNATURE_V1: u8 = 0x04;

/// A witness's Ed25519 cosigning key.
#[derive(Clone, PartialEq, Eq)]
pub struct WitnessKey {
    name: String,
    id: [u8; 4],
    public: [u8; 32],
}

impl fmt::Debug for WitnessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WitnessKey({self})")
    }
}

impl fmt::Display for WitnessKey {
    /// The vkey text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut key = vec![COSIGNATURE_V1];
        key.extend_from_slice(&self.public);
        write!(f, "{}+{}+{}", self.name, self.id_hex(), Base64::encode_string(&key))
    }
}

/// Why a text is not a witness key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VkeyError {
    /// Not three parts joined by `+`.
    #[error("not a vkey: expected NAME+KEYID+BASE64 (three parts joined by +)")]
    Form,
    /// A key name with a space, a control character or nothing.
    #[error("the key name {0:?} is empty or holds a space, + or a control character")]
    Name(String),
    /// The key ID is not 8 hex digits.
    #[error("the key ID {0:?} is not 8 hex digits")]
    KeyId(String),
    /// The key part is not base64.
    #[error("the key is not standard base64")]
    Base64,
    /// A signature type other than `0x04`.
    #[error("signature type 0x{0:02x} is not a cosignature/v1 key (0x04, timestamped Ed25519){1}")]
    Type(u8, &'static str),
    /// The key material has the wrong length.
    #[error("an Ed25519 key has 32 bytes, not {0}")]
    Length(usize),
    /// The key ID is not the one the name and key give.
    #[error("the key ID {given} does not match the name and key (SHA-256 gives {computed})")]
    Mismatch {
        /// The key ID written.
        given: String,
        /// The key ID of the name and key.
        computed: String,
    },
}

/// Why a cosignature line of the key does not hold.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CosignatureError {
    /// Not `— name base64`.
    #[error("not a note signature line")]
    Form,
    /// Not 4 + 8 + 64 bytes.
    #[error("a cosignature/v1 signature has 76 bytes (key ID, timestamp, signature), not {0}")]
    Length(usize),
    /// A zero timestamp, or one over 2^63 - 1.
    #[error("the cosignature's timestamp {0} is zero or out of range")]
    Time(u64),
    /// The Ed25519 signature does not verify.
    #[error("the cosignature of {0} does not verify: another checkpoint, or forged")]
    Signature(String),
}

impl FromStr for WitnessKey {
    type Err = VkeyError;

    fn from_str(text: &str) -> Result<Self, VkeyError> {
        // The base64 of the key may hold `+`; the name and the hex key ID never do.
        let mut parts = text.trim().splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(VkeyError::Form);
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(VkeyError::Name(name.to_owned()));
        }
        let id_ok = id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit());
        let given = u32::from_str_radix(id, 16).ok().filter(|_| id_ok);
        let given = given.ok_or_else(|| VkeyError::KeyId(id.to_owned()))?.to_be_bytes();
        let bytes = Base64::decode_vec(key).map_err(|_| VkeyError::Base64)?;
        let (kind, material) = bytes.split_first().ok_or(VkeyError::Base64)?;
        match *kind {
            COSIGNATURE_V1 => {}
            0x01 => return Err(VkeyError::Type(0x01, ": a log's note key, not a witness's")),
            0x06 => {
                return Err(VkeyError::Type(0x06, ": ML-DSA-44 cosignatures are not supported"))
            }
            other => return Err(VkeyError::Type(other, "")),
        }
        let public: [u8; 32] =
            material.try_into().map_err(|_| VkeyError::Length(material.len()))?;
        let computed = key_id(name, &public);
        if computed != given {
            return Err(VkeyError::Mismatch { given: id.to_owned(), computed: hex(&computed) });
        }
        Ok(WitnessKey { name: name.to_owned(), id: computed, public })
    }
}

/// SHA-256(name || 0x0A || 0x04 || key)[:4], the key ID of an Ed25519 cosigner.
pub(crate) fn key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', COSIGNATURE_V1]);
    h.update(public);
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The message a `cosignature/v1` signs over the checkpoint `text` at `time`.
pub(crate) fn cosigned_message(text: &str, time: u64) -> String {
    format!("cosignature/v1\ntime {time}\n{text}")
}

impl WitnessKey {
    /// The key name (the witness's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key ID, 8 hex digits.
    pub(crate) fn id_hex(&self) -> String {
        hex(&self.id)
    }

    /// The key of `name` and the raw Ed25519 public key `public`.
    pub fn new(name: &str, public: [u8; 32]) -> Result<WitnessKey, VkeyError> {
        let mut key = vec![COSIGNATURE_V1];
        key.extend_from_slice(&public);
        let text =
            format!("{name}+{}+{}", hex(&key_id(name, &public)), Base64::encode_string(&key));
        text.parse()
    }

    /// Checks the note signature `line` against the checkpoint note `text` (its lines, final
    /// newline included). `None` when the line is not this key's (another name or key ID: a
    /// note's verifier ignores it); else its timestamp, or why it does not hold.
    pub fn check(&self, text: &str, line: &str) -> Option<Result<u64, CosignatureError>> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let rest = line.strip_prefix("\u{2014} ")?;
        let (name, b64) = rest.split_once(' ')?;
        if name != self.name {
            return None;
        }
        let Ok(bytes) = Base64::decode_vec(b64) else { return Some(Err(CosignatureError::Form)) };
        if bytes.len() < 4 || bytes[..4] != self.id {
            return None;
        }
        if bytes.len() != 76 {
            return Some(Err(CosignatureError::Length(bytes.len())));
        }
        let mut time = [0u8; 8];
        time.copy_from_slice(&bytes[4..12]);
        let time = u64::from_be_bytes(time);
        if time == 0 || time > i64::MAX as u64 {
            return Some(Err(CosignatureError::Time(time)));
        }
        let message = cosigned_message(text, time);
        let key = UnparsedPublicKey::new(&ED25519, &self.public);
        Some(match key.verify(message.as_bytes(), &bytes[12..]) {
            Ok(()) => Ok(time),
            Err(_) => Err(CosignatureError::Signature(self.name.clone())),
        })
    }

    /// The first of `lines` (note signature lines) that is a valid cosignature of this key
    /// over `text`: the line and its timestamp. A line of this key that does not verify is an
    /// error, as C2SP signed-note says (a note with a bad signature of a known key is
    /// rejected whole).
    pub fn find<'a>(
        &self,
        text: &str,
        lines: impl IntoIterator<Item = &'a str>,
    ) -> Result<Option<(&'a str, u64)>, CosignatureError> {
        for line in lines {
            match self.check(text, line) {
                None => continue,
                Some(Ok(time)) => return Ok(Some((line, time))),
                Some(Err(e)) => return Err(e),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{Ed25519KeyPair, KeyPair};

    fn pair() -> Ed25519KeyPair {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap()
    }

    fn cosign(pair: &Ed25519KeyPair, key: &WitnessKey, text: &str, time: u64) -> String {
        let mut sig = key.id.to_vec();
        sig.extend_from_slice(&time.to_be_bytes());
        sig.extend_from_slice(pair.sign(cosigned_message(text, time).as_bytes()).as_ref());
        format!("\u{2014} {} {}\n", key.name, Base64::encode_string(&sig))
    }

    #[test]
    fn the_spec_example_vkey_parses_only_as_what_it_is() {
        // signed-note's example is a type 0x01 (log) key: named as such.
        let e = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
        assert!(matches!(e.parse::<WitnessKey>(), Err(VkeyError::Type(0x01, _))));
        assert_eq!("a+b".parse::<WitnessKey>(), Err(VkeyError::Form));
        assert!(matches!("w+zz+AAAA".parse::<WitnessKey>(), Err(VkeyError::KeyId(_))));
        assert_eq!("w+00000000+!!".parse::<WitnessKey>(), Err(VkeyError::Base64));
    }

    #[test]
    fn a_cosignature_verifies_with_its_key_only() {
        let p = pair();
        let public: [u8; 32] = p.public_key().as_ref().try_into().unwrap();
        let key = WitnessKey::new("witness.example/w1", public).unwrap();
        let text = key.to_string();
        assert_eq!(text.parse::<WitnessKey>().unwrap(), key);
        // A key whose base64 holds `+` (the third part is the rest of the text).
        let plus = "w+58396df7+BPv7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7";
        assert_eq!(plus.parse::<WitnessKey>().unwrap().name(), "w");
        // A key ID that does not match is named.
        let bad = format!("witness.example/w1+00000000+{}", text.splitn(3, '+').nth(2).unwrap());
        assert!(matches!(bad.parse::<WitnessKey>(), Err(VkeyError::Mismatch { .. })));

        let note = "robots-proxy/audit/00\n5\nq3JcUvjAn3n1JHGcYZnq2yU1jdeOqz3u1iDtf7F0x7M=\n";
        let line = cosign(&p, &key, note, 1_700_000_000);
        assert_eq!(key.check(note, &line), Some(Ok(1_700_000_000)));
        assert_eq!(
            key.find(note, ["\u{2014} other AAAA", line.as_str()]).unwrap().unwrap().1,
            1_700_000_000
        );
        // Another checkpoint: the signature does not verify.
        let other = note.replace("\n5\n", "\n6\n");
        assert!(matches!(key.check(&other, &line), Some(Err(CosignatureError::Signature(_)))));
        // Another key of the same name: not this key's line.
        let q = pair();
        let public: [u8; 32] = q.public_key().as_ref().try_into().unwrap();
        let stranger = WitnessKey::new("witness.example/w1", public).unwrap();
        assert_eq!(stranger.check(note, &line), None);
        // A zero timestamp is refused.
        let zero = cosign(&p, &key, note, 0);
        assert_eq!(key.check(note, &zero), Some(Err(CosignatureError::Time(0))));
    }
}
