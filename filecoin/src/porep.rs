//! PoRep commit phase 2 from a commit-phase-1 output ("C1"): each partition's
//! circuit built exactly as filecoin-proofs' `seal_commit_phase2` builds it, run
//! through the recording constraint system.

use std::convert::TryInto;

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::constants::{DefaultPieceDomain, DefaultPieceHasher};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::types::VanillaSealProof;
use filecoin_proofs::with_shape;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

use crate::record::{record_witness, Witness};
use crate::Error;

/// How many circuit partitions (one Groth16 proof each) the C1 output's
/// registered proof has: 1 at 2 KiB, 10 at 32 GiB.
pub fn partition_count(c1: &SealCommitPhase1Output) -> usize {
    usize::from(c1.registered_proof.partitions())
}

/// Synthesizes partition `k` of the C1 output's seal proof and records it.
pub fn record_partition(c1: &SealCommitPhase1Output, k: usize) -> Result<Witness, Error> {
    let sector_size = u64::from(c1.registered_proof.sector_size());
    with_shape!(sector_size, record_partition_inner, c1, k)
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}

fn record_partition_inner<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
    k: usize,
) -> Result<Witness, Error> {
    let config = c1.registered_proof.as_v1_config();
    let partitions = partition_count(c1);
    if k >= partitions {
        return Err(Error::Filecoin(format!(
            "partition {k} of a {partitions}-partition seal proof"
        )));
    }
    let vanilla: Vec<Vec<VanillaSealProof<Tree>>> =
        c1.vanilla_proofs.clone().try_into().map_err(filecoin)?;
    let proofs = vanilla.get(k).ok_or_else(|| {
        Error::Filecoin(format!(
            "the C1 output has no vanilla proofs for partition {k}"
        ))
    })?;
    let comm_r = <Tree::Hasher as Hasher>::Domain::try_from_bytes(&c1.comm_r).map_err(filecoin)?;
    let comm_d = DefaultPieceDomain::try_from_bytes(&c1.comm_d).map_err(filecoin)?;
    // As filecoin-proofs-api converts it: through the field element.
    let replica_id: blstrs::Scalar = c1.replica_id.into();
    let public_inputs = stacked::PublicInputs {
        replica_id: replica_id.into(),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(&config).map_err(filecoin)?,
        partitions: Some(partitions),
        priority: false,
    };
    type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
    let pp = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(
        &setup,
    )
    .map_err(filecoin)?;
    let circuit =
        <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::circuit(
            &public_inputs,
            Default::default(),
            proofs,
            &pp.vanilla_params,
            Some(k),
        )
        .map_err(filecoin)?;
    record_witness(circuit)
}
