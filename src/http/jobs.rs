//! `/v1/jobs`: submit a job, read it, fetch its proofs, cancel it. Each
//! job belongs to the tenant that submitted it; to another tenant it does
//! not exist (404, as for a missing job).

use std::sync::Arc;
use std::time::Instant;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use cuzk_actors::messages::{CancelJob, GetJob, GetProofs, JobStatus, ProofsError, SubmitJob};
use cuzk_actors::store::StoreError;
use cuzk_actors::tracker::Tracker;
use cuzk_actors::{JobId, NewJob, RecordedRequest, TenantScope};
use serde_json::json;

use super::error::{unavailable, ApiError, SCHEDULER};
// Named by the #[utoipa::path] attributes.
use super::schemas::{ErrorBody, JobDoc, JobRef, ProofsDoc, SchedulerGone, TokenRefusals};
use super::state::AppState;
use crate::filecoin;
use crate::fleet::Fleet;
use crate::job_input::SubmitRequest;
use crate::telemetry::{TenantLimit, TenantRefused};
use crate::tenants::Caller;

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
        (status = 408, description = "the body did not arrive within limits.body_read_timeout_s", body = ErrorBody),
        (status = 413, description = "body over limits.max_body_bytes", body = ErrorBody),
        (status = 415, description = "the body is not declared as JSON (Content-Type: application/json)", body = ErrorBody),
        (status = 422, description = "not a valid job, an empty idempotency key, or a key already used with a different body (the reason says why)", body = ErrorBody),
        (status = 429, description = "limits.max_queued_jobs unfinished jobs, the tenant's own max_queued_jobs, or the tenant over its submit rate (the error names which); nothing was queued", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds: the queue limits' limits.queue_full_retry_after_s, or until the tenant's rate bucket holds a submission"))),
        (status = 503, description = "shutting down, stored jobs still being rebuilt after a start, or the job store failed to commit (`reason`: shutting_down, recovering, store_failing); nothing was queued", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
        (status = 507, description = "the data directory's free space is under store.min_free_bytes; nothing was written", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
        TokenRefusals,
        SchedulerGone,
    ),
    security((), ("bearer" = ["submit"]))
)]
pub async fn submit_job(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    // The gate lets a submission through only with a tenant.
    let tenant = caller
        .tenant
        .clone()
        .ok_or_else(|| ApiError::new(401, "submitting needs a token"))?;
    // Before the body is read: a tenant over its rate costs no more.
    if let Err(wait_s) = state.submit_rates.take(&tenant, &caller.limits, Instant::now()) {
        TenantRefused { tenant: tenant.as_str(), reason: TenantLimit::RateLimited }.emit();
        return Ok(too_many(
            wait_s,
            format!(
                "tenant {tenant:?} is over its submit rate (submit_rate_per_s = {}, from [auth.tenants.{tenant}] or [auth.tenant_defaults]); retry in {wait_s} s",
                caller.limits.submit_rate_per_s
            ),
        ));
    }
    let body = read_body(&req, payload, state.max_body_bytes, state.body_read_timeout).await?;
    let header_key = match req.headers().get("Idempotency-Key") {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::new(400, "Idempotency-Key must be visible ASCII"))?
                .to_string(),
        ),
        None => None,
    };
    // An empty key would merge every client's keyless-by-mistake jobs.
    if header_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err(ApiError::new(422, "Idempotency-Key must not be empty"));
    }
    if !state.intake.is_open() {
        return Err(shutting_down());
    }
    if state.recovering.is_set() {
        return Err(recovering(&state));
    }
    if let Some(free) = crate::store::free_bytes(&state.data_dir).filter(|f| *f < state.min_free_bytes) {
        return Err(ApiError::new(
            507,
            format!(
                "the data directory has {free} bytes free, under store.min_free_bytes ({}); nothing was written",
                state.min_free_bytes
            ),
        )
        .retry_after(state.retry_after_s));
    }
    let parser = state.jobs.clone();
    let parsed = web::block(move || parser.parse(&body))
        .await
        .map_err(|e| ApiError::new(500, format!("validation thread failed: {e}")))??;
    if header_key.is_none() && parsed.request.request_id.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err(ApiError::new(422, "request_id must not be empty"));
    }
    let new_job = NewJob {
        id: JobId(uuid::Uuid::new_v4().simple().to_string()),
        priority: parsed.priority,
        partitions: parsed.partitions,
        circuit: parsed.request.circuit,
        circuit_id: parsed.work.circuit_id().to_string(),
        reservation: parsed.reservation,
        idempotency_key: header_key.or(parsed.request.request_id),
        tenant: tenant.clone(),
        tenant_max_unfinished: (caller.limits.max_queued_jobs > 0).then_some(caller.limits.max_queued_jobs),
        deadline: parsed
            .request
            .deadline_ms
            .map(std::time::Duration::from_millis),
        work: Arc::new(parsed.work),
        request: Some(RecordedRequest {
            text: parsed.canonical,
            digest: parsed.digest,
        }),
    };
    let key = new_job.idempotency_key.clone().unwrap_or_default();
    let outcome = match &state.fleet {
        Some(_) => {
            let max = state.max_queued_jobs;
            ask_fleet(&state, move |fleet| fleet.submit(&new_job, max)).await?
        }
        None => ask_tracker(&state, SubmitJob(new_job)).await?,
    };
    if outcome.key_conflict {
        return Err(ApiError::new(
            422,
            format!(
                "idempotency key {key:?} belongs to job {} submitted with a different body",
                outcome.id
            ),
        ));
    }
    if let Some(full) = outcome.queue_full {
        let error = match &full.tenant {
            Some(tenant) => {
                TenantRefused { tenant: tenant.as_str(), reason: TenantLimit::QueueFull }.emit();
                format!(
                    "tenant {tenant:?} has {} unfinished jobs (max_queued_jobs = {}, from [auth.tenants.{tenant}] or [auth.tenant_defaults]); retry later",
                    full.unfinished, full.limit
                )
            }
            None => format!(
                "queue full: {} unfinished jobs (limits.max_queued_jobs = {}); retry later",
                full.unfinished, full.limit
            ),
        };
        return Ok(too_many(state.retry_after_s, error));
    }
    // Durable before the answer: a job we answered for survives a crash.
    if let Some(durable) = outcome.durable {
        if let Err(error) = durable.await {
            if outcome.created {
                let _ = ask_tracker(&state, CancelJob(outcome.id.clone(), TenantScope::All)).await;
            }
            return Err(if state.intake.is_open() {
                ApiError::new(503, format!("the job could not be stored: {error}"))
                    .with("reason", json!("store_failing"))
                    .retry_after(state.retry_after_s)
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

/// The request body, at most `limit` bytes and within `timeout` of the
/// headers: a client that trickles it is answered 408 and holds the
/// connection no longer.
async fn read_body(
    req: &HttpRequest,
    payload: web::Payload,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<web::Bytes, ApiError> {
    let too_large = || ApiError::new(413, format!("the body exceeds limits.max_body_bytes ({limit} bytes)"));
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    match actix_rt::time::timeout(timeout, payload.to_bytes_limited(limit)).await {
        Err(_) => Err(ApiError::new(
            408,
            format!("the body did not arrive within {} s (limits.body_read_timeout_s)", timeout.as_secs()),
        )),
        Ok(Err(_)) => Err(too_large()),
        Ok(Ok(read)) => read.map_err(|e| ApiError::new(400, format!("reading the body failed: {e}"))),
    }
}

/// 429: nothing was queued; retry after `retry_after_s` seconds.
fn too_many(retry_after_s: u64, error: String) -> HttpResponse {
    HttpResponse::TooManyRequests()
        .insert_header((header::RETRY_AFTER, retry_after_s.to_string()))
        .json(json!({ "error": error }))
}

fn shutting_down() -> ApiError {
    ApiError::new(503, "shutting down: not taking new jobs; retry on another daemon or after the restart")
        .with("reason", json!("shutting_down"))
}

/// 404, or 503 while stored jobs are still being rebuilt: the job may be
/// one of them. `was_recovering` is the flag as read *before* the tracker
/// was asked: it clears only once the rebuilt jobs are queued to the
/// tracker, so a clear flag means they were ahead of the lookup; read after
/// the answer, a rebuild finishing in between turned a resumed job into a
/// 404 (seen in the durability test).
fn job_not_found(state: &AppState, was_recovering: bool, id: &str) -> ApiError {
    if was_recovering {
        return recovering(state);
    }
    ApiError::new(404, format!("no job {id:?}"))
}

fn recovering(state: &AppState) -> ApiError {
    ApiError::new(503, "restarting: stored jobs are still being rebuilt; retry shortly")
        .with("reason", json!("recovering"))
        .retry_after(state.retry_after_s)
}

/// 409: the job's status forbids what was asked; the body carries it.
fn conflict(message: String, status: JobStatus) -> ApiError {
    ApiError::new(409, message).with("status", json!(status))
}

/// Asks the fleet's database on a blocking thread; a database that fails
/// is a 503 (`store_failing`, with Retry-After), as a failing store is on
/// a single daemon.
pub(super) async fn ask_fleet<T: Send + 'static>(
    state: &AppState,
    question: impl FnOnce(&Fleet) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    let fleet = state.fleet.clone().expect("asked only on a fleet node");
    web::block(move || question(&fleet))
        .await
        .map_err(|e| ApiError::new(500, format!("database thread failed: {e}")))?
        .map_err(|error| {
            ApiError::new(503, format!("the fleet's database failed: {error}"))
                .with("reason", json!("store_failing"))
                .retry_after(state.retry_after_s)
        })
}

/// Asks the tracker; one that no longer answers is a 503.
async fn ask_tracker<M>(state: &AppState, message: M) -> Result<M::Result, ApiError>
where
    M: actix::Message + Send + 'static,
    M::Result: Send,
    Tracker: actix::Handler<M>,
{
    state
        .system
        .tracker
        .send(message)
        .await
        .map_err(|e| unavailable(SCHEDULER, e))
}

#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "the job, per partition", body = JobDoc),
        (status = 404, description = "no such job, or another tenant's (while stored jobs are rebuilt after a start: 503, `reason` recovering)", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn get_job(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let was_recovering = state.recovering.is_set();
    let local = ask_tracker(&state, GetJob(JobId(id.clone()), caller.jobs())).await?;
    let view = match &state.fleet {
        // The database has every partition; the tracker, detail of those
        // this node holds.
        Some(_) => {
            let (job, scope) = (JobId(id.clone()), caller.jobs());
            ask_fleet(&state, move |fleet| fleet.view(&job, &scope, local)).await?
        }
        None => local.map(|v| serde_json::to_value(v).expect("a view serializes")),
    };
    view.map(|v| HttpResponse::Ok().json(v))
        .ok_or_else(|| job_not_found(&state, was_recovering, &id))
}

#[utoipa::path(
    get, path = "/v1/jobs/{id}/proofs", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "one proof per partition", body = ProofsDoc),
        (status = 404, description = "no such job, or another tenant's (while stored jobs are rebuilt after a start: 503, `reason` recovering)", body = ErrorBody),
        (status = 409, description = "the job is not done; `status` says what it is", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn get_proofs(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let was_recovering = state.recovering.is_set();
    let (job, scope) = (JobId(id.clone()), caller.jobs());
    let proofs = match &state.fleet {
        Some(_) => ask_fleet(&state, move |fleet| fleet.proofs(&job, &scope)).await?,
        None => ask_tracker(&state, GetProofs(job, scope)).await?,
    };
    match proofs {
        Ok(view) => {
            let mut body = json!({
                "circuit_id": view.circuit_id,
                "proofs": view.proofs.iter().map(|(partition, record)| json!({
                    "partition": partition,
                    "proof": hex::encode(&record.proof),
                    "public_inputs": record.public_inputs.iter().map(hex::encode).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            });
            if filecoin::is_kind(&view.circuit) {
                // The bytes filecoin-proofs-api returns for the call: the
                // partitions' 192-byte proofs in partition order.
                let proof: Vec<u8> = view.proofs.iter().flat_map(|(_, r)| r.proof.iter().copied()).collect();
                body["kind"] = json!(view.circuit);
                body["proof"] = json!(hex::encode(proof));
            }
            Ok(HttpResponse::Ok().json(body))
        }
        Err(ProofsError::NotFound) => Err(job_not_found(&state, was_recovering, &id)),
        Err(ProofsError::NotReady(status)) => Err(conflict(
            format!(
                "job {id} is {}; proofs exist only once it is done",
                status.as_str()
            ),
            status,
        )),
    }
}

#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "cancelled (also when it already was)", body = JobRef),
        (status = 404, description = "no such job, or another tenant's (while stored jobs are rebuilt after a start: 503, `reason` recovering)", body = ErrorBody),
        (status = 409, description = "the job already ended otherwise; `status` says how", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    ),
    security((), ("bearer" = ["submit"]))
)]
pub async fn cancel_job(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let was_recovering = state.recovering.is_set();
    let (job, scope) = (JobId(id.clone()), caller.jobs());
    let status = match &state.fleet {
        Some(_) => ask_fleet(&state, move |fleet| fleet.cancel(&job, &scope)).await?,
        None => ask_tracker(&state, CancelJob(job, scope)).await?,
    };
    match status {
        None => Err(job_not_found(&state, was_recovering, &id)),
        Some(JobStatus::Cancelled) => {
            Ok(HttpResponse::Ok().json(json!({ "id": id, "status": "cancelled" })))
        }
        Some(status) => Err(conflict(
            format!("job {id} already finished: {}", status.as_str()),
            status,
        )),
    }
}
