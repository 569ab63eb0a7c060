//! `cuzk-bench curio-inputs --out DIR`: the 2 KiB Filecoin inputs of
//! cuzk-filecoin's fixtures (sectors sealed, vanilla proofs made and an
//! update encoded by filecoin-proofs-api itself) written as files, raw, for
//! a client in another language: the commit-phase-1 output as
//! filecoin-proofs-api's JSON, each vanilla proof as filecoin-proofs'
//! bincode, commitments and randomness as hex in `manifest.json`. The
//! PoRep's C1 is generated without sealing (cuzk-filecoin's `synthetic`,
//! for the fixtures' prover, a sector of its own): the daemon's HTTP tests
//! prove a sealed sector's C1, so the proof the gRPC client has
//! filecoin-proofs-api verify is the one that shows a generated C1 proves
//! (the benchmarks' 32 and 64 GiB sectors are generated). The
//! client wraps them in Curio's encodings itself (tests/grpc_conformance.py
//! does: the C1 envelope, Go-numbered proof types, the prover id from the
//! miner id), so the daemon's decoding is checked by code that shares none
//! of it. No parameter file is needed: nothing is proved here.

use std::path::{Path, PathBuf};

use cuzk_filecoin::fixtures::{
    self, Sector, MINER_ID, PROVER_ID, SEAL, SEED, TICKET, UPDATE, WINDOW, WINNING,
};
use cuzk_filecoin::synthetic::{generate_c1, SealInputs};
use serde_json::{json, Value};

/// The arguments of `cuzk-bench curio-inputs`.
#[derive(clap::Args)]
pub struct CurioInputsArgs {
    /// The directory to write into (made if missing).
    #[arg(long)]
    pub out: PathBuf,
}

/// The generated PoRep's sector: none of the sealed ones (1 to 3).
const POREP_SECTOR: u64 = 4;

/// Writes the files and `manifest.json`, which names them; answers the
/// manifest's path.
pub fn run(args: &CurioInputsArgs) -> Result<PathBuf, String> {
    let out = &args.out;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let sectors: Vec<Sector> =
        (1..=3).map(|id| fixtures::seal(id).map_err(|e| format!("{e:#}"))).collect::<Result<_, _>>()?;
    let all: Vec<&Sector> = sectors.iter().collect();
    let replica = |s: &Sector| json!({ "sector_id": u64::from(s.id), "comm_r": hex::encode(s.p2.comm_r) });

    let porep = generate_c1(&SealInputs {
        registered_proof: SEAL,
        prover_id: PROVER_ID,
        sector_id: POREP_SECTOR,
        ticket: TICKET,
        seed: SEED,
        rng_seed: POREP_SECTOR,
    })
    .map_err(|e| format!("{e:#}"))?;
    write(out, "porep-c1.json", &serde_json::to_vec(&porep).map_err(|e| e.to_string())?)?;
    let sealed = &sectors[0];

    let winning_randomness = post_randomness(0x11);
    let winning = fixtures::post_vanilla_proofs(WINNING, winning_randomness, &all[..1])
        .map_err(|e| format!("{e:#}"))?;

    // Three sectors at two per 2 KiB WindowPoSt partition: partition 1
    // carries one sector, as a partition with skipped sectors does.
    let window_randomness = post_randomness(0x22);
    let window =
        fixtures::post_vanilla_proofs(WINDOW, window_randomness, &all).map_err(|e| format!("{e:#}"))?;
    let per_partition = WINDOW.as_v1_config().sector_count;
    let partitions: Vec<Value> = all
        .chunks(per_partition)
        .zip(window.chunks(per_partition))
        .enumerate()
        .map(|(index, (sectors, proofs))| {
            Ok(json!({
                "index": index,
                "sectors": sectors.iter().map(|s| replica(s)).collect::<Vec<_>>(),
                "vanilla_proofs": written(out, &format!("window-{index}"), proofs)?,
            }))
        })
        .collect::<Result<_, String>>()?;

    let update = fixtures::update(sealed).map_err(|e| format!("{e:#}"))?;

    let manifest = json!({
        "miner_id": MINER_ID,
        "prover_id": hex::encode(PROVER_ID),
        "porep": {
            "registered_proof": porep.registered_proof,
            "sector_id": POREP_SECTOR,
            "c1": "porep-c1.json",
            "comm_r": hex::encode(porep.comm_r),
            "comm_d": hex::encode(porep.comm_d),
            "ticket": hex::encode(TICKET),
            "seed": hex::encode(SEED),
        },
        "winning": {
            "registered_proof": WINNING,
            "randomness": hex::encode(winning_randomness),
            "sectors": [replica(sealed)],
            "vanilla_proofs": written(out, "winning", &winning)?,
        },
        "window": {
            "registered_proof": WINDOW,
            "randomness": hex::encode(window_randomness),
            "partitions": partitions,
        },
        "snap": {
            "registered_proof": UPDATE,
            "comm_r_old": hex::encode(update.comm_r_old),
            "comm_r_new": hex::encode(update.comm_r_new),
            "comm_d_new": hex::encode(update.comm_d_new),
            "vanilla_proofs": written(out, "snap", &update.vanilla_proofs)?,
        },
    });
    let path = out.join("manifest.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).map_err(|e| e.to_string())?)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// PoSt randomness as Curio sends it: 32 bytes, the last masked `& 0x3f`
/// so that it is a field element.
fn post_randomness(fill: u8) -> [u8; 32] {
    let mut randomness = [fill; 32];
    randomness[31] &= 0x3f;
    randomness
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let path = dir.join(name);
    std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes each proof as `<stem>-<i>.bin` and answers the names.
fn written(dir: &Path, stem: &str, proofs: &[Vec<u8>]) -> Result<Vec<String>, String> {
    proofs
        .iter()
        .enumerate()
        .map(|(i, proof)| {
            let name = format!("{stem}-{i}.bin");
            write(dir, &name, proof)?;
            Ok(name)
        })
        .collect()
}
