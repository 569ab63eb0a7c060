//! PoSt vanilla proofs of sectors that were never sealed, in the form
//! filecoin-proofs-api's `generate_single_vanilla_proof` returns them: the
//! input of `generate_winning_post_with_vanilla`,
//! `generate_window_post_with_vanilla` and
//! `generate_single_window_post_with_vanilla` (a 32 GiB WindowPoSt partition
//! is 2,349 sectors).
//!
//! A PoSt opens each challenged sector's tree R (last layer) at leaves drawn
//! from the randomness, the prover id and the sector id, which no tree
//! depends on: the challenges come first (filecoin-proofs-api's own
//! `generate_fallback_sector_challenges`, as Curio draws them), then each
//! sector's sparse tree R over random replica nodes at the challenged leaves,
//! a random comm_c, and comm_r = H(comm_c, comm_r_last), the sector's public
//! replica commitment.

use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::types::{FallbackPoStSectorProof, VanillaProof};
use filecoin_proofs::{commitment_from_fr, with_shape};
use filecoin_proofs_api::{post, RegisteredPoStProof, SectorId};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_post::fallback::SectorProof;

use super::tree::{levels, Level, SparseTree, TreeProof};
use super::{filecoin, Error};

/// What a PoSt's vanilla proofs depend on, and the seed of everything drawn
/// at random.
#[derive(Clone, Debug)]
pub struct PostInputs {
    /// WinningPoSt or WindowPoSt, and the sector size.
    pub registered_proof: RegisteredPoStProof,
    /// The chain randomness (a field element, as filecoin-proofs requires).
    pub randomness: [u8; 32],
    /// The storage provider's id.
    pub prover_id: [u8; 32],
    /// The challenged sectors, in the order the proofs are listed.
    pub sector_ids: Vec<u64>,
    /// Seeds each sector's replica nodes, comm_c and off-path tree nodes
    /// (one stream per sector id).
    pub rng_seed: u64,
}

/// A sector's id and comm_r: its public replica, as the verifiers take it
/// (`PublicReplicaInfo`).
pub type Replica = (u64, [u8; 32]);

/// Generated PoSt vanilla proofs and the public replicas they prove.
#[derive(Clone, Debug)]
pub struct GeneratedPost {
    /// Per sector, in the inputs' order.
    pub replicas: Vec<Replica>,
    /// Per sector, the bincode-encoded `FallbackPoStSectorProof`
    /// `generate_single_vanilla_proof` returns.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// Generates one vanilla proof per sector of `inputs` (the sectors in
/// parallel), each inclusion proof validated as
/// `generate_single_vanilla_proof` validates its own.
pub fn generate_post(inputs: &PostInputs) -> Result<GeneratedPost, Error> {
    with_shape!(u64::from(inputs.registered_proof.sector_size()), generate, inputs)
}

fn generate<Tree: 'static + MerkleTreeTrait>(inputs: &PostInputs) -> Result<GeneratedPost, Error> {
    let ids: Vec<SectorId> = inputs.sector_ids.iter().map(|&id| SectorId::from(id)).collect();
    let challenges = post::generate_fallback_sector_challenges(
        inputs.registered_proof,
        &inputs.randomness,
        &ids,
        inputs.prover_id,
    )
    .map_err(filecoin)?;
    let nodes = (u64::from(inputs.registered_proof.sector_size()) / 32) as usize;
    let shape = levels::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let sectors = ids
        .par_iter()
        .map(|&id| {
            let leaves = challenges.get(&id).ok_or(Error::Inconsistent("a sector without challenges"))?;
            sector_proof::<Tree>(id, leaves, shape.clone(), inputs.rng_seed)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let (replicas, vanilla_proofs) = sectors.into_iter().unzip();
    Ok(GeneratedPost { replicas, vanilla_proofs })
}

/// Sector `id`'s public replica and encoded vanilla proof at the challenged
/// `leaves` of a tree R of `shape`. Its random values come from its own
/// ChaCha stream (the sector id's) of `rng_seed`: the same whatever the
/// order or thread the sectors are generated in.
fn sector_proof<Tree: 'static + MerkleTreeTrait>(
    id: SectorId,
    leaves: &[u64],
    shape: Vec<Level>,
    rng_seed: u64,
) -> Result<(Replica, Vec<u8>), Error> {
    let mut rng = ChaCha20Rng::seed_from_u64(rng_seed);
    rng.set_stream(u64::from(id));
    let replica =
        leaves.iter().map(|&leaf| (leaf, <Tree::Hasher as Hasher>::Domain::random(&mut rng))).collect();
    let tree_r = SparseTree::<Tree::Hasher>::build(shape, replica, &mut rng);
    let comm_c = <Tree::Hasher as Hasher>::Domain::random(&mut rng);
    let comm_r_last = tree_r.root();
    let inclusion_proofs = leaves
        .iter()
        .map(|&leaf| {
            tree_r
                .proof(leaf)
                .filter(|proof: &TreeProof<Tree>| {
                    proof.validate(leaf as usize) && proof.root() == comm_r_last
                })
                .ok_or(Error::Inconsistent("a tree R path does not verify"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
    let proof = FallbackPoStSectorProof::<Tree> {
        sector_id: id,
        comm_r,
        vanilla_proof: VanillaProof::<Tree> {
            sectors: vec![SectorProof { inclusion_proofs, comm_c, comm_r_last }],
        },
    };
    let encoded =
        bincode::serialize(&proof).map_err(|e| Error::Filecoin(format!("encoding a vanilla proof: {e}")))?;
    Ok(((u64::from(id), commitment_from_fr(comm_r.into())), encoded))
}
