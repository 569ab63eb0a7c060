//! Bearer-token authentication and the per-listener gate in front of every
//! route: it resolves a token to its tenant and scopes (a `Caller` in the
//! request's extensions) and can be replaced while requests run (SIGHUP).
//! Tokens are kept only as SHA-256 digests; docs/security.md gives the
//! threat model.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpResponse};
use cuzk_actors::Tenant;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::tenants::{check_tenant_name, Caller, TenantError, TenantLimits};

/// Why a token entry (`TOKEN[@TENANT][:SCOPE,SCOPE]`) or a token's text is
/// refused.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum TokenError {
    /// A scope other than submit, read, admin and critical.
    #[error("unknown scope {0:?} (known: submit, read, admin, critical)")]
    UnknownScope(String),
    /// Too short, or holding characters a bearer token cannot hold.
    #[error("a token must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / =")]
    Text,
    /// The entry's tenant name.
    #[error(transparent)]
    Tenant(#[from] TenantError),
}

/// Why the tokens and tenants cannot be put in force: at start the daemon
/// refuses to run, on SIGHUP the old gate stays. Each says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The token file cannot be read.
    #[error("cannot read token file {}: {source}", path.display())]
    TokenFile { path: PathBuf, source: std::io::Error },
    /// A line of the token file is no token entry.
    #[error("{} line {line}: {source}", path.display())]
    TokenFileLine {
        path: PathBuf,
        /// From 1, as an editor shows it.
        line: usize,
        source: TokenError,
    },
    /// An entry of `CUZK_API_TOKENS` is no token entry.
    #[error("CUZK_API_TOKENS: {0}")]
    Environment(TokenError),
    /// A token of `[auth] tokens` whose text is no bearer token.
    #[error(transparent)]
    Token(TokenError),
    /// A token's `sha256` that is not 64 hex digits.
    #[error("auth: sha256 must be 64 hex digits")]
    Digest,
    /// A token given both as text and as a digest, or as neither.
    #[error("auth: give each token exactly one of token and sha256")]
    TokenOrDigest,
    /// A token with an empty scope list.
    #[error("auth: a token needs at least one scope")]
    NoScope,
    /// A tenant's name or limits, in the section named (`auth` for the
    /// tokens' tenants and `tenant_defaults`, `auth.tenants` for its keys).
    #[error("{section}: {source}")]
    Tenant { section: &'static str, source: TenantError },
    /// No token, a non-loopback address and no `--insecure`.
    #[error(
        "refusing to listen on {listen} without API tokens: anyone who can reach it could \
         submit and cancel jobs. Configure tokens ([auth] tokens, --token-file or \
         CUZK_API_TOKENS), listen on a loopback address, or pass --insecure"
    )]
    NoTokensOffLoopback { listen: String },
    /// A token source was named (`--token-file`, `CUZK_API_TOKENS`) but no
    /// token is in force, and no `--insecure`: an empty file or variable
    /// (a secret that was not mounted) would leave the API open.
    #[error(
        "{source_name} holds no token, and no other token is configured: the API would accept \
         anyone. Add tokens, or pass --insecure to run without them"
    )]
    NoTokensFromSource { source_name: String },
    /// No token, `auth.behind_proxy` and no `--insecure`: behind a proxy
    /// on the same host every client would reach loopback, as an admin.
    #[error(
        "auth.behind_proxy: a proxy forwards the network to {listen}, so without API tokens \
         every client behind it would be an admin. Configure tokens ([auth] tokens, \
         --token-file or CUZK_API_TOKENS), or pass --insecure"
    )]
    NoTokensBehindProxy { listen: String },
    /// A reload (SIGHUP) that would leave no token where tokens are in
    /// force: turning authentication off takes a restart.
    #[error(
        "the reload leaves no API token; the {in_force} token(s) in force stay. Turning \
         authentication off takes a restart (with --insecure off loopback)"
    )]
    ReloadWithoutTokens { in_force: usize },
    /// The listen address does not resolve, so the loopback rule cannot be
    /// checked.
    #[error("cannot resolve listen address {listen}: {source}")]
    Unresolved { listen: String, source: std::io::Error },
}

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
    fn named(&self) -> Option<String> {
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
    #[serde(default, skip_serializing)]
    pub token: Option<String>,
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default = "all_scopes")]
    pub scopes: Vec<Scope>,
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

