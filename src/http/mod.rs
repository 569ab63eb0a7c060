//! The HTTP API (actix-web), the top of the daemon: handlers ask the job
//! seam (`crate::jobs`), the actors and the lower modules (job_input, keys);
//! nothing below imports this module. The contract is fixed: docs/api.md.
//!
//! One file per resource group (`jobs`, `circuits`, `params`, `workers`, `health`),
//! the shared state and error shape, and the OpenAPI document that
//! describes every route listed here (and serves itself).

pub mod circuits;
pub mod error;
pub mod gate;
pub mod health;
pub mod jobs;
pub mod openapi;
pub mod params;
pub mod schemas;
pub mod state;
pub mod workers;

use std::sync::OnceLock;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, HttpResponse};

use crate::auth::Access;

pub use error::{json_errors, ApiError};
pub use state::AppState;

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found(format!("no route {} {}", req.method(), req.path())))
}

/// A route as `configure` registers it.
pub struct Route {
    /// The HTTP method it answers.
    pub method: Method,
    /// The path pattern, as actix-web matches it and the OpenAPI document
    /// names it.
    pub path: &'static str,
    /// What it needs of its caller: the token gate asks for it, and the
    /// document's `security` says it.
    pub access: Access,
    /// Its handler.
    pub route: actix_web::Route,
}

macro_rules! routes {
    ($(($method:ident, $path:literal, $access:ident, $handler:expr)),* $(,)?) => {
        vec![$(Route {
            method: Method::$method,
            path: $path,
            access: Access::$access,
            route: web::method(Method::$method).to($handler),
        }),*]
    };
}

/// Every route: `configure` registers exactly these, and a test below
/// checks that the OpenAPI document has each. Each route's access is
/// written here only.
pub fn routes() -> Vec<Route> {
    routes![
        (GET, "/healthz", Open, health::healthz),
        (GET, "/readyz", Open, health::readyz),
        (GET, "/metrics", Read, health::metrics),
        (POST, "/v1/jobs", Submit, jobs::submit_job),
        (GET, "/v1/jobs/{id}", Read, jobs::get_job),
        (GET, "/v1/jobs/{id}/proofs", Read, jobs::get_proofs),
        (POST, "/v1/jobs/{id}/cancel", Submit, jobs::cancel_job),
        (GET, "/v1/circuits", Read, circuits::list_circuits),
        (GET, "/v1/circuits/{circuit_id}/vk", Read, circuits::get_vk),
        (GET, "/v1/params", Read, params::list_params),
        (POST, "/v1/params/{id}/preload", Admin, params::preload_params),
        (POST, "/v1/params/{id}/evict", Admin, params::evict_params),
        (GET, "/v1/status", Read, health::status),
        (GET, "/v1/openapi.json", Open, openapi::openapi_json),
        (GET, "/v1/workers", Read, workers::workers),
        (GET, "/v1/timeline", Read, workers::timeline),
        (GET, "/", Read, workers::index),
    ]
}

/// Each route's method, path and access, kept once.
fn access_table() -> &'static [(Method, &'static str, Access)] {
    static TABLE: OnceLock<Vec<(Method, &'static str, Access)>> = OnceLock::new();
    TABLE.get_or_init(|| routes().into_iter().map(|r| (r.method, r.path, r.access)).collect())
}

/// What a request needs of its caller: its route's access (`pattern`, the
/// path pattern it matched); a path no route serves needs a read's for GET
/// and HEAD (HEAD is routed as its GET), a submit's otherwise.
pub fn access(method: &Method, pattern: Option<&str>) -> Access {
    let method = if *method == Method::HEAD { &Method::GET } else { method };
    let read = matches!(*method, Method::GET);
    access_table()
        .iter()
        .find(|(m, path, _)| m == method && Some(*path) == pattern)
        .map_or(if read { Access::Read } else { Access::Submit }, |&(_, _, access)| access)
}

/// The OpenAPI document served, built once.
pub fn document() -> &'static openapi::Document {
    static DOC: OnceLock<openapi::Document> = OnceLock::new();
    DOC.get_or_init(|| openapi::Document::new(access_table().iter().map(|(m, p, a)| (m, *p, *a))))
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

/// Registers every route, the OpenAPI document they serve, and the 404 answer
/// of any other path, on an actix-web app.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(web::Data::new(document()));
    for route in routes() {
        cfg.route(route.path, route.route);
    }
    cfg.default_service(web::to(not_found));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let paths = document().0["paths"].as_object().expect("paths");
        let routes = routes();
        for Route { method, path, .. } in &routes {
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

    /// A request takes its route's access, HEAD its GET's; a path no
    /// route serves, a read's or a submit's.
    #[test]
    fn a_request_needs_what_its_route_needs() {
        assert_eq!(access(&Method::GET, Some("/healthz")), Access::Open);
        assert_eq!(access(&Method::HEAD, Some("/v1/jobs/{id}")), Access::Read);
        assert_eq!(access(&Method::POST, Some("/v1/params/{id}/preload")), Access::Admin);
        assert_eq!(access(&Method::POST, Some("/v1/jobs/{id}/cancel")), Access::Submit);
        assert_eq!(access(&Method::POST, Some("/healthz")), Access::Submit);
        assert_eq!(access(&Method::GET, None), Access::Read);
        assert_eq!(access(&Method::DELETE, None), Access::Submit);
        let security = |path: &str, method: &str| document().0["paths"][path][method]["security"].clone();
        assert_eq!(security("/v1/params/{id}/evict", "post"), serde_json::json!([{}, {"bearer": ["admin"]}]));
        assert_eq!(security("/readyz", "get"), serde_json::json!([{}]));
    }

    /// The error body's `reason` is a schema of its own listing exactly
    /// the reasons answered.
    #[test]
    fn the_error_reasons_are_listed() {
        let schemas = &document().0["components"]["schemas"];
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
