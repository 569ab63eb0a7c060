//! Checking proofs with filecoin-proofs-api's own verifiers, from the same
//! arguments a job was submitted with: what `cuzk verify` runs, so a proof is
//! judged by code this project did not write; and the cheap check of a
//! submission's ids against its C1 output.

use filecoin_proofs::constants::DefaultTreeHasher;
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::SectorId;
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
    .map_err(|e| Error::Filecoin(format!("{e:#}")))
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
