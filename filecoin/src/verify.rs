//! Checking proofs with filecoin-proofs-api's own verifiers, from the same
//! arguments a job was submitted with: what `cuzk verify` runs, so a proof is
//! judged by code this project did not write; and the cheap check of a
//! submission's ids against its C1 output.

use std::collections::BTreeMap;

use filecoin_proofs::constants::DefaultTreeHasher;
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::{post, update};
use filecoin_proofs_api::{PublicReplicaInfo, RegisteredPoStProof, RegisteredUpdateProof, SectorId};
use storage_proofs_porep::stacked::generate_replica_id;

use crate::Error;

/// `verify_seal` for a PoRep proof made from `c1`: comm_r, comm_d, ticket and
/// seed come from the C1 output; prover_id and sector_id are the ones
/// `seal_commit_phase2` takes (they fix the replica id the proof binds).
pub fn porep_c2(
    c1: &SealCommitPhase1Output,
    prover_id: [u8; 32],
    sector_id: u64,
    proof: &[u8],
) -> Result<bool, Error> {
    seal::verify_seal(
        c1.registered_proof,
        c1.comm_r,
        c1.comm_d,
        prover_id,
        SectorId::from(sector_id),
        c1.ticket,
        c1.seed,
        proof,
    )
    .map_err(filecoin)
}

/// `verify_winning_post` or `verify_window_post` (by the registered
/// proof's kind) for a PoSt proof over `replicas` (sector id, comm_r).
pub fn post_proof(
    registered_proof: RegisteredPoStProof,
    randomness: [u8; 32],
    prover_id: [u8; 32],
    replicas: &[(u64, [u8; 32])],
    proof: &[u8],
) -> Result<bool, Error> {
    let replicas: BTreeMap<SectorId, PublicReplicaInfo> = replicas
        .iter()
        .map(|&(id, comm_r)| (SectorId::from(id), PublicReplicaInfo::new(registered_proof, comm_r)))
        .collect();
    if registered_proof.typ() == filecoin_proofs_api::PoStType::Winning {
        post::verify_winning_post(&randomness, proof, &replicas, prover_id)
    } else {
        post::verify_window_post(&randomness, &[(registered_proof, proof)], &replicas, prover_id)
    }
    .map_err(filecoin)
}

/// `verify_empty_sector_update_proof` for a SnapDeals proof.
pub fn update_proof(
    registered_proof: RegisteredUpdateProof,
    [comm_r_old, comm_r_new, comm_d_new]: [[u8; 32]; 3],
    proof: &[u8],
) -> Result<bool, Error> {
    update::verify_empty_sector_update_proof(registered_proof, proof, comm_r_old, comm_r_new, comm_d_new)
        .map_err(filecoin)
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}

/// Whether `c1` was sealed for this prover and sector: its replica id is the
/// one filecoin-proofs derives from them, the ticket, comm_d and the proof's
/// porep id. A proof of a C1 that fails this check never verifies for them.
pub fn replica_id_matches(c1: &SealCommitPhase1Output, prover_id: [u8; 32], sector_id: u64) -> bool {
    let porep_id = c1.registered_proof.as_v1_config().porep_id;
    let expected = generate_replica_id::<DefaultTreeHasher, _>(
        &prover_id,
        sector_id,
        &c1.ticket,
        c1.comm_d,
        &porep_id,
    );
    expected == c1.replica_id
}
