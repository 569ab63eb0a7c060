//! `cuzk-bench c1`: a PoRep commit-phase-1 output (C1) of any registered
//! sector size, 32 GiB and 64 GiB included, generated in seconds without
//! sealing (cuzk-filecoin's `synthetic`) and written as the JSON
//! filecoin-proofs-api writes; or an existing C1 read and checked. Either
//! way, `--check-partition K` then synthesizes partition K's circuit through
//! the daemon's recording path and reports its unsatisfied constraints and
//! whether its public inputs are the ones filecoin-proofs-api's verifier
//! computes (`get_seal_inputs`): the evidence that a proof of it would verify.

use std::path::PathBuf;
use std::time::Instant;

use cuzk_filecoin::api::seal::{self, SealCommitPhase1Output};
use cuzk_filecoin::api::SectorId;
use cuzk_filecoin::convert::fr_from_blstrs;
use cuzk_filecoin::kinds::RegisteredProof;
use cuzk_filecoin::porep::PorepRequest;
use cuzk_filecoin::record::{Evaluation, Recorded};
use cuzk_filecoin::synthetic::{generate_c1, SealInputs};
use cuzk_filecoin::{parse_sector_size, Kind, ProofRequest};

/// Arguments of `cuzk-bench c1`.
#[derive(clap::Args, Clone, Debug)]
pub struct C1Args {
    /// Sector size of the generated C1 (by name, 2KiB to 64GiB, or bytes);
    /// its seal proof is that size's StackedDrg…V1_1.
    #[arg(long, default_value = "32GiB")]
    pub sector_size: String,
    /// Write the generated C1's JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Read and check this C1 JSON instead of generating one (`PorepRequest::check`
    /// and its replica id against --prover-id and --sector-id; its ticket and
    /// seed are its own).
    #[arg(long, conflicts_with_all = ["out", "ticket", "seed", "rng_seed"])]
    pub input: Option<PathBuf>,
    /// The storage provider's id, 32 bytes hex (default: actor f01000).
    #[arg(long, default_value = "e803000000000000000000000000000000000000000000000000000000000000")]
    pub prover_id: String,
    /// The sector's number.
    #[arg(long, default_value_t = 1)]
    pub sector_id: u64,
    /// The sealing ticket, 32 bytes hex.
    #[arg(long, default_value = "0303030303030303030303030303030303030303030303030303030303030303")]
    pub ticket: String,
    /// The interactive challenges' seed, 32 bytes hex.
    #[arg(long, default_value = "0505050505050505050505050505050505050505050505050505050505050505")]
    pub seed: String,
    /// Seeds the generated data, parent labels and off-path tree nodes (the
    /// same arguments give the same bytes).
    #[arg(long, default_value_t = 0)]
    pub rng_seed: u64,
    /// Partitions to synthesize (direct evaluation, one thread) and check:
    /// unsatisfied constraints and public inputs. A 32 GiB partition records
    /// 130 M constraints: tens of GB of host memory.
    #[arg(long, value_delimiter = ',')]
    pub check_partition: Vec<usize>,
}

/// A 32-byte hex argument (`--name`), with or without 0x.
pub(crate) fn bytes32(name: &str, text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(text.trim_start_matches("0x")).map_err(|e| format!("--{name}: {e}"))?;
    bytes.try_into().map_err(|b: Vec<u8>| format!("--{name} must be 32 bytes, got {}", b.len()))
}

/// Generates or reads the C1 and checks the partitions asked for; returns
/// the report, or an error naming what failed.
pub fn run(args: &C1Args) -> Result<String, String> {
    let prover_id = bytes32("prover-id", &args.prover_id)?;
    let (request, mut report) = match &args.input {
        Some(path) => read_and_check(path, prover_id, args.sector_id)?,
        None => generate(args, prover_id)?,
    };
    let mut failed = Vec::new();
    for &k in &args.check_partition {
        let line = check_partition(&request, k)?;
        if !line.ends_with("ok") {
            failed.push(k);
        }
        report += &format!("\n{line}");
    }
    if failed.is_empty() {
        Ok(report)
    } else {
        Err(format!("{report}\npartitions {failed:?} would not verify"))
    }
}

