//! The proxy's own certificate authority, and the leaf certificates it makes on demand to
//! terminate a client's TLS inside a CONNECT tunnel.
//!
//! Leaves are short-lived (a week), backdated an hour for clients with a slow clock, and share
//! one key pair generated at start-up (signing then costs tens of microseconds, not a key
//! generation). Each host's `ServerConfig` is cached, bounded, and made once however many
//! handshakes for a new host arrive together (moka's `get_with` coalesces them).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

use super::provider;

/// File names inside a CA directory.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The CA key's file name (mode 0600).
pub const CA_KEY_FILE: &str = "ca-key.pem";

/// How long a leaf certificate is valid.
const LEAF_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// How far back a leaf's validity starts, for clients whose clock is a little behind.
const LEAF_BACKDATE: Duration = Duration::from_secs(3600);
/// Leaf configs are dropped from the cache well before their certificate expires.
const LEAF_CACHE_TTL: Duration = Duration::from_secs(24 * 3600);

/// Why the CA cannot be created, loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The CA files exist already (`ca init` never overwrites a CA).
    #[error("{0} already exists; remove it first to make a new CA")]
    Exists(PathBuf),
    /// A certificate or key could not be made or parsed.
    #[error("certificate error: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused a certificate or key.
    #[error("TLS configuration error: {0}")]
    Tls(#[from] rustls::Error),
    /// The CA key can be read or written by other users than its owner. With it, anyone can
    /// mint a certificate for any name that every client trusting this CA accepts.
    #[error(
        "{path} has mode {mode:04o}: the CA key must be readable by its owner only \
         (chmod 600 {path})"
    )]
    KeyMode {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A CA key with no certificate beside it (an interrupted creation) that cannot be read.
    #[error(
        "{path} has no CA certificate beside it and cannot be read as a key ({cause}): it is \
         what a CA creation that stopped part way leaves; remove it and start again to make a \
         new CA"
    )]
    Leftover {
        /// The key file.
        path: PathBuf,
        /// Why it cannot be read.
        cause: String,
    },
}

/// Where a CA's certificate and key live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFiles {
    /// The CA certificate (PEM): what clients must trust.
    pub cert: PathBuf,
    /// The CA key (PEM, mode 0600).
    pub key: PathBuf,
}

impl CaFiles {
    /// The standard files inside `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        CaFiles { cert: dir.join(CA_CERT_FILE), key: dir.join(CA_KEY_FILE) }
    }
}

/// Writes a new CA certificate and key into `files`. Refuses to overwrite an existing one.
///
/// Each file is written whole under a temporary name in its directory, synced, and only then
/// put in place (a hard link, which never replaces a file, then the temporary name removed),
/// the key first and the certificate last, and the directory synced. So an interrupted
/// creation leaves no half-written file; at worst a key with no certificate beside it, one
/// that never signed anything, which [`CertificateAuthority::load_or_create`] completes.
pub fn init(files: &CaFiles) -> Result<(), CaError> {
    for path in [&files.cert, &files.key] {
        if path.exists() {
            return Err(CaError::Exists(path.clone()));
        }
    }
    let key = KeyPair::generate()?;
    let cert = ca_params()?.self_signed(&key)?;
    for path in [&files.key, &files.cert] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|source| CaError::Io { path: dir.to_owned(), source })?;
        }
    }
    put_in_place(&files.key, key.serialize_pem().as_bytes(), 0o600)?;
    put_in_place(&files.cert, cert.pem().as_bytes(), 0o644)?;
    Ok(())
}

/// The certificate of a CA whose creation stopped after its key was in place: a new
/// self-signed CA certificate for the key at `files.key`, put in place as [`init`] does. The
/// key must be its owner's alone and must parse; otherwise [`CaError::Leftover`] says which
/// file to remove.
fn complete(files: &CaFiles) -> Result<(), CaError> {
    let key = leftover_key(&files.key)?;
    let cert = ca_params()?.self_signed(&key)?;
    put_in_place(&files.cert, cert.pem().as_bytes(), 0o644)
}

