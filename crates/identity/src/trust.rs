//! The client keys an identity trusts (`signing.identities[].client_keys`): under
//! `signing.client_signatures = "cosign"`, the proxy's signature covers a client's only when the
//! client's verifies with one of them, so the organisation's key never vouches for a signature
//! (or for header values under it) that nobody the configuration trusts made.
//!
//! The file is a JWK Set (RFC 7517 §5), as a client agent's key directory serves it: Ed25519
//! keys (`kty` `OKP`, `crv` `Ed25519`), each matched against a signature's `keyid` by its `kid`
//! or, without one, its RFC 7638 thumbprint.

use std::path::{Path, PathBuf};

use base64ct::{Base64UrlUnpadded, Encoding};

use super::keys::Jwk;

/// Why a client-keys file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("client keys {path}: {why}")]
pub struct TrustError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: String,
}

/// One trusted key.
#[derive(Debug, Clone)]
struct Trusted {
    /// The `kid`, or the thumbprint when the JWK has none.
    keyid: String,
    public: Vec<u8>,
}

/// The client keys one identity trusts; empty: none (nothing is cosigned).
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: Vec<Trusted>,
}

#[derive(serde::Deserialize)]
struct JwkSet {
    keys: Vec<Jwk>,
}

impl TrustedKeys {
    /// Reads the JWK Set at `path`: every key must be an Ed25519 public key.
    pub fn load(path: &Path) -> Result<TrustedKeys, TrustError> {
        let bad = |why: String| TrustError { path: path.to_owned(), why };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        let set: JwkSet = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a JWK Set ({{\"keys\": [...]}}): {e}")))?;
        let mut keys = Vec::with_capacity(set.keys.len());
        for (i, jwk) in set.keys.iter().enumerate() {
            if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
                return Err(bad(format!(
                    "key {i}: kty {:?}, crv {:?}; only Ed25519 keys (OKP) are supported",
                    jwk.kty, jwk.crv
                )));
            }
            let public = Base64UrlUnpadded::decode_vec(&jwk.x)
                .ok()
                .filter(|x| x.len() == 32)
                .ok_or_else(|| bad(format!("key {i}: x is not 32 bytes of base64url")))?;
            let keyid = jwk.kid.clone().unwrap_or_else(|| jwk.thumbprint());
            keys.push(Trusted { keyid, public });
        }
        if keys.is_empty() {
            return Err(bad("lists no key".into()));
        }
        Ok(TrustedKeys { keys })
    }

    /// Whether any key is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `signature` is an Ed25519 signature of `base` by the trusted key `keyid`.
    pub fn verify(&self, keyid: &str, base: &[u8], signature: &[u8]) -> Result<(), &'static str> {
        let key = self
            .keys
            .iter()
            .find(|k| k.keyid == keyid)
            .ok_or("its keyid is not one of the identity's client_keys")?;
        aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ED25519, &key.public)
            .verify(base, signature)
            .map_err(|_| "does not verify with the client key its keyid names")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};

    #[test]
    fn a_jwk_set_is_read_and_only_its_keys_verify() {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = Base64UrlUnpadded::encode_string(pair.public_key().as_ref());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clients.json");
        std::fs::write(
            &path,
            format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"c1","x":"{x}"}}]}}"#),
        )
        .unwrap();
        let trusted = TrustedKeys::load(&path).unwrap();
        let signature = pair.sign(b"base");
        assert!(trusted.verify("c1", b"base", signature.as_ref()).is_ok());
        assert!(trusted.verify("c1", b"other", signature.as_ref()).is_err());
        assert!(trusted.verify("c2", b"base", signature.as_ref()).is_err());
        std::fs::write(&path, r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA"}]}"#).unwrap();
        let e = TrustedKeys::load(&path).unwrap_err().to_string();
        assert!(e.contains("only Ed25519"), "{e}");
        std::fs::write(&path, "{}").unwrap();
        assert!(TrustedKeys::load(&path).unwrap_err().to_string().contains("not a JWK Set"));
    }
}
