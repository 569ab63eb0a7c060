//! Filecoin's proof kinds as daemon jobs. A submission's `input` is read into
//! the request filecoin-proofs-api would take, checked before any partition
//! runs, and each partition is synthesized through the reference circuit
//! (`cuzk-filecoin` records it) and proved with the parameter file
//! filecoin-proofs itself would read, on the daemon's own engines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use cuzk_actors::{Phases, Priority, StageError};
use cuzk_filecoin::api::seal::SealCommitPhase1Output;
use cuzk_filecoin::kinds::RegisteredProof;
use cuzk_filecoin::params::{MappedParams, ParamPaths};
use cuzk_filecoin::prepare::{self, Counts};
use cuzk_filecoin::{porep, verify};
use cuzk_filecoin::record::Witness;
use cuzk_kernels::groth16::{PreparedCircuit, Synthesized};
use serde::Deserialize;
use serde_json::Value;

use crate::keys::CircuitStore;

/// The kinds clients name in `"circuit"`.
pub const KINDS: [&str; 1] = ["porep-c2"];

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
    /// The NTT domain, from the file's h query: sizes the reservation.
    pub domain_size: usize,
    /// The `.params` file.
    params: PathBuf,
    /// What each partition is synthesized from.
    request: Request,
}

enum Request {
    /// PoRep commit phase 2: the commit-phase-1 output.
    Porep(Box<SealCommitPhase1Output>),
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

impl FilecoinJob {
    /// Reads and checks a `kind` job's input against the parameter files in
    /// `params_dir`. Every error names the problem (HTTP 422).
    pub fn parse(kind: &str, input: &Value, params_dir: &Path) -> Result<Self, String> {
        match kind {
            "porep-c2" => Self::porep(input, params_dir),
            other => Err(format!("unknown Filecoin kind {other:?}")),
        }
    }

    fn porep(input: &Value, params_dir: &Path) -> Result<Self, String> {
        let input: PorepInput = serde_json::from_value(input.clone())
            .map_err(|e| format!("invalid porep-c2 input: {e}"))?;
        let prover_id = hex32("prover_id", &input.prover_id)?;
        let c1: SealCommitPhase1Output = match (input.c1, input.c1_base64) {
            (Some(c1), None) => serde_json::from_value(c1)
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
        if !verify::replica_id_matches(&c1, prover_id, input.sector_id) {
            return Err(format!(
                "the C1 output was not sealed for prover_id {} and sector_id {}: its replica id differs",
                input.prover_id, input.sector_id
            ));
        }
        let partitions = porep::partition_count(&c1);
        let cache_id = RegisteredProof::Seal(c1.registered_proof)
            .circuit_identifier()
            .map_err(|e| format!("registered proof {:?}: {e}", c1.registered_proof))?;
        Self::with_params(cache_id, partitions, params_dir, Request::Porep(Box::new(c1)))
    }

    /// Finds the parameter file and reads its domain; a missing or
    /// unreadable file fails the submission, naming the file.
    fn with_params(
        cache_id: String,
        partitions: usize,
        params_dir: &Path,
        request: Request,
    ) -> Result<Self, String> {
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
            domain_size: mapped.counts().h + 1,
            params,
            request,
        })
    }

    fn record(&self, partition: u32) -> Result<Witness, cuzk_filecoin::Error> {
        match &self.request {
            Request::Porep(c1) => porep::record_partition(c1, partition as usize),
        }
    }

    /// Partition `partition` synthesized, with the prepared circuit it is
    /// proved against (loaded from the parameter file on first use).
    pub fn synthesize(
        &self,
        keys: &CircuitStore,
        partition: u32,
    ) -> Result<(Arc<PreparedCircuit>, Synthesized, Phases), StageError> {
        let started = Instant::now();
        // A C1 or vanilla proof that does not synthesize never will.
        let witness = self.record(partition).map_err(StageError::permanent)?;
        let recorded = started.elapsed();
        let circuit = keys
            .prepared_with(&self.cache_id, || {
                let mapped = MappedParams::open(&self.params).map_err(|e| e.to_string())?;
                prepare::prepared_circuit(
                    &self.cache_id,
                    &mapped,
                    &witness.densities,
                    Counts::of(&witness),
                )
                .map_err(|e| e.to_string())
            })
            .map_err(StageError::permanent)?;
        let key_ready = started.elapsed() - recorded;
        let synthesized = prepare::synthesized(witness, &circuit).map_err(StageError::permanent)?;
        Ok((circuit, synthesized, vec![("synthesize", recorded), ("key", key_ready)]))
    }
}

/// A 32-byte value given as hex (an optional 0x prefix).
fn hex32(field: &str, text: &str) -> Result<[u8; 32], String> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    let bytes = hex::decode(digits).map_err(|e| format!("{field} is not hex: {e}"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{field} must be 32 bytes, got {}", b.len()))
}
