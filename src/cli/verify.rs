//! `cuzk verify`: a proofs document checked against the verifying key the
//! daemon serves, or a Filecoin proof file checked by filecoin-proofs-api's
//! own verifier, without the daemon.

use std::path::PathBuf;

use cuzk_filecoin::Kind;

use super::input::{filecoin_input, read_json};
use super::CliError;
use crate::client::{self, DocumentError};

/// `cuzk verify`'s flags: the proofs, and either the daemon that serves
/// their key or a Filecoin kind with its public values.
#[derive(clap::Args)]
pub(super) struct VerifyArgs {
    // The daemon's URL, which serves the verifying key.
    #[arg(long, default_value = "http://127.0.0.1:9820", env = "CUZK_SERVER")]
    server: String,
    /// The proofs document written by `submit` (or fetched from /proofs);
    /// with --kind, the proof bytes.
    proofs: PathBuf,
    /// A Filecoin kind (porep-c2 or porep, ...): verify without the daemon.
    #[arg(long)]
    kind: Option<Kind>,
    /// porep-c2: the commit-phase-1 output the proof was made from.
    #[arg(long, requires_all = ["kind", "prover_id", "sector_id"])]
    c1: Option<PathBuf>,
    /// The public values the proof is checked against, as JSON.
    #[arg(long, requires = "kind", conflicts_with = "c1")]
    input: Option<PathBuf>,
    /// porep-c2: the prover id, 32 bytes hex.
    #[arg(long)]
    prover_id: Option<String>,
    /// porep-c2: the sector number.
    #[arg(long)]
    sector_id: Option<u64>,
    /// API token, when the daemon requires one for reading.
    #[arg(long, env = "CUZK_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Checks the proofs: with `--kind` by filecoin-proofs-api's verifier, else
/// against the key the daemon serves for the document's circuit.
pub(super) fn run(args: VerifyArgs) -> Result<(), CliError> {
    match args.kind {
        Some(kind) => verify_filecoin(kind, args),
        None => verify_document(args),
    }
}

/// A Filecoin proof file against its public values (porep-c2's flags, or
/// `--input`).
fn verify_filecoin(kind: Kind, args: VerifyArgs) -> Result<(), CliError> {
    let VerifyArgs { proofs, c1, prover_id, sector_id, input, .. } = args;
    let proof = std::fs::read(&proofs).map_err(|source| CliError::Read { path: proofs, source })?;
    let public = filecoin_input(kind, c1, prover_id, sector_id, input)?;
    if crate::filecoin::verify(kind, &public, &proof)? {
        println!("valid: filecoin-proofs-api's verifier accepts the {} proof", kind.api_name());
        Ok(())
    } else {
        Err(CliError::FilecoinRejected { kind })
    }
}

/// A proofs document, each partition's proof against the verifying key the
/// daemon serves for its `circuit_id`.
fn verify_document(args: VerifyArgs) -> Result<(), CliError> {
    let VerifyArgs { server, proofs, token, .. } = args;
    let doc = read_json(&proofs)?;
    let circuit_id = doc["circuit_id"].as_str().ok_or(DocumentError::NoCircuitId)?;
    let vk = client::fetch_vk(&server, circuit_id, token.as_deref())?;
    let results = client::verify_proofs(&vk, &doc)?;
    for (partition, valid) in &results {
        println!("partition {partition}: {}", if *valid { "valid" } else { "INVALID" });
    }
    match results.iter().filter(|(_, valid)| !valid).count() {
        0 => {
            println!("all {} proofs valid for {circuit_id}", results.len());
            Ok(())
        }
        invalid => Err(CliError::InvalidProofs { invalid, total: results.len() }),
    }
}
