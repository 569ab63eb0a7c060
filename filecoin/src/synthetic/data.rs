//! The sector's data and its tree D (binary, SHA-256): the one tree of a C1
//! output that cannot be sparse. Its root comm_d fixes the replica id, the
//! replica id fixes the challenges, and only the challenges say which paths
//! are opened, so the whole tree must exist before any path is known; a
//! sparse tree with random siblings would need its root first.
//!
//! So the data is a real sector's worth, cheap to hash: the sector is cut
//! into blocks of `2^BLOCK_HEIGHT` nodes, each position filled with one of a
//! small pool of random blocks (random field elements, as Fr32-padded data
//! is). Each pool block's tree is hashed once, the tree above the blocks in
//! full, and every path runs through real nodes of this one data layer:
//! 2^18 block positions and 16 pool blocks at 32 GiB, about 330,000 SHA-256
//! hashes in all.

use filecoin_hashers::{Domain, Hasher};
use rand::{Rng, RngCore};
use storage_proofs_core::merkle::MerkleProof;
use typenum::U2;

use super::tree::hash_children;

/// log2 of the nodes in one data block (4,096 nodes, 128 KiB).
const BLOCK_HEIGHT: usize = 12;
/// The most distinct blocks the data is made of.
const POOL: usize = 16;

/// A sector's data layer and its full binary tree, stored by block.
pub struct DataTree<H: Hasher> {
    /// log2 of the nodes per block (less than [`BLOCK_HEIGHT`] only when the
    /// sector is smaller than one block).
    block_height: usize,
    /// Each pool block's tree, rows from its nodes up to its root.
    pool: Vec<Vec<Vec<H::Domain>>>,
    /// Which pool block fills each block position of the sector.
    placement: Vec<usize>,
    /// The tree above the blocks, rows from the block roots up to comm_d.
    top: Vec<Vec<H::Domain>>,
}

/// A binary tree's rows over `leaves` (a power of two), leaves first;
/// `first_height` is the height of the leaves' parents in the whole tree.
fn rows<H: Hasher>(leaves: Vec<H::Domain>, first_height: usize) -> Vec<Vec<H::Domain>> {
    let mut rows = vec![leaves];
    while rows.last().is_some_and(|row| row.len() > 1) {
        let height = first_height + rows.len() - 1;
        let row = rows.last().expect("checked above");
        let parents = row
            .chunks(2)
            .map(|pair| hash_children::<H>(pair, height))
            .collect();
        rows.push(parents);
    }
    rows
}

impl<H: Hasher> DataTree<H> {
    /// Random data for a sector of `nodes` nodes (a power of two), drawn from
    /// `rng`: the pool blocks' nodes, then each position's block.
    pub fn random<R: RngCore>(nodes: usize, rng: &mut R) -> Self {
        let block_height = BLOCK_HEIGHT.min(nodes.ilog2() as usize);
        let positions = nodes >> block_height;
        let pool: Vec<_> = (0..POOL.min(positions))
            .map(|_| {
                let leaves = (0..1usize << block_height)
                    .map(|_| H::Domain::random(rng))
                    .collect();
                rows::<H>(leaves, 0)
            })
            .collect();
        let placement: Vec<usize> = (0..positions).map(|_| rng.gen_range(0..pool.len())).collect();
        let roots = placement
            .iter()
            .map(|&block| pool[block].last().expect("a block has a root")[0])
            .collect();
        let top = rows::<H>(roots, block_height);
        DataTree {
            block_height,
            pool,
            placement,
            top,
        }
    }

    /// comm_d.
    pub fn root(&self) -> H::Domain {
        self.top.last().expect("the tree has a root")[0]
    }

    /// The data node at `index`.
    pub fn leaf(&self, index: usize) -> H::Domain {
        let block = &self.pool[self.placement[index >> self.block_height]];
        block[0][index & ((1 << self.block_height) - 1)]
    }

    /// The inclusion proof of node `index` (below the sector's node count),
    /// as storage-proofs' binary tree D proves it.
    pub fn proof(&self, index: usize) -> MerkleProof<H, U2> {
        let block = &self.pool[self.placement[index >> self.block_height]];
        let within = index & ((1 << self.block_height) - 1);
        let step = |row: &Vec<H::Domain>, at: usize| (vec![row[at ^ 1]], at & 1);
        let path = block[..self.block_height]
            .iter()
            .enumerate()
            .map(|(level, row)| step(row, within >> level))
            .chain(
                self.top[..self.top.len() - 1]
                    .iter()
                    .enumerate()
                    .map(|(level, row)| step(row, (index >> self.block_height) >> level)),
            )
            .collect();
        MerkleProof::from_parts(self.leaf(index), self.root(), path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::sha256::Sha256Hasher;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use storage_proofs_core::merkle::MerkleProofTrait;

    #[test]
    fn paths_reach_comm_d_and_a_small_sector_is_one_full_random_tree() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // Four block positions.
        let tree = DataTree::<Sha256Hasher>::random(1 << 14, &mut rng);
        assert_eq!(tree.placement.len(), 4);
        for index in [0, 1, 4095, 4096, 9000, (1 << 14) - 1] {
            let proof = tree.proof(index);
            assert!(proof.validate(index), "node {index}");
            assert!(proof.validate_data(tree.leaf(index)));
            assert_eq!(proof.root(), tree.root());
            assert_eq!(proof.path().len(), 14);
        }
        // 2 KiB: one block of 64 nodes, every node drawn at random and the
        // root its full tree's.
        let small = DataTree::<Sha256Hasher>::random(64, &mut rng);
        let leaves: Vec<_> = (0..64).map(|i| small.leaf(i)).collect();
        assert_eq!(rows::<Sha256Hasher>(leaves, 0).last().unwrap()[0], small.root());
        assert!(small.proof(63).validate(63));
    }
}
