//! The HTTP API (actix-web). The contract is fixed: docs/api.md.

use std::sync::Arc;

use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use cuzk_actors::messages::{CancelJob, GetJob, GetProofs, JobStatus, ProofsError, SubmitJob};
use cuzk_actors::{JobId, NewJob, Priority, ProvingSystem, Reservation};
use cuzk_kernels::circuits::{CircuitRegistry, CircuitShape, WitnessSource};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::backend::ProofJob;
use crate::keys::CircuitStore;
use crate::shutdown::Intake;
// Named by the #[utoipa::path] attributes.
use crate::openapi::{
    CircuitsDoc, ErrorBody, HealthDoc, JobDoc, JobRef, ProofsDoc, StatusDoc, VkDoc,
};

/// How many bytes one partition of a shape reserves (backend-specific).
pub type ReservationRule = Arc<dyn Fn(&CircuitShape) -> Reservation + Send + Sync>;

pub struct AppState {
    pub system: ProvingSystem,
    pub reservation: ReservationRule,
    pub registry: CircuitRegistry,
    pub store: Arc<CircuitStore>,
    pub max_partitions: u32,
    /// Seconds a client is told to wait when the job queue is full.
    pub retry_after_s: u64,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// Closed once a shutdown begins.
    pub intake: Intake,
}

/// An error answered as `{"error": "..."}` with its status code.
#[derive(Debug)]
pub struct ApiError {
    status: actix_web::http::StatusCode,
    body: Value,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status: actix_web::http::StatusCode::from_u16(status).expect("valid status code"),
            body: json!({ "error": message.into() }),
        }
    }

    fn with(mut self, key: &str, value: Value) -> Self {
        self.body[key] = value;
        self
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.body["error"].as_str().unwrap_or("error"))
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> actix_web::http::StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(&self.body)
    }
}

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(503, format!("scheduler unavailable: {e}"))
}

/// A proof job. Exactly one of `seed` and `inputs`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "partitions": 2, "seed": 7}))]
pub struct SubmitRequest {
    /// A registered circuit family (`GET /v1/circuits`).
    #[schema(examples("mimc-chain", "poseidon-merkle"))]
    circuit: String,
    /// The family's params; they select the shape.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    params: Value,
    /// 1 to `limits.max_partitions`.
    #[serde(default = "one")]
    #[schema(default = 1)]
    partitions: u32,
    #[serde(default)]
    #[schema(value_type = crate::openapi::PriorityDoc)]
    priority: Priority,
    /// Draw a random valid instance per partition.
    seed: Option<u64>,
    /// Witness inputs: one object for every partition, or an array with one per partition.
    #[schema(value_type = Option<Value>)]
    inputs: Option<Value>,
    /// Idempotency key (the `Idempotency-Key` header wins).
    request_id: Option<String>,
    /// Milliseconds after submission by which the job should be done.
    deadline_ms: Option<u64>,
}

fn empty_object() -> Value {
    json!({})
}

fn one() -> u32 {
    1
}

