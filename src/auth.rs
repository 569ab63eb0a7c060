//! Bearer-token authentication and the per-listener gate in front of every
//! route. Tokens are kept only as SHA-256 digests; docs/security.md gives the
//! threat model.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Submitting and cancelling jobs (every method other than GET and HEAD).
    Submit,
    /// Reading job state, proofs, keys, status and metrics.
    Read,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Submit => "submit",
            Scope::Read => "read",
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        match text {
            "submit" => Ok(Scope::Submit),
            "read" => Ok(Scope::Read),
            other => Err(format!("unknown scope {other:?} (known: submit, read)")),
        }
    }
}

fn all_scopes() -> Vec<Scope> {
    vec![Scope::Submit, Scope::Read]
}

/// `[auth]` in the config file.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub tokens: Vec<TokenConfig>,
    /// GET endpoints (other than /healthz and /v1/openapi.json) need a token
    /// with the read scope.
    pub read_requires_token: bool,
    /// Set by `--insecure` only: listen beyond loopback without any token.
    #[serde(skip)]
    pub insecure: bool,
    /// Without tokens, the `Host` names (beyond localhost, 127.0.0.1 and
    /// ::1) requests may carry, and the origins' hosts a browser may POST
    /// from: a DNS-rebinding or cross-site page names another.
    pub allowed_hosts: Vec<String>,
}

/// One token: its plaintext or the hex SHA-256 of it (so that the config
/// file need not hold the secret), and its scopes (default: all).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    #[serde(default, skip_serializing)]
    pub token: Option<String>,
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default = "all_scopes")]
    pub scopes: Vec<Scope>,
}

/// Parses `TOKEN` or `TOKEN:SCOPE,SCOPE`, the form of a `--token-file` line
/// and of a `CUZK_API_TOKENS` entry. Bearer tokens cannot hold `:` or
/// whitespace (RFC 6750's b64token), so the split is unambiguous.
pub fn parse_token_entry(entry: &str) -> Result<TokenConfig, String> {
    let (token, scopes) = match entry.split_once(':') {
        Some((token, scopes)) => (
            token,
            scopes
                .split(',')
                .map(|s| Scope::parse(s.trim()))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => (entry, all_scopes()),
    };
    check_token_text(token)?;
    Ok(TokenConfig {
        token: Some(token.to_string()),
        sha256: None,
        scopes,
    })
}

fn check_token_text(token: &str) -> Result<(), String> {
    let b64token = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
    if token.len() < 16 || !token.chars().all(b64token) {
        return Err("a token must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / =".into());
    }
    Ok(())
}

/// Tokens from a file, one per non-empty line (`#` starts a comment line).
pub fn read_token_file(path: &std::path::Path) -> Result<Vec<TokenConfig>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read token file {}: {e}", path.display()))?;
    text.lines()
        .map(str::trim)
        .enumerate()
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(n, line)| {
            parse_token_entry(line).map_err(|e| format!("{} line {}: {e}", path.display(), n + 1))
        })
        .collect()
}

/// Tokens from `CUZK_API_TOKENS`: entries separated by whitespace.
pub fn parse_token_list(text: &str) -> Result<Vec<TokenConfig>, String> {
    text.split_whitespace()
        .map(|e| parse_token_entry(e).map_err(|err| format!("CUZK_API_TOKENS: {err}")))
        .collect()
}

/// The tokens as the daemon keeps them, and which listener serves what.
pub struct Gate {
    tokens: Vec<([u8; 32], Vec<Scope>)>,
    read_requires_token: bool,
    /// Without tokens on loopback: the host names requests and origins may
    /// carry (None: no check, because tokens guard the daemon or
    /// `--insecure` opened it to every name).
    browser_guard: Option<Vec<String>>,
    /// The listener that serves only /metrics and /healthz.
    metrics_addr: Option<SocketAddr>,
}

