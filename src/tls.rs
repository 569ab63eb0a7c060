//! TLS for the API listener (rustls with the ring provider).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// `[tls]` in the config file: both paths or neither.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, leaf first.
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// Why TLS cannot be set up: a setting, a file or the pair they make.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// One of `cert` and `key` without the other.
    #[error("tls: set both cert and key, or neither")]
    HalfConfigured,
    /// The certificate file is unreadable or not PEM.
    #[error("tls: cannot read certificates from {}: {source}", path.display())]
    Certificates {
        /// The certificate file.
        path: PathBuf,
        /// What reading it failed with.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("tls: no certificate in {}", path.display())]
    NoCertificate {
        /// The certificate file.
        path: PathBuf,
    },
    /// The key file is unreadable or holds no private key.
    #[error("tls: cannot read a private key from {}: {source}", path.display())]
    PrivateKey {
        /// The key file.
        path: PathBuf,
        /// What reading it failed with.
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refuses the protocol versions (its provider's fault, not the
    /// files').
    #[error("tls: {0}")]
    Protocols(rustls::Error),
    /// The key does not belong to the certificate, or rustls cannot use it.
    #[error("tls: the certificate and key do not make a usable pair: {0}")]
    Pair(rustls::Error),
}

/// The rustls server config, or None when TLS is not configured.
pub fn server_config(config: &TlsConfig) -> Result<Option<rustls::ServerConfig>, TlsError> {
    let (cert_path, key_path) = match (&config.cert, &config.key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        _ => return Err(TlsError::HalfConfigured),
    };
    let certs = CertificateDer::pem_file_iter(cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Certificates { path: cert_path.clone(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: cert_path.clone() });
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|source| TlsError::PrivateKey { path: key_path.clone(), source })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocols)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map(Some)
        .map_err(TlsError::Pair)
}
