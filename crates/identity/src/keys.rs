//! Ed25519 signing keys: one PKCS#8 PEM file per key under the state directory, the key's
//! public JWK (RFC 8037: `kty` OKP, `crv` Ed25519, `x`) and its SHA-256 thumbprint (RFC 7638),
//! which is the `keyid` of every signature the key makes.
//!
//! Keys are made and used with aws-lc-rs (its Ed25519 signs about 2.5x faster than *ring*'s,
//! which matters with a fresh signature per request) and written with mode 0600; an
//! existing file is never overwritten. A key is written whole or not at all: into a hidden
//! temporary file of the same directory (`.NAME.pem.…partial`, a name no key can have), synced,
//! then linked in under its name, so a write that fails (a full disk, a killed process) never
//! leaves a partial `NAME.pem` behind. A key made elsewhere (`openssl genpkey -algorithm
//! ed25519`) loads too: PKCS#8 v1 and v2 are both read.
//!
//! A key must be its owner's alone, and so must its directory: a key file its group or others
//! may read, or a keys directory they may write (and so replace a key with one they know), is
//! refused with the `chmod` that fixes it (`robots_proxy_owner_only`, the rule of the CA key too).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64ct::{Base64, Base64UrlUnpadded, Encoding};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivatePkcs8KeyDer;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Why a key cannot be made or loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key file exists already: keys are never overwritten.
    #[error(
        "{0} exists already; a signing key is never overwritten (pick another name, or remove \
         the file yourself once no directory publishes the key)"
    )]
    Exists(PathBuf),
    /// Reading, writing or creating a directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a PEM `PRIVATE KEY` (PKCS#8) document.
    #[error("{path}: not a PEM PRIVATE KEY (PKCS#8) file: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        reason: String,
    },
    /// The PKCS#8 document is not an Ed25519 key.
    #[error("{path}: not an Ed25519 key: {reason}")]
    NotEd25519 {
        /// The file.
        path: PathBuf,
        /// What the crypto library said.
        reason: String,
    },
    /// The key file can be read or written by other users than its owner.
    #[error(
        "{path} has mode {mode:04o}: a signing key must be readable by its owner only \
         (chmod 600 {path})"
    )]
    FileMode {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The keys directory can be written by other users than its owner, who could replace a
    /// key in it.
    #[error(
        "{path} has mode {mode:04o}: the signing keys directory must not be writable by its \
         group or others, who could replace a key in it (chmod go-w {path})"
    )]
    DirMode {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The name cannot name a key file.
    #[error("{0}")]
    Name(String),
    /// The system's random number generator failed.
    #[error("cannot generate a key: the system random number generator failed")]
    Random,
}

/// A key's name: the file `NAME.pem` in the keys directory. Letters, digits, `.`, `_` and `-`,
/// 1 to 64 of them, not starting with `.`: it can never name a path outside the directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyName(String);

impl KeyName {
    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key's file in `dir`.
    pub fn file_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.pem", self.0))
    }
}

impl FromStr for KeyName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && !s.starts_with('.')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if ok {
            Ok(KeyName(s.to_owned()))
        } else {
            Err(format!(
                "{s:?} is not a key name: use 1 to 64 letters, digits, '.', '_' or '-', not \
                 starting with '.'"
            ))
        }
    }
}

impl fmt::Display for KeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for KeyName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for KeyName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A public key as a JWK (RFC 8037 §2), as the key directory lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    /// Always `OKP`.
    pub kty: String,
    /// Always `Ed25519`.
    pub crv: String,
    /// The key id: the RFC 7638 thumbprint, as the draft requires of a `kid` at the
    /// well-known URI (so a verifier matches `keyid` against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// The public key, base64url without padding.
    pub x: String,
    /// `sig`.
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
}

impl Jwk {
    /// The RFC 7638 thumbprint: SHA-256 of the required members in lexicographic order, no
    /// whitespace, base64url without padding.
    pub fn thumbprint(&self) -> String {
        let canonical =
            format!(r#"{{"crv":"{}","kty":"{}","x":"{}"}}"#, self.crv, self.kty, self.x);
        Base64UrlUnpadded::encode_string(&Sha256::digest(canonical.as_bytes()))
    }
}

/// An Ed25519 key pair that signs, with its key id.
pub struct SigningKey {
    name: KeyName,
    pair: Ed25519KeyPair,
    jwk: Jwk,
    keyid: String,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the private key.
        f.debug_struct("SigningKey").field("name", &self.name).field("keyid", &self.keyid).finish()
    }
}