impl Gate {
    /// Takes the tokens out of the config, hashing them and overwriting the
    /// plaintext, and checks the loopback rule for `listen`.
    pub fn new(config: &mut AuthConfig, listen: &str) -> Result<Self, String> {
        let mut tokens = Vec::new();
        for entry in std::mem::take(&mut config.tokens) {
            let digest = match (entry.token, entry.sha256) {
                (Some(mut token), None) => {
                    let checked = check_token_text(&token);
                    let digest = Sha256::digest(token.as_bytes()).into();
                    token.zeroize();
                    checked?;
                    digest
                }
                (None, Some(hex_digest)) => hex::decode(hex_digest.trim())
                    .ok()
                    .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                    .ok_or("auth: sha256 must be 64 hex digits")?,
                _ => return Err("auth: give each token exactly one of token and sha256".into()),
            };
            if entry.scopes.is_empty() {
                return Err("auth: a token needs at least one scope".into());
            }
            tokens.push((digest, entry.scopes));
        }
        if tokens.is_empty() && !config.insecure && !is_loopback(listen)? {
            return Err(format!(
                "refusing to listen on {listen} without API tokens: anyone who can reach it could \
                 submit and cancel jobs. Configure tokens ([auth] tokens, --token-file or \
                 CUZK_API_TOKENS), listen on a loopback address, or pass --insecure"
            ));
        }
        if tokens.is_empty() && config.insecure && !is_loopback(listen)? {
            log::warn!("--insecure: {listen} accepts unauthenticated requests");
        }
        let browser_guard = (tokens.is_empty() && !config.insecure).then(|| {
            let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
            hosts.extend(config.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
            hosts
        });
        Ok(Self {
            tokens,
            read_requires_token: config.read_requires_token,
            browser_guard,
            metrics_addr: None,
        })
    }

    pub fn with_metrics_listener(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// The scopes of a presented token. Every stored digest is compared, in
    /// constant time, so that timing says nothing about which bytes matched.
    fn scopes_of(&self, presented: &str) -> Option<&[Scope]> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (stored, scopes) in &self.tokens {
            if bool::from(stored.ct_eq(&digest)) {
                found = Some(scopes.as_slice());
            }
        }
        found
    }

    /// None to let the request through, or the response that refuses it.
    fn refuse(&self, req: &ServiceRequest) -> Option<HttpResponse> {
        let path = req.path();
        if self.metrics_addr == Some(req.app_config().local_addr())
            && !matches!(path, "/metrics" | "/healthz" | "/readyz")
        {
            return Some(
                HttpResponse::NotFound().json(
                    json!({"error": "the metrics listener serves only /metrics, /healthz and /readyz"}),
                ),
            );
        }
        let reading = matches!(*req.method(), Method::GET | Method::HEAD);
        if *req.method() == Method::POST && has_body(req) && !is_json(req) {
            // A form or text/plain POST is what a cross-site page can send
            // without asking; a JSON one needs a preflight nobody answers.
            return Some(HttpResponse::UnsupportedMediaType().json(json!({
                "error": "POST requests are JSON: send Content-Type: application/json"
            })));
        }
        if let Some(allowed) = &self.browser_guard {
            if let Some(refusal) = foreign_host(req, allowed, !reading) {
                return Some(HttpResponse::Forbidden().json(json!({ "error": refusal })));
            }
        }
        if self.tokens.is_empty() || matches!(path, "/healthz" | "/readyz" | "/v1/openapi.json") {
            return None;
        }
        let needed = match *req.method() {
            Method::GET | Method::HEAD if !self.read_requires_token => return None,
            Method::GET | Method::HEAD => Scope::Read,
            _ => Scope::Submit,
        };
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let Some(presented) = presented else {
            return Some(unauthorized(
                "Bearer realm=\"cuzk\"",
                "this endpoint needs a token: send Authorization: Bearer <token>",
            ));
        };
        match self.scopes_of(presented) {
            None => Some(unauthorized(
                "Bearer realm=\"cuzk\", error=\"invalid_token\"",
                "invalid token",
            )),
            Some(scopes) if !scopes.contains(&needed) => Some(
                HttpResponse::Forbidden()
                    .insert_header((
                        header::WWW_AUTHENTICATE,
                        format!(
                            "Bearer realm=\"cuzk\", error=\"insufficient_scope\", scope=\"{}\"",
                            needed.as_str()
                        ),
                    ))
                    .json(json!({
                        "error": format!("this token lacks the {} scope", needed.as_str())
                    })),
            ),
            Some(_) => None,
        }
    }
}

/// Whether the request carries a body (a bodiless POST, such as a cancel,
/// has nothing to declare).
fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|n| n.trim() != "0")
}

