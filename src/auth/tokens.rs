//! Tokens and where they come from: the `[auth]` section, a token file's
//! lines and `CUZK_API_TOKENS` (`TOKEN[@TENANT][:SCOPE,SCOPE]`), each token
//! checked and, where it must be kept, held as its SHA-256 digest; the
//! scopes a token may hold; the bearer token of an `authorization` header,
//! read the same way by both front ends.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cuzk_actors::Tenant;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use super::error::{AuthError, TokenError};
use crate::tenants::{check_tenant_name, TenantLimits};

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Submitting and cancelling jobs (every method other than GET and HEAD).
    Submit,
    /// Reading job state, proofs, keys, status and metrics.
    Read,
    /// Everything submit and read allow, for every tenant's jobs (reading,
    /// cancelling, job ids in `/v1/workers` and `/v1/timeline`), and the
    /// operator's routes: preloading and evicting parameter files.
    Admin,
    /// Asking for priority `critical` on any kind: without it, only the
    /// kinds in `scheduler.critical_kinds` keep a critical priority, and
    /// others are lowered to their default. Only a token that lists it has
    /// it (admin does not imply it), so that the critical lane, which a
    /// WinningPoSt needs within seconds, serves only whom the operator named.
    Critical,
}

impl Scope {
    /// The scope's name, as token entries and refusals write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Submit => "submit",
            Scope::Read => "read",
            Scope::Admin => "admin",
            Scope::Critical => "critical",
        }
    }

    fn parse(text: &str) -> Result<Self, TokenError> {
        match text {
            "submit" => Ok(Scope::Submit),
            "read" => Ok(Scope::Read),
            "admin" => Ok(Scope::Admin),
            "critical" => Ok(Scope::Critical),
            other => Err(TokenError::UnknownScope(other.to_string())),
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
    /// The tokens of the config file; more come from `--token-file` and `CUZK_API_TOKENS`.
    pub tokens: Vec<TokenConfig>,
    /// GET endpoints (other than /healthz, /readyz and /v1/openapi.json) need a token
    /// with the read scope.
    pub read_requires_token: bool,
    /// Set by `--insecure` only: listen beyond loopback without any token.
    #[serde(skip)]
    pub insecure: bool,
    /// Without tokens, the `Host` names (beyond localhost, 127.0.0.1 and
    /// ::1) requests may carry, and the hosts of the origins (with the
    /// request's own scheme and port) a browser may change state from: a
    /// DNS-rebinding or cross-site page names another.
    pub allowed_hosts: Vec<String>,
    /// A reverse proxy forwards other hosts' requests to this listener, so
    /// reaching loopback no longer means being on this host: without tokens
    /// the daemon refuses to start (unless `--insecure`), as it does off
    /// loopback.
    pub behind_proxy: bool,
    /// `[auth.tenants.NAME]`: a tenant's own limits.
    pub tenants: BTreeMap<String, TenantLimits>,
    /// The limits of a tenant without an entry in `tenants` (default: none
    /// beyond the daemon-wide ones).
    pub tenant_defaults: TenantLimits,
    /// Where the tokens came from besides this section, read again on
    /// SIGHUP. Set by `cuzk serve`.
    #[serde(skip)]
    pub sources: TokenSources,
}

/// Where `cuzk serve` found tokens, so that SIGHUP can read them again.
#[derive(Clone, Debug, Default)]
pub struct TokenSources {
    /// The config file (`--config`), whose `[auth]` is read again.
    pub config_file: Option<PathBuf>,
    /// `--token-file`, read again.
    pub token_file: Option<PathBuf>,
    /// The tokens of `CUZK_API_TOKENS`, hashed: the variable is read once
    /// and removed from the environment, so these are kept instead. None:
    /// the variable was not set (set and empty is a source with no token).
    pub from_env: Option<Vec<TokenConfig>>,
}

impl TokenSources {
    /// A source of tokens besides the config file that was named, for the
    /// refusal when no token is in force: it was expected to hold some, so
    /// it is a secret that did not arrive (an empty file, an empty variable).
    pub(super) fn named(&self) -> Option<String> {
        match (&self.token_file, &self.from_env) {
            (Some(path), _) => Some(format!("token file {}", path.display())),
            (None, Some(_)) => Some("CUZK_API_TOKENS".into()),
            (None, None) => None,
        }
    }
}

impl AuthConfig {
    /// Adds the tokens of the token file and of the environment to the
    /// section's own.
    pub fn add_source_tokens(&mut self) -> Result<(), AuthError> {
        if let Some(path) = &self.sources.token_file {
            self.tokens.extend(read_token_file(path)?);
        }
        self.tokens.extend(self.sources.from_env.iter().flatten().cloned());
        Ok(())
    }
}

/// One token: its plaintext or the hex SHA-256 of it (so that the config
/// file need not hold the secret), its scopes (default: submit and read)
/// and its tenant (default: `default`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// The bearer token itself; never written back out (`skip_serializing`).
    #[serde(default, skip_serializing)]
    pub token: Option<String>,
    /// Hex SHA-256 of the token, so that the config file need not hold the secret.
    #[serde(default)]
    pub sha256: Option<String>,
    /// What the token may do (submit, read, critical, admin).
    #[serde(default = "all_scopes")]
    pub scopes: Vec<Scope>,
    /// Whose jobs the token submits and sees, and whose limits apply.
    #[serde(default)]
    pub tenant: Tenant,
}

