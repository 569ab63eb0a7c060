//! Filecoin's proof kinds as daemon jobs. A submission's `input` (JSON in the
//! HTTP body) is decoded here into the request cuzk-filecoin proves its kind
//! from; cuzk-filecoin checks it before any partition runs, names its
//! parameter file, records each partition through the reference circuit and
//! loads the key from the file filecoin-proofs itself would read. What stays
//! here is the daemon's side: the job, the memory a partition reserves, its
//! key in the key store, the synthesis stage's errors, and a kind's default
//! priority.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use cuzk_actors::{Phases, Priority, Reservation, StageError};
use cuzk_filecoin::api::seal::SealCommitPhase1Output;
use cuzk_filecoin::kinds::parse_registered_proof;
use cuzk_filecoin::params::{self, MappedParams, QueryCounts};
use cuzk_filecoin::porep::PorepRequest;
use cuzk_filecoin::post::PostRequest;
use cuzk_filecoin::prepare::{self, LoadOptions};
use cuzk_filecoin::record::{Evaluation, Recorded, Witness};
use cuzk_filecoin::shape_cache::ShapeCache;
use cuzk_filecoin::update::UpdateRequest;
use cuzk_filecoin::verify::Statement;
use cuzk_filecoin::{Kind, Lateness, ProofRequest};
use cuzk_kernels::cpu::msm_digit_table_bytes;
use cuzk_kernels::groth16::{PreparedCircuit, Synthesized};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::json_text::{JsonObject, JsonText};
use crate::keys::KeyStore;

/// Whether a job's `circuit` names a Filecoin kind rather than a registered
/// family.
pub fn is_kind(circuit: &str) -> bool {
    Kind::from_api_name(circuit).is_some()
}

/// A job's priority when the client gives none, by what a late proof of
/// its kind costs: a lost block reward is critical, lost power high; a seal
/// or an update can wait.
pub fn default_priority(kind: Kind) -> Priority {
    match kind.lateness() {
        Lateness::BlockReward => Priority::Critical,
        Lateness::Power => Priority::High,
        Lateness::Delay => Priority::Normal,
    }
}

/// Why a Filecoin kind's input is not a job (HTTP 422) or not a statement
/// `cuzk verify` can check; every variant names the problem for the client.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The input lacks the kind's fields or has others.
    #[error("invalid {} {what}: {source}", kind.api_name())]
    Fields {
        /// The kind the input was read for.
        kind: Kind,
        /// "input" (a job's) or "verification input" (`cuzk verify`'s).
        what: &'static str,
        /// serde's reason: the field missing, unknown or of another type.
        source: serde_json::Error,
    },
    /// A byte string that is not hex.
    #[error("{field} is not hex: {source}")]
    NotHex {
        /// The field, with its index for a list's entry.
        field: String,
        /// The first character that is not a hex digit, or an odd length.
        source: hex::FromHexError,
    },
    /// A 32-byte value (id, randomness, commitment) of another length.
    #[error("{field} must be 32 bytes, got {len}")]
    Not32Bytes {
        /// The field.
        field: &'static str,
        /// The bytes it has.
        len: usize,
    },
    /// porep-c2 without its commit-phase-1 output.
    #[error("{} needs c1 or c1_base64", Kind::Porep.api_name())]
    NoC1,
    /// porep-c2 with its commit-phase-1 output twice.
    #[error("give either c1 or c1_base64, not both")]
    TwoC1,
    /// `c1_base64` that is not base64.
    #[error("c1_base64 is not base64: {0}")]
    NotBase64(base64::DecodeError),
    /// A commit-phase-1 output that does not decode.
    #[error("{field} is not a SealCommitPhase1Output: {source}")]
    NotC1 {
        /// `c1` or `c1_base64`.
        field: &'static str,
        /// serde's reason.
        source: serde_json::Error,
    },
    /// cuzk-filecoin refused the request: its registered proof, its checks,
    /// its parameter file.
    #[error(transparent)]
    Filecoin(#[from] cuzk_filecoin::Error),
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
    /// What each partition is synthesized from.
    request: Box<dyn ProofRequest>,
}

/// A Filecoin kind's input, typed: what a submission carries for its kind
/// (read from a JSON body, or built by the gRPC front end from Curio's
/// request). Its byte strings are kept as given (hex, base64, the C1's JSON
/// text) and checked, with the rest, when the job is made
/// ([`FilecoinJob::from_input`]): one set of checks for both front ends.
#[derive(Clone, Debug, PartialEq)]
pub enum FilecoinInput {
    /// `porep-c2`.
    Porep(PorepInput),
    /// `winning-post` and `window-post`.
    Post(PostInput),
    /// `snap-prove`.
    Update(UpdateInput),
}

