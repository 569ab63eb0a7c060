//! `/v1/params`: Filecoin's parameter files in the parameter directory and
//! which of them are loaded (decoded into a prepared circuit, counted in
//! the budget's resident bytes); preloading one spares the first job the
//! load, evicting one frees its memory (`crate::param_files`, which gRPC
//! shares).

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::error::{ApiError, ErrorBody};
// Named by the #[utoipa::path] attributes.
use super::schemas::{ParamsDoc, TokenRefusals};
use super::state::AppState;
use crate::param_files::ParamsError;

/// Filecoin's parameter files in the parameter directory, and which are
/// loaded with the memory they hold.
#[utoipa::path(
    get, path = "/v1/params", tag = "params",
    responses(
        (status = 200, description = "the parameter files present and the ones loaded", body = ParamsDoc),
        TokenRefusals,
    )
)]
pub async fn list_params(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let dir = state.params.dir.clone();
    let listed = web::block(move || cuzk_filecoin::params::cache_ids_in(&dir))
        .await
        .map_err(|e| ApiError::internal(format!("listing the parameter directory failed: {e}")))?;
    let loaded = state.params.loaded();
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
        "dir": state.params.dir.display().to_string(),
        "files": files,
    })))
}

/// Stops holding a loaded parameter file, freeing its memory once the
/// partitions using it finish.
#[utoipa::path(
    post, path = "/v1/params/{id}/evict", tag = "params",
    params(("id" = String, Path, description = "a cache id, as GET /v1/params lists it")),
    responses(
        (status = 200, description = "no longer held; partitions running keep it until they finish", body = ParamsDoc),
        (status = 404, description = "not loaded", body = ErrorBody),
        TokenRefusals,
    )
)]
pub async fn evict_params(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    state.params.evict(&id).map_err(params_error)?;
    Ok(HttpResponse::Ok().json(json!({ "id": id, "loaded": false })))
}

/// Loads a parameter file now, so that the first job of its circuit does not
/// wait for the load.
#[utoipa::path(
    post, path = "/v1/params/{id}/preload", tag = "params",
    params(("id" = String, Path, description = "a cache id, as GET /v1/params lists it")),
    responses(
        (status = 200, description = "loaded (now, or already): jobs of this circuit start without the load", body = ParamsDoc),
        (status = 404, description = "no such file in the parameter directory", body = ErrorBody),
        (status = 422, description = "the file names no circuit this daemon proves, does not fit it, or a device's engine cannot read it", body = ErrorBody),
        (status = 503, description = "loaded, but a device could not take it now (its memory full); retry later", body = ErrorBody),
        TokenRefusals,
    )
)]
pub async fn preload_params(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let loaded = state.params.preload(&id).await.map_err(params_error)?;
    Ok(HttpResponse::Ok().json(json!({
        "id": id,
        "loaded": true,
        "resident_bytes": loaded.resident_bytes,
    })))
}

/// A refused preload or evict: a file or a load that is not there is 404,
/// a file no circuit of which this daemon proves (or no engine of it can
/// take) 422, a device out of memory for it now 503.
fn params_error(error: ParamsError) -> ApiError {
    match error {
        ParamsError::NoFile { .. } | ParamsError::NotLoaded(_) => ApiError::not_found(error.to_string()),
        ParamsError::NoCircuit(_) | ParamsError::Load { .. } => ApiError::unprocessable(error.to_string()),
        // A device that could not take the key now (out of memory) may later.
        ParamsError::Warm { ref cause, .. } if cause.retryable() => ApiError::unavailable(error.to_string()),
        ParamsError::Warm { .. } => ApiError::unprocessable(error.to_string()),
        ParamsError::Thread { .. } => ApiError::internal(error.to_string()),
    }
}
