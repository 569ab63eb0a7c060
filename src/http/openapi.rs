//! The OpenAPI document and its route, `GET /v1/openapi.json`: the paths
//! from the `#[utoipa::path]` attributes on the handlers beside this file,
//! the bodies from `schemas` and the types they name, the bearer scheme,
//! links between job routes, and each operation's `security` from the
//! access its route has in the route list. It imports the handlers; only
//! the route list (`http::routes`) imports it, and hands it the access.

use actix_web::http::Method;
use actix_web::{web, HttpResponse};
use serde_json::{json, Value};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::{circuits, health, jobs, params, workers};
use crate::auth::Access;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The OpenAPI document's paths and schemas, collected by utoipa from the
/// handlers' attributes (`Document` adds what depends on the route list).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "cuzk",
        description = "Groth16 proving daemon. Errors are `{\"error\": reason}`. Bearer tokens \
                       are needed once any is configured: scope `submit` for POST, scope `read` \
                       for GET when read_requires_token is set (docs/security.md)."
    ),
    paths(
        jobs::submit_job,
        jobs::get_job,
        jobs::get_proofs,
        jobs::cancel_job,
        circuits::list_circuits,
        circuits::get_vk,
        params::list_params,
        params::preload_params,
        params::evict_params,
        health::status,
        health::healthz,
        health::readyz,
        health::metrics,
        openapi_json,
        workers::workers,
        workers::timeline,
        workers::index,
    ),
    // The response sets name ErrorBody, but utoipa collects schemas only
    // from tuple responses.
    components(schemas(ErrorBody)),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

/// This OpenAPI document.
#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "daemon",
    responses((status = 200, description = "this document", body = Object))
)]
pub async fn openapi_json(doc: web::Data<&'static Document>) -> HttpResponse {
    HttpResponse::Ok().json(&doc.0)
}

/// The document as JSON, as served: built once by the route list
/// (`http::document`), which knows each route's access.
pub struct Document(pub Value);

impl Document {
    /// The handlers' paths and the schemas, with each operation's
    /// `security` from `access` (method, path and access of every route).
    pub fn new<'a>(access: impl IntoIterator<Item = (&'a Method, &'a str, Access)>) -> Self {
        let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the document serializes");
        add_job_links(&mut doc);
        for (method, path, access) in access {
            // Anyone may call while no token is configured (`{}`); once one
            // is, a token with the scope named.
            let scope = match access {
                Access::Open => None,
                Access::Read => Some("read"),
                Access::Submit => Some("submit"),
                Access::Admin => Some("admin"),
            };
            let mut options = vec![json!({})];
            options.extend(scope.map(|scope| json!({"bearer": [scope]})));
            let method = method.as_str().to_ascii_lowercase();
            let operation = doc["paths"].get_mut(path).and_then(|p| p.get_mut(&method));
            if let Some(operation) = operation.and_then(Value::as_object_mut) {
                operation.insert("security".into(), Value::Array(options));
            }
        }
        Self(doc)
    }
}

/// Links from a submitted job's id to the operations on it, so that
/// stateful fuzzing follows real jobs. Written as JSON because utoipa 5.5
/// serializes a link's `operationId` in snake case.
fn add_job_links(doc: &mut Value) {
    let links: serde_json::Map<String, Value> = ["get_job", "get_proofs", "cancel_job"]
        .into_iter()
        .map(|operation| {
            let link = serde_json::json!({
                "operationId": operation,
                "parameters": {"id": "$response.body#/id"},
            });
            (operation.to_string(), link)
        })
        .collect();
    for code in ["200", "202"] {
        if let Some(response) = doc.pointer_mut(&format!("/paths/~1v1~1jobs/post/responses/{code}")) {
            response["links"] = Value::Object(links.clone());
        }
    }
}