/// `porep-c2`'s input: the arguments of `seal_commit_phase2`. prover_id and
/// sector_id are what it takes beside the C1 output. (Each input's fields
/// are declared in the order serde reports a missing one; `write` writes
/// them sorted.)
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PorepInput {
    /// The SealCommitPhase1Output as serde_json writes it, kept as text
    /// and read straight into its type: a value of another shape is
    /// refused at its first wrong field, never built as a tree.
    pub c1: Option<JsonText>,
    /// The same JSON, base64 (as Curio carries it).
    pub c1_base64: Option<String>,
    /// The miner's prover id, hex of 32 bytes.
    pub prover_id: String,
    /// The sector's number.
    pub sector_id: u64,
}

/// `winning-post` and `window-post`'s input: the arguments of
/// `generate_winning_post_with_vanilla` / `generate_window_post_with_vanilla`
/// (with `partition_index`: `generate_single_window_post_with_vanilla`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostInput {
    /// The API enum's variant name, e.g. "StackedDrgWinning2KiBV1".
    pub registered_proof: RegisteredProof,
    /// The challenge randomness, hex of 32 bytes.
    pub randomness: String,
    /// The miner's prover id, hex of 32 bytes.
    pub prover_id: String,
    /// Hex of each vanilla proof, as the vanilla-proof functions return them.
    pub vanilla_proofs: Vec<String>,
    /// The one partition to prove of a WindowPoSt (unset: all of them).
    pub partition_index: Option<usize>,
}

/// `snap-prove`'s input: the arguments of
/// `generate_empty_sector_update_proof_with_vanilla`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateInput {
    /// The API enum's variant name, e.g. "StackedDrg2KiBV1".
    pub registered_proof: RegisteredProof,
    /// The sector's replica commitment before the update, hex.
    pub comm_r_old: String,
    /// The replica commitment after the update, hex.
    pub comm_r_new: String,
    /// The new data's commitment, hex.
    pub comm_d_new: String,
    /// Hex of each partition's vanilla proof.
    pub vanilla_proofs: Vec<String>,
}

/// What a PoSt proof is verified against (`cuzk verify`): the challenged
/// sectors' public replicas instead of vanilla proofs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostPublic {
    registered_proof: RegisteredProof,
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
    registered_proof: RegisteredProof,
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
}

/// A registered proof's name as given: a string, or (refused by
/// `parse_registered_proof` with its reason) another scalar. An array or an
/// object is refused as it is read, never built into a tree.
#[derive(Clone, Debug, PartialEq)]
pub struct RegisteredProof(Value);

impl<'de> Deserialize<'de> for RegisteredProof {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Scalar;
        impl serde::de::Visitor<'_> for Scalar {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a registered proof's name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
        }
        deserializer.deserialize_any(Scalar).map(RegisteredProof)
    }
}

impl RegisteredProof {
    /// One of filecoin-proofs-api's registered proofs, by its variant name.
    pub fn of(proof: impl Serialize) -> Self {
        Self(serde_json::to_value(proof).expect("a registered proof is its variant's name"))
    }

    fn parse<P: DeserializeOwned>(&self) -> Result<P, cuzk_filecoin::Error> {
        parse_registered_proof(&self.0)
    }
}

impl FilecoinInput {
    /// `text` (a job's `input`, JSON) read as `kind`'s input.
    pub fn decode(kind: Kind, text: &str) -> Result<Self, InputError> {
        Ok(match kind {
            Kind::Porep => Self::Porep(decode(kind, "input", text)?),
            Kind::WinningPost | Kind::WindowPost => Self::Post(decode(kind, "input", text)?),
            Kind::EmptySectorUpdate => Self::Update(decode(kind, "input", text)?),
        })
    }

    /// Writes the input as the JSON object [`decode`](Self::decode) reads:
    /// compact, its keys sorted, a field without a value left out.
    pub fn write(&self, out: &mut JsonObject) {
        match self {
            Self::Porep(input) => {
                if let Some(c1) = &input.c1 {
                    out.text("c1", c1);
                }
                out.member_if("c1_base64", input.c1_base64.as_ref());
                out.member("prover_id", &input.prover_id);
                out.member("sector_id", &input.sector_id);
            }
            Self::Post(input) => {
                out.member_if("partition_index", input.partition_index.as_ref());
                out.member("prover_id", &input.prover_id);
                out.member("randomness", &input.randomness);
                out.member("registered_proof", &input.registered_proof.0);
                out.member("vanilla_proofs", &input.vanilla_proofs);
            }
            Self::Update(input) => {
                out.member("comm_d_new", &input.comm_d_new);
                out.member("comm_r_new", &input.comm_r_new);
                out.member("comm_r_old", &input.comm_r_old);
                out.member("registered_proof", &input.registered_proof.0);
                out.member("vanilla_proofs", &input.vanilla_proofs);
            }
        }
    }
}