fn check_token_text(token: &str) -> Result<(), TokenError> {
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

/// A token as the daemon keeps it.
struct KnownToken {
    /// SHA-256 of the token.
    digest: [u8; 32],
    scopes: Vec<Scope>,
    tenant: Tenant,
}

/// The tokens as the daemon keeps them, the tenants' limits, and which
/// listener serves what.
pub struct Gate {
    tokens: Vec<KnownToken>,
    read_requires_token: bool,
    /// Each configured tenant's limits.
    tenants: BTreeMap<Tenant, TenantLimits>,
    /// The limits of a tenant without an entry.
    tenant_defaults: TenantLimits,
    /// Without tokens on loopback: the host names requests and origins may
    /// carry (None: no check, because tokens guard the daemon or
    /// `--insecure` opened it to every name).
    browser_guard: Option<Vec<String>>,
    /// The listener that serves only /metrics, /healthz and /readyz.
    metrics_addr: Option<SocketAddr>,
    /// `auth.behind_proxy`: a proxy may forward to any listener, so a gRPC
    /// listener's reach (a unix socket, loopback) is no credential.
    behind_proxy: bool,
}

impl Gate {
    /// Takes the tokens out of the config, hashing them and overwriting the
    /// plaintext, and checks the loopback rule for `listen`.
    pub fn new(config: &mut AuthConfig, listen: &str) -> Result<Self, AuthError> {
        let in_auth = |source| AuthError::Tenant { section: "auth", source };
        let mut tokens = Vec::new();
        for entry in std::mem::take(&mut config.tokens) {
            check_tenant_name(entry.tenant.as_str()).map_err(in_auth)?;
            let digest = match (entry.token, entry.sha256) {
                (Some(mut token), None) => {
                    let checked = check_token_text(&token);
                    let digest = Sha256::digest(token.as_bytes()).into();
                    token.zeroize();
                    checked.map_err(AuthError::Token)?;
                    digest
                }
                (None, Some(hex_digest)) => hex::decode(hex_digest.trim())
                    .ok()
                    .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                    .ok_or(AuthError::Digest)?,
                _ => return Err(AuthError::TokenOrDigest),
            };
            if entry.scopes.is_empty() {
                return Err(AuthError::NoScope);
            }
            tokens.push(KnownToken { digest, scopes: entry.scopes, tenant: entry.tenant });
        }
        let mut tenants = BTreeMap::new();
        for (name, limits) in &config.tenants {
            check_tenant_name(name)
                .map_err(|source| AuthError::Tenant { section: "auth.tenants", source })?;
            limits.check(name).map_err(in_auth)?;
            tenants.insert(Tenant(name.clone()), *limits);
        }
        config.tenant_defaults.check("tenant_defaults").map_err(in_auth)?;
        if tenants.len() > 1 && !tokens.is_empty() && !config.read_requires_token {
            log::warn!(
                "auth: several tenants but read_requires_token = false: anyone holding a job id \
                 can read that job without a token (docs/security.md, Tenants)"
            );
        }
        if tokens.is_empty() {
            // Each way an unauthenticated daemon would serve more than this
            // host's own users, or was not meant to be unauthenticated.
            let refusal = if let Some(source_name) = config.sources.named() {
                Some(AuthError::NoTokensFromSource { source_name })
            } else if config.behind_proxy {
                Some(AuthError::NoTokensBehindProxy { listen: listen.to_string() })
            } else if !is_loopback(listen)? {
                Some(AuthError::NoTokensOffLoopback { listen: listen.to_string() })
            } else {
                None
            };
            match refusal {
                Some(refusal) if !config.insecure => return Err(refusal),
                Some(refusal) => log::warn!(
                    "--insecure: {listen} accepts unauthenticated requests; without it the daemon would refuse: {refusal}"
                ),
                None => {}
            }
        }
        let browser_guard = (tokens.is_empty() && !config.insecure).then(|| {
            let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
            hosts.extend(config.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
            hosts
        });
        Ok(Self {
            tokens,
            read_requires_token: config.read_requires_token,
            tenants,
            tenant_defaults: config.tenant_defaults,
            browser_guard,
            metrics_addr: None,
            behind_proxy: config.behind_proxy,
        })
    }

    pub fn with_metrics_listener(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// How many tokens the gate knows.
    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// The tenants refusal counts are kept for: every tenant a token or
    /// `[auth.tenants]` names, and the implicit one when there are no tokens.
    pub fn tenant_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tokens
            .iter()
            .map(|t| t.tenant.as_str())
            .chain(self.tenants.keys().map(Tenant::as_str))
            .collect();
        if self.tokens.is_empty() {
            names.push(Tenant::DEFAULT);
        }
        names.sort_unstable();
        names.dedup();
        names
    }

    fn limits_of(&self, tenant: &Tenant) -> TenantLimits {
        self.tenants.get(tenant).copied().unwrap_or(self.tenant_defaults)
    }

    /// A caller acting for `tenant`; `critical`: its token holds the
    /// critical scope.
    fn caller(&self, tenant: &Tenant, admin: bool, critical: bool) -> Caller {
        Caller { tenant: Some(tenant.clone()), admin, critical, limits: self.limits_of(tenant) }
    }

    /// The token a digest was presented for. Every stored digest is
    /// compared, in constant time, so that timing says nothing about which
    /// bytes matched.
    fn token_of(&self, presented: &str) -> Option<&KnownToken> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for known in &self.tokens {
            if bool::from(known.digest.ct_eq(&digest)) {
                found = Some(known);
            }
        }
        found
    }

    /// The caller a request comes from, or the response that refuses it.
    fn admit(&self, req: &ServiceRequest) -> Result<Caller, Box<HttpResponse>> {
        let path = req.path();
        let reached = req.conn_data::<Reached>();
        if self.metrics_addr.is_some()
            && self.metrics_addr == reached.map(|r| r.addr)
            && !matches!(path, "/metrics" | "/healthz" | "/readyz")
        {
            return Err(Box::new(
                HttpResponse::NotFound().json(
                    json!({"error": "the metrics listener serves only /metrics, /healthz and /readyz"}),
                ),
            ));
        }
        let reading = matches!(*req.method(), Method::GET | Method::HEAD);
        if *req.method() == Method::POST && has_body(req) && !is_json(req) {
            // A form or text/plain POST is what a cross-site page can send
            // without asking; a JSON one needs a preflight nobody answers.
            return Err(Box::new(HttpResponse::UnsupportedMediaType().json(json!({
                "error": "POST requests are JSON: send Content-Type: application/json"
            }))));
        }
        if let Some(allowed) = &self.browser_guard {
            // Probes through a proxy learn nothing but that the daemon runs.
            let probe = matches!(path, "/healthz" | "/readyz");
            let refusal =
                (!probe).then(|| proxied(req)).flatten().or_else(|| foreign_host(req, allowed, !reading));
            if let Some(refusal) = refusal {
                return Err(Box::new(HttpResponse::Forbidden().json(json!({ "error": refusal }))));
            }
        }
        // Without tokens, whoever reaches the daemon runs it: one tenant.
        if self.tokens.is_empty() {
            return Ok(self.tokenless_caller());
        }
        let anonymous = anonymous();
        if matches!(path, "/healthz" | "/readyz" | "/v1/openapi.json") {
            return Ok(anonymous);
        }
        // None: a read that needs no token (one presented still counts).
        let needed = match *req.method() {
            Method::GET | Method::HEAD if !self.read_requires_token => None,
            Method::GET | Method::HEAD => Some(Scope::Read),
            Method::POST if path.starts_with("/v1/params/") => Some(Scope::Admin),
            _ => Some(Scope::Submit),
        };
        let presented =
            req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let Some(presented) = presented else {
            return match needed {
                None => Ok(anonymous),
                Some(_) => Err(Box::new(unauthorized(
                    "Bearer realm=\"cuzk\"",
                    "this endpoint needs a token: send Authorization: Bearer <token>",
                ))),
            };
        };
        match self.token_caller(presented, needed) {
            Ok(caller) => Ok(caller),
            Err(TokenRefusal::LacksScope(needed)) => Err(Box::new(
                HttpResponse::Forbidden()
                    .insert_header((
                        header::WWW_AUTHENTICATE,
                        format!(
                            "Bearer realm=\"cuzk\", error=\"insufficient_scope\", scope=\"{}\"",
                            needed.as_str()
                        ),
                    ))
                    .json(json!({ "error": TokenRefusal::LacksScope(needed).to_string() })),
            )),
            Err(refusal) => Err(Box::new(unauthorized(
                "Bearer realm=\"cuzk\", error=\"invalid_token\"",
                &refusal.to_string(),
            ))),
        }
    }

    /// The caller a presented token makes, if it is known and holds
    /// `needed` (None: any token will do; admin holds every scope).
    fn token_caller(&self, presented: &str, needed: Option<Scope>) -> Result<Caller, TokenRefusal> {
        let known = self.token_of(presented).ok_or(TokenRefusal::Invalid)?;
        let admin = known.scopes.contains(&Scope::Admin);
        match needed {
            Some(needed) if !admin && !known.scopes.contains(&needed) => {
                Err(TokenRefusal::LacksScope(needed))
            }
            _ => Ok(self.caller(&known.tenant, admin, known.scopes.contains(&Scope::Critical))),
        }
    }

    /// The caller of a request that presents no token where its reach is
    /// its credential: with no tokens configured, whoever reaches the
    /// daemon runs it (tenant `default`, admin); with tokens, the tenant
    /// `default` without admin (a gRPC call on a unix socket or loopback).
    pub fn tokenless_caller(&self) -> Caller {
        self.caller(&Tenant::default(), self.tokens.is_empty(), false)
    }

    /// The caller of a gRPC call: `presented` its bearer token, `needed`
    /// the scope its method needs. `trusted`: the listener is a unix
    /// socket or loopback, whose reach is the credential, so a call
    /// without a token is `tokenless_caller` (except for admin methods,
    /// which need an admin token once tokens exist); elsewhere every call
    /// needs a token, reads included (docs/security.md: off loopback the
    /// listener is TLS with tokens), unless no token is configured at all
    /// (the start refused that without `--insecure`). Behind a proxy no
    /// listener is trusted.
    pub fn grpc_caller(
        &self,
        presented: Option<&str>,
        needed: Scope,
        trusted: bool,
    ) -> Result<Caller, TokenRefusal> {
        let trusted = trusted && !self.behind_proxy;
        // As a GET: a read takes any known token unless reads need the scope.
        let scope = (needed != Scope::Read || self.read_requires_token).then_some(needed);
        if let Some(presented) = presented {
            return self.token_caller(presented, scope);
        }
        if self.tokens.is_empty() || (trusted && needed != Scope::Admin) {
            return Ok(self.tokenless_caller());
        }
        Err(TokenRefusal::Missing(needed))
    }
}

/// A caller without a token on a route or method that needs none (a read
/// without `read_requires_token`): no tenant, so it reads any job whose id
/// it holds, and sees no job ids in listings.
fn anonymous() -> Caller {
    Caller { tenant: None, admin: false, critical: false, limits: TenantLimits::default() }
}

/// Why a request's token does not admit it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// None was presented where one is needed.
    #[error("this call needs a token with the {} scope: send authorization: Bearer <token>", .0.as_str())]
    Missing(Scope),
    /// The token is not one the daemon knows.
    #[error("invalid token")]
    Invalid,
    /// The token is known but lacks the scope.
    #[error("this token lacks the {} scope", .0.as_str())]
    LacksScope(Scope),
}

