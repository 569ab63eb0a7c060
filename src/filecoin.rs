//! Filecoin's proof kinds as daemon jobs. A submission's `input` is read into
//! the request filecoin-proofs-api would take, checked before any partition
//! runs, and each partition is synthesized through the reference circuit
//! (`cuzk-filecoin` records it) and proved with the parameter file
//! filecoin-proofs itself would read, on the daemon's own engines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use cuzk_actors::{Phases, Priority, Reservation, StageError};
use cuzk_filecoin::api::seal::SealCommitPhase1Output;
use cuzk_filecoin::kinds::RegisteredProof;
use cuzk_filecoin::params::{MappedParams, ParamPaths, QueryCounts};
use cuzk_filecoin::prepare;
use cuzk_filecoin::post::PostRequest;
use cuzk_filecoin::update::UpdateRequest;
use cuzk_filecoin::{porep, verify};
use cuzk_filecoin::record::{Evaluation, Recorded, Shape, Witness};
use cuzk_filecoin::Kind;
use cuzk_kernels::cpu::msm_digit_table_bytes;
use cuzk_kernels::groth16::{PreparedCircuit, Synthesized};
use cuzk_kernels::r1cs::Matrices;
use serde::Deserialize;
use serde_json::Value;

use crate::keys::CircuitStore;

/// The kinds clients name in `"circuit"`.
pub const KINDS: [&str; 4] = ["porep-c2", "winning-post", "window-post", "snap-prove"];

/// Whether `circuit` names a Filecoin kind rather than a registered family.
pub fn is_kind(circuit: &str) -> bool {
    KINDS.contains(&circuit)
}

/// A job's priority when the client gives none: a late WinningPoSt loses a
/// block reward, a late WindowPoSt a sector's power; seals can wait.
pub fn default_priority(kind: &str) -> Priority {
    match kind {
        "winning-post" => Priority::Critical,
        "window-post" => Priority::High,
        _ => Priority::Normal,
    }
}

/// One Filecoin job: its request and the parameter file it is proved with.
pub struct FilecoinJob {
    /// filecoin-proofs' cache identifier: the job's circuit id, and the name
    /// of its parameter files.
    pub cache_id: String,
    /// Circuit partitions, one Groth16 proof each.
    pub partitions: u32,
    /// The file's query sizes: the domain, aux and dense counts size the
    /// reservation.
    pub counts: QueryCounts,
    /// The `.params` file.
    params: PathBuf,
    /// The registered proof: which blank circuit compiles its matrices.
    registered: RegisteredProof,
    /// What each partition is synthesized from.
    request: Request,
}

enum Request {
    /// PoRep commit phase 2: the commit-phase-1 output.
    Porep(Box<SealCommitPhase1Output>),
    /// WinningPoSt or WindowPoSt from vanilla proofs.
    Post(PostRequest),
    /// SnapDeals from the update's vanilla proofs.
    Update(UpdateRequest),
}

/// `porep-c2`'s input. prover_id and sector_id are what
/// `seal_commit_phase2` takes beside the C1 output.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PorepInput {
    /// The SealCommitPhase1Output as serde_json writes it.
    c1: Option<Value>,
    /// The same JSON, base64 (as Curio carries it).
    c1_base64: Option<String>,
    prover_id: String,
    sector_id: u64,
}

/// `winning-post` and `window-post`'s input: the arguments of
/// `generate_winning_post_with_vanilla` / `generate_window_post_with_vanilla`
/// (with `partition_index`: `generate_single_window_post_with_vanilla`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostInput {
    /// The API enum's variant name, e.g. "StackedDrgWinning2KiBV1".
    registered_proof: Value,
    randomness: String,
    prover_id: String,
    /// Hex of each vanilla proof, as the vanilla-proof functions return them.
    vanilla_proofs: Vec<String>,
    partition_index: Option<usize>,
}

/// `snap-prove`'s input: the arguments of
/// `generate_empty_sector_update_proof_with_vanilla`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateInput {
    /// The API enum's variant name, e.g. "StackedDrg2KiBV1".
    registered_proof: Value,
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
    /// Hex of each partition's vanilla proof.
    vanilla_proofs: Vec<String>,
}

