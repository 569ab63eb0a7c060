//! Sparse Merkle trees: a sector's tree C and tree R (last layer) as far as a
//! C1 output opens them. Only the opened leaves, their paths and the paths'
//! siblings exist; a sibling off every path is a random digest standing for
//! the root of a random subtree. All paths are built together, bottom up, so
//! shared upper nodes are computed once and every path reaches the one root.
//!
//! The nodes are hashed with the tree hasher's own `multi_node`, the call
//! storage-proofs' `InclusionPath::root` makes when it verifies a path, and
//! the paths become storage-proofs' `MerkleProof` through its public
//! `from_parts`.

use std::collections::{BTreeMap, BTreeSet};

use filecoin_hashers::{Domain, Hasher, PoseidonArity};
use merkletree::hash::Algorithm;
use rand::RngCore;
use storage_proofs_core::merkle::{base_path_length, MerkleProof, MerkleTreeTrait};

/// The inclusion proof of a sector tree of shape `Tree` (trees C and R).
pub type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// One level of a tree above its leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Children per node of this level.
    pub arity: usize,
    /// The `height` the verifier hands the hash for this level: its place in
    /// its base, sub-tree or top-tree segment (each `InclusionPath` counts
    /// from 0). Both Filecoin hashers ignore it; it is passed as they get it.
    pub height: usize,
}

/// The levels of a tree of `leaves` with base arity `A`, sub-tree arity `B`
/// and top-tree arity `C` (0: none), leaves' parents first: the layout of
/// storage-proofs' `MerkleTreeWrapper<H, _, A, B, C>` and of its proofs.
pub fn levels<A: PoseidonArity, B: PoseidonArity, C: PoseidonArity>(leaves: usize) -> Vec<Level> {
    let base = base_path_length::<A, B, C>(leaves);
    let mut levels: Vec<Level> = (0..base).map(|height| Level { arity: A::to_usize(), height }).collect();
    levels.extend(
        [B::to_usize(), C::to_usize()]
            .into_iter()
            .filter(|&arity| arity > 0)
            .map(|arity| Level { arity, height: 0 }),
    );
    levels
}

/// A binary tree's levels over `leaves` (a power of two): tree D's shape.
pub fn binary_levels(leaves: usize) -> Vec<Level> {
    (0..leaves.ilog2() as usize).map(|height| Level { arity: 2, height }).collect()
}

/// A parent node from its children, hashed as `InclusionPath::root` hashes
/// each step of a path it verifies.
pub fn hash_children<H: Hasher>(children: &[H::Domain], height: usize) -> H::Domain {
    H::Function::default().multi_node(children, height)
}

/// A Merkle tree materialized only along the paths of chosen leaves.
pub struct SparseTree<H: Hasher> {
    /// The levels above the leaves, leaves' parents first.
    levels: Vec<Level>,
    /// The nodes that exist, per row: the leaves first, the root's row last.
    /// Each row holds every node on an opened path and all its siblings.
    rows: Vec<BTreeMap<u64, H::Domain>>,
}

impl<H: Hasher> SparseTree<H> {
    /// Builds the tree over `leaves` (index → value); every sibling that is
    /// not itself on a path is drawn from `rng`, in index order, so the tree
    /// is a function of the leaves and the generator's state.
    pub fn build<R: RngCore>(levels: Vec<Level>, leaves: BTreeMap<u64, H::Domain>, rng: &mut R) -> Self {
        let mut rows = vec![leaves];
        for level in &levels {
            let arity = level.arity as u64;
            let row = rows.last_mut().expect("the leaves' row is always there");
            let groups: BTreeSet<u64> = row.keys().map(|i| i / arity).collect();
            let mut parents = BTreeMap::new();
            for group in groups {
                let children: Vec<H::Domain> = (group * arity..(group + 1) * arity)
                    .map(|i| *row.entry(i).or_insert_with(|| H::Domain::random(rng)))
                    .collect();
                parents.insert(group, hash_children::<H>(&children, level.height));
            }
            rows.push(parents);
        }
        SparseTree { levels, rows }
    }

    /// The root: the single node of the top row (a tree without leaves has
    /// the default digest).
    pub fn root(&self) -> H::Domain {
        let top = self.rows.last().expect("the leaves' row is always there");
        top.values().next().copied().unwrap_or_default()
    }

    /// The inclusion proof of leaf `index`, in the tree's proof type (`A`,
    /// `B`, `C` as in [`levels`]); `None` when the leaf is neither one the
    /// tree was built over nor a sibling of one.
    pub fn proof<A: PoseidonArity, B: PoseidonArity, C: PoseidonArity>(
        &self,
        index: u64,
    ) -> Option<MerkleProof<H, A, B, C>> {
        let leaf = *self.rows[0].get(&index)?;
        let mut at = index;
        let mut path = Vec::with_capacity(self.levels.len());
        for (level, row) in self.levels.iter().zip(&self.rows) {
            let arity = level.arity as u64;
            let first = at / arity * arity;
            let siblings = (first..first + arity)
                .filter(|&i| i != at)
                .map(|i| row.get(&i).copied())
                .collect::<Option<Vec<_>>>()?;
            path.push((siblings, (at - first) as usize));
            at /= arity;
        }
        Some(MerkleProof::from_parts(leaf, self.root(), path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::poseidon::PoseidonHasher;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use storage_proofs_core::merkle::MerkleProofTrait;
    use typenum::{U0, U2, U8};

    #[test]
    fn every_path_verifies_to_the_one_root_and_proves_its_leaf() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        // 64 GiB's shape at a small size: 8-ary base, an 8-ary sub-tree level
        // and a binary top: 8^2 · 8 · 2 = 1024 leaves.
        let levels = levels::<U8, U8, U2>(1024);
        assert_eq!(levels.len(), 4);
        assert_eq!((levels[2].arity, levels[3].arity), (8, 2));
        let leaves: BTreeMap<u64, _> = [0u64, 1, 9, 511, 512, 1023]
            .into_iter()
            .map(|i| (i, <PoseidonHasher as Hasher>::Domain::random(&mut rng)))
            .collect();
        let tree = SparseTree::<PoseidonHasher>::build(levels, leaves.clone(), &mut rng);
        for (&i, &value) in &leaves {
            let proof: MerkleProof<PoseidonHasher, U8, U8, U2> = tree.proof(i).unwrap();
            assert!(proof.verify(), "leaf {i}");
            assert!(proof.validate(i as usize) && proof.validate_data(value));
            assert_eq!(proof.root(), tree.root());
        }
        assert!(tree.proof::<U8, U8, U2>(100).is_none(), "no path reaches leaf 100");
        // A changed leaf no longer reaches the root.
        let mut changed = leaves.clone();
        changed.insert(9, <PoseidonHasher as Hasher>::Domain::random(&mut rng));
        let other = SparseTree::<PoseidonHasher>::build(super::levels::<U8, U8, U2>(1024), changed, &mut rng);
        assert_ne!(other.root(), tree.root());
        assert_eq!(binary_levels(1 << 5).len(), 5);
        assert_eq!(super::levels::<U8, U0, U0>(64).len(), 2);
    }
}
