//! Whole trees over a sector's worth of leaves, cheap to hash: trees whose
//! root must exist before any path is known. PoRep's tree D is one (its root
//! comm_d fixes the replica id, which fixes the challenges, which say which
//! paths are opened), and so are SnapDeals' three trees (the challenges hash
//! comm_r_new, the root of the new replica's tree R). A sparse tree with
//! random siblings would need its root first.
//!
//! So the leaves are a real layer with structure: the sector is cut into
//! segments, each filled with one entry of a small pool, and each pool entry
//! is one block of leaves repeated to fill the segment. A pool entry's tree
//! is hashed once (its block's rows, then one node per level up to the
//! segment's root, its children being equal), the rows above the segments
//! in full. Every path runs through real nodes of the one layer.
//!
//! - PoRep's data at 32 GiB: blocks of 4,096 random nodes, 16 of them, one
//!   per segment of 4,096 nodes (2^18 segments).
//! - SnapDeals at 32 GiB: the old replica and the new data one block of 64
//!   random nodes repeated over the sector; the new replica one entry per
//!   rho bucket (old + data · rho), its segments of 2^18 nodes.

use filecoin_hashers::{Hasher, PoseidonArity};
use storage_proofs_core::merkle::MerkleProof;

use super::tree::{hash_children, Level};

/// A whole tree whose leaves repeat by block and segment.
pub struct BlockTree<H: Hasher> {
    /// The levels above the leaves, leaves' parents first.
    levels: Vec<Level>,
    /// Per row (0 = leaves): how many leaves one node covers.
    covers: Vec<usize>,
    /// Rows inside a block: a block holds `covers[block_rows]` leaves.
    block_rows: usize,
    /// Rows inside a segment (at least `block_rows`).
    segment_rows: usize,
    /// Per pool entry, its rows up to its segment's root: the block's rows,
    /// then one node per row.
    pool: Vec<Vec<Vec<H::Domain>>>,
    /// Which pool entry fills each segment.
    placement: Vec<usize>,
    /// The rows from the segments' roots up to the root.
    upper: Vec<Vec<H::Domain>>,
}

impl<H: Hasher> BlockTree<H> {
    /// The tree of `levels` whose segment `s` (`covers[segment_rows]` leaves)
    /// repeats block `blocks[placement[s]]` (`covers[block_rows]` leaves).
    pub fn new(
        levels: Vec<Level>,
        block_rows: usize,
        segment_rows: usize,
        blocks: Vec<Vec<H::Domain>>,
        placement: Vec<usize>,
    ) -> Self {
        let mut covers = vec![1usize];
        for level in &levels {
            covers.push(covers.last().expect("starts with 1") * level.arity);
        }
        let pool = blocks
            .into_iter()
            .map(|leaves| {
                assert_eq!(leaves.len(), covers[block_rows], "a block's leaves");
                let mut rows = vec![leaves];
                for level in &levels[..segment_rows] {
                    let row = rows.last().expect("the leaves' row");
                    let parents = if row.len() >= level.arity {
                        row.chunks(level.arity)
                            .map(|children| hash_children::<H>(children, level.height))
                            .collect()
                    } else {
                        // Above the block the children are copies of one node.
                        vec![hash_children::<H>(&vec![row[0]; level.arity], level.height)]
                    };
                    rows.push(parents);
                }
                rows
            })
            .collect::<Vec<_>>();
        let roots = placement.iter().map(|&entry| pool[entry][segment_rows][0]).collect();
        let mut upper: Vec<Vec<H::Domain>> = vec![roots];
        for level in &levels[segment_rows..] {
            let row = upper.last().expect("the segments' row");
            let parents =
                row.chunks(level.arity).map(|children| hash_children::<H>(children, level.height)).collect();
            upper.push(parents);
        }
        assert_eq!(upper.last().map(Vec::len), Some(1), "the segments fill the tree");
        BlockTree { levels, covers, block_rows, segment_rows, pool, placement, upper }
    }

    /// The root.
    pub fn root(&self) -> H::Domain {
        self.upper.last().expect("built with a root")[0]
    }

