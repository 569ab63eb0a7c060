//! `/v1/params`: Filecoin's parameter files in the parameter directory and
//! which of them are loaded (decoded into a prepared circuit, counted in
//! the budget's resident bytes); preloading one spares the first job the
//! load, evicting one frees its memory.

use std::path::PathBuf;

use actix_web::{web, HttpResponse};
use cuzk_actors::messages::budget::SetResident;
use cuzk_filecoin::Kind;
use serde_json::json;

use super::error::{ApiError, ErrorBody};
// Named by the #[utoipa::path] attributes.
use super::schemas::{ParamsDoc, TokenRefusals};
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
    let dir = state.parser.params_dir.clone();
    let listed = web::block(move || cuzk_filecoin::params::cache_ids_in(&dir))
        .await
        .map_err(|e| ApiError::internal(format!("listing the parameter directory failed: {e}")))?;
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
        "dir": state.parser.params_dir.display().to_string(),
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
    security((), ("bearer" = ["admin"]))
)]
pub async fn evict_params(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    if param_file(&state, &id).is_some() && state.store.evict(&id) {
        update_budget(&state);
        Ok(HttpResponse::Ok().json(json!({ "id": id, "loaded": false })))
    } else {
        Err(ApiError::not_found(format!("parameters {id:?} are not loaded")))
    }
}

#[utoipa::path(
    post, path = "/v1/params/{id}/preload", tag = "params",
    params(("id" = String, Path, description = "a cache id, as GET /v1/params lists it")),
    responses(
        (status = 200, description = "loaded (now, or already): jobs of this circuit start without the load", body = ParamsDoc),
        (status = 404, description = "no such file in the parameter directory", body = ErrorBody),
        (status = 422, description = "the file names no circuit this daemon proves, or does not fit it", body = ErrorBody),
        TokenRefusals,
    ),
    security((), ("bearer" = ["admin"]))
)]
pub async fn preload_params(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let path = param_file(&state, &id)
        .ok_or_else(|| ApiError::not_found(format!("no parameter file for {id:?} in {}", state.parser.params_dir.display())))?;
    let (kind, sector_size) = Kind::of_cache_id(&id)
        .ok_or_else(|| ApiError::unprocessable(format!("{id:?} names no circuit of a registered proof")))?;
    let store = state.store.clone();
    let cache_id = id.clone();
    // Decoding a large file takes minutes: off the HTTP workers.
    let loaded = web::block(move || {
        store.prepared_with(&cache_id, || {
            crate::filecoin::load_circuit(&cache_id, &path, kind, sector_size, None)
        })
    })
    .await
    .map_err(|e| ApiError::internal(format!("loading {id} did not finish: {e}")))?
    .map_err(|e| ApiError::unprocessable(format!("loading {id}: {e}")))?;
    update_budget(&state);
    Ok(HttpResponse::Ok().json(json!({
        "id": id,
        "loaded": true,
        "resident_bytes": loaded.resident_bytes(),
    })))
}

/// The `.params` file of `id` in the parameter directory.
fn param_file(state: &AppState, id: &str) -> Option<PathBuf> {
    cuzk_filecoin::params::cache_ids_in(&state.parser.params_dir)
        .into_iter()
        .find_map(|(file_id, path)| (file_id == id).then_some(path))
}

/// Tells the budget the resident bytes changed, so admission counts a
/// preloaded key, or no longer counts an evicted one, before the next
/// partition's synthesis would.
fn update_budget(state: &AppState) {
    state.system.budget.do_send(SetResident { bytes: state.system.backend.resident_bytes() });
}