/// The key a stopped CA creation left at `path`, if it is its owner's alone and can be read.
fn leftover_key(path: &Path) -> Result<KeyPair, CaError> {
    check_key_mode(path)?;
    let leftover = |cause: String| CaError::Leftover { path: path.to_owned(), cause };
    let pem = fs::read_to_string(path).map_err(|e| leftover(e.to_string()))?;
    KeyPair::from_pem(&pem).map_err(|e| leftover(e.to_string()))
}

/// Whether `serve` can complete the CA whose key at `path` has no certificate beside it
/// (for `config check`).
pub fn check_leftover_key(path: &Path) -> Result<(), CaError> {
    leftover_key(path).map(drop)
}

fn ca_params() -> Result<CertificateParams, CaError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let host = hostname();
    params.distinguished_name.push(DnType::CommonName, format!("robots-proxy CA ({host})"));
    params.distinguished_name.push(DnType::OrganizationName, "robots-proxy");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = SystemTime::now();
    params.not_before = (now - Duration::from_secs(24 * 3600)).into();
    params.not_after = (now + Duration::from_secs(10 * 365 * 24 * 3600)).into();
    params.serial_number = Some(serial());
    Ok(params)
}

fn hostname() -> String {
    fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_default()
}

#[cfg(test)]
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CaError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| CaError::Io { path: path.to_owned(), source };
    let mut f =
        fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(io)?;
    std::io::Write::write_all(&mut f, bytes).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Writes `bytes` to `path`, which must not exist, all at once
/// ([`robots_proxy_owner_only::write_new`]), so `path` is either absent or whole.
fn put_in_place(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CaError> {
    robots_proxy_owner_only::write_new(path, bytes, mode).map_err(|source| match source.kind() {
        std::io::ErrorKind::AlreadyExists => CaError::Exists(path.to_owned()),
        _ => CaError::Io { path: path.to_owned(), source },
    })
}

/// A random-enough, unique serial number: time and a counter.
fn serial() -> SerialNumber {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&nanos.to_be_bytes());
    bytes[8..].copy_from_slice(&n.to_be_bytes());
    bytes[0] &= 0x7f; // positive
    bytes[0] |= 0x01; // no leading zero byte
    SerialNumber::from_slice(&bytes)
}

/// The loaded CA, making and caching leaf certificates.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    leaf_key: KeyPair,
    /// `leaf_key` loaded once by the crypto provider: parsing a PKCS#8 key (and checking it
    /// against the certificate) for every new host cost more than signing the certificate.
    leaf_signer: Arc<dyn rustls::sign::SigningKey>,
    configs: moka::sync::Cache<String, Arc<ServerConfig>>,
    made: AtomicU64,
    /// The CA certificate's `notAfter`: no leaf is valid past it.
    not_after: SystemTime,
}

/// Refuses a CA key that the file's group or others may read or write (as SSH refuses a
/// private key that others can read). A key `ca init` or `serve` made has mode 0600.
fn check_key_mode(path: &Path) -> Result<(), CaError> {
    match robots_proxy_owner_only::too_open(path, robots_proxy_owner_only::KEY_FILE) {
        Ok(None) => Ok(()),
        Ok(Some(mode)) => Err(CaError::KeyMode { path: path.to_owned(), mode }),
        Err(source) => Err(CaError::Io { path: path.to_owned(), source }),
    }
}

