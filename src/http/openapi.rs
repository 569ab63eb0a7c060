//! The OpenAPI document served at `GET /v1/openapi.json`. The paths come
//! from the `#[utoipa::path]` attributes on the handlers beside this file;
//! the response bodies the actors crate builds are described here by
//! schema-only types, which fuzzing (tests/fuzz.sh) checks against real
//! answers. The responses many routes share (the token gate's 401 and 403,
//! the 503 of an actor gone) are written once here, as response sets the
//! handlers list by name.

// Schema-only types: read by the derive, never built.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi, ToSchema};

use super::{circuits, daemon, jobs, workers};
use crate::job_input::PriorityDoc;

/// Every error: a reason, plus the job's status for 409.
#[derive(ToSchema)]
pub struct ErrorBody {
    error: String,
    status: Option<JobStatusDoc>,
}

#[derive(ToSchema)]
#[schema(as = JobStatus)]
#[serde(rename_all = "lowercase")]
pub enum JobStatusDoc {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

#[derive(ToSchema)]
#[schema(as = Stage)]
#[serde(rename_all = "snake_case")]
pub enum StageDoc {
    Queued,
    WaitingBudget,
    Synthesizing,
    WaitingGpu,
    Proving,
    WaitingFinalizer,
    Finalizing,
    Done,
    Failed,
    Cancelled,
}

/// A submitted job's id and status (also the answer to a cancel).
#[derive(ToSchema)]
pub struct JobRef {
    id: String,
    status: JobStatusDoc,
}

#[derive(ToSchema)]
#[schema(as = Job)]
pub struct JobDoc {
    id: String,
    status: JobStatusDoc,
    circuit: String,
    circuit_id: String,
    priority: PriorityDoc,
    submitted_at_ms: u64,
    /// Present when the job has a deadline.
    deadline_missed: Option<bool>,
    partitions: Vec<PartitionDoc>,
    error: Option<String>,
    /// Wall time since submission (`total`) and the partitions' summed stage times.
    timings_ms: BTreeMap<String, f64>,
}

#[derive(ToSchema)]
#[schema(as = Partition)]
pub struct PartitionDoc {
    index: u32,
    stage: StageDoc,
    timings_ms: BTreeMap<String, f64>,
    worker: Option<String>,
    gpu_phases_ms: Option<BTreeMap<String, f64>>,
    error: Option<String>,
}

#[derive(ToSchema)]
#[schema(as = Proofs)]
pub struct ProofsDoc {
    circuit_id: String,
    proofs: Vec<ProofDoc>,
}

#[derive(ToSchema)]
#[schema(as = Proof)]
pub struct ProofDoc {
    partition: u32,
    /// Compressed Groth16 proof, hex.
    proof: String,
    /// Compressed field elements, hex.
    public_inputs: Vec<String>,
}

#[derive(ToSchema)]
#[schema(as = Circuits)]
pub struct CircuitsDoc {
    circuits: Vec<CircuitDoc>,
}

#[derive(ToSchema)]
#[schema(as = Circuit)]
pub struct CircuitDoc {
    name: String,
    /// The family's params, inputs and public inputs, in words.
    description: Value,
    known_shapes: Vec<String>,
}

#[derive(ToSchema)]
#[schema(as = VerifyingKey)]
pub struct VkDoc {
    circuit_id: String,
    /// Compressed Groth16 verifying key, hex.
    vk: String,
}

/// Budget, queues, job counts by status and every worker's state
/// (docs/api.md).
#[derive(ToSchema)]
#[schema(as = Status)]
pub struct StatusDoc {
    backend: String,
    budget: BTreeMap<String, Value>,
    queues: BTreeMap<String, Value>,
    jobs: BTreeMap<String, u64>,
    workers: Vec<BTreeMap<String, Value>>,
}

/// `GET /v1/workers` (docs/api.md).
#[derive(ToSchema)]
#[schema(as = Workers)]
pub struct WorkersDoc {
    workers: Vec<BTreeMap<String, Value>>,
}

/// `GET /v1/timeline` as JSON (docs/api.md).
#[derive(ToSchema)]
#[schema(as = Timeline)]
pub struct TimelineDoc {
    since_unix_ms: f64,
    until_unix_ms: f64,
    entries: Vec<BTreeMap<String, Value>>,
}

#[derive(ToSchema)]
#[schema(as = Health)]
pub struct HealthDoc {
    status: String,
}

/// The token gate's refusals (src/auth.rs), answered before any handler
/// runs: every route whose security names `bearer` lists these.
#[derive(IntoResponses)]
pub enum TokenRefusals {
    #[response(
        status = 401,
        description = "a token is configured and this one is missing or invalid",
        headers(("WWW-Authenticate" = String))
    )]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "the token lacks the needed scope")]
    Forbidden(ErrorBody),
}

/// The answer of a route that asks an actor which no longer answers (the
/// daemon is stopping, or broken).
#[derive(IntoResponses)]
pub enum SchedulerGone {
    #[response(status = 503, description = "the scheduler's actors are gone")]
    Unavailable(ErrorBody),
}

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
        daemon::status,
        daemon::healthz,
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
