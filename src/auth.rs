//! Who may call the daemon, through either front end: tokens and where they
//! come from (`tokens`), the gate that turns a request's facts into a
//! `Caller` or a typed refusal and that SIGHUP replaces whole (`gate`), the
//! facts an HTTP request is judged by (`request`), the browser guard of a
//! daemon without tokens (`browser`), and the errors (`error`). The front
//! ends gather the facts and answer the refusals: the HTTP middleware is
//! `http::gate`, gRPC's `grpc::admit`. Tokens are kept only as SHA-256
//! digests; docs/security.md gives the threat model.

mod browser;
mod error;
mod gate;
mod request;
mod tokens;

pub use error::{AuthError, TokenError};
pub use gate::{is_loopback, Gate, Gates, HttpRefusal, TokenRefusal};
pub use request::{Access, HttpAsk, Reached, Verb, FORWARDING_HEADERS};
pub use tokens::{
    bearer_token, parse_token_entry, parse_token_list, read_token_file, AuthConfig, Scope, TokenConfig,
    TokenSources,
};