impl CertificateAuthority {
    /// Loads the CA from `files`; the key must be its owner's alone ([`CaError::KeyMode`]).
    pub fn load(files: &CaFiles) -> Result<Self, CaError> {
        let read = |path: &Path| {
            fs::read_to_string(path).map_err(|source| CaError::Io { path: path.to_owned(), source })
        };
        let cert_pem = read(&files.cert)?;
        let key_pem = read(&files.key)?;
        check_key_mode(&files.key)?;
        let key = KeyPair::from_pem(&key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key)?;
        let ca_der = rustls::pki_types::pem::PemObject::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| CaError::Io {
                path: files.cert.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
            })?;
        let not_after = not_after(&ca_der).ok_or_else(|| CaError::Io {
            path: files.cert.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the CA certificate cannot be read as X.509",
            ),
        })?;
        let leaf_key = KeyPair::generate()?;
        let leaf_signer = provider().key_provider.load_private_key(PrivateKeyDer::Pkcs8(
            PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
        ))?;
        Ok(CertificateAuthority {
            issuer,
            ca_der,
            ca_pem: cert_pem,
            leaf_key,
            leaf_signer,
            configs: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(LEAF_CACHE_TTL)
                .build(),
            made: AtomicU64::new(0),
            not_after,
        })
    }

    /// Loads the CA from `files`, creating it first if neither file exists. Returns whether it
    /// was created (or its certificate made).
    ///
    /// A key with no certificate beside it is what a creation that stopped part way leaves
    /// (`init` puts the key in place before the certificate; a version before it wrote the
    /// key, then the certificate). No certificate was ever issued by it, so the creation is
    /// completed: a certificate is made for that key (which, were it a CA whose `ca.pem` was
    /// deleted, clients that trust the old certificate still accept, as the key is the same).
    /// A key that cannot be read is refused, naming the file to remove. For the default CA
    /// under `state_dir` only: a CA the operator names is never generated.
    pub fn load_or_create(files: &CaFiles) -> Result<(Self, bool), CaError> {
        let created = match (files.cert.exists(), files.key.exists()) {
            (false, false) => {
                init(files)?;
                true
            }
            (false, true) => {
                tracing::warn!(
                    key = %files.key.display(),
                    cert = %files.cert.display(),
                    "the CA key has no certificate beside it (a CA creation stopped part way): \
                     making its certificate"
                );
                complete(files)?;
                true
            }
            _ => false,
        };
        Ok((Self::load(files)?, created))
    }

    /// The CA certificate, PEM: what clients must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// How many leaf certificates this CA has signed so far.
    pub fn certificates_made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// A TLS server configuration presenting a certificate for `host` (a DNS name or an IP
    /// address), made on first use and cached.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, Arc<CaError>> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.configs.try_get_with(host.clone(), || self.make_config(&host))
    }

    /// Makes a certificate for `host` without caching it (for benchmarks of the fresh path).
    pub fn make_config(&self, host: &str) -> Result<Arc<ServerConfig>, CaError> {
        let leaf = self.leaf(host)?;
        let chain = vec![leaf.der().clone(), self.ca_der.clone()];
        let certified = rustls::sign::CertifiedKey::new(chain, self.leaf_signer.clone());
        debug_assert!(certified.keys_match().is_ok(), "the leaf certifies the leaf key");
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A leaf certificate for `host`, signed and counted: valid from an hour ago for
    /// [`LEAF_LIFETIME`], but never past the CA's own `notAfter` (an operator's CA close to
    /// its end must not issue leaves that outlive it).
    fn leaf(&self, host: &str) -> Result<rcgen::Certificate, CaError> {
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = SystemTime::now();
        params.not_before = (now - LEAF_BACKDATE).into();
        params.not_after = (now + LEAF_LIFETIME).min(self.not_after).into();
        params.serial_number = Some(serial());
        let leaf = params.signed_by(&self.leaf_key, &self.issuer)?;
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(leaf)
    }
}