/// Whether the request declares a JSON body (`application/json` or a
/// `+json` type, parameters allowed).
fn is_json(req: &ServiceRequest) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .is_some_and(|t| t == "application/json" || (t.starts_with("application/") && t.ends_with("+json")))
}

/// Why a request from a browser is refused in the no-token mode: its
/// `Host` is not a name of this daemon (DNS rebinding), or, for a request
/// that changes state, its `Origin` is another site (CSRF).
fn foreign_host(req: &ServiceRequest, allowed: &[String], changes_state: bool) -> Option<String> {
    let known = |host: &str| allowed.iter().any(|a| a.eq_ignore_ascii_case(host));
    let host = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !host.is_empty() && !known(host_name(host)) {
        return Some(format!(
            "Host {host:?} is not a name of this daemon (a DNS-rebinding guard without tokens); add it to auth.allowed_hosts"
        ));
    }
    let origin = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok());
    match origin {
        Some(origin) if changes_state => {
            let host = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
            (!known(host_name(host))).then(|| {
                format!("a request from origin {origin:?} may not change state (a CSRF guard without tokens)")
            })
        }
        _ => None,
    }
}

/// The name in a `Host` header or an origin's authority: the port and the
/// brackets of an IPv6 address removed.
fn host_name(authority: &str) -> &str {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => authority,
    }
}

fn unauthorized(challenge: &'static str, message: &str) -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header((header::WWW_AUTHENTICATE, challenge))
        .json(json!({ "error": message }))
}

/// Whether every address `listen` resolves to is a loopback address.
pub fn is_loopback(listen: &str) -> Result<bool, String> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve listen address {listen}: {e}"))?
        .collect();
    Ok(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()))
}

/// The middleware: answers 401, 403 or 404 itself, or passes the request on.
pub async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let refusal = req
        .app_data::<web::Data<Arc<Gate>>>()
        .and_then(|gate| gate.refuse(&req));
    match refusal {
        Some(response) => Ok(req.into_response(response).map_into_right_body()),
        None => Ok(next.call(req).await?.map_into_left_body()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_entries_parse() {
        let t = parse_token_entry("abcdefghijklmnop:read").unwrap();
        assert_eq!(t.token.as_deref(), Some("abcdefghijklmnop"));
        assert_eq!(t.scopes, vec![Scope::Read]);
        let t = parse_token_entry("abcdefghijklmnop").unwrap();
        assert_eq!(t.scopes, all_scopes());
        assert!(parse_token_entry("short").is_err());
        assert!(parse_token_entry("abcdefghijklmnop:admin").is_err());
        assert_eq!(
            parse_token_list(" a234567890123456  b234567890123456:submit\n")
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn loopback_rule() {
        assert!(is_loopback("127.0.0.1:0").unwrap());
        assert!(is_loopback("[::1]:0").unwrap());
        assert!(!is_loopback("0.0.0.0:0").unwrap());
        let mut open = AuthConfig::default();
        assert!(Gate::new(&mut open, "0.0.0.0:0")
            .err()
            .unwrap()
            .contains("--insecure"));
        open.insecure = true;
        assert!(Gate::new(&mut open, "0.0.0.0:0").is_ok());
    }

    #[test]
    fn hashed_tokens_match_only_themselves() {
        let mut config = AuthConfig {
            tokens: vec![
                parse_token_entry("reader0123456789:read").unwrap(),
                TokenConfig {
                    token: None,
                    sha256: Some(hex::encode(Sha256::digest(b"submitter0123456"))),
                    scopes: vec![Scope::Submit],
                },
            ],
            ..AuthConfig::default()
        };
        let gate = Gate::new(&mut config, "0.0.0.0:0").unwrap();
        assert!(config.tokens.is_empty());
        assert_eq!(gate.scopes_of("reader0123456789"), Some(&[Scope::Read][..]));
        assert_eq!(
            gate.scopes_of("submitter0123456"),
            Some(&[Scope::Submit][..])
        );
        assert_eq!(gate.scopes_of("reader012345678"), None);
    }
}
