//! `/v1/circuits`: the circuit families and the verifying key of each shape
//! set up so far.

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::error::{ApiError, ErrorBody};
// Named by the #[utoipa::path] attributes.
use super::schemas::{CircuitsDoc, TokenRefusals, VkDoc};
use super::state::AppState;

/// The circuit families this daemon proves, with the shapes set up so far.
#[utoipa::path(
    get, path = "/v1/circuits", tag = "circuits",
    responses(
        (status = 200, description = "circuit families and the shapes set up so far", body = CircuitsDoc),
        TokenRefusals,
    )
)]
pub async fn list_circuits(state: web::Data<AppState>) -> HttpResponse {
    let known = state.keys.known_shapes();
    let circuits: Vec<Value> = state
        .parser
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

/// The verifying key of a shape that has been set up, to check its proofs.
#[utoipa::path(
    get, path = "/v1/circuits/{circuit_id}/vk", tag = "circuits",
    params(("circuit_id" = String, Path, description = "a shape, e.g. poseidon-merkle-d8-c2")),
    responses(
        (status = 200, description = "the Groth16 verifying key", body = VkDoc),
        (status = 404, description = "the shape has not been set up", body = ErrorBody),
        TokenRefusals,
    )
)]
pub async fn get_vk(state: web::Data<AppState>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let lookup_state = state.clone();
    let lookup_id = id.clone();
    let vk = web::block(move || lookup_state.keys.verifying_key(&lookup_id))
        .await
        .map_err(|e| ApiError::internal(format!("key lookup failed: {e}")))?
        .ok_or_else(|| {
            ApiError::not_found(format!("no verifying key for circuit {id:?}; it is set up on its first job"))
        })?;
    let mut bytes = Vec::new();
    ark_serialize::CanonicalSerialize::serialize_compressed(&vk, &mut bytes)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({ "circuit_id": id, "vk": hex::encode(bytes) })))
}