/// A seed per partition, so that partitions of one job (and jobs with nearby
/// seeds) get unrelated instances.
fn partition_seed(seed: u64, partition: u32) -> u64 {
    // splitmix64 finalizer over the pair.
    let mut z = seed ^ (u64::from(partition)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Memory one partition of `shape` holds on the host, from its NTT domain n
/// (32-byte field elements): a, b and c (3n, released after prove_start),
/// then the assignment, H, the MSM scalars and the signed-digit table
/// arkworks' MSM builds (one 8-byte digit per scalar per window, with
/// windows of ln(n)+2 bits), plus a fixed allowance for MSM buckets and
/// thread-local buffers. `tests/reservation_peak.rs` measures a partition's
/// real peak against it.
pub fn reservation_for(shape: &CircuitShape) -> Reservation {
    const ELEMENT: u64 = 32;
    const BUCKETS_AND_BUFFERS: u64 = 1 << 20;
    let n = shape.estimated_constraints.next_power_of_two() as u64;
    let window_bits = u64::from(n.ilog2()) * 69 / 100 + 2;
    let windows = 255u64.div_ceil(window_bits) + 1;
    let digit_table = n * windows * 8;
    Reservation {
        abc_bytes: 3 * n * ELEMENT,
        retained_bytes: 5 * n * ELEMENT + digit_table + BUCKETS_AND_BUFFERS,
    }
}

/// Also rebuilds stored jobs on restart (`store::rebuild`), so a job resumes
/// exactly as it was accepted.
pub(crate) fn parse_submit(
    registry: &CircuitRegistry,
    max_partitions: u32,
    body: &[u8],
) -> Result<(SubmitRequest, ProofJob), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(400, format!("invalid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::new(422, "the body must be a JSON object"));
    }
    let request: SubmitRequest = serde_json::from_value(value)
        .map_err(|e| ApiError::new(422, format!("invalid job: {e}")))?;
    let family = registry
        .get(&request.circuit)
        .cloned()
        .ok_or_else(|| {
            let known: Vec<&str> = registry.families().map(|f| f.name()).collect();
            ApiError::new(
                422,
                format!(
                    "unknown circuit {:?}; known circuits: {}",
                    request.circuit,
                    known.join(", ")
                ),
            )
        })?;
    if request.partitions == 0 || request.partitions > max_partitions {
        return Err(ApiError::new(
            422,
            format!(
                "partitions must be between 1 and {}, got {}",
                max_partitions, request.partitions
            ),
        ));
    }
    let shape = family
        .shape(&request.params)
        .map_err(|e| ApiError::new(422, format!("invalid params for {}: {e}", request.circuit)))?;
    let witnesses: Vec<WitnessSource> = match (&request.seed, &request.inputs) {
        (Some(seed), None) => (0..request.partitions)
            .map(|p| WitnessSource::Seed(partition_seed(*seed, p)))
            .collect(),
        (None, Some(Value::Array(per_partition))) => {
            if per_partition.len() != request.partitions as usize {
                return Err(ApiError::new(
                    422,
                    format!(
                        "inputs has {} entries but the job has {} partitions",
                        per_partition.len(),
                        request.partitions
                    ),
                ));
            }
            per_partition
                .iter()
                .cloned()
                .map(WitnessSource::Inputs)
                .collect()
        }
        (None, Some(inputs)) => {
            vec![WitnessSource::Inputs(inputs.clone()); request.partitions as usize]
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::new(422, "give either seed or inputs, not both"))
        }
        (None, None) => return Err(ApiError::new(422, "one of seed or inputs is required")),
    };
    for (partition, source) in witnesses.iter().enumerate() {
        if matches!(source, WitnessSource::Inputs(_)) {
            family.instance(&shape, source).map_err(|e| {
                ApiError::new(422, format!("inputs for partition {partition}: {e}"))
            })?;
        }
    }
    Ok((
        request,
        ProofJob {
            family,
            shape,
            witnesses,
        },
    ))
}

#[utoipa::path(
    post, path = "/v1/jobs", tag = "jobs",
    request_body(content = SubmitRequest, content_type = "application/json"),
    params(("Idempotency-Key" = Option<String>, Header, description = "idempotency key")),
    responses(
        (status = 202, description = "queued", body = JobRef,
         headers(("Location" = String, description = "/v1/jobs/{id}"))),
        (status = 200, description = "a repeated idempotency key: the existing job", body = JobRef,
         headers(("Location" = String))),
        (status = 400, description = "not JSON, or a non-ASCII Idempotency-Key", body = ErrorBody),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
        (status = 413, description = "body over limits.max_body_bytes", body = ErrorBody),
        (status = 422, description = "not a valid job (the reason says why)", body = ErrorBody),
        (status = 429, description = "limits.max_queued_jobs unfinished jobs; nothing was queued", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
        (status = 503, description = "the scheduler's actors are gone", body = ErrorBody),
    ),
    security((), ("bearer" = ["submit"]))
)]
pub async fn submit_job(
    state: web::Data<AppState>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let header_key = match req.headers().get("Idempotency-Key") {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::new(400, "Idempotency-Key must be visible ASCII"))?
                .to_string(),
        ),
        None => None,
    };
    if !state.intake.is_open() {
        return Err(shutting_down());
    }
    let parse_state = state.clone();
    let parse_body = body.clone();
    let (request, job) = web::block(move || {
        parse_submit(&parse_state.registry, parse_state.max_partitions, &parse_body)
    })
    .await
    .map_err(|e| ApiError::new(500, format!("validation thread failed: {e}")))??;
    let new_job = NewJob {
        id: JobId(uuid::Uuid::new_v4().simple().to_string()),
        priority: request.priority,
        partitions: request.partitions,
        circuit: request.circuit,
        circuit_id: job.shape.circuit_id.clone(),
        reservation: (state.reservation)(&job.shape),
        idempotency_key: header_key.or(request.request_id),
        deadline: request.deadline_ms.map(std::time::Duration::from_millis),
        work: Arc::new(job),
        // Parsed above, so valid JSON and UTF-8.
        request: String::from_utf8(body.to_vec()).ok(),
    };
    let outcome = state
        .system
        .tracker
        .send(SubmitJob(new_job))
        .await
        .map_err(unavailable)?;
    if let Some(full) = outcome.queue_full {
        return Ok(HttpResponse::TooManyRequests()
            .insert_header((header::RETRY_AFTER, state.retry_after_s.to_string()))
            .json(json!({
                "error": format!(
                    "queue full: {} unfinished jobs (limits.max_queued_jobs = {}); retry later",
                    full.unfinished, full.limit
                )
            })));
    }
    // Durable before the answer: a job we answered for survives a crash.
    if let Some(durable) = outcome.durable {
        if let Err(error) = durable.await {
            if outcome.created {
                let _ = state.system.tracker.send(CancelJob(outcome.id.clone())).await;
            }
            return Err(if state.intake.is_open() {
                ApiError::new(503, format!("the job could not be stored: {error}"))
            } else {
                shutting_down()
            });
        }
    }
    let mut response = if outcome.created {
        HttpResponse::Accepted()
    } else {
        HttpResponse::Ok()
    };
    Ok(response
        .insert_header((header::LOCATION, format!("/v1/jobs/{}", outcome.id)))
        .json(json!({ "id": outcome.id, "status": outcome.status })))
}

