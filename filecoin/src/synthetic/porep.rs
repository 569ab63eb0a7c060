//! A PoRep commit-phase-1 output generated without sealing, in the form
//! filecoin-proofs-api's `seal_commit_phase1` returns it.
//!
//! Order, as the dependencies force it: the data and comm_d; the replica id
//! from prover id, sector id, ticket, comm_d and porep id
//! (`generate_replica_id`); each partition's challenges from the replica id
//! and seed (`PublicInputs::challenges`, what the verifier derives); SDR
//! labels of the challenged nodes over random parent labels; tree C over
//! the columns' hashes and tree R over the encoded challenged nodes (both
//! sparse); comm_r = H(comm_c, comm_r_last); then one vanilla proof per
//! challenge, built from storage-proofs' own proof types.

use std::any::Any;
use std::collections::BTreeSet;

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::constants::{
    DefaultPieceHasher, SECTOR_SIZE_2_KIB, SECTOR_SIZE_32_GIB, SECTOR_SIZE_512_MIB, SECTOR_SIZE_64_GIB,
    SECTOR_SIZE_8_MIB,
};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::types::VanillaSealProof;
use filecoin_proofs::{commitment_from_fr, with_shape};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof as ApiVanillaProofs};
use filecoin_proofs_api::{ApiFeature, RegisteredSealProof};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{
    generate_replica_id, ColumnProof, EncodingProof, LabelingProof, PublicInputs, PublicParams,
    ReplicaColumnProof, StackedCompound, StackedDrg,
};

use super::blocks::BlockTree;
use super::columns::Columns;
use super::tree::{binary_levels, levels, SparseTree, TreeProof};
use super::{filecoin, Error};
use crate::request::ProofRequest;

/// What a sector's C1 output depends on besides its data: the arguments
/// `seal_pre_commit_phase1` and `seal_commit_phase1` take, and the seed of
/// everything drawn at random.
#[derive(Clone, Debug)]
pub struct SealInputs {
    /// The seal proof: its sector size, porep id and partitions.
    pub registered_proof: RegisteredSealProof,
    /// The storage provider's id (in the replica id).
    pub prover_id: [u8; 32],
    /// The sector's number (in the replica id).
    pub sector_id: u64,
    /// The chain randomness sealing started from (in the replica id).
    pub ticket: [u8; 32],
    /// The interactive challenges' randomness.
    pub seed: [u8; 32],
    /// Seeds the data, the parents' labels and the trees' off-path nodes:
    /// equal inputs give byte-equal outputs.
    pub rng_seed: u64,
}

/// Generates the C1 output of a sector sealed with `inputs`, checked as
/// filecoin-proofs checks its own before returning it.
pub fn generate_c1(inputs: &SealInputs) -> Result<SealCommitPhase1Output, Error> {
    let proof = inputs.registered_proof;
    let unsupported = |reason| Err(Error::Unsupported { proof: format!("{proof:?}"), reason });
    if proof.major_version() != 1 {
        return unsupported("only V1 seal proofs are known");
    }
    if proof.feature_enabled(ApiFeature::SyntheticPoRep)
        || proof.feature_enabled(ApiFeature::NonInteractivePoRep)
    {
        // Their challenges hash comm_r, which depends on the trees built
        // over the challenged paths.
        return unsupported("its challenges depend on comm_r; only interactive PoRep is generated");
    }
    let c1 = with_shape!(u64::from(proof.sector_size()), generate, inputs)?;
    let request = crate::porep::PorepRequest { c1, prover_id: inputs.prover_id, sector_id: inputs.sector_id };
    request.check().map_err(Error::SelfCheck)?;
    Ok(request.c1)
}

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type PieceDomain = <DefaultPieceHasher as Hasher>::Domain;