fn generate(args: &C1Args, prover_id: [u8; 32]) -> Result<(PorepRequest, String), String> {
    let bytes = parse_sector_size(&args.sector_size).map_err(|e| e.to_string())?;
    let RegisteredProof::Seal(registered_proof) =
        Kind::Porep.registered_proof(bytes).map_err(|e| e.to_string())?
    else {
        return Err(format!("no seal proof for {} bytes", bytes));
    };
    let inputs = SealInputs {
        registered_proof,
        prover_id,
        sector_id: args.sector_id,
        ticket: bytes32("ticket", &args.ticket)?,
        seed: bytes32("seed", &args.seed)?,
        rng_seed: args.rng_seed,
    };
    let start = Instant::now();
    let c1 = generate_c1(&inputs).map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let mut report = format!(
        "generated {registered_proof:?} C1 ({} partitions; comm_d {}, comm_r {}) and checked it (PorepRequest::check) in {seconds:.2} s",
        registered_proof.partitions(),
        hex::encode(c1.comm_d),
        hex::encode(c1.comm_r),
    );
    if let Some(out) = &args.out {
        let json = serde_json::to_vec(&c1).map_err(|e| format!("the C1 as JSON: {e}"))?;
        std::fs::write(out, &json).map_err(|e| format!("{}: {e}", out.display()))?;
        report +=
            &format!("\nwrote {} bytes ({:.1} MB) to {}", json.len(), json.len() as f64 / 1e6, out.display());
    }
    Ok((PorepRequest { c1, prover_id, sector_id: args.sector_id }, report))
}

/// Reads a C1 and checks it for this prover and sector (its vanilla proofs
/// and its replica id: `PorepRequest::check`).
fn read_and_check(
    path: &PathBuf,
    prover_id: [u8; 32],
    sector_id: u64,
) -> Result<(PorepRequest, String), String> {
    let json = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let c1: SealCommitPhase1Output =
        serde_json::from_slice(&json).map_err(|e| format!("{}: not a C1 output: {e}", path.display()))?;
    let request = PorepRequest { c1, prover_id, sector_id };
    let start = Instant::now();
    request.check().map_err(|e| format!("{}: {e}", path.display()))?;
    let report = format!(
        "{}: {:?} C1 of {} bytes, replica id of prover {} and sector {sector_id}; PorepRequest::check accepts it ({:.2} s)",
        path.display(),
        request.c1.registered_proof,
        json.len(),
        hex::encode(prover_id),
        start.elapsed().as_secs_f64()
    );
    Ok((request, report))
}

/// Partition `k` recorded with direct evaluation: its constraints, how many
/// are unsatisfied, and its public inputs against `get_seal_inputs`. The
/// line ends with "ok" when a proof of it would verify.
fn check_partition(request: &PorepRequest, k: usize) -> Result<String, String> {
    let PorepRequest { c1, prover_id, sector_id } = request;
    let start = Instant::now();
    let Recorded::Witness(witness) =
        request.record_partition(k, Evaluation::Direct).map_err(|e| format!("partition {k}: {e}"))?
    else {
        return Err(format!("partition {k}: direct evaluation recorded no witness"));
    };
    let recorded = start.elapsed().as_secs_f64();
    let unsatisfied = witness.unsatisfied();
    let expected = seal::get_seal_inputs(
        c1.registered_proof,
        c1.comm_r,
        c1.comm_d,
        *prover_id,
        SectorId::from(*sector_id),
        c1.ticket,
        c1.seed,
    )
    .map_err(|e| format!("get_seal_inputs: {e:#}"))?;
    let inputs_equal = expected.get(k).is_some_and(|inputs| {
        inputs.len() == witness.public_inputs().len()
            && inputs.iter().map(fr_from_blstrs).eq(witness.public_inputs().iter().copied())
    });
    Ok(format!(
        "partition {k}: {} constraints, {} variables, recorded in {recorded:.1} s; {unsatisfied} unsatisfied; {} public inputs {}; {}",
        witness.num_constraints(),
        witness.inputs.len() + witness.aux.len(),
        witness.public_inputs().len(),
        if inputs_equal { "equal to get_seal_inputs'" } else { "DIFFERENT from get_seal_inputs'" },
        if unsatisfied == 0 && inputs_equal { "ok" } else { "FAILED" },
    ))
}
