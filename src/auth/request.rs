//! What the gate needs to know of an HTTP request, gathered by the front
//! end from its method, headers and connection, so that every decision is
//! made here, in one place, and none of it on actix-web's types.

use std::net::SocketAddr;

/// The headers whose presence says a proxy forwarded the request, in the
/// order a refusal names the first found.
pub const FORWARDING_HEADERS: [&str; 5] =
    ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip", "via"];

/// What a request's method asks of the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// GET or HEAD: reads only.
    Read,
    /// POST: a submission, a cancel or an operator's route.
    Post,
    /// Any other method: held to the submit scope as a POST is.
    Other,
}

/// What a route needs of its caller: the HTTP route table gives each
/// route's (`http::routes`), and the OpenAPI document's `security` follows
/// from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone, tokens or not: the probes and the API's own description.
    Open,
    /// A token with the read scope where `auth.read_requires_token` is set;
    /// none otherwise (one presented still counts).
    Read,
    /// A token with the submit scope.
    Submit,
    /// A token with the admin scope: the operator's routes.
    Admin,
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

/// One HTTP request as the gate judges it.
#[derive(Clone, Copy, Debug)]
pub struct HttpAsk<'a> {
    /// The path: the metrics listener's few routes are told apart by it.
    pub path: &'a str,
    /// What the method asks.
    pub verb: Verb,
    /// What its route needs (a path no route serves: `Read` for GET and
    /// HEAD, `Submit` for the rest).
    pub access: Access,
    /// The listener the connection reached (None where none was recorded).
    pub reached: Option<Reached>,
    /// The request carries a body that does not declare JSON: a form or
    /// text/plain body is what a cross-site page can send without asking.
    pub undeclared_body: bool,
    /// The first of `FORWARDING_HEADERS` present.
    pub forwarded_by: Option<&'static str>,
    /// The `Host` header ("" when there is none).
    pub host: &'a str,
    /// The `Origin` header.
    pub origin: Option<&'a str>,
    /// The bearer token of the `authorization` header.
    pub bearer: Option<&'a str>,
}