impl PorepInput {
    /// The C1 output, from either form, and the prover id.
    fn read(&self) -> Result<(SealCommitPhase1Output, [u8; 32]), String> {
        let prover_id = hex32("prover_id", &self.prover_id)?;
        let c1 = match (&self.c1, &self.c1_base64) {
            (Some(c1), None) => serde_json::from_value(c1.clone())
                .map_err(|e| format!("c1 is not a SealCommitPhase1Output: {e}"))?,
            (None, Some(encoded)) => {
                let json = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|e| format!("c1_base64 is not base64: {e}"))?;
                serde_json::from_slice(&json)
                    .map_err(|e| format!("c1_base64 is not a SealCommitPhase1Output: {e}"))?
            }
            (Some(_), Some(_)) => return Err("give either c1 or c1_base64, not both".into()),
            (None, None) => return Err("porep-c2 needs c1 or c1_base64".into()),
        };
        Ok((c1, prover_id))
    }
}

/// What a PoSt proof is verified against (`cuzk verify`): the challenged
/// sectors' public replicas instead of vanilla proofs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostPublic {
    registered_proof: Value,
    randomness: String,
    prover_id: String,
    replicas: Vec<PublicReplica>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublicReplica {
    sector_id: u64,
    comm_r: String,
}

/// What a SnapDeals proof is verified against.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdatePublic {
    registered_proof: Value,
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
}

/// Checks `proof` with filecoin-proofs-api's own verifier for `kind`:
/// porep-c2 from the job's own input; the PoSt kinds from
/// `{"registered_proof", "randomness", "prover_id", "replicas": [{"sector_id",
/// "comm_r"}]}`; snap-prove from its input without the vanilla proofs.
pub fn verify(kind: &str, public: &Value, proof: &[u8]) -> Result<bool, String> {
    let parse_error = |e: serde_json::Error| format!("invalid {kind} verification input: {e}");
    let valid = match kind {
        "porep-c2" => {
            let input: PorepInput = serde_json::from_value(public.clone()).map_err(parse_error)?;
            let (c1, prover_id) = input.read()?;
            verify::porep_c2(&c1, prover_id, input.sector_id, proof)
        }
        "winning-post" | "window-post" => {
            let input: PostPublic = serde_json::from_value(public.clone()).map_err(parse_error)?;
            let replicas = input
                .replicas
                .iter()
                .map(|r| Ok((r.sector_id, hex32("comm_r", &r.comm_r)?)))
                .collect::<Result<Vec<_>, String>>()?;
            verify::post_proof(
                registered(&input.registered_proof)?,
                hex32("randomness", &input.randomness)?,
                hex32("prover_id", &input.prover_id)?,
                &replicas,
                proof,
            )
        }
        "snap-prove" => {
            let input: UpdatePublic = serde_json::from_value(public.clone()).map_err(parse_error)?;
            let commitments = [
                hex32("comm_r_old", &input.comm_r_old)?,
                hex32("comm_r_new", &input.comm_r_new)?,
                hex32("comm_d_new", &input.comm_d_new)?,
            ];
            verify::update_proof(registered(&input.registered_proof)?, commitments, proof)
        }
        other => return Err(format!("unknown Filecoin kind {other:?}; known: {}", KINDS.join(", "))),
    };
    valid.map_err(|e| e.to_string())
}

/// Whether `params_dir` has the parameter file of a Filecoin job whose
/// circuit is `circuit_id` (its cache id): a fleet node claims a kind's
/// partitions only where it does.
pub fn has_parameter_file(circuit: &str, circuit_id: &str, params_dir: &Path) -> bool {
    !is_kind(circuit) || ParamPaths::new(params_dir, circuit_id).params.is_file()
}

impl FilecoinJob {
    /// Reads and checks a `kind` job's input against the parameter files in
    /// `params_dir`. Every error names the problem (HTTP 422).
    pub fn parse(kind: &str, input: &Value, params_dir: &Path) -> Result<Self, String> {
        match kind {
            "porep-c2" => Self::porep(input, params_dir),
            "winning-post" => Self::post(input, params_dir, true),
            "window-post" => Self::post(input, params_dir, false),
            "snap-prove" => Self::update(input, params_dir),
            other => Err(format!("unknown Filecoin kind {other:?}")),
        }
    }

    fn porep(input: &Value, params_dir: &Path) -> Result<Self, String> {
        let input: PorepInput = serde_json::from_value(input.clone())
            .map_err(|e| format!("invalid porep-c2 input: {e}"))?;
        let (c1, prover_id) = input.read()?;
        porep::check(&c1).map_err(|e| e.to_string())?;
        if !verify::replica_id_matches(&c1, prover_id, input.sector_id) {
            return Err(format!(
                "the C1 output was not sealed for prover_id {} and sector_id {}: its replica id differs",
                input.prover_id, input.sector_id
            ));
        }
        let partitions = porep::partition_count(&c1);
        let registered = RegisteredProof::Seal(c1.registered_proof);
        Self::with_params(registered, partitions, params_dir, Request::Porep(Box::new(c1)))
    }

