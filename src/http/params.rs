//! `/v1/params`: Filecoin's parameter files in the parameter directory and
//! which of them are loaded (decoded into a prepared circuit, counted in
//! the budget's resident bytes); evicting one frees its memory.

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::ApiError;
// Named by the #[utoipa::path] attributes.
use super::schemas::{ErrorBody, ParamsDoc, TokenRefusals};
use super::state::AppState;

#[utoipa::path(
    get, path = "/v1/params", tag = "params",
    responses(
        (status = 200, description = "the parameter files present and the ones loaded", body = ParamsDoc),
        TokenRefusals,
    ),
    security((), ("bearer" = ["read"]))
)]
pub async fn list_params(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let dir = state.jobs.params_dir.clone();
    let listed = web::block(move || cuzk_filecoin::params::cache_ids_in(&dir))
        .await
        .map_err(|e| ApiError::new(500, format!("listing the parameter directory failed: {e}")))?;
    let loaded = state.store.loaded();
    let files: Vec<_> = listed
        .iter()
        .map(|(id, path)| {
            json!({
                "id": id,
                "file": path.display().to_string(),
                "bytes": std::fs::metadata(path).map(|m| m.len()).ok(),
                "loaded": loaded.contains_key(id),
                "resident_bytes": loaded.get(id),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "dir": state.jobs.params_dir.display().to_string(),
        "files": files,
    })))
}

#[utoipa::path(
    post, path = "/v1/params/{id}/evict", tag = "params",
    params(("id" = String, Path, description = "a cache id, as GET /v1/params lists it")),
    responses(
        (status = 200, description = "no longer held; partitions running keep it until they finish", body = ParamsDoc),
        (status = 404, description = "not loaded", body = ErrorBody),
        TokenRefusals,
    ),
    security((), ("bearer" = ["submit"]))
)]
pub async fn evict_params(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let is_filecoin = cuzk_filecoin::params::cache_ids_in(&state.jobs.params_dir)
        .iter()
        .any(|(file_id, _)| *file_id == id);
    if is_filecoin && state.store.evict(&id) {
        Ok(HttpResponse::Ok().json(json!({ "id": id, "loaded": false })))
    } else {
        Err(ApiError::new(404, format!("parameters {id:?} are not loaded")))
    }
}
