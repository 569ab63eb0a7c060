//! The bodies the HTTP API answers with, as OpenAPI schemas: the handlers
//! name them in their `#[utoipa::path]` attributes and `openapi` collects
//! them into the document. A body that is a type of its own derives its
//! schema from its definition (a job's view, `JobView`, with the actors'
//! `openapi` feature; the error body in `error.rs`); the schema-only types
//! here describe the bodies built as JSON, and fuzzing (tests/fuzz.sh)
//! checks them against real answers. The enums inside them (`JobStatus`)
//! are the actors' own types. The responses many routes share
//! (the token gate's 401 and 403, the 503 of an actor gone) are written
//! once here, as response sets the handlers list by name.

// Schema-only types: read by the derive, never built.
#![allow(dead_code)]

use std::collections::BTreeMap;

use cuzk_actors::messages::JobStatus;
use serde_json::Value;
use utoipa::{IntoResponses, ToSchema};

use super::error::ErrorBody;

/// A submitted job's id and status (also the answer to a cancel).
#[derive(ToSchema)]
pub struct JobRef {
    id: String,
    status: JobStatus,
}

/// A done job's proofs (`GET /v1/jobs/{id}/proofs`): one per partition, for
/// the circuit whose verifying key checks them.
#[derive(ToSchema)]
#[schema(as = Proofs)]
pub struct ProofsDoc {
    circuit_id: String,
    /// Filecoin kinds only: the kind the job named.
    kind: Option<String>,
    /// Filecoin kinds only: the bytes filecoin-proofs-api returns for the
    /// call (the partitions' 192-byte proofs in order), hex.
    proof: Option<String>,
    proofs: Vec<ProofDoc>,
}

/// One partition's proof and the public inputs it is checked against.
#[derive(ToSchema)]
#[schema(as = Proof)]
pub struct ProofDoc {
    partition: u32,
    /// Compressed Groth16 proof, hex.
    proof: String,
    /// Compressed field elements, hex.
    public_inputs: Vec<String>,
}

/// The circuit families this daemon proves (`GET /v1/circuits`).
#[derive(ToSchema)]
#[schema(as = Circuits)]
pub struct CircuitsDoc {
    circuits: Vec<CircuitDoc>,
}

/// A circuit family: its name (a job's `circuit_id`), what its parameters and
/// inputs mean, and the shapes whose keys exist.
#[derive(ToSchema)]
#[schema(as = Circuit)]
pub struct CircuitDoc {
    name: String,
    /// The family's params, inputs and public inputs, in words.
    description: Value,
    known_shapes: Vec<String>,
}

/// Filecoin's parameter files (`GET /v1/params`).
#[derive(ToSchema)]
#[schema(as = Params)]
pub struct ParamsDoc {
    /// The parameter directory.
    dir: String,
    files: Vec<ParamFileDoc>,
}

/// One parameter file of the parameter directory, and whether it is loaded.
#[derive(ToSchema)]
#[schema(as = ParamFile)]
pub struct ParamFileDoc {
    /// filecoin-proofs' cache id (`v28-<id>.params`); a Filecoin job's circuit_id.
    id: String,
    file: String,
    bytes: Option<u64>,
    /// Decoded and held for proving.
    loaded: bool,
    /// Host bytes held while loaded.
    resident_bytes: Option<u64>,
}

/// The verifying key of a circuit (`GET /v1/circuits/{id}/vk`), to check its
/// proofs without trusting the daemon.
#[derive(ToSchema)]
#[schema(as = VerifyingKey)]
pub struct VkDoc {
    circuit_id: String,
    /// Compressed Groth16 verifying key, hex.
    vk: String,
}

/// Budget, queues, job counts by status and every worker's state
/// (docs/api.md).
#[derive(ToSchema)]
#[schema(as = Status)]
pub struct StatusDoc {
    backend: String,
    budget: BTreeMap<String, Value>,
    queues: BTreeMap<String, Value>,
    jobs: BTreeMap<String, u64>,
    workers: Vec<BTreeMap<String, Value>>,
    /// Whether the job store writes, and damage found on start.
    store: cuzk_actors::store::StoreHealth,
    /// True while stored unfinished jobs are rebuilt after a start.
    recovering: bool,
    /// The submissions being read and parsed against the parse budget:
    /// `bytes_in_use`, `requests`, `limit_bytes`, `max_requests`,
    /// `urgent_reserve_bytes`, `urgent_reserve_requests`, `urgent_body_bytes`,
    /// `share_per_tenant` (a fraction), `tenants`.
    parsing: BTreeMap<String, f64>,
    /// The CUDA backend's devices, each with its memory plan: what stays
    /// resident, what streams, how many workers prove at once (docs/gpu.md,
    /// "Device memory plan"); absent on other backends.
    devices: Option<Vec<Value>>,
}

/// `GET /v1/workers` (docs/api.md).
#[derive(ToSchema)]
#[schema(as = Workers)]
pub struct WorkersDoc {
    workers: Vec<BTreeMap<String, Value>>,
}

/// `GET /v1/timeline` as JSON (docs/api.md).
#[derive(ToSchema)]
#[schema(as = Timeline)]
pub struct TimelineDoc {
    since_unix_ms: f64,
    until_unix_ms: f64,
    entries: Vec<BTreeMap<String, Value>>,
}

/// A health probe that passed: `status` is `ok` (a failed readiness probe
/// answers the error body instead).
#[derive(ToSchema)]
#[schema(as = Health)]
pub struct HealthDoc {
    status: String,
}

/// The token gate's refusals (`auth::HttpRefusal`), answered before any handler
/// runs: every route whose security names `bearer` lists these.
#[derive(IntoResponses)]
pub enum TokenRefusals {
    /// No token where one is needed, or one no configured token matches.
    #[response(
        status = 401,
        description = "a token is configured and this one is missing or invalid",
        headers(("WWW-Authenticate" = String))
    )]
    Unauthorized(ErrorBody),
    /// A valid token whose scopes do not cover the route.
    #[response(status = 403, description = "the token lacks the needed scope")]
    Forbidden(ErrorBody),
}

/// The answer of a route that asks an actor which no longer answers (the
/// daemon is stopping, or broken).
#[derive(IntoResponses)]
pub enum SchedulerGone {
    /// The daemon's actors no longer answer: it is stopping, or broken.
    #[response(status = 503, description = "the scheduler's actors are gone")]
    Unavailable(ErrorBody),
}
