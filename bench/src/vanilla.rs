//! `cuzk-bench vanilla`: WinningPoSt, WindowPoSt or SnapDeals vanilla proofs
//! of sectors that were never sealed (cuzk-filecoin's `synthetic`), any
//! sector size: a daemon job body (`POST /v1/jobs`) and the verifier's
//! public input (`cuzk verify --kind … --input`), so a 32 GiB WinningPoSt, a
//! full 32 GiB WindowPoSt partition (2,349 sectors) or a 32 GiB SnapDeals
//! proof (16 partitions) can be proved without a sealed sector.

use std::path::{Path, PathBuf};
use std::time::Instant;

use cuzk_filecoin::kinds::RegisteredProof;
use cuzk_filecoin::post::PostRequest;
use cuzk_filecoin::synthetic::{generate_post, generate_update, Error, PostInputs, UpdateInputs};
use cuzk_filecoin::update::UpdateRequest;
use cuzk_filecoin::{parse_sector_size, Kind, ProofRequest};
use serde_json::{json, Value};

use crate::c1::bytes32;

/// Arguments of `cuzk-bench vanilla`.
#[derive(clap::Args, Clone, Debug)]
pub struct VanillaArgs {
    /// winning-post, window-post or snap-prove.
    #[arg(long, default_value = "window-post")]
    pub kind: String,
    /// Sector size by name (2KiB to 64GiB) or bytes; the registered proof is
    /// that size's current one (WinningPoSt V1, WindowPoSt V1_2, update V1).
    #[arg(long, default_value = "32GiB")]
    pub sector_size: String,
    /// PoSt: sectors to prove (default: one partition's, 2,349 for a 32 GiB
    /// WindowPoSt; WinningPoSt always 1), numbered from --first-sector-id.
    #[arg(long)]
    pub sectors: Option<usize>,
    /// PoSt: the first sector's number.
    #[arg(long, default_value_t = 1)]
    pub first_sector_id: u64,
    /// PoSt: the chain randomness, 32 bytes hex (a field element).
    #[arg(long, default_value = "2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c")]
    pub randomness: String,
    /// PoSt: the storage provider's id, 32 bytes hex (default: actor f01000).
    #[arg(long, default_value = "e803000000000000000000000000000000000000000000000000000000000000")]
    pub prover_id: String,
    /// Seeds the replicas, data, comm_c and off-path tree nodes.
    #[arg(long, default_value_t = 0)]
    pub rng_seed: u64,
    /// Write the job body, `{"circuit", "input"}`, here.
    #[arg(long)]
    pub out: PathBuf,
    /// Write the verifier's input here: PoSt `{"registered_proof",
    /// "randomness", "prover_id", "replicas"}`, SnapDeals the job's input
    /// without its vanilla proofs.
    #[arg(long)]
    pub public: Option<PathBuf>,
}

fn write(path: &Path, value: &Value) -> Result<usize, String> {
    let bytes = serde_json::to_vec(value).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(bytes.len())
}

/// What one generation made: the job's input, the verifier's input and a
/// line saying what and how long.
struct Made {
    /// The job's input, as the daemon takes it for `--kind`.
    input: Value,
    /// The verifier's input, as `cuzk verify` takes it.
    public: Value,
    /// What was generated and in how long.
    summary: String,
}

/// Runs a generator; its result and the seconds it took.
fn timed<T>(generate: impl FnOnce() -> Result<T, Error>) -> Result<(T, f64), String> {
    let start = Instant::now();
    let made = generate().map_err(|e| e.to_string())?;
    Ok((made, start.elapsed().as_secs_f64()))
}

