//! `cuzk submit`: one job (a Filecoin kind's or a registered family's) sent
//! to the daemon, waited for, and its proofs written to a file.

use std::path::PathBuf;
use std::time::Duration;

use cuzk_filecoin::Kind;
use serde_json::json;

use super::input::{filecoin_input, parse_json, read_json};
use super::CliError;
use crate::client::{self, Submission};

/// `cuzk submit`'s flags: the job's body, how to reach the daemon, where
/// the proofs go.
#[derive(clap::Args)]
pub(super) struct SubmitArgs {
    // The daemon's URL.
    #[arg(long, default_value = "http://127.0.0.1:9820", env = "CUZK_SERVER")]
    server: String,
    /// A Filecoin kind: porep-c2 or porep, ... (more in docs/filecoin.md).
    #[arg(conflicts_with = "circuit", required_unless_present = "circuit")]
    kind: Option<Kind>,
    /// A registered circuit family.
    #[arg(long)]
    circuit: Option<String>,
    /// porep-c2: the commit-phase-1 output (JSON, as Lotus and Curio write it).
    #[arg(long, requires = "kind")]
    c1: Option<PathBuf>,
    /// porep-c2: the miner's prover id, 32 bytes hex.
    #[arg(long, requires = "c1")]
    prover_id: Option<String>,
    /// porep-c2: the sector number.
    #[arg(long, requires = "c1")]
    sector_id: Option<u64>,
    /// A Filecoin kind's whole input object, as JSON (docs/filecoin.md).
    #[arg(long, requires = "kind", conflicts_with = "c1")]
    input: Option<PathBuf>,
    /// Circuit params as JSON, e.g. '{"depth": 8, "challenges": 2}'.
    #[arg(long, default_value = "{}")]
    params: String,
    // A family's partitions (a Filecoin kind's input says its own).
    #[arg(long, default_value_t = 1)]
    partitions: u32,
    /// Default: normal; a Filecoin kind's own (critical for winning-post).
    #[arg(long)]
    priority: Option<String>,
    /// Draw a random valid instance from this seed.
    #[arg(long, conflicts_with = "inputs")]
    seed: Option<u64>,
    /// A JSON file with witness inputs.
    #[arg(long)]
    inputs: Option<PathBuf>,
    // Sent as Idempotency-Key: a retried submit answers the first job.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// API token (needs the submit and read scopes).
    #[arg(long, env = "CUZK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Where to write the proofs document (a Filecoin kind: the proof
    /// bytes filecoin-proofs-api would return).
    #[arg(long, default_value = "proofs.json")]
    out: PathBuf,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
}

/// Submits the job, waits for its end and writes its proofs: a Filecoin
/// kind's as the bytes filecoin-proofs-api would return, a family's as the
/// proofs document.
pub(super) fn run(args: SubmitArgs) -> Result<(), CliError> {
    let SubmitArgs {
        server,
        kind,
        circuit,
        c1,
        prover_id,
        sector_id,
        input,
        params,
        partitions,
        priority,
        seed,
        inputs,
        idempotency_key,
        token,
        out,
        timeout,
    } = args;
    if kind.is_none() && (c1.is_some() || input.is_some()) {
        return Err(CliError::Usage("--c1 and --input are for Filecoin kinds (cuzk submit porep-c2 ...)"));
    }
    let mut body = match (kind, circuit) {
        (Some(kind), _) => {
            let input = filecoin_input(kind, c1, prover_id, sector_id, input)?;
            json!({ "circuit": kind.api_name(), "input": input })
        }
        (None, Some(circuit)) => {
            let mut body = json!({
                "circuit": circuit,
                "params": parse_json("--params", &params)?,
                "partitions": partitions,
            });
            match (seed, inputs) {
                (Some(seed), _) => body["seed"] = json!(seed),
                (None, Some(path)) => body["inputs"] = read_json(&path)?,
                (None, None) => return Err(CliError::Usage("give --seed or --inputs")),
            }
            body
        }
        (None, None) => return Err(CliError::Usage("give a Filecoin kind or --circuit")),
    };
    if let Some(priority) = priority {
        body["priority"] = json!(priority);
    }
    let proofs = client::submit_and_wait(&Submission {
        server,
        body,
        idempotency_key,
        token,
        timeout: Duration::from_secs(timeout),
        progress: true,
    })?;
    let bytes = match proofs["proof"].as_str().filter(|_| kind.is_some()) {
        Some(proof) => hex::decode(proof).map_err(CliError::ProofNotHex)?,
        None => serde_json::to_vec_pretty(&proofs).expect("JSON values serialize"),
    };
    std::fs::write(&out, bytes).map_err(|source| CliError::Write { path: out.clone(), source })?;
    println!("proofs written to {}", out.display());
    Ok(())
}
