//! TLS: the one crypto provider, the proxy's CA, and the verified client for origins.
//!
//! The binary links exactly one rustls crypto provider, *ring* (features are chosen so that
//! aws-lc-rs is never pulled in), and every rustls config is built with
//! `builder_with_provider(provider())`, so no process-wide default is needed.

pub mod ca;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The crypto provider every TLS configuration of the process uses.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: std::sync::OnceLock<Arc<CryptoProvider>> = std::sync::OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}
