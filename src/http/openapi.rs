//! The OpenAPI document served at `GET /v1/openapi.json`: the paths from
//! the `#[utoipa::path]` attributes on the handlers beside this file, the
//! bodies from `schemas`, the bearer scheme, and links between job routes.

use std::sync::OnceLock;

use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::schemas::ErrorBody;
use super::{circuits, daemon, jobs, params, workers};

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
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
        daemon::openapi_json,
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
        if let Some(response) = doc.pointer_mut(&format!("/paths/~1v1~1jobs/post/responses/{code}"))
        {
            response["links"] = Value::Object(links.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let paths = document()["paths"].as_object().expect("paths");
        let routes = crate::http::routes();
        for (method, path, _) in &routes {
            let operation = &paths
                .get(*path)
                .unwrap_or_else(|| panic!("{path} is not in the OpenAPI document"))
                [method.as_str().to_lowercase()];
            assert!(
                operation.is_object(),
                "{method} {path} is not in the OpenAPI document"
            );
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
                assert_eq!(
                    schema, "#/components/schemas/ErrorBody",
                    "{method} {path} {code}"
                );
            }
        }
        let documented: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(
            documented,
            routes.len(),
            "the document has operations no route serves"
        );
    }
}
