//! The TLS listener for clients (`proxy.tls_listen`): its server configuration, with optional
//! client certificates (`access.client_ca`, `access.client_certificate`), and the user a
//! verified client certificate names.
//!
//! Clients reach the same proxy over TLS (`https://` proxy URLs: curl `--proxy https://…`,
//! Python requests, undici's `ProxyAgent`, Chromium), speaking HTTP/1.1 or, by ALPN, HTTP/2
//! (CONNECT included, as an HTTP/2 stream, RFC 9113 §8.5).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::provider;

/// Why the TLS listener's configuration cannot be built. Each names the configuration key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenerTlsError {
    /// A file could not be read.
    #[error("{key} {}: {source}", path.display())]
    Read {
        /// The configuration key that names the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no usable PEM certificate or key.
    #[error("{key} {}: {reason}", path.display())]
    Pem {
        /// The configuration key that names the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The client CAs cannot verify certificates.
    #[error("access.client_ca {}: {reason}", path.display())]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// rustls refused the certificate and key (say, a key that does not match).
    #[error("proxy.tls_certificate / proxy.tls_key: {0}")]
    Tls(#[from] rustls::Error),
}

/// What the TLS listener is configured with.
#[derive(Debug, Clone, Copy)]
pub struct ListenerFiles<'a> {
    /// `proxy.tls_certificate`: the certificate chain, leaf first (PEM).
    pub certificate: &'a Path,
    /// `proxy.tls_key`: its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: &'a Path,
    /// `access.client_ca`: the CAs client certificates are verified against (PEM bundle).
    pub client_ca: Option<&'a Path>,
    /// `access.client_certificate = "required"`: a client without a valid certificate is
    /// refused in the handshake.
    pub require_client_certificate: bool,
}

/// The TLS listener's server configuration in force: each new handshake takes the one stored
/// last, so a reload that reads the certificate, key and client CA again
/// ([`listener_config`]) applies them to new connections while open ones keep theirs.
pub type ListenerTls = Arc<arc_swap::ArcSwap<ServerConfig>>;

/// The server configuration of the TLS listener: the certificate and key, ALPN `h2` and
/// `http/1.1`, and, with `client_ca`, client certificates verified against it (required or
/// optional; a certificate that does not verify is always refused).
pub fn listener_config(files: ListenerFiles<'_>) -> Result<Arc<ServerConfig>, ListenerTlsError> {
    let chain = certificates("proxy.tls_certificate", files.certificate)?;
    let key_pem = read("proxy.tls_key", files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| ListenerTlsError::Pem {
        key: "proxy.tls_key",
        path: files.key.to_owned(),
        reason: format!("no PEM private key: {e}"),
    })?;
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("access.client_ca", path)? {
                roots.add(cert).map_err(|e| ListenerTlsError::ClientCa {
                    path: path.to_owned(),
                    reason: e.to_string(),
                })?;
            }
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            if !files.require_client_certificate {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier.build().map_err(|e| ListenerTlsError::ClientCa {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The user name a verified client certificate gives: its subject's common name (CN) or, when
/// the subject has none, its first DNS name (subjectAltName). `None` when it has neither, or
/// cannot be read.
pub fn client_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    if let Some(cn) = cert.subject().iter_common_name().next() {
        return cn.as_str().ok().map(str::to_owned);
    }
    let names = cert.subject_alternative_name().ok()??;
    names.value.general_names.iter().find_map(|name| match name {
        x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
        _ => None,
    })
}

/// Why a client's TLS handshake failed, when it is about its certificate (for the log line
/// that names the cause); `None` for anything else (a client that does not trust the proxy's
/// certificate, a port scan, a timeout).
pub fn client_certificate_problem(error: &std::io::Error) -> Option<String> {
    let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    match tls {
        rustls::Error::NoCertificatesPresented => Some(
            "the client sent no certificate, and access.client_certificate is \"required\""
                .to_owned(),
        ),
        rustls::Error::InvalidCertificate(why) => Some(format!(
            "the client certificate does not verify against access.client_ca: {why:?}"
        )),
        _ => None,
    }
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, ListenerTlsError> {
    std::fs::read(path).map_err(|source| ListenerTlsError::Read {
        key,
        path: path.to_owned(),
        source,
    })
}

/// Every PEM certificate of the file at `path`; at least one.
fn certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, ListenerTlsError> {
    let pem = read(key, path)?;
    let bad = |reason: String| ListenerTlsError::Pem { key, path: path.to_owned(), reason };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate found".to_owned()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    fn cert(cn: Option<&str>, dns: &[&str]) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        params.subject_alt_names =
            dns.iter().map(|d| SanType::DnsName((*d).try_into().unwrap())).collect();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn the_common_name_names_the_user_else_the_first_dns_name() {
        assert_eq!(
            client_name(&cert(Some("crawler-a"), &["b.example"])).as_deref(),
            Some("crawler-a")
        );
        assert_eq!(
            client_name(&cert(None, &["b.example", "c.example"])).as_deref(),
            Some("b.example")
        );
        assert_eq!(client_name(&cert(None, &[])), None);
        assert_eq!(client_name(&CertificateDer::from(vec![1, 2, 3])), None);
    }

    #[test]
    fn certificate_problems_are_told_from_other_handshake_failures() {
        let io = |e: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let none = client_certificate_problem(&io(rustls::Error::NoCertificatesPresented));
        assert!(none.unwrap().contains("sent no certificate"));
        let bad = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert!(client_certificate_problem(&io(bad)).unwrap().contains("access.client_ca"));
        let other = rustls::Error::General("peer sent no ClientHello".into());
        assert_eq!(client_certificate_problem(&io(other)), None);
        let plain = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof");
        assert_eq!(client_certificate_problem(&plain), None);
    }

    #[test]
    fn missing_files_name_their_key() {
        let files = ListenerFiles {
            certificate: Path::new("/nonexistent/cert.pem"),
            key: Path::new("/nonexistent/key.pem"),
            client_ca: None,
            require_client_certificate: false,
        };
        let e = listener_config(files).unwrap_err().to_string();
        assert!(e.starts_with("proxy.tls_certificate /nonexistent/cert.pem: "), "{e}");
    }
}
