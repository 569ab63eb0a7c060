//! TLS to the database: the `sslmode` and `sslrootcert` options of a
//! connection string, read as libpq reads them (the client library itself
//! knows only `disable`, `prefer` and `require`, and no CA file), and the
//! rustls settings they ask for, on the ring provider the API listener uses.
//!
//! - `disable`: never TLS.
//! - `prefer` (the default, as in libpq): TLS when the server offers it,
//!   without verifying the server; in clear when it does not.
//! - `require`: TLS or no connection, without verifying the server (libpq's
//!   `require` without a CA file): safe from a passive listener, not from
//!   an active one.
//! - `verify-full`: TLS, the server's chain verified against the CA
//!   certificates of `sslrootcert` and its name against the host connected
//!   to.

use std::path::PathBuf;
use std::sync::Arc;

use postgres::config::SslMode;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Why the TLS options of a connection string cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsSettingError {
    /// `allow`, `verify-ca` or a word libpq does not know either.
    #[error("sslmode={0} is not supported: use disable, prefer, require or verify-full")]
    Mode(String),
    /// verify-full has nothing to verify against: no system roots are read.
    #[error("sslmode=verify-full needs sslrootcert=<a PEM file of the CA certificates to trust>")]
    NoRootCert,
    /// A CA file with a mode that would not read it: refused rather than
    /// letting the operator believe the server is verified.
    #[error("sslrootcert is read only with sslmode=verify-full: sslmode={0} does not verify the server")]
    RootCertUnused(String),
    /// The CA file is missing, unreadable or not PEM.
    #[error("sslrootcert={}: cannot read certificates: {source}", path.display())]
    Unreadable {
        /// The CA file (`sslrootcert`).
        path: PathBuf,
        /// What reading it failed with.
        source: rustls::pki_types::pem::Error,
    },
    /// The CA file holds no certificate.
    #[error("sslrootcert={}: no certificate in the file", path.display())]
    NoCertificate {
        /// The CA file.
        path: PathBuf,
    },
    /// A certificate in the CA file that rustls cannot use as a root.
    #[error("sslrootcert={}: not a usable CA certificate: {source}", path.display())]
    Unusable {
        /// The CA file.
        path: PathBuf,
        /// Why rustls refused the certificate.
        source: rustls::Error,
    },
    /// rustls refuses the protocol versions (its provider's fault, not the
    /// settings').
    #[error("TLS: {0}")]
    Protocols(rustls::Error),
}

/// A connection string's TLS, read.
pub struct Tls {
    /// The connection string without `sslmode` and `sslrootcert`, for the
    /// client's own parser (which refuses `verify-full` and `sslrootcert`).
    pub rest: String,
    /// What the client is told: verify-full is `Require` with a verifying
    /// connector.
    pub mode: SslMode,
    /// How a TLS session is set up (never used under `Disable`).
    pub connector: MakeRustlsConnect,
}

/// The TLS that `url` asks for, and `url` without the options read here.
pub fn read(url: &str) -> Result<Tls, TlsSettingError> {
    let (rest, written, root_cert) = take_tls_options(url);
    let written = written.unwrap_or_else(|| "prefer".into());
    let (mode, verified) = match written.as_str() {
        "disable" => (SslMode::Disable, false),
        "prefer" => (SslMode::Prefer, false),
        "require" => (SslMode::Require, false),
        "verify-full" => (SslMode::Require, true),
        _ => return Err(TlsSettingError::Mode(written)),
    };
    let roots = match (verified, root_cert) {
        (true, Some(path)) => Some(roots(PathBuf::from(path))?),
        (true, None) => return Err(TlsSettingError::NoRootCert),
        (false, Some(_)) => return Err(TlsSettingError::RootCertUnused(written)),
        (false, None) => None,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsSettingError::Protocols)?;
    let config = match roots {
        // webpki checks the chain and the name the client connects to (the
        // URL's host, not `hostaddr`).
        Some(roots) => builder.with_root_certificates(roots).with_no_client_auth(),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            .with_no_client_auth(),
    };
    Ok(Tls { rest, mode, connector: MakeRustlsConnect::new(config) })
}