impl PorepInput {
    /// The request, from either form of the C1 output.
    fn request(&self) -> Result<PorepRequest, InputError> {
        let prover_id = hex32("prover_id", &self.prover_id)?;
        let c1: SealCommitPhase1Output = match (&self.c1, &self.c1_base64) {
            (Some(c1), None) => serde_json::from_str(c1.as_str())
                .map_err(|source| InputError::NotC1 { field: "c1", source })?,
            (None, Some(encoded)) => {
                let json = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(InputError::NotBase64)?;
                serde_json::from_slice(&json)
                    .map_err(|source| InputError::NotC1 { field: "c1_base64", source })?
            }
            (Some(_), Some(_)) => return Err(InputError::TwoC1),
            (None, None) => return Err(InputError::NoC1),
        };
        Ok(PorepRequest { c1, prover_id, sector_id: self.sector_id })
    }
}

/// `text` read as `kind`'s `what` (its job input, or what `cuzk verify`
/// checks a proof against), straight into its type.
fn decode<T: DeserializeOwned>(kind: Kind, what: &'static str, text: &str) -> Result<T, InputError> {
    serde_json::from_str(text).map_err(|source| InputError::Fields { kind, what, source })
}

/// The request a Filecoin job's input asks for.
fn request(input: &FilecoinInput) -> Result<Box<dyn ProofRequest>, InputError> {
    Ok(match input {
        FilecoinInput::Porep(input) => Box::new(input.request()?),
        FilecoinInput::Post(input) => Box::new(PostRequest {
            registered_proof: input.registered_proof.parse()?,
            randomness: hex32("randomness", &input.randomness)?,
            prover_id: hex32("prover_id", &input.prover_id)?,
            vanilla_proofs: vanilla_proofs(&input.vanilla_proofs)?,
            partition_index: input.partition_index,
        }),
        FilecoinInput::Update(input) => Box::new(UpdateRequest {
            registered_proof: input.registered_proof.parse()?,
            comm_r_old: hex32("comm_r_old", &input.comm_r_old)?,
            comm_r_new: hex32("comm_r_new", &input.comm_r_new)?,
            comm_d_new: hex32("comm_d_new", &input.comm_d_new)?,
            vanilla_proofs: vanilla_proofs(&input.vanilla_proofs)?,
        }),
    })
}

/// What a `kind` proof is checked against: porep-c2's job input; the PoSt
/// kinds' `{"registered_proof", "randomness", "prover_id", "replicas":
/// [{"sector_id", "comm_r"}]}`; snap-prove's input without the vanilla
/// proofs.
fn statement(kind: Kind, public: &str) -> Result<Statement, InputError> {
    const WHAT: &str = "verification input";
    Ok(match kind {
        Kind::Porep => Statement::Seal(decode::<PorepInput>(kind, WHAT, public)?.request()?),
        Kind::WinningPost | Kind::WindowPost => {
            let input: PostPublic = decode(kind, WHAT, public)?;
            Statement::PoSt {
                registered_proof: input.registered_proof.parse()?,
                randomness: hex32("randomness", &input.randomness)?,
                prover_id: hex32("prover_id", &input.prover_id)?,
                replicas: input
                    .replicas
                    .iter()
                    .map(|r| Ok((r.sector_id, hex32("comm_r", &r.comm_r)?)))
                    .collect::<Result<_, InputError>>()?,
            }
        }
        Kind::EmptySectorUpdate => {
            let input: UpdatePublic = decode(kind, WHAT, public)?;
            Statement::Update {
                registered_proof: input.registered_proof.parse()?,
                comm_r_old: hex32("comm_r_old", &input.comm_r_old)?,
                comm_r_new: hex32("comm_r_new", &input.comm_r_new)?,
                comm_d_new: hex32("comm_d_new", &input.comm_d_new)?,
            }
        }
    })
}