/// Generates the vanilla proofs, checks them as the daemon does at submit
/// and writes the files; returns the report.
pub fn run(args: &VanillaArgs) -> Result<String, String> {
    let kind: Kind = match args.kind.as_str() {
        "winning-post" => Kind::WinningPost,
        "window-post" => Kind::WindowPost,
        "snap-prove" => Kind::EmptySectorUpdate,
        other => return Err(format!("--kind {other}: winning-post, window-post or snap-prove")),
    };
    let bytes = parse_sector_size(&args.sector_size).map_err(|e| e.to_string())?;
    let made = match kind.registered_proof(bytes).map_err(|e| e.to_string())? {
        RegisteredProof::PoSt(registered_proof) => post(args, kind, registered_proof)?,
        RegisteredProof::Update(registered_proof) => update(args, registered_proof)?,
        RegisteredProof::Seal(_) => return Err("PoRep: use `cuzk-bench c1`".into()),
    };
    let job = json!({ "circuit": args.kind, "input": made.input });
    let written = write(&args.out, &job)?;
    let mut report = format!("{}; wrote the job ({written} bytes) to {}", made.summary, args.out.display());
    if let Some(path) = &args.public {
        let written = write(path, &made.public)?;
        report += &format!("\nwrote the verifier's input ({written} bytes) to {}", path.display());
    }
    Ok(report)
}

fn post(
    args: &VanillaArgs,
    kind: Kind,
    registered_proof: cuzk_filecoin::api::RegisteredPoStProof,
) -> Result<Made, String> {
    let count = match kind {
        Kind::WinningPost => 1,
        _ => args.sectors.unwrap_or(registered_proof.as_v1_config().sector_count),
    };
    let inputs = PostInputs {
        registered_proof,
        randomness: bytes32("randomness", &args.randomness)?,
        prover_id: bytes32("prover-id", &args.prover_id)?,
        sector_ids: (args.first_sector_id..).take(count).collect(),
        rng_seed: args.rng_seed,
    };
    let (generated, seconds) = timed(|| generate_post(&inputs))?;
    let request = PostRequest {
        registered_proof,
        randomness: inputs.randomness,
        prover_id: inputs.prover_id,
        vanilla_proofs: generated.vanilla_proofs,
        partition_index: None,
    };
    kind.admit(request.registered_proof()).map_err(|e| e.to_string())?;
    request.check().map_err(|e| e.to_string())?;
    let partitions = request.partition_count().map_err(|e| e.to_string())?;
    let common = json!({
        "registered_proof": registered_proof,
        "randomness": hex::encode(inputs.randomness),
        "prover_id": hex::encode(inputs.prover_id),
    });
    let mut input = common.clone();
    input["vanilla_proofs"] = request.vanilla_proofs.iter().map(hex::encode).collect();
    let mut public = common;
    public["replicas"] = generated
        .replicas
        .iter()
        .map(|(id, comm_r)| json!({ "sector_id": id, "comm_r": hex::encode(comm_r) }))
        .collect();
    Ok(Made {
        input,
        public,
        summary: format!(
            "generated {registered_proof:?} vanilla proofs of {count} sectors ({partitions} partitions) in {seconds:.2} s"
        ),
    })
}

fn update(
    args: &VanillaArgs,
    registered_proof: cuzk_filecoin::api::RegisteredUpdateProof,
) -> Result<Made, String> {
    let (generated, seconds) =
        timed(|| generate_update(&UpdateInputs { registered_proof, rng_seed: args.rng_seed }))?;
    let request = UpdateRequest {
        registered_proof,
        comm_r_old: generated.comm_r_old,
        comm_r_new: generated.comm_r_new,
        comm_d_new: generated.comm_d_new,
        vanilla_proofs: generated.vanilla_proofs,
    };
    request.check().map_err(|e| e.to_string())?;
    let public = json!({
        "registered_proof": registered_proof,
        "comm_r_old": hex::encode(request.comm_r_old),
        "comm_r_new": hex::encode(request.comm_r_new),
        "comm_d_new": hex::encode(request.comm_d_new),
    });
    let mut input = public.clone();
    input["vanilla_proofs"] = request.vanilla_proofs.iter().map(hex::encode).collect();
    Ok(Made {
        input,
        public,
        summary: format!(
            "generated and verified {registered_proof:?} vanilla proofs ({} partitions) in {seconds:.2} s",
            request.vanilla_proofs.len()
        ),
    })
}
