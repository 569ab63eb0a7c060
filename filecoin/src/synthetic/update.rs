//! SnapDeals (empty-sector update) vanilla proofs of a sector that was never
//! sealed nor updated, in the form filecoin-proofs-api's
//! `generate_partition_proofs` returns them: the input of
//! `generate_empty_sector_update_proof_with_vanilla` (16 partitions of 86
//! challenges at 32 GiB).
//!
//! The challenges hash comm_r_new = H(comm_c, root of the new replica's tree
//! R), and each challenged new replica node must be the old one plus the new
//! data times rho (a hash of phi = H(comm_d_new, comm_r_old) and the node
//! index's h high bits): the old replica, the new data and the new replica
//! must all exist whole before a challenge is known. They are block trees
//! (`blocks`): the old replica and the new data one random block of 64 nodes
//! (8 below 32 KiB) repeated over the sector, the new replica the old block
//! plus the data block times each rho bucket's rho, one pool entry per
//! bucket. phi, rho and the challenges are storage-proofs-update's own
//! functions; the proofs are its `PartitionProof` and `ChallengeProof`,
//! verified by its `EmptySectorUpdate::verify` before they are returned.

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{commitment_from_fr, with_shape, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredUpdateProof;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{TreeDDomain, TreeDHasher, TreeRDomain, TreeRHasher};
use storage_proofs_update::{
    phi, rho, ChallengeProof, Challenges, EmptySectorUpdate, PartitionProof, PublicInputs, PublicParams,
};

use super::blocks::BlockTree;
use super::tree::{binary_levels, levels};
use super::{filecoin, Error};

/// What an update's vanilla proofs depend on.
#[derive(Clone, Debug)]
pub struct UpdateInputs {
    /// The update proof: its sector size and partitions.
    pub registered_proof: RegisteredUpdateProof,
    /// Seeds the old replica, the new data and comm_c.
    pub rng_seed: u64,
}

/// Generated update vanilla proofs and the commitments they prove.
#[derive(Clone, Debug)]
pub struct GeneratedUpdate {
    /// The sector key's comm_r: H(comm_c, old replica's tree R root).
    pub comm_r_old: [u8; 32],
    /// The updated replica's comm_r: H(comm_c, new replica's tree R root).
    pub comm_r_new: [u8; 32],
    /// The new data's tree D root.
    pub comm_d_new: [u8; 32],
    /// One bincode-encoded `PartitionProof` per partition, in order.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// The most nodes in one repeated block (a power of 8, so it is a whole
/// subtree of tree R as of tree D).
const BLOCK: usize = 64;

/// Generates every partition's vanilla proof of an update of `inputs`'
/// sector size, each verified by `EmptySectorUpdate::verify`.
pub fn generate_update(inputs: &UpdateInputs) -> Result<GeneratedUpdate, Error> {
    if inputs.registered_proof.major_version() != 1 {
        return Err(Error::Unsupported {
            proof: format!("{:?}", inputs.registered_proof),
            reason: "only V1 update proofs are known",
        });
    }
    with_shape!(u64::from(inputs.registered_proof.sector_size()), generate, inputs)
}

fn generate<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    inputs: &UpdateInputs,
) -> Result<GeneratedUpdate, Error> {
    let config = SectorUpdateConfig::from_porep_config(&inputs.registered_proof.as_v1_config());
    let params = PublicParams::from_sector_size(u64::from(config.sector_size));
    let nodes = params.sector_nodes;
    let h = config.h;
    // Nodes sharing one rho: the h high bits of the index.
    let bucket = nodes >> h;
    let r_levels = levels::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    // Leaves under one node, per row of tree R (row 0: the leaves).
    let covers: Vec<usize> = std::iter::once(1)
        .chain(r_levels.iter().scan(1, |cover, level| {
            *cover *= level.arity;
            Some(*cover)
        }))
        .collect();
    let top_row_within =
        |leaves: usize| covers.iter().rposition(|&cover| cover <= leaves).expect("row 0 covers one leaf");
    // The new replica's segments: the largest subtrees of tree R inside a
    // bucket; the blocks: at most BLOCK nodes.
    let segment_rows = top_row_within(bucket);
    let block_rows = top_row_within(BLOCK.min(bucket));
    let (block, segment) = (covers[block_rows], covers[segment_rows]);
    let whole = r_levels.len();

    let mut rng = ChaCha20Rng::seed_from_u64(inputs.rng_seed);
    let old_block: Vec<TreeRDomain> = (0..block).map(|_| TreeRDomain::random(&mut rng)).collect();
    let data_block: Vec<TreeDDomain> = (0..block).map(|_| TreeDDomain::random(&mut rng)).collect();
    let comm_c = TreeRDomain::random(&mut rng);

    let tree_r_old =
        BlockTree::<TreeRHasher>::new(r_levels.clone(), block_rows, whole, vec![old_block.clone()], vec![0]);
    let d_levels = binary_levels(nodes);
    let d_rows = block.ilog2() as usize;
    let tree_d_new = BlockTree::<TreeDHasher>::new(
        d_levels.clone(),
        d_rows,
        d_levels.len(),
        vec![data_block.clone()],
        vec![0],
    );
    let comm_r_old = <TreeRHasher as Hasher>::Function::hash2(&comm_c, &tree_r_old.root());
    let comm_d_new = tree_d_new.root();
    let phi = phi(&comm_d_new, &comm_r_old);
    // The new replica: per bucket, old + data · rho(bucket).
    let new_blocks: Vec<Vec<TreeRDomain>> = (0..nodes / bucket)
        .map(|high| {
            let rho = rho(&phi, high as u32);
            old_block
                .iter()
                .zip(&data_block)
                .map(|(old, data)| {
                    let (old, data): (Fr, Fr) = ((*old).into(), (*data).into());
                    (old + data * rho).into()
                })
                .collect()
        })
        .collect();
    let placement = (0..nodes / segment).map(|s| s * segment / bucket).collect();
    let tree_r_new = BlockTree::<TreeRHasher>::new(r_levels, block_rows, segment_rows, new_blocks, placement);
    let comm_r_new = <TreeRHasher as Hasher>::Function::hash2(&comm_c, &tree_r_new.root());

    // The apex leafs: partition k's share of tree D's row of
    // partitions · apex_leaf_count nodes.
    let apex_row = d_levels.len() - (params.partition_count * params.apex_leaf_count).ilog2() as usize;
    let vanilla_proofs = (0..params.partition_count)
        .map(|k| {
            let apex_leafs = (k * params.apex_leaf_count..(k + 1) * params.apex_leaf_count)
                .map(|i| tree_d_new.node(apex_row, i))
                .collect();
            let challenge_proofs = Challenges::new(nodes, comm_r_new, k)
                .map(|c| ChallengeProof::<Tree> {
                    proof_r_old: tree_r_old.proof(c as usize),
                    proof_d_new: tree_d_new.proof(c as usize),
                    proof_r_new: tree_r_new.proof(c as usize),
                })
                .collect();
            let proof = PartitionProof::<Tree> { comm_c, apex_leafs, challenge_proofs };
            let public = PublicInputs { k, comm_r_old, comm_d_new, comm_r_new, h };
            if !EmptySectorUpdate::<Tree>::verify(&params, &public, &proof).map_err(filecoin)? {
                return Err(Error::Inconsistent("a generated update partition does not verify"));
            }
            bincode::serialize(&proof).map_err(|e| Error::Filecoin(format!("encoding a vanilla proof: {e}")))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(GeneratedUpdate {
        comm_r_old: commitment_from_fr(comm_r_old.into()),
        comm_r_new: commitment_from_fr(comm_r_new.into()),
        comm_d_new: commitment_from_fr(comm_d_new.into()),
        vanilla_proofs,
    })
}