    fn post(input: &Value, params_dir: &Path, winning: bool) -> Result<Self, String> {
        let kind = if winning { "winning-post" } else { "window-post" };
        let input: PostInput = serde_json::from_value(input.clone())
            .map_err(|e| format!("invalid {kind} input: {e}"))?;
        if winning && input.partition_index.is_some() {
            return Err("winning-post takes no partition_index".into());
        }
        let request = PostRequest {
            registered_proof: registered(&input.registered_proof)?,
            randomness: hex32("randomness", &input.randomness)?,
            prover_id: hex32("prover_id", &input.prover_id)?,
            vanilla_proofs: vanilla_proofs(&input.vanilla_proofs)?,
            partition_index: input.partition_index,
        };
        request.check(winning).map_err(|e| e.to_string())?;
        let partitions = request.partition_count().map_err(|e| e.to_string())?;
        let registered = RegisteredProof::PoSt(request.registered_proof);
        Self::with_params(registered, partitions, params_dir, Request::Post(request))
    }

    fn update(input: &Value, params_dir: &Path) -> Result<Self, String> {
        let input: UpdateInput = serde_json::from_value(input.clone())
            .map_err(|e| format!("invalid snap-prove input: {e}"))?;
        let request = UpdateRequest {
            registered_proof: registered(&input.registered_proof)?,
            comm_r_old: hex32("comm_r_old", &input.comm_r_old)?,
            comm_r_new: hex32("comm_r_new", &input.comm_r_new)?,
            comm_d_new: hex32("comm_d_new", &input.comm_d_new)?,
            vanilla_proofs: vanilla_proofs(&input.vanilla_proofs)?,
        };
        request.check().map_err(|e| e.to_string())?;
        let partitions = request.partition_count().map_err(|e| e.to_string())?;
        let registered = RegisteredProof::Update(request.registered_proof);
        Self::with_params(registered, partitions, params_dir, Request::Update(request))
    }

    /// Finds the parameter file and reads its domain; a missing or
    /// unreadable file fails the submission, naming the file.
    fn with_params(
        registered: RegisteredProof,
        partitions: usize,
        params_dir: &Path,
        request: Request,
    ) -> Result<Self, String> {
        let cache_id = circuit_id(registered)?;
        let params = ParamPaths::new(params_dir, &cache_id).params;
        if !params.is_file() {
            return Err(format!(
                "parameter file {} is missing (params_dir {})",
                params.display(),
                params_dir.display()
            ));
        }
        let mapped = MappedParams::open(&params).map_err(|e| e.to_string())?;
        Ok(Self {
            cache_id,
            partitions: partitions as u32,
            counts: mapped.counts(),
            params,
            registered,
            request,
        })
    }

    /// What one partition holds beyond the resident key
    /// ([`reservation_for_counts`] of its parameter file).
    pub fn reservation(&self, evaluation: Evaluation) -> Reservation {
        reservation_for_counts(&self.counts, evaluation)
    }

    fn record(&self, partition: u32, evaluation: Evaluation) -> Result<Recorded, cuzk_filecoin::Error> {
        let k = partition as usize;
        match &self.request {
            Request::Porep(c1) => porep::record_partition(c1, k, evaluation),
            Request::Post(request) => request.record_partition(k, evaluation),
            Request::Update(request) => request.record_partition(k, evaluation),
        }
    }

    /// Partition `partition` synthesized, with the prepared circuit it is
    /// proved against. The circuit is loaded from the parameter file on
    /// first use: for compiled evaluation with the blank circuit's matrices
    /// (recorded once), for direct evaluation with the densities this
    /// partition's synthesis recorded.
    pub fn synthesize(
        &self,
        keys: &CircuitStore,
        partition: u32,
        evaluation: Evaluation,
    ) -> Result<(Arc<PreparedCircuit>, Synthesized, Phases), StageError> {
        let started = Instant::now();
        // A C1 or vanilla proof that does not synthesize never will.
        let recorded = self.record(partition, evaluation).map_err(StageError::permanent)?;
        let synthesis = started.elapsed();
        let circuit = keys
            .prepared_with(&self.cache_id, || self.prepare(&recorded))
            .map_err(StageError::permanent)?;
        let key_ready = started.elapsed();
        let synthesized = prepare::synthesized(recorded, &circuit).map_err(StageError::permanent)?;
        let phases = vec![
            ("synthesize", synthesis),
            ("key", key_ready - synthesis),
            ("evaluate", started.elapsed() - key_ready),
        ];
        Ok((circuit, synthesized, phases))
    }