impl SigningKey {
    /// Makes a new key and writes it to `path` (mode 0600, its directory created with mode
    /// 0700; an existing directory must not be writable by its group or others). Refuses to
    /// overwrite an existing file.
    pub fn create(name: &KeyName, path: &Path) -> Result<SigningKey, KeyError> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let document = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| KeyError::Random)?;
        let dir = directory_of(path);
        create_private_dir(dir)?;
        check_dir(dir)?;
        let pem = pem_encode(document.as_ref());
        robots_proxy_owner_only::write_new(path, pem.as_bytes(), 0o600).map_err(|source| {
            match source.kind() {
                std::io::ErrorKind::AlreadyExists => KeyError::Exists(path.to_owned()),
                _ => KeyError::Io { path: path.to_owned(), source },
            }
        })?;
        Self::from_pkcs8(name, path, document.as_ref())
    }

    /// Loads the key `name` from `path`: the file must be readable by its owner only, and its
    /// directory writable by its owner only.
    pub fn load(name: &KeyName, path: &Path) -> Result<SigningKey, KeyError> {
        check_dir(directory_of(path))?;
        match robots_proxy_owner_only::too_open(path, robots_proxy_owner_only::KEY_FILE) {
            Ok(None) => {}
            Ok(Some(mode)) => return Err(KeyError::FileMode { path: path.to_owned(), mode }),
            Err(source) => return Err(KeyError::Io { path: path.to_owned(), source }),
        }
        let text =
            std::fs::read(path).map_err(|source| KeyError::Io { path: path.to_owned(), source })?;
        let der = PrivatePkcs8KeyDer::from_pem_slice(&text)
            .map_err(|e| KeyError::Pem { path: path.to_owned(), reason: e.to_string() })?;
        Self::from_pkcs8(name, path, der.secret_pkcs8_der())
    }

    fn from_pkcs8(name: &KeyName, path: &Path, der: &[u8]) -> Result<SigningKey, KeyError> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map_err(|e| KeyError::NotEd25519 { path: path.to_owned(), reason: e.to_string() })?;
        let mut jwk = Jwk {
            kty: "OKP".to_owned(),
            crv: "Ed25519".to_owned(),
            kid: None,
            x: Base64UrlUnpadded::encode_string(pair.public_key().as_ref()),
            use_: Some("sig".to_owned()),
        };
        let keyid = jwk.thumbprint();
        jwk.kid = Some(keyid.clone());
        Ok(SigningKey { name: name.clone(), pair, jwk, keyid })
    }

    /// The key's name.
    pub fn name(&self) -> &KeyName {
        &self.name
    }

    /// The key id: the JWK SHA-256 thumbprint (RFC 7638), base64url.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> &Jwk {
        &self.jwk
    }

    /// The raw 32-byte public key.
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// Signs `message` (Ed25519 is deterministic: the same message gives the same signature).
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.pair.sign(message).as_ref());
        out
    }
}

/// `-----BEGIN PRIVATE KEY-----`, the DER in lines of 64 base64 characters.
fn pem_encode(der: &[u8]) -> String {
    let b64 = Base64::encode_string(der);
    let mut out = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END PRIVATE KEY-----\n");
    out
}

/// The directory `path` is in (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn create_private_dir(dir: &Path) -> Result<(), KeyError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| KeyError::Io { path: dir.to_owned(), source })
}

/// Refuses a keys directory its group or others may write.
fn check_dir(dir: &Path) -> Result<(), KeyError> {
    match robots_proxy_owner_only::too_open(dir, robots_proxy_owner_only::KEY_DIR) {
        Ok(None) => Ok(()),
        Ok(Some(mode)) => Err(KeyError::DirMode { path: dir.to_owned(), mode }),
        Err(source) => Err(KeyError::Io { path: dir.to_owned(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprint_of_the_rfc_9421_test_key() {
        // The Ed25519 test key of RFC 9421 §B.1.4, whose thumbprint the Web Bot Auth draft
        // uses as its example keyid.
        let jwk = Jwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            kid: None,
            x: "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs".into(),
            use_: None,
        };
        assert_eq!(jwk.thumbprint(), "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U");
    }

    #[test]
    fn names_stay_in_their_directory() {
        for bad in ["", ".hidden", "a/b", "../x", "a b", &"x".repeat(65)] {
            assert!(bad.parse::<KeyName>().is_err(), "{bad:?}");
        }
        for good in ["bots-2026", "a.b_c", "K1"] {
            assert_eq!(good.parse::<KeyName>().unwrap().as_str(), good);
        }
    }

    #[test]
    fn create_writes_0600_once_and_load_reads_it_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let name: KeyName = "k1".parse().unwrap();
        let path = name.file_in(&dir.path().join("keys"));
        let made = SigningKey::create(&name, &path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = SigningKey::create(&name, &path).unwrap_err();
        assert!(matches!(again, KeyError::Exists(_)), "{again}");
        let loaded = SigningKey::load(&name, &path).unwrap();
        assert_eq!(loaded.keyid(), made.keyid());
        assert_eq!(loaded.sign(b"x"), made.sign(b"x"));
        std::fs::write(dir.path().join("bad.pem"), "not a key").unwrap();
        assert!(SigningKey::load(&name, &dir.path().join("bad.pem")).is_err());
    }
}