/// The listener a connection reached, put in its connection data when it is
/// accepted (`server::listen`): which listener (the metrics one serves less)
/// and the scheme and port a same-origin check compares with.
#[derive(Clone, Copy, Debug)]
pub struct Reached {
    /// The listener's address, as bound.
    pub addr: SocketAddr,
    /// Whether it speaks TLS.
    pub tls: bool,
}

/// The gate in force, replaced whole on reload: a request takes the gate
/// current when it arrives and keeps it to its end.
pub struct Gates(RwLock<Arc<Gate>>);

impl Gates {
    pub fn new(gate: Gate) -> Self {
        Self(RwLock::new(Arc::new(gate)))
    }

    pub fn current(&self) -> Arc<Gate> {
        // The lock guards a pointer swap only: a poisoned one still holds a
        // whole gate.
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Builds a gate from `config` for `listen` (the metrics listener kept)
    /// and puts it in force; on error the current gate stays. A gate
    /// without tokens never replaces one with tokens: a reload that empties
    /// the token file must not open the API.
    pub fn replace(&self, config: &mut AuthConfig, listen: &str) -> Result<Arc<Gate>, AuthError> {
        let mut gate = Gate::new(config, listen)?;
        let current = self.current();
        if gate.tokens.is_empty() && !current.tokens.is_empty() {
            return Err(AuthError::ReloadWithoutTokens { in_force: current.token_count() });
        }
        gate.metrics_addr = current.metrics_addr;
        let gate = Arc::new(gate);
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = gate.clone();
        Ok(gate)
    }
}

/// Whether the request carries a body (a bodiless POST, such as a cancel,
/// has nothing to declare).
fn has_body(req: &ServiceRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|n| n.trim() != "0")
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

/// Why a request is refused in the no-token mode because a proxy forwarded
/// it: it names a client elsewhere, and without tokens the daemon serves
/// only this host's own users. Proxies that set none of these headers are
/// what `auth.behind_proxy` is for.
fn proxied(req: &ServiceRequest) -> Option<String> {
    const FORWARDING: [&str; 5] = ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip", "via"];
    let header = FORWARDING.into_iter().find(|h| req.headers().contains_key(*h))?;
    Some(format!(
        "this request came through a proxy ({header} header): without tokens the daemon serves only \
         clients on its own host; configure tokens (docs/security.md, Behind a proxy)"
    ))
}

/// Why a request from a browser is refused in the no-token mode: its
/// `Host` is not a name of this daemon (DNS rebinding), or, for a request
/// that changes state, its `Origin` is another site or another service of
/// this host (CSRF): its scheme, host and port must be this daemon's, as
/// the request reached it.
fn foreign_host(req: &ServiceRequest, allowed: &[String], changes_state: bool) -> Option<String> {
    let known = |host: &str| allowed.iter().any(|a| a.eq_ignore_ascii_case(host));
    let host = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !host.is_empty() && !known(authority_parts(host).0) {
        return Some(format!(
            "Host {host:?} is not a name of this daemon (a DNS-rebinding guard without tokens); add it to auth.allowed_hosts"
        ));
    }
    let origin = req.headers().get(header::ORIGIN).and_then(|v| v.to_str().ok());
    match origin {
        Some(origin) if changes_state => {
            let reached = req.conn_data::<Reached>();
            let scheme = if reached.is_some_and(|r| r.tls) { "https" } else { "http" };
            // The port the client reached: the Host header's, else the listener's.
            let port = match authority_parts(host) {
                (_, Some(port)) => parse_port(port, scheme),
                (_, None) if !host.is_empty() => default_port(scheme),
                (_, None) => reached.map(|r| r.addr.port()),
            };
            let same_origin = origin.split_once("://").is_some_and(|(origin_scheme, authority)| {
                let (name, origin_port) = authority_parts(authority);
                let origin_port =
                    origin_port.map_or(default_port(origin_scheme), |p| parse_port(p, origin_scheme));
                origin_scheme.eq_ignore_ascii_case(scheme)
                    && known(name)
                    && port.is_some()
                    && origin_port == port
            });
            (!same_origin).then(|| {
                format!("a request from origin {origin:?} may not change state (a CSRF guard without tokens)")
            })
        }
        _ => None,
    }
}

/// The name and the port (None: not given) of a `Host` header or an
/// origin's authority, the brackets of an IPv6 address removed.
fn authority_parts(authority: &str) -> (&str, Option<&str>) {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        let (name, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (name, after.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => (name, Some(port)),
        _ => (authority, None),
    }
}

/// A port as given; an empty one is the scheme's default (RFC 3986), text
/// that is no port is None, which matches nothing.
fn parse_port(port: &str, scheme: &str) -> Option<u16> {
    if port.is_empty() {
        default_port(scheme)
    } else {
        port.parse().ok()
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

fn unauthorized(challenge: &'static str, message: &str) -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header((header::WWW_AUTHENTICATE, challenge))
        .json(json!({ "error": message }))
}

/// Whether every address `listen` resolves to is a loopback address.
pub fn is_loopback(listen: &str) -> Result<bool, AuthError> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|source| AuthError::Unresolved { listen: listen.to_string(), source })?
        .collect();
    Ok(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()))
}

/// The middleware: answers 401, 403, 404 or 415 itself, or passes the
/// request on with its `Caller` in the extensions.
pub async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let admitted = match req.app_data::<web::Data<Gates>>() {
        Some(gates) => gates.current().admit(&req),
        None => Err(Box::new(
            HttpResponse::InternalServerError().json(json!({"error": "no token gate is configured"})),
        )),
    };
    match admitted {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            Ok(next.call(req).await?.map_into_left_body())
        }
        Err(response) => Ok(req.into_response(*response).map_into_right_body()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: &str = "both-0123456789abcdef";

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
    fn loopback_rule() {
        assert!(is_loopback("127.0.0.1:0").unwrap());
        assert!(is_loopback("[::1]:0").unwrap());
        assert!(!is_loopback("0.0.0.0:0").unwrap());
        let mut open = AuthConfig::default();
        let refused = Gate::new(&mut open, "0.0.0.0:0").err().unwrap();
        assert!(matches!(&refused, AuthError::NoTokensOffLoopback { listen } if listen == "0.0.0.0:0"));
        assert!(refused.to_string().contains("--insecure"), "{refused}");
        open.insecure = true;
        assert!(Gate::new(&mut open, "0.0.0.0:0").is_ok());
    }

    #[test]
    fn a_reload_never_drops_the_last_token() {
        let gates = Gates::new(
            Gate::new(
                &mut AuthConfig { tokens: vec![parse_token_entry(BOTH).unwrap()], ..AuthConfig::default() },
                "127.0.0.1:0",
            )
            .unwrap(),
        );
        // Even --insecure, which lets a daemon start without tokens, does not
        // let a reload remove them.
        let mut emptied = AuthConfig { insecure: true, ..AuthConfig::default() };
        let refused = gates.replace(&mut emptied, "127.0.0.1:0").err().unwrap();
        assert!(matches!(refused, AuthError::ReloadWithoutTokens { in_force: 1 }), "{refused}");
        assert!(refused.to_string().contains("takes a restart"), "{refused}");
        assert_eq!(gates.current().token_count(), 1);
        // A daemon that had none may reload to none.
        let open = Gates::new(Gate::new(&mut AuthConfig::default(), "127.0.0.1:0").unwrap());
        assert_eq!(open.replace(&mut AuthConfig::default(), "127.0.0.1:0").unwrap().token_count(), 0);
    }

    #[test]
    fn behind_a_proxy_no_grpc_listener_is_trusted() {
        let gate = |behind_proxy| {
            let token = parse_token_entry(BOTH).unwrap();
            Gate::new(
                &mut AuthConfig { tokens: vec![token], behind_proxy, ..AuthConfig::default() },
                "127.0.0.1:0",
            )
            .unwrap()
        };
        // A loopback or unix-socket call without a token is the default tenant's...
        let caller = gate(false).grpc_caller(None, Scope::Submit, true).unwrap();
        assert_eq!(caller.tenant, Some(Tenant::default()));
        // ...unless a proxy may be the one calling.
        let refused = gate(true).grpc_caller(None, Scope::Submit, true).unwrap_err();
        assert_eq!(refused, TokenRefusal::Missing(Scope::Submit));
        assert!(gate(true).grpc_caller(Some(BOTH), Scope::Submit, true).is_ok());
        // Off loopback (or behind a proxy) every call needs a token, reads
        // too, though HTTP admits anonymous reads without read_requires_token.
        for (behind_proxy, trusted) in [(false, false), (true, true)] {
            let refused = gate(behind_proxy).grpc_caller(None, Scope::Read, trusted).unwrap_err();
            assert_eq!(refused, TokenRefusal::Missing(Scope::Read));
        }
        assert!(gate(false).grpc_caller(Some(BOTH), Scope::Read, false).is_ok());
    }

    #[test]
    fn authorities_split_into_name_and_port() {
        assert_eq!(authority_parts("localhost:9820"), ("localhost", Some("9820")));
        assert_eq!(authority_parts("[::1]:9820"), ("::1", Some("9820")));
        assert_eq!(authority_parts("[::1]"), ("::1", None));
        assert_eq!(authority_parts("cuzk.lan"), ("cuzk.lan", None));
        assert_eq!(parse_port("", "https"), Some(443));
        assert_eq!(parse_port("99999", "http"), None);
        assert_eq!(default_port("ftp"), None);
    }

    #[test]
    fn refusals_name_the_setting_to_fix() {
        let refusal = |config: &mut AuthConfig| Gate::new(config, "127.0.0.1:0").err().unwrap().to_string();
        let mut bad_rate = AuthConfig::default();
        bad_rate
            .tenants
            .insert("acme".into(), TenantLimits { submit_rate_per_s: -1.0, ..TenantLimits::default() });
        assert_eq!(
            refusal(&mut bad_rate),
            "auth: tenant \"acme\": submit_rate_per_s must be a number of at least 0"
        );
        let mut bad_name = AuthConfig::default();
        bad_name.tenants.insert("a b".into(), TenantLimits::default());
        assert!(refusal(&mut bad_name).starts_with("auth.tenants: tenant \"a b\": "));
        let mut bad_defaults = AuthConfig::default();
        bad_defaults.tenant_defaults.submit_rate_per_s = f64::NAN;
        assert!(refusal(&mut bad_defaults).starts_with("auth: tenant \"tenant_defaults\": "));
        let digest = |sha256: &str| AuthConfig {
            tokens: vec![TokenConfig {
                token: None,
                sha256: Some(sha256.into()),
                scopes: vec![Scope::Read],
                tenant: Tenant::default(),
            }],
            ..AuthConfig::default()
        };
        assert!(matches!(Gate::new(&mut digest("00"), "127.0.0.1:0"), Err(AuthError::Digest)));
        let mut unscoped = digest(&"00".repeat(32));
        unscoped.tokens[0].scopes.clear();
        assert!(matches!(Gate::new(&mut unscoped, "127.0.0.1:0"), Err(AuthError::NoScope)));
        assert!(matches!(
            is_loopback("no-port"),
            Err(AuthError::Unresolved { listen, .. }) if listen == "no-port"
        ));
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
                    tenant: Tenant("acme".into()),
                },
                parse_token_entry("admin01234567890@ops:admin").unwrap().hashed().unwrap(),
            ],
            ..AuthConfig::default()
        };
        let gate = Gate::new(&mut config, "0.0.0.0:0").unwrap();
        assert!(config.tokens.is_empty());
        let found = |t| gate.token_of(t).map(|k| (k.scopes.clone(), k.tenant.to_string()));
        assert_eq!(found("reader0123456789"), Some((vec![Scope::Read], "default".into())));
        assert_eq!(found("submitter0123456"), Some((vec![Scope::Submit], "acme".into())));
        assert_eq!(found("admin01234567890"), Some((vec![Scope::Admin], "ops".into())));
        assert_eq!(found("reader012345678"), None);
        assert_eq!(gate.tenant_names(), vec!["acme", "default", "ops"]);
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
}
