//! TLS: the one crypto provider, the proxy's CA, the verified client for origins, and the TLS
//! listener for clients.
//!
//! The binary links exactly one rustls crypto provider, *ring* (features are chosen so that
//! aws-lc-rs is never pulled in), and every rustls config is built with
//! `builder_with_provider(provider())`, so no process-wide default is needed.

pub mod ca;
pub mod listener;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

use robots_proxy_units::bounds::{duration, Bound, DAY, POSITIVE};
use robots_proxy_units::{raw_section, Problems};

/// The crypto provider every TLS configuration of the process uses.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<CryptoProvider>> = std::sync::OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// How CONNECT requests (HTTPS through the proxy) are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpsMode {
    /// Terminate the client's TLS with a certificate from the proxy's CA, decide every request
    /// inside exactly as for plain HTTP, and forward over a fresh, verified TLS connection.
    Intercept,
    /// Relay bytes without looking inside; refuse the CONNECT only when the token's rules for
    /// the authority disallow every path.
    Tunnel,
    /// Refuse every CONNECT.
    Reject,
}

/// `[https]`
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct HttpsSection {
    /// `intercept`, `tunnel` or `reject`.
    pub mode: HttpsMode,
    /// Ports a CONNECT may go to; others are refused with 403.
    pub connect_ports: Vec<u16>,
    /// The CA certificate (PEM) used to sign leaf certificates. Default: `ca/ca.pem` under
    /// `state_dir`, created on first start in intercept mode.
    pub ca_cert: Option<std::path::PathBuf>,
    /// The CA key (PEM). Default: `ca/ca-key.pem` under `state_dir`.
    pub ca_key: Option<std::path::PathBuf>,
    /// Extra CA certificates (PEM) trusted for origins, besides the built-in web PKI roots.
    pub upstream_ca_file: Option<std::path::PathBuf>,
    /// Write an audit record for every allowed tunnel too (tunnel mode).
    pub audit_tunnels: bool,
    /// Close a tunnel after this long without traffic in either direction.
    #[serde(with = "humantime_serde")]
    pub tunnel_idle_timeout: std::time::Duration,
}

impl Default for HttpsSection {
    fn default() -> Self {
        HttpsSection {
            mode: HttpsMode::Intercept,
            connect_ports: vec![443],
            ca_cert: None,
            ca_key: None,
            upstream_ca_file: None,
            audit_tunnels: false,
            tunnel_idle_timeout: std::time::Duration::from_secs(300),
        }
    }
}

raw_section!(HttpsSection, RawHttpsSection, "https");

/// The bounds of `[https]`.
pub const HTTPS_BOUNDS: &[Bound<HttpsSection>] =
    &[duration("https.tunnel_idle_timeout", |c| c.tunnel_idle_timeout, POSITIVE, DAY)];

impl TryFrom<RawHttpsSection> for HttpsSection {
    type Error = Problems;

    /// The bounds, the ports, and the CA's two files.
    fn try_from(raw: RawHttpsSection) -> Result<Self, Problems> {
        let h = raw.0;
        let mut problems = Problems::new();
        problems.bounds(HTTPS_BOUNDS, &h);
        problems.need(!h.connect_ports.is_empty(), "https.connect_ports", || {
            "must list at least one port (use https.mode = \"reject\" to refuse CONNECT)".into()
        });
        problems.need(!h.connect_ports.contains(&0), "https.connect_ports", || {
            "0 is not a port".into()
        });
        problems.need(h.ca_cert.is_some() == h.ca_key.is_some(), "https.ca_cert", || {
            "https.ca_cert and https.ca_key must be set together".into()
        });
        problems.need(h.ca_cert.is_none() || h.ca_cert != h.ca_key, "https.ca_key", || {
            "names the same file as https.ca_cert; the CA certificate and its key need files of \
             their own"
                .into()
        });
        problems.or_build(|| h)
    }
}

/// Why the client configuration for origins cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientTlsError {
    /// The extra CA file could not be read.
    #[error("https.upstream_ca_file {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The extra CA file holds no usable certificate.
    #[error("https.upstream_ca_file {path}: {reason}")]
    Certificates {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// rustls refused the configuration.
    #[error("TLS client configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// The TLS configuration for connections to origins: web PKI roots plus the optional extra CA
/// file; certificates are always verified.
pub fn client_config(
    extra_ca: Option<&std::path::Path>,
) -> Result<rustls::ClientConfig, ClientTlsError> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_ca {
        let pem = std::fs::read(path)
            .map_err(|source| ClientTlsError::Read { path: path.to_owned(), source })?;
        let mut added = 0;
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| ClientTlsError::Certificates {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            roots.add(cert).map_err(|e| ClientTlsError::Certificates {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(ClientTlsError::Certificates {
                path: path.to_owned(),
                reason: "no PEM certificate found".to_owned(),
            });
        }
    }
    // ALPN is left empty: hyper-rustls sets it from the HTTP versions it enables.
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A connector for `http` and `https` URLs: TLS with `tls` (HTTP/2 or HTTP/1.1 by ALPN), TCP
/// with `connect_timeout` and no Nagle delay, to addresses `guard` allows only (the SSRF guard,
/// see [`crate::guard`]). The same connector type serves forwarding and robots.txt fetches, so
/// neither can reach a prohibited address.
pub fn https_connector(
    tls: rustls::ClientConfig,
    connect_timeout: std::time::Duration,
    guard: Arc<crate::guard::DestinationGuard>,
) -> hyper_rustls::HttpsConnector<crate::guard::GuardedConnector> {
    let settings = crate::guard::ConnectSettings::origins(connect_timeout);
    let tcp = crate::guard::GuardedConnector::new(guard, settings);
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(tcp)
}