fn shutting_down() -> ApiError {
    ApiError::new(503, "shutting down: not taking new jobs; retry on another daemon or after the restart")
        .with("reason", json!("shutting_down"))
}

fn job_not_found(id: &str) -> ApiError {
    ApiError::new(404, format!("no job {id:?}"))
}

#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "the job, per partition", body = JobDoc),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
        (status = 503, description = "the scheduler's actors are gone", body = ErrorBody),
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn get_job(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let view = state
        .system
        .tracker
        .send(GetJob(JobId(id.clone())))
        .await
        .map_err(unavailable)?;
    view.map(|v| HttpResponse::Ok().json(v))
        .ok_or_else(|| job_not_found(&id))
}

#[utoipa::path(
    get, path = "/v1/jobs/{id}/proofs", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "one proof per partition", body = ProofsDoc),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
        (status = 409, description = "the job is not done; `status` says what it is", body = ErrorBody),
        (status = 503, description = "the scheduler's actors are gone", body = ErrorBody),
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn get_proofs(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    match state
        .system
        .tracker
        .send(GetProofs(JobId(id.clone())))
        .await
        .map_err(unavailable)?
    {
        Ok(view) => Ok(HttpResponse::Ok().json(json!({
            "circuit_id": view.circuit_id,
            "proofs": view.proofs.iter().map(|(partition, record)| json!({
                "partition": partition,
                "proof": hex::encode(&record.proof),
                "public_inputs": record.public_inputs.iter().map(hex::encode).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }))),
        Err(ProofsError::NotFound) => Err(job_not_found(&id)),
        Err(ProofsError::NotReady(status)) => Err(ApiError::new(
            409,
            format!(
                "job {id} is {}; proofs exist only once it is done",
                status.as_str()
            ),
        )
        .with("status", json!(status))),
    }
}

#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "cancelled (also when it already was)", body = JobRef),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
        (status = 404, description = "no such job", body = ErrorBody),
        (status = 409, description = "the job already ended otherwise; `status` says how", body = ErrorBody),
        (status = 503, description = "the scheduler's actors are gone", body = ErrorBody),
    ),
    security((), ("bearer" = ["submit"]))
)]
pub async fn cancel_job(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    match state
        .system
        .tracker
        .send(CancelJob(JobId(id.clone())))
        .await
        .map_err(unavailable)?
    {
        None => Err(job_not_found(&id)),
        Some(JobStatus::Cancelled) => {
            Ok(HttpResponse::Ok().json(json!({ "id": id, "status": "cancelled" })))
        }
        Some(status) => Err(ApiError::new(
            409,
            format!("job {id} already finished: {}", status.as_str()),
        )
        .with("status", json!(status))),
    }
}

