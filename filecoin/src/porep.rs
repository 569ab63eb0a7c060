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
use filecoin_proofs_api::ApiFeature;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

use crate::record::{record, Evaluation, Recorded};
use crate::{witness, Error};

/// How many circuit partitions (one Groth16 proof each) the C1 output's
/// registered proof has: 1 at 2 KiB, 10 at 32 GiB.
pub fn partition_count(c1: &SealCommitPhase1Output) -> usize {
    usize::from(c1.registered_proof.partitions())
}

/// Synthesizes partition `k` of the C1 output's seal proof and records it.
pub fn record_partition(
    c1: &SealCommitPhase1Output,
    k: usize,
    evaluation: Evaluation,
) -> Result<Recorded, Error> {
    let sector_size = u64::from(c1.registered_proof.sector_size());
    with_shape!(sector_size, record_partition_inner, c1, k, evaluation)
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}

/// Refuses, before any partition runs, a non-interactive PoRep C1 output
/// (not supported), one that commit phase 2 would
/// refuse (all-zero commitments or seed, no vanilla proofs) or whose vanilla
/// proofs do not verify: the check commit phase 1 makes on them
/// (`StackedDrg::verify_all_partitions`, with the same public inputs), since
/// commit phase 2 proves without verifying them.
pub fn check(c1: &SealCommitPhase1Output) -> Result<(), Error> {
    let sector_size = u64::from(c1.registered_proof.sector_size());
    with_shape!(sector_size, check_inner, c1)
}

fn check_inner<Tree: 'static + MerkleTreeTrait>(c1: &SealCommitPhase1Output) -> Result<(), Error> {
    if c1.registered_proof.feature_enabled(ApiFeature::NonInteractivePoRep) {
        // seal_commit_phase2 returns a SnarkPack aggregate of the partition
        // proofs for these, which needs the inner-product SRS file and an
        // aggregation step after the last partition.
        return Err(Error::Invalid(format!(
            "{:?} is non-interactive PoRep, whose proof is a SnarkPack aggregate; the daemon does not aggregate",
            c1.registered_proof
        )));
    }
    for (name, value) in [
        ("comm_d", &c1.comm_d),
        ("comm_r", &c1.comm_r),
        ("seed", &c1.seed),
    ] {
        if *value == [0; 32] {
            return Err(Error::Invalid(format!(
                "the C1 output's {name} is all zero"
            )));
        }
    }
    let vanilla = vanilla_proofs::<Tree>(c1)?;
    if vanilla.len() != partition_count(c1) || vanilla.iter().any(|p| p.is_empty()) {
        return Err(Error::Invalid(format!(
            "the C1 output has vanilla proofs for {} partitions ({} empty), its {:?} has {}",
            vanilla.len(),
            vanilla.iter().filter(|p| p.is_empty()).count(),
            c1.registered_proof,
            partition_count(c1)
        )));
    }
    let (public_inputs, pp) = public_inputs_and_params::<Tree>(c1)?;
    let valid = StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
        &pp.vanilla_params,
        &public_inputs,
        &vanilla,
    )
    .map_err(|e| Error::Invalid(format!("the C1 output's vanilla proofs: {e:#}")))?;
    if valid {
        Ok(())
    } else {
        Err(Error::Invalid(
            "the C1 output's vanilla proofs do not verify against its comm_r, comm_d, replica id and seed"
                .into(),
        ))
    }
}

fn vanilla_proofs<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
) -> Result<Vec<Vec<VanillaSealProof<Tree>>>, Error> {
    c1.vanilla_proofs
        .clone()
        .try_into()
        .map_err(|e: anyhow::Error| {
            Error::Invalid(format!(
                "the C1 output's vanilla proofs are not {:?} proofs: {e:#}",
                c1.registered_proof
            ))
        })
}

type Compound<T> = StackedCompound<T, DefaultPieceHasher>;
type Public<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    <DefaultPieceHasher as Hasher>::Domain,
>;
type Params<Tree> =
    compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>;

/// The public inputs and compound parameters filecoin-proofs' commit phases
/// build from a C1 output.
fn public_inputs_and_params<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
) -> Result<(Public<Tree>, Params<Tree>), Error> {
    let config = c1.registered_proof.as_v1_config();
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
        partitions: Some(partition_count(c1)),
        priority: false,
    };
    let pp = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(
        &setup,
    )
    .map_err(filecoin)?;
    Ok((public_inputs, pp))
}

fn record_partition_inner<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
    k: usize,
    evaluation: Evaluation,
) -> Result<Recorded, Error> {
    let partitions = partition_count(c1);
    if k >= partitions {
        return Err(Error::Filecoin(format!(
            "partition {k} of a {partitions}-partition seal proof"
        )));
    }
    let vanilla = vanilla_proofs::<Tree>(c1)?;
    let proofs = vanilla.get(k).ok_or_else(|| {
        Error::Filecoin(format!(
            "the C1 output has no vanilla proofs for partition {k}"
        ))
    })?;
    let (public_inputs, pp) = public_inputs_and_params::<Tree>(c1)?;
    if evaluation == Evaluation::Compiled {
        return witness::record_partition::<Tree>(&public_inputs, proofs);
    }
    let circuit =
        <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::circuit(
            &public_inputs,
            (),
            proofs,
            &pp.vanilla_params,
            Some(k),
        )
        .map_err(filecoin)?;
    record(circuit, evaluation)
}
