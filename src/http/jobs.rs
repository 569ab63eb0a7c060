//! `/v1/jobs`: submit a job, read it, fetch its proofs, cancel it, each
//! through the job seam (`crate::jobs`): these handlers read HTTP and write
//! it. Each job belongs to the tenant that submitted it; to another tenant
//! it does not exist (404, as for a missing job).

use std::pin::Pin;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use cuzk_actors::messages::{JobStatus, JobView};
use cuzk_actors::JobId;
use futures_core::Stream;
use serde_json::json;

use super::error::{ApiError, ErrorBody};
// Named by the #[utoipa::path] attributes.
use super::schemas::{JobRef, ProofsDoc, SchedulerGone, TokenRefusals};
use super::state::AppState;
use crate::filecoin;
use crate::job_input::SubmitRequest;
use crate::jobs::Offered;
use crate::tenants::Caller;

/// Submits a job. A repeated `Idempotency-Key` with the same body answers the
/// existing job instead of queueing another.
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
        (status = 429, description = "limits.max_queued_jobs unfinished jobs, the tenant's own max_queued_jobs or its share of the queue (limits.queue_share_per_tenant) or of the parse budget (limits.parse_share_per_tenant), or the tenant over its submit rate (the error names which); nothing was queued", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds: the queue limits' limits.queue_full_retry_after_s, or until the tenant's rate bucket holds a submission"))),
        (status = 503, description = "shutting down, stored jobs still being rebuilt after a start, the job store failed to commit, or the submissions being read and parsed hold limits.parse_budget_bytes or limits.max_parsing_requests (`reason`: shutting_down, recovering, store_failing, parsing_full); nothing was read or queued", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
        (status = 507, description = "the data directory's free space is under store.min_free_bytes; nothing was written", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn submit_job(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    // The gate lets a submission through only with a tenant.
    let tenant = caller.tenant.clone().ok_or_else(|| ApiError::unauthorized("submitting needs a token"))?;
    let limit = state.max_body_bytes;
    let too_large =
        || ApiError::payload_too_large(format!("the body exceeds limits.max_body_bytes ({limit} bytes)"));
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    // Before the body is read: a tenant over its rate costs no more, and
    // the body's parse is counted as its bytes arrive (its class, urgent or
    // bulk, from its declared length, else the limit), so a body that stalls
    // holds the share of what it sent.
    let expected = declared.unwrap_or(limit);
    let mut admission = state.jobs.admit(tenant, &caller, expected)?;
    let body = read_body(payload, expected, state.body_read_timeout, |received| {
        admission.received(&state.jobs, received).map_err(ApiError::from)
    })
    .await
    .map_err(|e| e.unwrap_or_else(too_large))?;
    let header_key = match req.headers().get("Idempotency-Key") {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::bad_request("Idempotency-Key must be visible ASCII"))?
                .to_string(),
        ),
        None => None,
    };
    // An empty key would merge every client's keyless-by-mistake jobs.
    if header_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err(ApiError::unprocessable("Idempotency-Key must not be empty"));
    }
    let submitted = state.jobs.submit(admission, Offered::Body(Box::new(body)), header_key).await?;
    let mut response = if submitted.created { HttpResponse::Accepted() } else { HttpResponse::Ok() };
    Ok(response
        .insert_header((header::LOCATION, format!("/v1/jobs/{}", submitted.id)))
        .json(json!({ "id": submitted.id, "status": submitted.status })))
}

/// The request body, at most `limit` bytes and within `timeout` of the
/// headers: a client that trickles it is answered 408 and holds the
/// connection no longer. `arrived` is told the bytes received after each
/// piece, and its refusal ends the read. `Err(None)`: the body is over
/// `limit`.
async fn read_body(
    mut payload: web::Payload,
    limit: usize,
    timeout: std::time::Duration,
    mut arrived: impl FnMut(usize) -> Result<(), ApiError>,
) -> Result<web::Bytes, Option<ApiError>> {
    let read = async {
        let mut body = web::BytesMut::new();
        while let Some(piece) = std::future::poll_fn(|cx| Pin::new(&mut payload).poll_next(cx)).await {
            let piece =
                piece.map_err(|e| Some(ApiError::bad_request(format!("reading the body failed: {e}"))))?;
            let received = body.len() + piece.len();
            if received > limit {
                return Err(None);
            }
            arrived(received).map_err(Some)?;
            body.extend_from_slice(&piece);
        }
        Ok(body.freeze())
    };
    actix_rt::time::timeout(timeout, read).await.unwrap_or_else(|_| {
        Err(Some(ApiError::request_timeout(format!(
            "the body did not arrive within {} s (limits.body_read_timeout_s)",
            timeout.as_secs()
        ))))
    })
}

/// A job's status and the stage of each of its partitions.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "the job, per partition", body = JobView),
        (status = 404, description = "no such job, or another tenant's (while stored jobs are rebuilt after a start: 503, `reason` recovering)", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn get_job(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let view = state.jobs.view(&JobId(id.into_inner()), &caller.jobs()).await?;
    // Through a Value, whose keys are sorted: the order this answer has
    // always had.
    Ok(HttpResponse::Ok().json(serde_json::to_value(view).expect("a view serializes")))
}

/// A done job's proofs, one per partition with its public inputs (and, for a
/// Filecoin kind, the bytes filecoin-proofs-api returns).
#[utoipa::path(
    get, path = "/v1/jobs/{id}/proofs", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "one proof per partition", body = ProofsDoc),
        (status = 404, description = "no such job, or another tenant's (while stored jobs are rebuilt after a start: 503, `reason` recovering)", body = ErrorBody),
        (status = 409, description = "the job is not done; `status` says what it is", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn get_proofs(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let view = state.jobs.proofs(&JobId(id.into_inner()), &caller.jobs()).await?;
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

/// Cancels a job, so that none of its partitions run any more; cancelling a
/// job already cancelled answers the same.
#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses(
        (status = 200, description = "cancelled (also when it already was)", body = JobRef),
        (status = 404, description = "no such job, or another tenant's (while stored jobs are rebuilt after a start: 503, `reason` recovering)", body = ErrorBody),
        (status = 409, description = "the job already ended otherwise; `status` says how", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn cancel_job(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = JobId(id.into_inner());
    state.jobs.cancel(&id, &caller.jobs()).await?;
    Ok(HttpResponse::Ok().json(json!({ "id": id, "status": JobStatus::Cancelled })))
}
