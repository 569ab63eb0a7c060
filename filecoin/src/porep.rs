//! PoRep commit phase 2 from a commit-phase-1 output ("C1"): the request
//! refused before any partition runs when commit phase 2 would fail or prove
//! something `verify_seal` rejects, and each partition's circuit built exactly
//! as filecoin-proofs' `seal_commit_phase2` builds it, run through the
//! recording constraint system.

use std::convert::TryInto;

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::constants::{DefaultPieceDomain, DefaultPieceHasher, DefaultTreeHasher};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::types::VanillaSealProof;
use filecoin_proofs::with_shape;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::ApiFeature;
use serde::Deserialize;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, generate_replica_id, StackedCompound, StackedDrg};

use crate::kinds::RegisteredProof;
use crate::record::{record, Evaluation, Recorded};
use crate::{vanilla, witness, Error, ProofRequest};

/// A PoRep commit phase 2 job, holding exactly the arguments of
/// filecoin-proofs-api's `seal_commit_phase2`.
#[derive(Clone, Debug)]
pub struct PorepRequest {
    /// The commit-phase-1 output: registered proof, commitments, ticket,
    /// seed, replica id and the vanilla proofs each partition proves.
    pub c1: SealCommitPhase1Output,
    /// The miner's prover id: with the sector id it fixes the replica id
    /// the proof binds.
    pub prover_id: [u8; 32],
    /// The sector number.
    pub sector_id: u64,
}

impl ProofRequest for PorepRequest {
    fn registered_proof(&self) -> RegisteredProof {
        RegisteredProof::Seal(self.c1.registered_proof)
    }

    /// Refuses a non-interactive PoRep C1 output (not supported), one that
    /// commit phase 2 would refuse (all-zero commitments or seed, no vanilla
    /// proofs), commitments or a replica id that are not field elements,
    /// vanilla proofs of another shape than the circuit's (path lengths and
    /// positions, parent and row counts) or that
    /// do not verify: the check commit phase 1 makes on them
    /// (`StackedDrg::verify_all_partitions`, with the same public inputs),
    /// since commit phase 2 proves without verifying them.
    /// Then one sealed for another prover or sector: its replica id is not
    /// the one filecoin-proofs derives from them, and its proof would never
    /// verify for them.
    fn check(&self) -> Result<(), Error> {
        with_shape!(self.sector_size(), check_inner, &self.c1)?;
        if !self.replica_id_matches() {
            return Err(Error::Invalid(format!(
                "the C1 output was not sealed for prover_id {} and sector_id {}: its replica id differs",
                hex::encode(self.prover_id),
                self.sector_id
            )));
        }
        Ok(())
    }

    /// 1 at 2 KiB, 10 at 32 GiB: the registered proof's.
    fn partition_count(&self) -> Result<usize, Error> {
        Ok(partitions(&self.c1))
    }

    fn record_partition(&self, k: usize, evaluation: Evaluation) -> Result<Recorded, Error> {
        with_shape!(self.sector_size(), record_partition_inner, &self.c1, k, evaluation)
    }
}

impl PorepRequest {
    /// Whether the C1's replica id is the one filecoin-proofs derives from
    /// this prover and sector, its ticket, comm_d and the proof's porep id.
    fn replica_id_matches(&self) -> bool {
        let c1 = &self.c1;
        let porep_id = c1.registered_proof.as_v1_config().porep_id;
        let expected = generate_replica_id::<DefaultTreeHasher, _>(
            &self.prover_id,
            self.sector_id,
            &c1.ticket,
            c1.comm_d,
            &porep_id,
        );
        expected == c1.replica_id
    }
}

/// How many circuit partitions the C1 output's registered proof has.
fn partitions(c1: &SealCommitPhase1Output) -> usize {
    usize::from(c1.registered_proof.partitions())
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
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
    for (name, value) in [("comm_d", &c1.comm_d), ("comm_r", &c1.comm_r), ("seed", &c1.seed)] {
        if *value == [0; 32] {
            return Err(Error::Invalid(format!("the C1 output's {name} is all zero")));
        }
    }
    // The seed and the ticket are hashed; these three become field elements.
    for (name, value) in [
        ("comm_d", c1.comm_d.as_slice()),
        ("comm_r", c1.comm_r.as_slice()),
        ("replica_id", c1.replica_id.as_ref()),
    ] {
        vanilla::field_element(format_args!("the C1 output's {name}"), value)?;
    }
    let vanilla = vanilla_proofs::<Tree>(c1)?;
    if vanilla.len() != partitions(c1) || vanilla.iter().any(|p| p.is_empty()) {
        return Err(Error::Invalid(format!(
            "the C1 output has vanilla proofs for {} partitions ({} empty), its {:?} has {}",
            vanilla.len(),
            vanilla.iter().filter(|p| p.is_empty()).count(),
            c1.registered_proof,
            partitions(c1)
        )));
    }
    let (public_inputs, pp) = public_inputs_and_params::<Tree>(c1)?;
    for (k, partition) in vanilla.iter().enumerate() {
        check_shape(&pp.vanilla_params, &public_inputs, k, partition)?;
    }
    let valid = vanilla::reference("the C1 output's vanilla proofs", || {
        StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
            &pp.vanilla_params,
            &public_inputs,
            &vanilla,
        )
    })?
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

