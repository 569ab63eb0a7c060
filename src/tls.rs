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

/// The rustls server config, or None when TLS is not configured.
pub fn server_config(config: &TlsConfig) -> Result<Option<rustls::ServerConfig>, String> {
    let (cert_path, key_path) = match (&config.cert, &config.key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        _ => return Err("tls: set both cert and key, or neither".into()),
    };
    let certs = CertificateDer::pem_file_iter(cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            format!(
                "tls: cannot read certificates from {}: {e}",
                cert_path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!("tls: no certificate in {}", cert_path.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
        format!(
            "tls: cannot read a private key from {}: {e}",
            key_path.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map(Some)
        .map_err(|e| format!("tls: the certificate and key do not make a usable pair: {e}"))
}