/// The parts of the sector every challenge's proof draws from.
struct Sector<Tree: 'static + MerkleTreeTrait> {
    /// SDR's graph and layer count.
    params: PublicParams<Tree>,
    /// The data and tree D.
    data: BlockTree<DefaultPieceHasher>,
    /// The labels of the challenged nodes and their parents.
    columns: Columns<Tree::Hasher>,
    /// Tree C over the columns' hashes.
    tree_c: SparseTree<Tree::Hasher>,
    /// Tree R's last layer over the replica's challenged nodes.
    tree_r: SparseTree<Tree::Hasher>,
}

/// log2 of the nodes in one block of the data (4,096 nodes, 128 KiB).
const DATA_BLOCK_ROWS: usize = 12;
/// The most distinct blocks the data is made of.
const DATA_POOL: usize = 16;

/// A sector's data and its tree D, drawn from `rng`: blocks of 4,096
/// random field elements (as Fr32-padded data is), each block position
/// filled with one of 16 (the whole sector one block below 128 KiB).
fn random_data<R: RngCore>(nodes: usize, rng: &mut R) -> BlockTree<DefaultPieceHasher> {
    let rows = DATA_BLOCK_ROWS.min(nodes.ilog2() as usize);
    let segments = nodes >> rows;
    let blocks: Vec<Vec<PieceDomain>> = (0..DATA_POOL.min(segments))
        .map(|_| (0..1 << rows).map(|_| PieceDomain::random(rng)).collect())
        .collect();
    let placement = (0..segments).map(|_| rng.gen_range(0..blocks.len())).collect();
    BlockTree::new(binary_levels(nodes), rows, rows, blocks, placement)
}

fn generate<Tree: 'static + MerkleTreeTrait>(inputs: &SealInputs) -> Result<SealCommitPhase1Output, Error> {
    let config = inputs.registered_proof.as_v1_config();
    let partitions = usize::from(config.partitions);
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(&config).map_err(filecoin)?,
        partitions: Some(partitions),
        priority: false,
    };
    let params = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&setup)
    .map_err(filecoin)?
    .vanilla_params;
    let nodes = params.graph.size();
    let mut rng = ChaCha20Rng::seed_from_u64(inputs.rng_seed);

    let data = random_data(nodes, &mut rng);
    let comm_d = data.root();
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &inputs.prover_id,
        inputs.sector_id,
        &inputs.ticket,
        comm_d,
        &config.porep_id,
    );
    let public = PublicInputs::<TreeDomain<Tree>, PieceDomain> {
        replica_id,
        seed: Some(inputs.seed),
        tau: None,
        k: None,
    };
    let challenges: Vec<Vec<usize>> =
        (0..partitions).map(|k| public.challenges(&params.challenges, nodes, Some(k))).collect();
    let challenged: BTreeSet<u32> = challenges.iter().flatten().map(|&c| c as u32).collect();

    let layers = params.num_layers;
    let columns = Columns::label(&params.graph, &replica_id, layers, &challenged, &mut rng)?;
    let shape = levels::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let tree_c = SparseTree::build(shape.clone(), columns.hashes()?, &mut rng);
    // The replica: each data node plus its last-layer label, as SDR encodes.
    let replica = challenged
        .iter()
        .map(|&node| {
            let key: Fr = columns
                .rows(node)
                .ok_or(Error::Inconsistent("a challenged node without a column"))?[layers - 1]
                .into();
            let value: Fr = data.node(0, node as usize).into();
            Ok((u64::from(node), (key + value).into()))
        })
        .collect::<Result<_, Error>>()?;
    let tree_r = SparseTree::build(shape, replica, &mut rng);
    let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&tree_c.root(), &tree_r.root());

    let sector = Sector { params, data, columns, tree_c, tree_r };
    let vanilla = challenges
        .iter()
        .map(|partition| partition.iter().map(|&c| sector.proof(c)).collect())
        .collect::<Result<Vec<Vec<_>>, Error>>()?;
    let replica_id: Fr = replica_id.into();
    Ok(SealCommitPhase1Output {
        registered_proof: inputs.registered_proof,
        vanilla_proofs: api_proofs::<Tree>(u64::from(inputs.registered_proof.sector_size()), vanilla)?,
        comm_r: commitment_from_fr(comm_r.into()),
        comm_d: commitment_from_fr(comm_d.into()),
        replica_id: replica_id.into(),
        seed: inputs.seed,
        ticket: inputs.ticket,
    })
}