/// Checks `proof` with filecoin-proofs-api's own verifier for `kind`,
/// against the values `public` holds (see [`statement`]); a registered
/// proof of another kind is refused.
pub fn verify(kind: Kind, public: &Value, proof: &[u8]) -> Result<bool, InputError> {
    let statement = statement(kind, &public.to_string())?;
    kind.admit(statement.registered_proof())?;
    Ok(statement.verify(proof)?)
}

/// Whether `params_dir` has the parameter file of a Filecoin job whose
/// circuit is `circuit_id` (its cache id): a fleet node claims a kind's
/// partitions only where it does.
pub fn has_parameter_file(circuit: &str, circuit_id: &str, params_dir: &Path) -> bool {
    !is_kind(circuit) || params::params_file(params_dir, circuit_id).is_ok()
}

impl FilecoinJob {
    /// Reads a `kind` job's input and has cuzk-filecoin check it: the
    /// registered proof is of that kind, the request passes its checks, and
    /// its parameter file is in `params_dir` and readable.
    pub fn parse(kind: Kind, input: &Value, params_dir: &Path) -> Result<Self, InputError> {
        Self::parse_text(kind, &input.to_string(), params_dir)
    }

    /// As `parse`, from the input's JSON text.
    pub fn parse_text(kind: Kind, input: &str, params_dir: &Path) -> Result<Self, InputError> {
        Self::from_input(kind, &FilecoinInput::decode(kind, input)?, params_dir)
    }

    /// A `kind` job from its typed input, checked as `parse` says.
    pub fn from_input(kind: Kind, input: &FilecoinInput, params_dir: &Path) -> Result<Self, InputError> {
        let request = request(input)?;
        kind.admit(request.registered_proof())?;
        request.check()?;
        let partitions = request.partition_count()?;
        let cache_id = request.cache_id()?;
        let params = params::params_file(params_dir, &cache_id)?;
        let counts = MappedParams::open(&params)?.counts();
        Ok(Self {
            cache_id,
            // Beyond u32, the partition limit refuses it.
            partitions: u32::try_from(partitions).unwrap_or(u32::MAX),
            counts,
            params,
            request,
        })
    }

    /// What one partition holds on the host beyond the resident key
    /// ([`reservation_for_counts`] of its parameter file), proved on the
    /// CPU or (`on_device`) on a device that evaluates and proves.
    pub fn reservation(&self, evaluation: Evaluation, on_device: bool) -> Reservation {
        reservation_for_counts(&self.counts, evaluation, on_device)
    }

    /// Partition `partition` synthesized, with the prepared circuit it is
    /// proved against. The circuit is loaded from the parameter file on
    /// first use: for compiled evaluation with the blank circuit's matrices
    /// (recorded once), for direct evaluation with the densities this
    /// partition's synthesis recorded. a, b and c are evaluated on the host.
    pub fn synthesize(
        &self,
        keys: &KeyStore,
        partition: u32,
        evaluation: Evaluation,
    ) -> Result<(Arc<PreparedCircuit>, Synthesized, Phases), StageError> {
        self.synthesize_for(keys, partition, evaluation, false, &CircuitLoading::default())
    }

    /// As `synthesize`; with `on_device` a compiled partition's a, b and c
    /// are left to the engine, which evaluates them on its device; the
    /// circuit is loaded as `loading` says.
    pub fn synthesize_for(
        &self,
        keys: &KeyStore,
        partition: u32,
        evaluation: Evaluation,
        on_device: bool,
        loading: &CircuitLoading,
    ) -> Result<(Arc<PreparedCircuit>, Synthesized, Phases), StageError> {
        let started = Instant::now();
        // A C1 or vanilla proof that does not synthesize never will.
        let recorded =
            self.request.record_partition(partition as usize, evaluation).map_err(StageError::permanent)?;
        let synthesis = started.elapsed();
        // The key store keeps one error per circuit, typed, for every job
        // that asks after it.
        let circuit = keys
            .prepared_with(&self.cache_id, &self.params, || self.prepare(&recorded, loading))
            .map_err(StageError::permanent)?;
        let key_ready = started.elapsed();
        let synthesized =
            prepare::synthesized(recorded, &circuit, on_device).map_err(StageError::permanent)?;
        let phases = vec![
            ("synthesize", synthesis),
            ("key", key_ready - synthesis),
            ("evaluate", started.elapsed() - key_ready),
        ];
        Ok((circuit, synthesized, phases))
    }

    fn prepare(
        &self,
        recorded: &Recorded,
        loading: &CircuitLoading,
    ) -> Result<PreparedCircuit, cuzk_filecoin::Error> {
        let witness = match recorded {
            Recorded::Witness(witness) => Some(witness),
            Recorded::Assignment { .. } => None,
        };
        let (kind, sector_size) = self.request.kind_and_sector_size();
        loading.load(&self.cache_id, &self.params, kind, sector_size, witness)
    }
}

