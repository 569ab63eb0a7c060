//! `cuzk-bench post`: WinningPoSt or WindowPoSt vanilla proofs of sectors
//! that were never sealed (cuzk-filecoin's `synthetic::generate_post`), any
//! sector size: a daemon job body (`POST /v1/jobs`) and the verifier's
//! public input (`cuzk verify --kind … --input`), so a 32 GiB WinningPoSt or
//! a full 32 GiB WindowPoSt partition (2,349 sectors) can be proved without
//! a sealed sector.

use std::path::{Path, PathBuf};
use std::time::Instant;

use cuzk_filecoin::kinds::RegisteredProof;
use cuzk_filecoin::post::PostRequest;
use cuzk_filecoin::synthetic::{generate_post, PostInputs};
use cuzk_filecoin::{parse_sector_size, Kind};
use serde_json::{json, Value};

use crate::c1::bytes32;

/// Arguments of `cuzk-bench post`.
#[derive(clap::Args, Clone, Debug)]
pub struct PostArgs {
    /// winning-post or window-post.
    #[arg(long, default_value = "window-post")]
    pub kind: String,
    /// Sector size by name (2KiB to 64GiB) or bytes; the registered proof is
    /// that size's current one (WinningPoSt V1, WindowPoSt V1_2).
    #[arg(long, default_value = "32GiB")]
    pub sector_size: String,
    /// Sectors to prove (default: one partition's, 2,349 for a 32 GiB
    /// WindowPoSt; WinningPoSt always 1), numbered from --first-sector-id.
    #[arg(long)]
    pub sectors: Option<usize>,
    /// The first sector's number.
    #[arg(long, default_value_t = 1)]
    pub first_sector_id: u64,
    /// The chain randomness, 32 bytes hex (a field element).
    #[arg(long, default_value = "2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c")]
    pub randomness: String,
    /// The storage provider's id, 32 bytes hex (default: actor f01000).
    #[arg(long, default_value = "e803000000000000000000000000000000000000000000000000000000000000")]
    pub prover_id: String,
    /// Seeds the sectors' replica nodes, comm_c and off-path tree nodes.
    #[arg(long, default_value_t = 0)]
    pub rng_seed: u64,
    /// Write the job body, `{"circuit", "input"}`, here.
    #[arg(long)]
    pub out: PathBuf,
    /// Write the verifier's input, `{"registered_proof", "randomness",
    /// "prover_id", "replicas"}`, here.
    #[arg(long)]
    pub public: Option<PathBuf>,
}

fn write(path: &Path, value: &Value) -> Result<usize, String> {
    let bytes = serde_json::to_vec(value).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(bytes.len())
}

/// Generates the vanilla proofs, checks them as the daemon does at submit
/// (`PostRequest::check`) and writes the files; returns the report.
pub fn run(args: &PostArgs) -> Result<String, String> {
    let kind: Kind = match args.kind.as_str() {
        "winning-post" => Kind::WinningPost,
        "window-post" => Kind::WindowPost,
        other => return Err(format!("--kind {other}: winning-post or window-post")),
    };
    let bytes = parse_sector_size(&args.sector_size)?;
    let RegisteredProof::PoSt(registered_proof) = kind.registered_proof(bytes).map_err(|e| e.to_string())?
    else {
        return Err(format!("no PoSt proof for {bytes} bytes"));
    };
    let per_partition = registered_proof.as_v1_config().sector_count;
    let count = match kind {
        Kind::WinningPost => 1,
        _ => args.sectors.unwrap_or(per_partition),
    };
    let inputs = PostInputs {
        registered_proof,
        randomness: bytes32("randomness", &args.randomness)?,
        prover_id: bytes32("prover-id", &args.prover_id)?,
        sector_ids: (args.first_sector_id..).take(count).collect(),
        rng_seed: args.rng_seed,
    };
    let start = Instant::now();
    let generated = generate_post(&inputs).map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let request = PostRequest {
        registered_proof,
        randomness: inputs.randomness,
        prover_id: inputs.prover_id,
        vanilla_proofs: generated.vanilla_proofs,
        partition_index: None,
    };
    request.check(kind == Kind::WinningPost).map_err(|e| e.to_string())?;
    let partitions = request.partition_count().map_err(|e| e.to_string())?;
    let job = json!({
        "circuit": args.kind,
        "input": {
            "registered_proof": registered_proof,
            "randomness": hex::encode(inputs.randomness),
            "prover_id": hex::encode(inputs.prover_id),
            "vanilla_proofs": request.vanilla_proofs.iter().map(hex::encode).collect::<Vec<_>>(),
        },
    });
    let written = write(&args.out, &job)?;
    let mut report = format!(
        "generated {registered_proof:?} vanilla proofs of {count} sectors ({partitions} partitions) in {seconds:.2} s; wrote the job ({written} bytes) to {}",
        args.out.display()
    );
    if let Some(path) = &args.public {
        let public = json!({
            "registered_proof": registered_proof,
            "randomness": hex::encode(inputs.randomness),
            "prover_id": hex::encode(inputs.prover_id),
            "replicas": generated.replicas.iter()
                .map(|(id, comm_r)| json!({ "sector_id": id, "comm_r": hex::encode(comm_r) }))
                .collect::<Vec<_>>(),
        });
        let written = write(path, &public)?;
        report += &format!("\nwrote the verifier's input ({written} bytes) to {}", path.display());
    }
    Ok(report)
}