#[utoipa::path(
    get, path = "/v1/circuits", tag = "circuits",
    responses(
        (status = 200, description = "circuit families and the shapes set up so far", body = CircuitsDoc),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn list_circuits(state: web::Data<AppState>) -> HttpResponse {
    let known = state.store.known_shapes();
    let circuits: Vec<Value> = state
        .registry
        .families()
        .map(|family| {
            let prefix = format!("{}-", family.name());
            json!({
                "name": family.name(),
                "description": family.describe(),
                "known_shapes": known.iter().filter(|id| id.starts_with(&prefix)).collect::<Vec<_>>(),
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({ "circuits": circuits }))
}

#[utoipa::path(
    get, path = "/v1/circuits/{circuit_id}/vk", tag = "circuits",
    params(("circuit_id" = String, Path, description = "a shape, e.g. poseidon-merkle-d8-c2")),
    responses(
        (status = 200, description = "the Groth16 verifying key", body = VkDoc),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
        (status = 404, description = "the shape has not been set up", body = ErrorBody),
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn get_vk(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let lookup_state = state.clone();
    let lookup_id = id.clone();
    let vk = web::block(move || lookup_state.store.verifying_key(&lookup_id))
        .await
        .map_err(|e| ApiError::new(500, format!("key lookup failed: {e}")))?
        .ok_or_else(|| {
            ApiError::new(
                404,
                format!("no verifying key for circuit {id:?}; it is set up on its first job"),
            )
        })?;
    let mut bytes = Vec::new();
    ark_serialize::CanonicalSerialize::serialize_compressed(&vk, &mut bytes)
        .map_err(|e| ApiError::new(500, e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "circuit_id": id, "vk": hex::encode(bytes) })))
}

#[utoipa::path(
    get, path = "/v1/status", tag = "daemon",
    responses(
        (status = 200, description = "budget, queues, job counts, workers", body = StatusDoc),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
        (status = 503, description = "the scheduler's actors are gone", body = ErrorBody),
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn status(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let status = state.system.status().await.map_err(unavailable)?;
    Ok(HttpResponse::Ok().json(status))
}

#[utoipa::path(
    get, path = "/healthz", tag = "daemon",
    responses((status = 200, description = "the daemon answers", body = HealthDoc)),
    security(())
)]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

#[utoipa::path(
    get, path = "/metrics", tag = "daemon",
    responses(
        (status = 200, description = "Prometheus text (docs/metrics.md)", body = String,
         content_type = "text/plain"),
        (status = 401, description = "a token is configured and this one is missing or invalid", body = ErrorBody,
         headers(("WWW-Authenticate" = String))),
        (status = 403, description = "the token lacks the needed scope", body = ErrorBody),
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(cuzk_actors::telemetry::fix_exposition(
            &state.metrics.render(),
        ))
}

#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "daemon",
    responses((status = 200, description = "this document", body = Object)),
    security(())
)]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(crate::openapi::document())
}

pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::new(
        404,
        format!("no route {} {}", req.method(), req.path()),
    ))
}

/// Gives actix-web's own error responses (body too large, wrong method,
/// unreadable payload) the same JSON shape as ours.
pub fn json_errors<B: actix_web::body::MessageBody + 'static>(
    res: actix_web::dev::ServiceResponse<B>,
) -> actix_web::Result<actix_web::middleware::ErrorHandlerResponse<B>> {
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return Ok(actix_web::middleware::ErrorHandlerResponse::Response(
            res.map_into_left_body(),
        ));
    }
    let status = res.status();
    let message = match res.response().error() {
        Some(error) => error.to_string(),
        None => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let (req, _) = res.into_parts();
    let response = HttpResponse::build(status)
        .json(json!({ "error": message }))
        .map_into_right_body();
    Ok(actix_web::middleware::ErrorHandlerResponse::Response(
        actix_web::dev::ServiceResponse::new(req, response),
    ))
}

macro_rules! routes {
    ($(($method:ident, $path:literal, $handler:expr)),* $(,)?) => {
        vec![$((Method::$method, $path, web::method(Method::$method).to($handler))),*]
    };
}

/// Every route as (method, path, route): `configure` registers exactly
/// these, and a test in src/openapi.rs checks that the OpenAPI document has each.
pub fn routes() -> Vec<(Method, &'static str, actix_web::Route)> {
    routes![
        (GET, "/healthz", healthz),
        (GET, "/metrics", metrics),
        (POST, "/v1/jobs", submit_job),
        (GET, "/v1/jobs/{id}", get_job),
        (GET, "/v1/jobs/{id}/proofs", get_proofs),
        (POST, "/v1/jobs/{id}/cancel", cancel_job),
        (GET, "/v1/circuits", list_circuits),
        (GET, "/v1/circuits/{circuit_id}/vk", get_vk),
        (GET, "/v1/status", status),
        (GET, "/v1/openapi.json", openapi_json),
        (GET, "/v1/workers", crate::observe::workers),
        (GET, "/v1/timeline", crate::observe::timeline),
        (GET, "/", crate::observe::index),
    ]
}

pub fn configure(cfg: &mut web::ServiceConfig, max_body_bytes: usize) {
    cfg.app_data(web::PayloadConfig::new(max_body_bytes));
    for (_, path, route) in routes() {
        cfg.route(path, route);
    }
    cfg.default_service(web::to(not_found));
}