impl TokenConfig {
    /// The same token held as its digest, the plaintext overwritten: what
    /// the daemon keeps of a token it must read again on reload.
    pub fn hashed(mut self) -> Result<Self, TokenError> {
        if let Some(mut token) = self.token.take() {
            let checked = check_token_text(&token);
            self.sha256 = Some(hex::encode(Sha256::digest(token.as_bytes())));
            token.zeroize();
            checked?;
        }
        Ok(self)
    }
}

/// Parses `TOKEN[@TENANT][:SCOPE,SCOPE]`, the form of a `--token-file` line
/// and of a `CUZK_API_TOKENS` entry. Bearer tokens cannot hold `:`, `@` or
/// whitespace (RFC 6750's b64token), nor can tenant names, so the splits are
/// unambiguous.
pub fn parse_token_entry(entry: &str) -> Result<TokenConfig, TokenError> {
    let (token, scopes) = match entry.split_once(':') {
        Some((token, scopes)) => {
            (token, scopes.split(',').map(|s| Scope::parse(s.trim())).collect::<Result<Vec<_>, _>>()?)
        }
        None => (entry, all_scopes()),
    };
    let (token, tenant) = match token.split_once('@') {
        Some((token, tenant)) => {
            check_tenant_name(tenant)?;
            (token, Tenant(tenant.to_string()))
        }
        None => (token, Tenant::default()),
    };
    check_token_text(token)?;
    Ok(TokenConfig { token: Some(token.to_string()), sha256: None, scopes, tenant })
}

/// Refused unless `token` is a bearer token (RFC 6750's b64token) of at
/// least 16 characters.
pub(super) fn check_token_text(token: &str) -> Result<(), TokenError> {
    let b64token = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
    if token.len() < 16 || !token.chars().all(b64token) {
        return Err(TokenError::Text);
    }
    Ok(())
}

/// Tokens from a file, one per non-empty line (`#` starts a comment line).
pub fn read_token_file(path: &std::path::Path) -> Result<Vec<TokenConfig>, AuthError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| AuthError::TokenFile { path: path.to_path_buf(), source })?;
    text.lines()
        .map(str::trim)
        .enumerate()
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(n, line)| {
            parse_token_entry(line).map_err(|source| AuthError::TokenFileLine {
                path: path.to_path_buf(),
                line: n + 1,
                source,
            })
        })
        .collect()
}

/// Tokens from `CUZK_API_TOKENS`: entries separated by whitespace, each kept
/// as its digest (the variable is read once, and its text overwritten).
pub fn parse_token_list(text: &str) -> Result<Vec<TokenConfig>, AuthError> {
    text.split_whitespace()
        .map(|entry| parse_token_entry(entry).and_then(TokenConfig::hashed).map_err(AuthError::Environment))
        .collect()
}

/// The token of an `authorization` header's value (`Bearer <token>`, the
/// scheme in any case), as HTTP and gRPC both send it.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_entries_parse() {
        let t = parse_token_entry("abcdefghijklmnop:read").unwrap();
        assert_eq!(t.token.as_deref(), Some("abcdefghijklmnop"));
        assert_eq!(t.scopes, vec![Scope::Read]);
        assert_eq!(t.tenant, Tenant::default());
        let t = parse_token_entry("abcdefghijklmnop").unwrap();
        assert_eq!(t.scopes, all_scopes());
        assert_eq!(parse_token_entry("short").err(), Some(TokenError::Text));
        assert_eq!(
            parse_token_entry("abcdefghijklmnop:owner").err(),
            Some(TokenError::UnknownScope("owner".into()))
        );
        let t = parse_token_entry("abcdefghijklmnop@acme-eu:submit,admin").unwrap();
        assert_eq!(t.token.as_deref(), Some("abcdefghijklmnop"));
        assert_eq!(t.tenant.as_str(), "acme-eu");
        assert_eq!(t.scopes, vec![Scope::Submit, Scope::Admin]);
        let t = parse_token_entry("abcdefghijklmnop@acme").unwrap();
        assert_eq!((t.tenant.as_str(), t.scopes), ("acme", all_scopes()));
        let t = parse_token_entry("abcdefghijklmnop:submit,critical").unwrap();
        assert_eq!(t.scopes, vec![Scope::Submit, Scope::Critical]);
        // An empty or odd tenant, a token too short once the tenant is
        // split off, a second `@`: refused, never guessed at.
        for bad in [
            "abcdefghijklmnop@",
            "abcdefghijklmnop@:read",
            "abcdefghijklmnop@a b",
            "abcdefghijklmnop@a@b",
            "abcdefg@acme-tenant-name",
            "@acme",
        ] {
            assert!(parse_token_entry(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_token_list(" a234567890123456  b234567890123456:submit\n").unwrap().len(), 2);
    }

    #[test]
    fn hashing_keeps_no_plaintext_and_checks_the_token() {
        let t = parse_token_entry("abcdefghijklmnop@acme:read").unwrap().hashed().unwrap();
        assert_eq!(t.token, None);
        assert_eq!(t.sha256, Some(hex::encode(Sha256::digest(b"abcdefghijklmnop"))));
        assert_eq!((t.tenant.as_str(), t.scopes.clone()), ("acme", vec![Scope::Read]));
        let short = TokenConfig { token: Some("short".into()), ..t };
        assert_eq!(short.hashed().err(), Some(TokenError::Text));
    }

    #[test]
    fn a_bearer_token_is_read_whatever_the_schemes_case() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token(" bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
