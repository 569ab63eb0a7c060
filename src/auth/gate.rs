//! The gate in front of both front ends: the tokens as the daemon keeps
//! them (digests only), the tenants' limits, and the decision that turns a
//! request's facts into a `Caller` or a typed refusal (`http_caller` for an
//! HTTP request, `grpc_caller` for a gRPC call, by the same rules); SIGHUP
//! replaces the gate whole (`Gates`).

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, RwLock};

use cuzk_actors::Tenant;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use super::browser;
use super::error::AuthError;
use super::request::{Access, HttpAsk, Verb};
use super::tokens::{check_token_text, AuthConfig, Scope};
use crate::tenants::{check_tenant_name, Caller, TenantLimits};

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

    /// The gate with `addr` as the metrics listener: requests that reach it get
    /// only /metrics, /healthz and /readyz.
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

    /// The caller an HTTP request comes from, or why it is refused:
    /// the metrics listener's few routes, a POST body that is not JSON,
    /// the browser guard without tokens, then the token its route's
    /// access needs.
    pub fn http_caller(&self, ask: &HttpAsk) -> Result<Caller, HttpRefusal> {
        if self.metrics_addr.is_some()
            && self.metrics_addr == ask.reached.map(|r| r.addr)
            && !matches!(ask.path, "/metrics" | "/healthz" | "/readyz")
        {
            return Err(HttpRefusal::MetricsListener);
        }
        // A JSON body needs a preflight nobody answers.
        if ask.verb == Verb::Post && ask.undeclared_body {
            return Err(HttpRefusal::NotJson);
        }
        if let Some(refusal) =
            self.browser_guard.as_deref().and_then(|allowed| browser::refusal(ask, allowed))
        {
            return Err(HttpRefusal::Browser(refusal));
        }
        // Without tokens, whoever reaches the daemon runs it: one tenant.
        if self.tokens.is_empty() {
            return Ok(self.tokenless_caller());
        }
        // None: a read that needs no token (one presented still counts).
        let needed = match ask.access {
            Access::Open => return Ok(anonymous()),
            Access::Read if !self.read_requires_token => None,
            Access::Read => Some(Scope::Read),
            Access::Submit => Some(Scope::Submit),
            Access::Admin => Some(Scope::Admin),
        };
        match (ask.bearer, needed) {
            (Some(presented), _) => self.token_caller(presented, needed).map_err(HttpRefusal::Token),
            (None, None) => Ok(anonymous()),
            (None, Some(_)) => Err(HttpRefusal::NoToken),
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

/// Why the gate refuses an HTTP request before any handler sees it; the
/// HTTP front end answers each with its status (`http::error`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpRefusal {
    /// A route other than the probes and /metrics on the metrics listener.
    #[error("the metrics listener serves only /metrics, /healthz and /readyz")]
    MetricsListener,
    /// A POST whose body does not declare JSON.
    #[error("POST requests are JSON: send Content-Type: application/json")]
    NotJson,
    /// The browser guard's refusal (`browser::refusal`), in its words.
    #[error("{0}")]
    Browser(String),
    /// No token where the route needs one.
    #[error("this endpoint needs a token: send Authorization: Bearer <token>")]
    NoToken,
    /// The token presented does not admit it.
    #[error(transparent)]
    Token(TokenRefusal),
}

/// The gate in force, replaced whole on reload: a request takes the gate
/// current when it arrives and keeps it to its end.
pub struct Gates(RwLock<Arc<Gate>>);

impl Gates {
    /// Puts `gate` in force.
    pub fn new(gate: Gate) -> Self {
        Self(RwLock::new(Arc::new(gate)))
    }

    /// The gate in force now, for one request to keep to its end.
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

/// Whether every address `listen` resolves to is a loopback address.
pub fn is_loopback(listen: &str) -> Result<bool, AuthError> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|source| AuthError::Unresolved { listen: listen.to_string(), source })?
        .collect();
    Ok(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()))
}

#[cfg(test)]
mod tests {
    use super::super::request::Reached;
    use super::super::tokens::{parse_token_entry, TokenConfig};
    use super::*;

    const BOTH: &str = "both-0123456789abcdef";

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

    /// The HTTP decisions, from a request's facts alone.
    #[test]
    fn http_requests_are_judged_by_route_scope_and_listener() {
        let reader = "reader0123456789";
        let mut config = AuthConfig {
            tokens: vec![
                parse_token_entry(BOTH).unwrap(),
                parse_token_entry(&format!("{reader}:read")).unwrap(),
            ],
            read_requires_token: true,
            ..AuthConfig::default()
        };
        let metrics: SocketAddr = "127.0.0.1:9999".parse().unwrap();
        let gate = Gate::new(&mut config, "127.0.0.1:0").unwrap().with_metrics_listener(metrics);
        let ask = |path, verb, access, bearer| HttpAsk {
            path,
            verb,
            access,
            reached: None,
            undeclared_body: false,
            forwarded_by: None,
            host: "",
            origin: None,
            bearer,
        };
        let judged = |ask: HttpAsk| gate.http_caller(&ask).map(|caller| caller.tenant);
        assert_eq!(judged(ask("/healthz", Verb::Read, Access::Open, None)), Ok(None));
        assert_eq!(judged(ask("/v1/status", Verb::Read, Access::Read, None)), Err(HttpRefusal::NoToken));
        assert_eq!(
            judged(ask("/v1/status", Verb::Read, Access::Read, Some(reader))),
            Ok(Some(Tenant::default()))
        );
        assert_eq!(
            judged(ask("/v1/jobs", Verb::Post, Access::Submit, Some(reader))),
            Err(HttpRefusal::Token(TokenRefusal::LacksScope(Scope::Submit)))
        );
        assert_eq!(
            judged(ask("/v1/params/x/preload", Verb::Post, Access::Admin, Some(BOTH))),
            Err(HttpRefusal::Token(TokenRefusal::LacksScope(Scope::Admin)))
        );
        assert_eq!(
            judged(ask("/v1/jobs", Verb::Other, Access::Submit, Some("wrong0123456789abc"))),
            Err(HttpRefusal::Token(TokenRefusal::Invalid))
        );
        let form =
            HttpAsk { undeclared_body: true, ..ask("/v1/jobs", Verb::Post, Access::Submit, Some(BOTH)) };
        assert_eq!(judged(form), Err(HttpRefusal::NotJson));
        let on_metrics = |path| HttpAsk {
            reached: Some(Reached { addr: metrics, tls: false }),
            ..ask(path, Verb::Read, Access::Read, Some(BOTH))
        };
        assert_eq!(judged(on_metrics("/v1/status")), Err(HttpRefusal::MetricsListener));
        assert!(judged(on_metrics("/metrics")).is_ok());
        // Without tokens on loopback: the browser guard, then the operator.
        let open = Gate::new(&mut AuthConfig::default(), "127.0.0.1:0").unwrap();
        let from_page = HttpAsk { host: "evil.example", ..ask("/v1/jobs", Verb::Post, Access::Submit, None) };
        assert!(
            matches!(open.http_caller(&from_page), Err(HttpRefusal::Browser(why)) if why.contains("allowed_hosts"))
        );
        let proxied =
            HttpAsk { forwarded_by: Some("via"), ..ask("/v1/status", Verb::Read, Access::Read, None) };
        assert!(
            matches!(open.http_caller(&proxied), Err(HttpRefusal::Browser(why)) if why.contains("via header"))
        );
        let local = HttpAsk { host: "localhost:9820", ..ask("/v1/jobs", Verb::Post, Access::Submit, None) };
        assert!(open.http_caller(&local).unwrap().admin);
    }
}
