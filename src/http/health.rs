//! The daemon's health and load: `/healthz`, `/readyz`, `/v1/status` and `/metrics`.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::{ApiError, ErrorBody, ErrorReason};
// Named by the #[utoipa::path] attributes.
use super::schemas::{HealthDoc, SchedulerGone, StatusDoc, TokenRefusals};
use super::state::AppState;
use crate::jobs::Unready;

/// `/v1/status`'s query.
#[derive(serde::Deserialize)]
pub struct StatusQuery {
    /// `fleet`: the whole fleet's counts, from the database.
    scope: Option<String>,
}

/// The daemon's state: memory budget, queues, job counts and workers, or with
/// `scope=fleet` the whole fleet's counts.
#[utoipa::path(
    get, path = "/v1/status", tag = "daemon",
    params(("scope" = Option<String>, Query, description = "`fleet` (a fleet node only): jobs by status, partitions waiting, and partitions held per node, summed from the database; answered 503 `store_failing` while it cannot be read")),
    responses(
        (status = 200, description = "budget, queues, job counts, workers (this daemon's); with scope=fleet, the fleet's counts", body = StatusDoc),
        (status = 400, description = "an unknown scope", body = ErrorBody),
        (status = 422, description = "scope=fleet on a daemon that is not a fleet node (no PostgreSQL store)", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn status(
    state: web::Data<AppState>,
    query: web::Query<StatusQuery>,
) -> Result<HttpResponse, ApiError> {
    // Both answers go through a Value, whose keys are sorted: the order
    // they have always had.
    let body = match query.scope.as_deref() {
        None | Some("node") => serde_json::to_value(state.jobs.status().await?),
        Some("fleet") => serde_json::to_value(state.jobs.fleet_status().await?),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown scope {other:?}: node (the default) or fleet"
            )))
        }
    };
    Ok(HttpResponse::Ok().json(body.map_err(|e| ApiError::internal(e.to_string()))?))
}

/// Readiness: whether the daemon takes jobs now, for a load balancer to route by.
#[utoipa::path(
    get, path = "/readyz", tag = "daemon",
    responses(
        (status = 200, description = "taking jobs", body = HealthDoc),
        (status = 503, description = "not taking jobs now: shutting down, stored jobs still being rebuilt after a start, or the job store cannot write (`reason`: shutting_down, recovering, store_failing); /healthz still answers", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
    )
)]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match state.jobs.readiness() {
        Ok(()) => Ok(HttpResponse::Ok().json(json!({ "status": "ok" }))),
        Err(Unready::ShuttingDown) => {
            Err(ApiError::unavailable("shutting down").because(ErrorReason::ShuttingDown))
        }
        Err(Unready::Recovering { retry_after_s }) => {
            Err(ApiError::unavailable("stored jobs are still being rebuilt")
                .because(ErrorReason::Recovering)
                .retry_after(retry_after_s))
        }
        Err(Unready::StoreFailing { why, retry_after_s }) => {
            Err(ApiError::unavailable(format!("the job store cannot write: {why}"))
                .because(ErrorReason::StoreFailing)
                .retry_after(retry_after_s))
        }
    }
}

/// Liveness: answers whenever the daemon's HTTP server runs.
#[utoipa::path(
    get, path = "/healthz", tag = "daemon",
    responses((status = 200, description = "the daemon answers", body = HealthDoc))
)]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// The Prometheus metrics (docs/metrics.md).
#[utoipa::path(
    get, path = "/metrics", tag = "daemon",
    responses(
        (status = 200, description = "Prometheus text (docs/metrics.md)", body = String,
         content_type = "text/plain"),
        TokenRefusals,
    )
)]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let text = state.metrics.text().await;
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(text)
}