impl<Tree: 'static + MerkleTreeTrait> Sector<Tree> {
    /// Node `node`'s column and its path in tree C.
    fn column(&self, node: u32) -> Result<ColumnProof<TreeProof<Tree>>, Error> {
        let rows = self.columns.rows(node).ok_or(Error::Inconsistent("an opened node without a column"))?;
        let path = self
            .tree_c
            .proof(u64::from(node))
            .ok_or(Error::Inconsistent("a column without a path in tree C"))?;
        Ok(ColumnProof::new(node, rows.to_vec(), path))
    }

    /// The vanilla proof of challenge `c`, as `StackedDrg::prove_layers`
    /// builds it from a sealed sector's trees and labels.
    fn proof(&self, c: usize) -> Result<VanillaSealProof<Tree>, Error> {
        let graph = &self.params.graph;
        let layers = self.params.num_layers;
        let base = graph.base_graph().degree();
        let mut parents = vec![0u32; graph.degree()];
        graph.parents(c, &mut parents).map_err(filecoin)?;
        let columns = |nodes: &[u32]| nodes.iter().map(|&p| self.column(p)).collect::<Result<Vec<_>, _>>();
        let labeling_proofs = (1..=layers)
            .map(|layer| {
                let labels = self.columns.parent_labels(&parents, base, layer)?;
                Ok(LabelingProof::new(layer as u32, c as u64, labels))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let encoding_proof =
            EncodingProof::new(layers as u32, c as u64, self.columns.parent_labels(&parents, base, layers)?);
        // The path checks `prove_layers` makes as it opens trees D and R (the
        // vanilla verification only compares their leaves, indices and roots;
        // the circuit hashes them).
        let comm_d_proofs = self.data.proof(c);
        let comm_r_last_proof =
            self.tree_r.proof(c as u64).ok_or(Error::Inconsistent("a challenge without a path in tree R"))?;
        if !comm_d_proofs.validate(c) || !comm_r_last_proof.validate(c) {
            return Err(Error::Inconsistent("a tree D or tree R path does not verify"));
        }
        Ok(VanillaSealProof::<Tree> {
            comm_d_proofs,
            comm_r_last_proof,
            replica_column_proofs: ReplicaColumnProof {
                c_x: self.column(c as u32)?,
                drg_parents: columns(&parents[..base])?,
                exp_parents: columns(&parents[base..])?,
            },
            labeling_proofs,
            encoding_proof,
        })
    }
}

/// The vanilla proofs as filecoin-proofs-api's enum holds them: the variant
/// named for the sector size. (Its own conversion is private; the shape
/// types of several sizes are one type, so the size picks the variant.)
fn api_proofs<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    proofs: Vec<Vec<VanillaSealProof<Tree>>>,
) -> Result<ApiVanillaProofs, Error> {
    fn take<T: 'static>(proofs: Box<dyn Any>) -> Result<T, Error> {
        proofs
            .downcast::<T>()
            .map(|p| *p)
            .map_err(|_| Error::Inconsistent("the sector size's tree shape is not its proofs'"))
    }
    let proofs: Box<dyn Any> = Box::new(proofs);
    Ok(match sector_size {
        SECTOR_SIZE_2_KIB => ApiVanillaProofs::StackedDrg2KiBV1(take(proofs)?),
        SECTOR_SIZE_8_MIB => ApiVanillaProofs::StackedDrg8MiBV1(take(proofs)?),
        SECTOR_SIZE_512_MIB => ApiVanillaProofs::StackedDrg512MiBV1(take(proofs)?),
        SECTOR_SIZE_32_GIB => ApiVanillaProofs::StackedDrg32GiBV1(take(proofs)?),
        SECTOR_SIZE_64_GIB => ApiVanillaProofs::StackedDrg64GiBV1(take(proofs)?),
        _ => return Err(Error::Inconsistent("a sector size without a seal proof")),
    })
}