/// How this daemon loads a Filecoin circuit from its parameter file: the
/// same for jobs and for preloads, since the key store keeps whichever
/// comes first.
#[derive(Clone, Debug, Default)]
pub struct CircuitLoading {
    /// Leave keys in their files, read by range by the engines (every
    /// device's engine `reads_key_by_range`: CUDA): the host never holds a
    /// 32 GiB PoRep key's 50 GB decoded.
    pub key_in_file: bool,
    /// Where blank circuits' compiled shapes are kept between starts (9 GB
    /// for 32 GiB PoRep, two minutes to record); None keeps none.
    pub shape_dir: Option<PathBuf>,
    /// Free bytes a shape file must leave on its filesystem (the job
    /// store's `store.min_free_bytes`).
    pub keep_free: u64,
}

impl CircuitLoading {
    /// `cache_id`'s circuit from `params`, as [`prepare::load_circuit`]
    /// loads it with these settings.
    pub fn load(
        &self,
        cache_id: &str,
        params: &Path,
        kind: Kind,
        sector_size: u64,
        witness: Option<&Witness>,
    ) -> Result<PreparedCircuit, cuzk_filecoin::Error> {
        let dir = self.shape_dir.as_deref();
        let room = |bytes: u64| dir.is_some_and(|dir| crate::store::room_for(dir, bytes, self.keep_free));
        let shapes = dir.map(|dir| ShapeCache { dir, room: &room });
        let options = LoadOptions { key_in_file: self.key_in_file, shapes: shapes.as_ref() };
        prepare::load_circuit(cache_id, params, kind, sector_size, witness, options)
    }
}

/// What one partition of a circuit holds beyond its resident key, from its
/// parameter file's counts (n the domain, v = inputs + aux, 32-byte
/// elements): a, b and c (3n), released after the NTTs; then the assignment
/// and the transient copy synthesis converts it from (2v), the H scalars (n)
/// and the signed-digit table of the largest MSM (n per window, 8 bytes),
/// which bound every later MSM's scalars and digits; direct evaluation also
/// holds bellperson's a, b and c while it converts them (3n more). That is
/// the CPU engine's peak; `tests/reservation_peak.rs` measures a WinningPoSt
/// partition against it. With `on_device` (engines that evaluate a, b and c
/// and prove on their device: CUDA) the host holds only the assignment and
/// its transient copy (2v) beyond the small overhead: H, the MSMs' scalars
/// and digits live on the device, a, b and c too in compiled evaluation
/// (direct evaluation still builds them on the host and uploads them). At
/// 32 GiB PoRep that is 8.3 GB a partition instead of the CPU's 37.8 GiB.
pub fn reservation_for_counts(counts: &QueryCounts, evaluation: Evaluation, on_device: bool) -> Reservation {
    const ELEMENT: u64 = 32;
    const OVERHEAD: u64 = 8 << 20;
    let n = (counts.h + 1) as u64;
    let v = (counts.ic + counts.l) as u64;
    let converting = match evaluation {
        Evaluation::Direct => 3 * n * ELEMENT,
        Evaluation::Compiled | Evaluation::CompiledReference => 0,
    };
    if on_device {
        // Direct evaluation's a, b and c are built on the host and uploaded.
        let abc = converting;
        return Reservation { abc_bytes: abc, retained_bytes: 2 * v * ELEMENT + converting + OVERHEAD };
    }
    Reservation {
        abc_bytes: 3 * n * ELEMENT,
        retained_bytes: (2 * v + n) * ELEMENT + msm_digit_table_bytes(n) + converting + OVERHEAD,
    }
}

/// Vanilla proofs given as hex strings.
fn vanilla_proofs(hex_proofs: &[String]) -> Result<Vec<Vec<u8>>, InputError> {
    hex_proofs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            hex::decode(text.strip_prefix("0x").unwrap_or(text))
                .map_err(|source| InputError::NotHex { field: format!("vanilla_proofs[{i}]"), source })
        })
        .collect()
}

/// A 32-byte value given as hex (an optional 0x prefix).
fn hex32(field: &'static str, text: &str) -> Result<[u8; 32], InputError> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    let bytes =
        hex::decode(digits).map_err(|source| InputError::NotHex { field: field.to_string(), source })?;
    bytes.try_into().map_err(|b: Vec<u8>| InputError::Not32Bytes { field, len: b.len() })
}
