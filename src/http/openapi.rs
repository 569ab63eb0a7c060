//! The OpenAPI document and its route, `GET /v1/openapi.json`: the paths
//! from the `#[utoipa::path]` attributes on the handlers beside this file,
//! the bodies from `schemas` and the types they name, the bearer scheme,
//! and links between job routes. It imports the handlers; only the route
//! list (`http::routes`) imports it.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::{circuits, daemon, jobs, params, workers};

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

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
        daemon::status,
        daemon::healthz,
        daemon::readyz,
        daemon::metrics,
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

#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "daemon",
    responses((status = 200, description = "this document", body = Object)),
    security(())
)]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(document())
}

/// The document as JSON, built once.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the document serializes");
        add_job_links(&mut doc);
        doc
    })
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