    /// Node `index` of row `row` (0: the leaves).
    pub fn node(&self, row: usize, index: usize) -> H::Domain {
        if row > self.segment_rows {
            return self.upper[row - self.segment_rows][index];
        }
        let first_leaf = index * self.covers[row];
        let entry = &self.pool[self.placement[first_leaf / self.covers[self.segment_rows]]];
        if row > self.block_rows {
            entry[row][0]
        } else {
            let within = first_leaf % self.covers[self.block_rows];
            entry[row][within / self.covers[row]]
        }
    }

    /// The inclusion proof of leaf `index`, in the tree's proof type (`A`,
    /// `B`, `C` as the levels were made).
    pub fn proof<A: PoseidonArity, B: PoseidonArity, C: PoseidonArity>(
        &self,
        index: usize,
    ) -> MerkleProof<H, A, B, C> {
        let mut at = index;
        let path = self
            .levels
            .iter()
            .enumerate()
            .map(|(row, level)| {
                let first = at / level.arity * level.arity;
                let siblings =
                    (first..first + level.arity).filter(|&i| i != at).map(|i| self.node(row, i)).collect();
                let step = (siblings, at - first);
                at /= level.arity;
                step
            })
            .collect();
        MerkleProof::from_parts(self.node(0, index), self.root(), path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::tree::{binary_levels, levels};
    use filecoin_hashers::poseidon::PoseidonHasher;
    use filecoin_hashers::sha256::Sha256Hasher;
    use filecoin_hashers::Domain;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use storage_proofs_core::merkle::MerkleProofTrait;
    use typenum::{U0, U2, U8};

    /// Every leaf, hashed row by row: the tree the block structure stands for.
    fn full_root<H: Hasher>(levels: &[Level], leaves: Vec<H::Domain>) -> H::Domain {
        levels.iter().fold(leaves, |row, level| {
            row.chunks(level.arity).map(|c| hash_children::<H>(c, level.height)).collect()
        })[0]
    }

    #[test]
    fn a_block_tree_is_the_full_tree_of_its_leaves() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // Binary, 2^10 leaves: blocks of 8, segments of 32, three blocks.
        let blocks: Vec<Vec<_>> = (0..3)
            .map(|_| (0..8).map(|_| <Sha256Hasher as Hasher>::Domain::random(&mut rng)).collect())
            .collect();
        let placement: Vec<usize> = (0..32).map(|s| (s * 7) % 3).collect();
        let tree =
            BlockTree::<Sha256Hasher>::new(binary_levels(1 << 10), 3, 5, blocks.clone(), placement.clone());
        let leaves: Vec<_> = (0..1 << 10).map(|i| blocks[placement[i / 32]][i % 8]).collect();
        assert_eq!(tree.root(), full_root::<Sha256Hasher>(&binary_levels(1 << 10), leaves.clone()));
        for index in [0, 7, 8, 31, 32, 500, 1023] {
            let proof: MerkleProof<Sha256Hasher, U2> = tree.proof(index);
            assert!(proof.validate(index) && proof.validate_data(leaves[index]), "leaf {index}");
        }

        // 64 GiB's arities (8-ary, sub-tree 8, top 2) over 2^10 leaves:
        // blocks of 8, segments of 64, one block per segment.
        let shape = levels::<U8, U8, U2>(1 << 10);
        let blocks: Vec<Vec<_>> = (0..16)
            .map(|_| (0..8).map(|_| <PoseidonHasher as Hasher>::Domain::random(&mut rng)).collect())
            .collect();
        let tree = BlockTree::<PoseidonHasher>::new(shape.clone(), 1, 2, blocks.clone(), (0..16).collect());
        let leaves: Vec<_> = (0..1 << 10).map(|i| blocks[i / 64][i % 8]).collect();
        assert_eq!(tree.root(), full_root::<PoseidonHasher>(&shape, leaves.clone()));
        for index in [0, 63, 64, 1000] {
            let proof: MerkleProof<PoseidonHasher, U8, U8, U2> = tree.proof(index);
            assert!(proof.validate(index) && proof.validate_data(leaves[index]), "leaf {index}");
        }
        // One block over the whole tree.
        let one = BlockTree::<PoseidonHasher>::new(
            levels::<U8, U0, U0>(64),
            1,
            2,
            vec![blocks[0].clone()],
            vec![0],
        );
        let leaves: Vec<_> = (0..64).map(|i| blocks[0][i % 8]).collect();
        assert_eq!(one.root(), full_root::<PoseidonHasher>(&levels::<U8, U0, U0>(64), leaves));
    }
}
