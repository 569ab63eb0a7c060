//! The token gate as actix-web middleware: a request's facts gathered from
//! its method, headers and connection (`HttpAsk`), judged by the gate in
//! force (`auth::Gate::http_caller`), and either passed on with its
//! `Caller` in the request's extensions or answered here with the error
//! shape every route answers with.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderName};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, ResponseError};

use super::error::ApiError;
use crate::auth::{bearer_token, Gates, HttpAsk, Reached, Verb, FORWARDING_HEADERS};

/// The middleware: answers 401, 403, 404 or 415 itself, or passes the
/// request on with its `Caller` in the extensions.
pub async fn gate(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let admitted = match req.app_data::<web::Data<Gates>>() {
        Some(gates) => gates.current().http_caller(&ask(&req)).map_err(ApiError::from),
        None => Err(ApiError::internal("no token gate is configured")),
    };
    match admitted {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            Ok(next.call(req).await?.map_into_left_body())
        }
        Err(refused) => Ok(req.into_response(refused.error_response()).map_into_right_body()),
    }
}

/// What the gate judges of `req`.
fn ask(req: &ServiceRequest) -> HttpAsk<'_> {
    let headers = req.headers();
    HttpAsk {
        path: req.path(),
        verb: match *req.method() {
            Method::GET | Method::HEAD => Verb::Read,
            Method::POST => Verb::Post,
            _ => Verb::Other,
        },
        access: super::access(req.method(), req.match_pattern().as_deref()),
        reached: req.conn_data::<Reached>().copied(),
        undeclared_body: has_body(headers) && !is_json(headers),
        forwarded_by: FORWARDING_HEADERS.into_iter().find(|h| headers.contains_key(*h)),
        host: text(headers, header::HOST).unwrap_or(""),
        origin: text(headers, header::ORIGIN),
        bearer: text(headers, header::AUTHORIZATION).and_then(bearer_token),
    }
}

/// A header's value, where it is text.
fn text(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether the request carries a body (a bodiless POST, such as a cancel,
/// has nothing to declare).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || text(headers, header::CONTENT_LENGTH).is_some_and(|n| n.trim() != "0")
}

/// Whether the request declares a JSON body (`application/json` or a
/// `+json` type, parameters allowed).
fn is_json(headers: &HeaderMap) -> bool {
    text(headers, header::CONTENT_TYPE)
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .is_some_and(|t| t == "application/json" || (t.starts_with("application/") && t.ends_with("+json")))
}
