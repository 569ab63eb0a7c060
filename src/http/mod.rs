//! The HTTP API (actix-web), the top of the daemon: handlers ask the job
//! seam (`crate::jobs`), the actors and the lower modules (job_input, keys);
//! nothing below imports this module. The contract is fixed: docs/api.md.
//!
//! One file per resource group (`jobs`, `circuits`, `params`, `workers`, `daemon`),
//! the shared state and error shape, and the OpenAPI document that
//! describes every route listed here (and serves itself).

pub mod circuits;
pub mod daemon;
pub mod error;
pub mod gate;
pub mod jobs;
pub mod openapi;
pub mod params;
pub mod schemas;
pub mod state;
pub mod workers;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, HttpResponse};

pub use error::{json_errors, ApiError};
pub use state::AppState;

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found(format!("no route {} {}", req.method(), req.path())))
}

macro_rules! routes {
    ($(($method:ident, $path:literal, $handler:expr)),* $(,)?) => {
        vec![$((Method::$method, $path, web::method(Method::$method).to($handler))),*]
    };
}

/// Every route as (method, path, route): `configure` registers exactly
/// these, and a test below checks that the OpenAPI document has each.
pub fn routes() -> Vec<(Method, &'static str, actix_web::Route)> {
    routes![
        (GET, "/healthz", daemon::healthz),
        (GET, "/readyz", daemon::readyz),
        (GET, "/metrics", daemon::metrics),
        (POST, "/v1/jobs", jobs::submit_job),
        (GET, "/v1/jobs/{id}", jobs::get_job),
        (GET, "/v1/jobs/{id}/proofs", jobs::get_proofs),
        (POST, "/v1/jobs/{id}/cancel", jobs::cancel_job),
        (GET, "/v1/circuits", circuits::list_circuits),
        (GET, "/v1/circuits/{circuit_id}/vk", circuits::get_vk),
        (GET, "/v1/params", params::list_params),
        (POST, "/v1/params/{id}/preload", params::preload_params),
        (POST, "/v1/params/{id}/evict", params::evict_params),
        (GET, "/v1/status", daemon::status),
        (GET, "/v1/openapi.json", openapi::openapi_json),
        (GET, "/v1/workers", workers::workers),
        (GET, "/v1/timeline", workers::timeline),
        (GET, "/", workers::index),
    ]
}

/// HEAD is answered wherever GET is: the request is routed (and
/// authorized) as the GET it stands for, and the connection, which decoded
/// a HEAD, sends the headers without the body.
pub async fn head_as_get(
    mut req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    if req.method() == Method::HEAD {
        req.head_mut().method = Method::GET;
    }
    next.call(req).await
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    for (_, path, route) in routes() {
        cfg.route(path, route);
    }
    cfg.default_service(web::to(not_found));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let paths = openapi::document()["paths"].as_object().expect("paths");
        let routes = routes();
        for (method, path, _) in &routes {
            let operation =
                &paths.get(*path).unwrap_or_else(|| panic!("{path} is not in the OpenAPI document"))
                    [method.as_str().to_lowercase()];
            assert!(operation.is_object(), "{method} {path} is not in the OpenAPI document");
            let responses = operation["responses"].as_object().unwrap();
            let needs_token = operation["security"]
                .as_array()
                .is_some_and(|options| options.iter().any(|o| o.get("bearer").is_some()));
            for code in ["401", "403"] {
                assert_eq!(
                    responses.contains_key(code),
                    needs_token,
                    "{method} {path}: {code} is documented exactly where a token may be needed"
                );
            }
            let errors = responses.keys().filter(|code| !code.starts_with('2'));
            for code in errors {
                let schema = &responses[code]["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/ErrorBody", "{method} {path} {code}");
            }
        }
        let documented: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(documented, routes.len(), "the document has operations no route serves");
    }

    /// The error body's `reason` is a schema of its own listing exactly
    /// the reasons answered.
    #[test]
    fn the_error_reasons_are_listed() {
        let schemas = &openapi::document()["components"]["schemas"];
        assert_eq!(
            schemas["ErrorBody"]["properties"]["reason"]["oneOf"][1]["$ref"],
            "#/components/schemas/ErrorReason",
            "{}",
            schemas["ErrorBody"]
        );
        let reasons = serde_json::json!(["shutting_down", "recovering", "store_failing", "parsing_full"]);
        assert_eq!(schemas["ErrorReason"]["enum"], reasons, "{}", schemas["ErrorReason"]);
        for reason in [
            error::ErrorReason::ShuttingDown,
            error::ErrorReason::Recovering,
            error::ErrorReason::StoreFailing,
            error::ErrorReason::ParsingFull,
        ] {
            let named = serde_json::to_value(reason).unwrap();
            assert!(reasons.as_array().unwrap().contains(&named), "{named} is listed");
        }
    }
}