/// A certificate's `notAfter`, or `None` when it cannot be parsed.
fn not_after(der: &CertificateDer<'_>) -> Option<SystemTime> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let secs = cert.validity().not_after.timestamp();
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_writes_private_key_0600_and_never_overwrites() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let files = CaFiles::in_dir(dir.path());
        init(&files).unwrap();
        let mode = fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(fs::read_to_string(&files.cert).unwrap().contains("BEGIN CERTIFICATE"));
        assert!(matches!(init(&files), Err(CaError::Exists(_))));
        let ca = CertificateAuthority::load(&files).unwrap();
        let a = ca.server_config("example.test").unwrap();
        let b = ca.server_config("EXAMPLE.test.").unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one config per host");
        assert!(ca.server_config("127.0.0.1").is_ok());
        assert!(ca.server_config("::1").is_ok());
    }

    #[test]
    fn a_ca_key_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let files = CaFiles::in_dir(dir.path());
        init(&files).unwrap();
        assert!(CertificateAuthority::load(&files).is_ok());
        for mode in [0o666, 0o644, 0o640, 0o620] {
            fs::set_permissions(&files.key, fs::Permissions::from_mode(mode)).unwrap();
            let err = CertificateAuthority::load(&files).err().expect("refused");
            assert!(matches!(err, CaError::KeyMode { .. }), "{mode:o}: {err}");
            assert!(err.to_string().contains("chmod 600"), "{err}");
        }
        fs::set_permissions(&files.key, fs::Permissions::from_mode(0o400)).unwrap();
        assert!(CertificateAuthority::load(&files).is_ok());
    }

    #[test]
    fn a_leaf_never_outlives_its_ca() {
        let dir = tempfile::tempdir().unwrap();
        let files = CaFiles::in_dir(dir.path());
        // An operator's CA with two days left: a week-long leaf would outlive it.
        let key = KeyPair::generate().unwrap();
        let mut params = ca_params().unwrap();
        let ends = SystemTime::now() + Duration::from_secs(2 * 24 * 3600);
        params.not_after = ends.into();
        let cert = params.self_signed(&key).unwrap();
        write_file(&files.key, key.serialize_pem().as_bytes(), 0o600).unwrap();
        write_file(&files.cert, cert.pem().as_bytes(), 0o644).unwrap();
        let ca = CertificateAuthority::load(&files).unwrap();
        let leaf = ca.leaf("example.test").unwrap();
        let leaf_ends = not_after(leaf.der()).unwrap();
        let ca_ends = not_after(&ca.ca_der).unwrap();
        assert!(leaf_ends <= ca_ends, "{leaf_ends:?} is past the CA's {ca_ends:?}");
        // A CA with years left gives the full week.
        let dir = tempfile::tempdir().unwrap();
        let files = CaFiles::in_dir(dir.path());
        init(&files).unwrap();
        let ca = CertificateAuthority::load(&files).unwrap();
        let leaf_ends = not_after(ca.leaf("example.test").unwrap().der()).unwrap();
        let week = leaf_ends.duration_since(SystemTime::now()).unwrap();
        assert!(week > LEAF_LIFETIME - Duration::from_secs(60), "{week:?}");
    }

    #[test]
    fn a_key_left_without_its_certificate_is_completed_not_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let files = CaFiles::in_dir(dir.path());
        // A creation that stopped after the key was in place.
        init(&files).unwrap();
        fs::remove_file(&files.cert).unwrap();
        let key = fs::read(&files.key).unwrap();
        let (ca, created) = CertificateAuthority::load_or_create(&files).expect("starts");
        assert!(created, "its certificate was made");
        assert_eq!(fs::read(&files.key).unwrap(), key, "the same key");
        assert!(ca.server_config("example.test").is_ok());
        // Later starts load it as it is.
        let (_, created) = CertificateAuthority::load_or_create(&files).unwrap();
        assert!(!created);
        assert!(fs::read_dir(dir.path()).unwrap().all(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name == CA_CERT_FILE || name == CA_KEY_FILE
        }));
        // A key cut short cannot be completed: the error names it and what to do.
        fs::remove_file(&files.cert).unwrap();
        fs::write(&files.key, &key[..key.len() / 2]).unwrap();
        let err = CertificateAuthority::load_or_create(&files).err().expect("refused");
        let text = err.to_string();
        assert!(matches!(err, CaError::Leftover { .. }), "{text}");
        assert!(text.contains("ca-key.pem") && text.contains("remove it"), "{text}");
    }

    #[test]
    fn load_names_the_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = CertificateAuthority::load(&CaFiles::in_dir(dir.path())).err().unwrap();
        assert!(err.to_string().contains("ca.pem"), "{err}");
    }
}
