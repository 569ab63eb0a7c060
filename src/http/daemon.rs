//! The daemon itself: `/v1/status`, `/healthz`, `/metrics` and this API's
//! OpenAPI document.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::{unavailable, ApiError, SCHEDULER};
// Named by the #[utoipa::path] attributes.
use super::schemas::{HealthDoc, SchedulerGone, StatusDoc, TokenRefusals};
use super::state::AppState;

#[utoipa::path(
    get, path = "/v1/status", tag = "daemon",
    responses(
        (status = 200, description = "budget, queues, job counts, workers", body = StatusDoc),
        TokenRefusals,
        SchedulerGone,
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn status(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let status = state
        .system
        .status()
        .await
        .map_err(|e| unavailable(SCHEDULER, e))?;
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
        TokenRefusals,
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
    HttpResponse::Ok().json(super::openapi::document())
}
