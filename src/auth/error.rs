//! What keeps a token, or the tokens and tenants together, from coming into
//! force: one error for an entry (`TokenError`) and one for the gate
//! (`AuthError`), each saying what to fix.

use std::path::PathBuf;

use crate::tenants::TenantError;

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
    TokenFile {
        /// The token file named by `--token-file`.
        path: PathBuf,
        /// What reading it failed with.
        source: std::io::Error,
    },
    /// A line of the token file is no token entry.
    #[error("{} line {line}: {source}", path.display())]
    TokenFileLine {
        /// The token file.
        path: PathBuf,
        /// From 1, as an editor shows it.
        line: usize,
        /// Why the line is no entry.
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
    Tenant {
        /// The config section, as the message names it.
        section: &'static str,
        /// What is wrong with the tenant.
        source: TenantError,
    },
    /// No token, a non-loopback address and no `--insecure`.
    #[error(
        "refusing to listen on {listen} without API tokens: anyone who can reach it could \
         submit and cancel jobs. Configure tokens ([auth] tokens, --token-file or \
         CUZK_API_TOKENS), listen on a loopback address, or pass --insecure"
    )]
    NoTokensOffLoopback {
        /// The address that is not loopback.
        listen: String,
    },
    /// A token source was named (`--token-file`, `CUZK_API_TOKENS`) but no
    /// token is in force, and no `--insecure`: an empty file or variable
    /// (a secret that was not mounted) would leave the API open.
    #[error(
        "{source_name} holds no token, and no other token is configured: the API would accept \
         anyone. Add tokens, or pass --insecure to run without them"
    )]
    NoTokensFromSource {
        /// The source that was named, as the message names it.
        source_name: String,
    },
    /// No token, `auth.behind_proxy` and no `--insecure`: behind a proxy
    /// on the same host every client would reach loopback, as an admin.
    #[error(
        "auth.behind_proxy: a proxy forwards the network to {listen}, so without API tokens \
         every client behind it would be an admin. Configure tokens ([auth] tokens, \
         --token-file or CUZK_API_TOKENS), or pass --insecure"
    )]
    NoTokensBehindProxy {
        /// The address the proxy forwards to.
        listen: String,
    },
    /// A reload (SIGHUP) that would leave no token where tokens are in
    /// force: turning authentication off takes a restart.
    #[error(
        "the reload leaves no API token; the {in_force} token(s) in force stay. Turning \
         authentication off takes a restart (with --insecure off loopback)"
    )]
    ReloadWithoutTokens {
        /// Tokens in force now, which stay.
        in_force: usize,
    },
    /// The listen address does not resolve, so the loopback rule cannot be
    /// checked.
    #[error("cannot resolve listen address {listen}: {source}")]
    Unresolved {
        /// The address as configured.
        listen: String,
        /// What the resolver answered.
        source: std::io::Error,
    },
}
