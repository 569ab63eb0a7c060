//! Checking proofs with filecoin-proofs-api's own verifiers, from the same
//! arguments a job was submitted with: what `cuzk verify` runs, so a proof is
//! judged by code this project did not write.

use std::collections::BTreeMap;

use filecoin_proofs_api::seal;
use filecoin_proofs_api::{post, update};
use filecoin_proofs_api::{PublicReplicaInfo, RegisteredPoStProof, RegisteredUpdateProof, SectorId};

use crate::kinds::RegisteredProof;
use crate::porep::PorepRequest;
use crate::Error;

/// What a proof claims, by kind: the public values filecoin-proofs-api's
/// verifier for that kind checks it against.
#[derive(Clone, Debug)]
pub enum Statement {
    /// PoRep C2: the request the proof was made from (comm_r, comm_d,
    /// ticket and seed come from the C1 output; prover_id and sector_id fix
    /// the replica id the proof binds).
    Seal(PorepRequest),
    /// WinningPoSt or WindowPoSt (by the registered proof) over the
    /// challenged sectors' public replicas, as the chain knows them.
    PoSt {
        /// Which PoSt and sector size.
        registered_proof: RegisteredPoStProof,
        /// The chain randomness the challenges were drawn from.
        randomness: [u8; 32],
        /// The miner's prover id.
        prover_id: [u8; 32],
        /// (sector id, comm_r) of each challenged sector.
        replicas: Vec<(u64, [u8; 32])>,
    },
    /// SnapDeals: the update's three commitments.
    Update {
        /// The update proof and sector size.
        registered_proof: RegisteredUpdateProof,
        /// The sector key's replica commitment.
        comm_r_old: [u8; 32],
        /// The updated replica's commitment.
        comm_r_new: [u8; 32],
        /// The new data's commitment.
        comm_d_new: [u8; 32],
    },
}

impl Statement {
    /// The registered proof the statement is about (it tells its kind).
    pub fn registered_proof(&self) -> RegisteredProof {
        match self {
            Statement::Seal(request) => RegisteredProof::Seal(request.c1.registered_proof),
            Statement::PoSt { registered_proof, .. } => RegisteredProof::PoSt(*registered_proof),
            Statement::Update { registered_proof, .. } => RegisteredProof::Update(*registered_proof),
        }
    }

    /// Whether filecoin-proofs-api's verifier for the kind accepts `proof`
    /// (`verify_seal`, `verify_winning_post`, `verify_window_post` or
    /// `verify_empty_sector_update_proof`).
    pub fn verify(&self, proof: &[u8]) -> Result<bool, Error> {
        match self {
            Statement::Seal(PorepRequest { c1, prover_id, sector_id }) => seal::verify_seal(
                c1.registered_proof,
                c1.comm_r,
                c1.comm_d,
                *prover_id,
                SectorId::from(*sector_id),
                c1.ticket,
                c1.seed,
                proof,
            ),
            Statement::PoSt { registered_proof, randomness, prover_id, replicas } => {
                let replicas: BTreeMap<SectorId, PublicReplicaInfo> = replicas
                    .iter()
                    .map(|&(id, comm_r)| {
                        (SectorId::from(id), PublicReplicaInfo::new(*registered_proof, comm_r))
                    })
                    .collect();
                if registered_proof.typ() == filecoin_proofs_api::PoStType::Winning {
                    post::verify_winning_post(randomness, proof, &replicas, *prover_id)
                } else {
                    post::verify_window_post(randomness, &[(*registered_proof, proof)], &replicas, *prover_id)
                }
            }
            Statement::Update { registered_proof, comm_r_old, comm_r_new, comm_d_new } => {
                update::verify_empty_sector_update_proof(
                    *registered_proof,
                    proof,
                    *comm_r_old,
                    *comm_r_new,
                    *comm_d_new,
                )
            }
        }
        .map_err(|e| Error::Filecoin(format!("{e:#}")))
    }
}