/// The CA certificates of the PEM file at `path`.
fn roots(path: PathBuf) -> Result<RootCertStore, TlsSettingError> {
    let certs = CertificateDer::pem_file_iter(&path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsSettingError::Unreadable { path: path.clone(), source })?;
    if certs.is_empty() {
        return Err(TlsSettingError::NoCertificate { path });
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|source| TlsSettingError::Unusable { path: path.clone(), source })?;
    }
    Ok(roots)
}

/// `url` without its `sslmode` and `sslrootcert` options, and their values
/// (the last of each, as the client reads a repeated option): from the
/// query of a URL (`postgres://...?sslmode=require`) or from `key=value`
/// pairs (`host=db sslmode=require`).
fn take_tls_options(url: &str) -> (String, Option<String>, Option<String>) {
    let is_tls = |key: &str| key == "sslmode" || key == "sslrootcert";
    // The TLS options in the order written.
    let mut taken = Vec::new();
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            Some((base, query)) => {
                let mut kept = Vec::new();
                for pair in query.split('&') {
                    match pair.split_once('=') {
                        Some((key, value)) if is_tls(key) => {
                            taken.push((key.to_string(), percent_decoded(value)))
                        }
                        _ => kept.push(pair),
                    }
                }
                if kept.is_empty() {
                    base.to_string()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
            None => url.to_string(),
        }
    } else {
        let mut rest = url.to_string();
        let mut spans = Vec::new();
        for (span, key, value) in pairs(url) {
            if is_tls(&key) {
                spans.push(span);
                taken.push((key, value));
            }
        }
        // From the end, so that the spans left to cut stay where they were.
        for span in spans.into_iter().rev() {
            rest.replace_range(span, "");
        }
        rest
    };
    let last = |name: &str| taken.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    (rest, last("sslmode"), last("sslrootcert"))
}

/// A URL query value with its `%XX` escapes decoded (a CA file's path may
/// hold escaped characters).
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| value.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `key=value` pairs of a libpq connection string, each with the span
/// of its text: spaces may surround the `=`, a value may be quoted ('...')
/// and hold `\'` and `\\`, an unquoted one may escape with `\`. Stops at
/// the first thing that is not a pair, leaving it to the client's parser
/// to refuse.
fn pairs(text: &str) -> Vec<(std::ops::Range<usize>, String, String)> {
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    let skip_spaces = |chars: &mut std::iter::Peekable<std::str::CharIndices>| {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    };
    loop {
        skip_spaces(&mut chars);
        let Some(&(start, _)) = chars.peek() else { break };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        skip_spaces(&mut chars);
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            break;
        }
        skip_spaces(&mut chars);
        let quoted = chars.next_if(|(_, c)| *c == '\'').is_some();
        let mut value = String::new();
        let mut end = text.len();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, c)| c)),
                '\'' if quoted => {
                    end = at + 1;
                    break;
                }
                c if c.is_whitespace() && !quoted => {
                    end = at;
                    break;
                }
                c => value.push(c),
            }
        }
        found.push((start..end, key, value));
    }
    found
}

/// Accepts the server's certificate unchecked, as libpq's `prefer` and
/// `require` do without a CA file; the handshake's signatures are still
/// checked with the provider's algorithms, so the session is encrypted to
/// whoever holds the key of the certificate shown.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::take_tls_options;

    #[test]
    fn tls_options_are_taken_from_both_forms_and_the_rest_kept() {
        let cases = [
            ("postgres://u:p@db/jobs", "postgres://u:p@db/jobs", None, None),
            (
                "postgres://u:p@db/jobs?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
                "postgres://u:p@db/jobs?application_name=x",
                Some("verify-full"),
                Some("/etc/ca.pem"),
            ),
            ("postgresql://db/jobs?sslmode=require", "postgresql://db/jobs", Some("require"), None),
            (
                "host=db sslmode = 'verify-full' sslrootcert='/a b/c\\'a.pem' user=u",
                "host=db   user=u",
                Some("verify-full"),
                Some("/a b/c'a.pem"),
            ),
            ("host=db sslmode=disable sslmode=require", "host=db  ", Some("require"), None),
        ];
        for (url, rest, mode, root_cert) in cases {
            let (kept, found_mode, found_root) = take_tls_options(url);
            assert_eq!(kept, rest, "{url}");
            assert_eq!(found_mode.as_deref(), mode, "{url}");
            assert_eq!(found_root.as_deref(), root_cert, "{url}");
        }
    }
}