/// A column opening as it travels (the C1 output's JSON; here bincode): the
/// reference keeps its fields to itself, so the rows and the path are read
/// back from the serialized form to check their shape.
#[derive(Deserialize)]
struct ColumnOpening<P> {
    column: ColumnRows,
    inclusion_proof: P,
}

/// A column: the node's label in every layer.
#[derive(Deserialize)]
struct ColumnRows {
    /// The column's node; read past (the path's position says it).
    _index: u32,
    rows: Vec<[u8; 32]>,
}

/// `value` read back through its serialized form as `T`, a view of the
/// fields the reference keeps to itself.
fn view<T: serde::de::DeserializeOwned>(what: &str, value: &impl serde::Serialize) -> Result<T, Error> {
    bincode::serialize(value)
        .and_then(|bytes| bincode::deserialize(&bytes))
        .map_err(|e| Error::Invalid(format!("{what}: {e}")))
}

/// Refuses partition `k`'s vanilla proofs unless each has the circuit's
/// shape, which `verify_all_partitions` does not check in full (it zips
/// the parent openings with the graph's parents, and reads a parent column
/// only through its hash) and the circuit assumes (it slices, indexes and
/// asserts on it): one proof per challenge; the data, replica and column
/// paths of the trees' shape; the challenged column and every parent's
/// with one row per layer, every row a field element; the graph's count of
/// DRG and expander parents.
fn check_shape<Tree: 'static + MerkleTreeTrait>(
    params: &stacked::PublicParams<Tree>,
    public_inputs: &Public<Tree>,
    k: usize,
    proofs: &[VanillaSealProof<Tree>],
) -> Result<(), Error> {
    let nodes = params.graph.size();
    let layers = params.num_layers;
    let challenges = public_inputs.challenges(&params.challenges, nodes, Some(k));
    if proofs.len() != challenges.len() {
        return Err(Error::Invalid(format!(
            "partition {k} has {} challenge proofs; it has {} challenges",
            proofs.len(),
            challenges.len()
        )));
    }
    let parents =
        [("DRG", params.graph.base_graph().degree()), ("expander", params.graph.expansion_degree())];
    for (i, proof) in proofs.iter().enumerate() {
        let what = format!("partition {k}, challenge {i}");
        vanilla::merkle_proof(format_args!("{what}: the comm_d path"), &proof.comm_d_proofs, nodes)?;
        vanilla::merkle_proof(format_args!("{what}: the comm_r_last path"), &proof.comm_r_last_proof, nodes)?;
        let columns = &proof.replica_column_proofs;
        for ((kind, degree), openings) in parents.iter().zip([&columns.drg_parents, &columns.exp_parents]) {
            if openings.len() != *degree {
                return Err(Error::Invalid(format!(
                    "{what}: {} {kind} parent columns; the graph has {degree} {kind} parents",
                    openings.len()
                )));
            }
        }
        let named = |kind: &'static str| move |(j, opening)| (format!("{kind} parent {j}'s column"), opening);
        let all = std::iter::once(("the challenged column".to_string(), &columns.c_x))
            .chain(columns.drg_parents.iter().enumerate().map(named("DRG")))
            .chain(columns.exp_parents.iter().enumerate().map(named("expander")));
        for (name, opening) in all {
            let column = format!("{what}: {name}");
            let opening: ColumnOpening<Tree::Proof> = view(&column, opening)?;
            if opening.column.rows.len() != layers {
                return Err(Error::Invalid(format!(
                    "{column} has {} rows; the graph has {layers} layers",
                    opening.column.rows.len()
                )));
            }
            for (layer, row) in opening.column.rows.iter().enumerate() {
                vanilla::field_element(format_args!("{column}, layer {}", layer + 1), row)?;
            }
            vanilla::merkle_proof(format_args!("{column}'s path"), &opening.inclusion_proof, nodes)?;
        }
    }
    Ok(())
}

fn vanilla_proofs<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
) -> Result<Vec<Vec<VanillaSealProof<Tree>>>, Error> {
    c1.vanilla_proofs.clone().try_into().map_err(|e: anyhow::Error| {
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
type Params<Tree> = compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>;

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
        partitions: Some(partitions(c1)),
        priority: false,
    };
    let pp = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(&setup)
        .map_err(filecoin)?;
    Ok((public_inputs, pp))
}

fn record_partition_inner<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
    k: usize,
    evaluation: Evaluation,
) -> Result<Recorded, Error> {
    let count = partitions(c1);
    if k >= count {
        return Err(Error::Filecoin(format!("partition {k} of a {count}-partition seal proof")));
    }
    let vanilla = vanilla_proofs::<Tree>(c1)?;
    let proofs = vanilla
        .get(k)
        .ok_or_else(|| Error::Filecoin(format!("the C1 output has no vanilla proofs for partition {k}")))?;
    let (public_inputs, pp) = public_inputs_and_params::<Tree>(c1)?;
    if evaluation == Evaluation::Compiled {
        return witness::record_partition::<Tree>(&public_inputs, proofs);
    }
    let circuit = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::circuit(
        &public_inputs,
        (),
        proofs,
        &pp.vanilla_params,
        Some(k),
    )
    .map_err(filecoin)?;
    record(circuit, evaluation)
}
