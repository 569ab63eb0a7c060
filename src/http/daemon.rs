//! The daemon itself: `/v1/status`, `/healthz`, `/readyz`, `/metrics` and this API's
//! OpenAPI document.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::{unavailable, ApiError, SCHEDULER};
// Named by the #[utoipa::path] attributes.
use super::schemas::{ErrorBody, HealthDoc, SchedulerGone, StatusDoc, TokenRefusals};
use super::state::AppState;

/// `/v1/status`'s query.
#[derive(serde::Deserialize)]
pub struct StatusQuery {
    /// `fleet`: the whole fleet's counts, from the database.
    scope: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/status", tag = "daemon",
    params(("scope" = Option<String>, Query, description = "`fleet` (a fleet node only): jobs by status, partitions waiting, and partitions held per node, summed from the database; answered 503 `store_failing` while it cannot be read")),
    responses(
        (status = 200, description = "budget, queues, job counts, workers (this daemon's); with scope=fleet, the fleet's counts", body = StatusDoc),
        (status = 400, description = "an unknown scope", body = ErrorBody),
        (status = 422, description = "scope=fleet on a daemon that is not a fleet node (no PostgreSQL store)", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn status(state: web::Data<AppState>, query: web::Query<StatusQuery>) -> Result<HttpResponse, ApiError> {
    match query.scope.as_deref() {
        None | Some("node") => {}
        Some("fleet") => {
            let node = match &state.fleet {
                Some(fleet) => fleet.node.clone(),
                None => return Err(ApiError::new(422, "scope=fleet needs a fleet node: this daemon has no PostgreSQL store (store.url)")),
            };
            let fleet = super::jobs::ask_fleet(&state, |fleet| fleet.status()).await?;
            return Ok(HttpResponse::Ok().json(json!({ "scope": "fleet", "node": node, "fleet": fleet })));
        }
        Some(other) => return Err(ApiError::new(400, format!("unknown scope {other:?}: node (the default) or fleet"))),
    }
    let status = state
        .system
        .status()
        .await
        .map_err(|e| unavailable(SCHEDULER, e))?;
    let mut body = serde_json::to_value(status).map_err(|e| ApiError::new(500, e.to_string()))?;
    body["store"] = json!(state.job_store.health());
    body["recovering"] = json!(state.recovering.is_set());
    if let Some(fleet) = &state.fleet {
        body["node"] = json!(fleet.node);
    }
    Ok(HttpResponse::Ok().json(body))
}

#[utoipa::path(
    get, path = "/readyz", tag = "daemon",
    responses(
        (status = 200, description = "taking jobs", body = HealthDoc),
        (status = 503, description = "not taking jobs now: shutting down, stored jobs still being rebuilt after a start, or the job store cannot write (`reason`: shutting_down, recovering, store_failing); /healthz still answers", body = ErrorBody,
         headers(("Retry-After" = u64, description = "seconds"))),
    ),
    security(())
)]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if !state.intake.is_open() {
        return Err(ApiError::new(503, "shutting down").with("reason", json!("shutting_down")));
    }
    if state.recovering.is_set() {
        return Err(ApiError::new(503, "stored jobs are still being rebuilt")
            .with("reason", json!("recovering"))
            .retry_after(state.retry_after_s));
    }
    if let Some(failing) = state.job_store.health().failing {
        return Err(ApiError::new(503, format!("the job store cannot write: {failing}"))
            .with("reason", json!("store_failing"))
            .retry_after(state.retry_after_s));
    }
    Ok(HttpResponse::Ok().json(json!({ "status": "ok" })))
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
        TokenRefusals,
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(crate::telemetry::fix_exposition(
            &state.metrics.render(),
        ))
}

#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "daemon",
    responses((status = 200, description = "this document", body = Object)),
    security(())
)]
pub async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(super::openapi::document())
}