    fn prepare(&self, recorded: &Recorded) -> Result<PreparedCircuit, String> {
        let witness = match recorded {
            Recorded::Witness(witness) => Some(witness),
            Recorded::Assignment { .. } => None,
        };
        let (kind, sector_size) = self.registered.kind_and_sector_size();
        load_circuit(&self.cache_id, &self.params, kind, sector_size, witness)
    }
}

/// What one partition of a circuit holds beyond its resident key, from its
/// parameter file's counts (n the domain, v = inputs + aux, 32-byte
/// elements): a, b and c (3n), released after the NTTs; then the assignment
/// and the transient copy synthesis converts it from (2v), the H scalars (n)
/// and the signed-digit table of the largest MSM (n per window, 8 bytes),
/// which bound every later MSM's scalars and digits; direct evaluation also
/// holds bellperson's a, b and c while it converts them (3n more). The CPU
/// engine's peak, so an upper bound for the CUDA engine's host memory.
/// `tests/reservation_peak.rs` measures a WinningPoSt partition against it.
pub fn reservation_for_counts(counts: &QueryCounts, evaluation: Evaluation) -> Reservation {
    const ELEMENT: u64 = 32;
    const OVERHEAD: u64 = 8 << 20;
    let n = (counts.h + 1) as u64;
    let v = (counts.ic + counts.l) as u64;
    let converting = match evaluation {
        Evaluation::Direct => 3 * n * ELEMENT,
        Evaluation::Compiled | Evaluation::CompiledReference => 0,
    };
    Reservation {
        abc_bytes: 3 * n * ELEMENT,
        retained_bytes: (2 * v + n) * ELEMENT
            + msm_digit_table_bytes(n)
            + converting
            + OVERHEAD,
    }
}

/// Reads `cache_id`'s parameter file (`params`, for `kind` at `sector_size`)
/// into a prepared circuit. With `witness` (a partition just recorded for
/// direct evaluation) the circuit takes that partition's densities and no
/// matrices; without one, the blank circuit is recorded once for its
/// densities and compiled matrices, which serve both evaluations.
pub fn load_circuit(
    cache_id: &str,
    params: &Path,
    kind: Kind,
    sector_size: u64,
    witness: Option<&Witness>,
) -> Result<PreparedCircuit, String> {
    let mapped = MappedParams::open(params).map_err(|e| e.to_string())?;
    let prepared = match witness {
        Some(witness) => prepare::prepared_circuit(
            cache_id,
            &mapped,
            &witness.densities,
            Matrices::empty(witness.inputs.len(), witness.aux.len()),
            witness.num_constraints(),
        ),
        None => {
            let Shape { matrices, constraints, densities } =
                kind.blank(sector_size).map_err(|e| e.to_string())?.shape;
            prepare::prepared_circuit(cache_id, &mapped, &densities, matrices, constraints)
        }
    };
    prepared.map_err(|e| e.to_string())
}

/// A registered proof given as its enum variant's name.
fn registered<T: serde::de::DeserializeOwned>(name: &Value) -> Result<T, String> {
    serde_json::from_value(name.clone())
        .map_err(|e| format!("registered_proof {name} is not one filecoin-proofs-api knows: {e}"))
}

/// The parameter files' cache identifier of a registered proof.
fn circuit_id(proof: RegisteredProof) -> Result<String, String> {
    proof
        .circuit_identifier()
        .map_err(|e| format!("registered proof {proof:?}: {e}"))
}

/// Vanilla proofs given as hex strings.
fn vanilla_proofs(hex_proofs: &[String]) -> Result<Vec<Vec<u8>>, String> {
    hex_proofs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            hex::decode(text.strip_prefix("0x").unwrap_or(text))
                .map_err(|e| format!("vanilla_proofs[{i}] is not hex: {e}"))
        })
        .collect()
}

/// A 32-byte value given as hex (an optional 0x prefix).
fn hex32(field: &str, text: &str) -> Result<[u8; 32], String> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    let bytes = hex::decode(digits).map_err(|e| format!("{field} is not hex: {e}"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{field} must be 32 bytes, got {}", b.len()))
}
