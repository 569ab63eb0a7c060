//! One PoRep challenge's assignment: what storage-proofs-porep 19.1.0's
//! `stacked::circuit::params::Proof::synthesize` allocates, in its order.
//! The hashes are values-only: SHA-256 (the SDR labels of
//! `create_label_circuit`, tree D's `Sha256Function`) and Poseidon (the
//! column hashes, trees C and R's `PoseidonFunction`); everything else runs
//! through the reference gadgets themselves (allocations, bit
//! decompositions, `UInt64`, multipacking, the insertion of a node among
//! its siblings, the encoding).
//!
//! `Proof::synthesize`, its `enforce_inclusion` (storage-proofs-core's
//! `PoRCircuit`), the column allocation and hash (`column.rs`, `hash.rs`)
//! are private or call the hash gadgets inside, as do
//! `create_label_circuit` and the hashers' `hash_multi_leaf_circuit`: each
//! is mirrored here, allocation for allocation, and says which function it
//! mirrors.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::PrimeField;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{
    Hasher, POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8,
};
use generic_array::typenum::Unsigned;
use storage_proofs_core::gadgets::encode::encode;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::TOTAL_PARENTS;

use super::bits::{Bit, Word};
use super::poseidon::poseidon_hash;
use super::sha256::{digest_bytes, sha256};
use super::vanilla::{ChallengeProof, ColumnOpening, PathOptions};
use crate::assignment::{synthesis, AssignmentCs};
use crate::Error;

/// The light bits of gadget-made booleans.
fn light(bits: &[Boolean]) -> Result<Vec<Bit>, Error> {
    bits.iter().map(|b| Bit::from_boolean(b).map_err(synthesis)).collect()
}

/// `reverse_bit_numbering(num.to_bits_le(cs))`: the 255 allocated bits of
/// `num`, padded with a constant to 32 bytes, each byte most significant bit
/// first; how both the labels and tree D's hash read a field element.
fn byte_bits(cs: &mut AssignmentCs, num: &AllocatedNum<Scalar>) -> Result<Vec<Bit>, Error> {
    light(&reverse_bit_numbering(num.to_bits_le(&mut *cs).map_err(synthesis)?))
}

/// `multipack::pack_bits` of the digest's first 254 bits taken least
/// significant first within each byte (`create_label_circuit` and
/// `Sha256Function::hash_circuit` both do this): the digest's bytes as a
/// little-endian number with its top two bits cleared, allocated.
fn pack_digest(cs: &mut AssignmentCs, digest: &[Word; 8]) -> Result<AllocatedNum<Scalar>, Error> {
    let mut bytes = digest_bytes(digest);
    bytes[31] &= 0x3f;
    let value = Option::from(Scalar::from_repr(bytes))
        .ok_or_else(|| Error::Synthesis("a 254-bit digest is not below the modulus".into()))?;
    AllocatedNum::alloc(&mut *cs, || Ok(value)).map_err(synthesis)
}

/// `create_label_circuit` (storage-proofs-porep `stacked/circuit/create_label.rs`):
/// SHA-256 of the replica id, the layer and node, and the 37 parents, each
/// padded to 32 bytes, packed into the label.
fn label(
    cs: &mut AssignmentCs,
    replica_id: &[Bit],
    parents: &[&[Bit]],
    layer: u32,
    node: &[Bit],
) -> Result<AllocatedNum<Scalar>, Error> {
    let pad_to = |message: &mut Vec<Bit>, multiple: usize| {
        while !message.len().is_multiple_of(multiple) {
            message.push(Bit::Constant(false));
        }
    };
    let mut message = Vec::with_capacity((2 + TOTAL_PARENTS) * 256);
    message.extend_from_slice(replica_id);
    pad_to(&mut message, 256);
    message.extend(Word::constant(layer).bits_be());
    message.extend_from_slice(node);
    pad_to(&mut message, 512);
    for parent in parents {
        message.extend_from_slice(parent);
        pad_to(&mut message, 256);
    }
    if message.len() != (2 + TOTAL_PARENTS) * 256 {
        return Err(Error::Invalid(format!(
            "a label's preimage is {} bits, not {}",
            message.len(),
            (2 + TOTAL_PARENTS) * 256
        )));
    }
    let digest = sha256(&message, &mut cs.aux);
    pack_digest(cs, &digest)
}

/// `Sha256Function::hash_multi_leaf_circuit` (filecoin-hashers
/// `sha256.rs`): SHA-256 of the leaves' bytes, packed.
fn sha256_leaves(
    cs: &mut AssignmentCs,
    leaves: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, Error> {
    let mut message = Vec::with_capacity(leaves.len() * 256);
    for leaf in leaves {
        message.extend(byte_bits(cs, leaf)?);
    }
    let digest = sha256(&message, &mut cs.aux);
    pack_digest(cs, &digest)
}

/// How a tree hashes a node's children in the circuit.
#[derive(Clone, Copy)]
enum TreeHash {
    /// Tree D: `Sha256Function::hash_multi_leaf_circuit`.
    Sha256,
    /// Trees C and R: `PoseidonFunction::hash_multi_leaf_circuit`, neptune's
    /// circuit with the arity's constants.
    Poseidon,
}

impl TreeHash {
    fn hash(
        self,
        cs: &mut AssignmentCs,
        children: &[AllocatedNum<Scalar>],
    ) -> Result<AllocatedNum<Scalar>, Error> {
        match (self, children.len()) {
            (TreeHash::Sha256, _) => sha256_leaves(cs, children),
            (TreeHash::Poseidon, 2) => poseidon_hash(cs, children, &POSEIDON_CONSTANTS_2).map_err(synthesis),
            (TreeHash::Poseidon, 4) => poseidon_hash(cs, children, &POSEIDON_CONSTANTS_4).map_err(synthesis),
            (TreeHash::Poseidon, 8) => poseidon_hash(cs, children, &POSEIDON_CONSTANTS_8).map_err(synthesis),
            (TreeHash::Poseidon, n) => Err(Error::Invalid(format!("a tree node of {n} children"))),
        }
    }
}

/// `enforce_inclusion` (private in `params.rs`): storage-proofs-core's
/// `PoRCircuit::synthesize` (`gadgets/por.rs`) from an allocated leaf to an
/// allocated, private root, over a tree of `arities` (base, sub-tree and
/// top, 0 when absent). `AuthPath::from` puts the last level in the top
/// path and the one before in the sub-tree path when those exist, the rest
/// in the base path, and `SubPath::synthesize` takes them in that order:
/// per level the index bits, the siblings, the insertion and the hash. Then
/// all index bits are packed into public inputs. The root's equality
/// allocates nothing.
fn inclusion(
    cs: &mut AssignmentCs,
    path: PathOptions,
    leaf: &AllocatedNum<Scalar>,
    arities: [usize; 3],
    hash: TreeHash,
) -> Result<(), Error> {
    let [base, sub, top] = arities;
    let upper = usize::from(sub > 0) + usize::from(top > 0);
    let levels = path.len();
    if levels < upper {
        return Err(Error::Invalid(format!("a Merkle path of {levels} levels")));
    }
    let mut cur = leaf.clone();
    let mut index_bits = Vec::new();
    for (level, (hashes, index)) in path.into_iter().enumerate() {
        let arity = match level + upper {
            l if l < levels => base,
            l if l == levels && sub > 0 => sub,
            _ => top,
        };
        if hashes.len() + 1 != arity || !arity.is_power_of_two() {
            return Err(Error::Invalid(format!("{} siblings at a level of arity {arity}", hashes.len())));
        }
        let bits = (0..arity.trailing_zeros())
            .map(|i| {
                AllocatedBit::alloc(&mut *cs, index.map(|index| (index >> i) & 1 == 1)).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(synthesis)?;
        index_bits.extend_from_slice(&bits);
        let siblings = hashes
            .into_iter()
            .map(|h| AllocatedNum::alloc(&mut *cs, || h.ok_or(SynthesisError::AssignmentMissing)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(synthesis)?;
        let children = insert(cs, &cur, &bits, &siblings).map_err(synthesis)?;
        cur = hash.hash(cs, &children)?;
    }
    multipack::pack_into_inputs(&mut *cs, &index_bits).map_err(synthesis)
}

/// Trees C and R's shape: `Tree`'s arities, Poseidon its hasher (every
/// PoRep sector shape's).
fn tree_shape<Tree: MerkleTreeTrait>() -> Result<[usize; 3], Error> {
    if <Tree::Hasher as Hasher>::name() != PoseidonHasher::name() {
        return Err(Error::Invalid(format!(
            "trees C and R hashed with {}, not Poseidon",
            <Tree::Hasher as Hasher>::name()
        )));
    }
    Ok([Tree::Arity::to_usize(), Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize()])
}

/// `hash_single_column` (private in `hash.rs`): Poseidon over the column's
/// values, for the two column heights it supports.
fn column_hash(
    cs: &mut AssignmentCs,
    column: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, Error> {
    match column.len() {
        2 => poseidon_hash(cs, column, &POSEIDON_CONSTANTS_2),
        11 => poseidon_hash(cs, column, &POSEIDON_CONSTANTS_11),
        n => return Err(Error::Invalid(format!("a column of {n} layers (2 or 11 are hashed)"))),
    }
    .map_err(synthesis)
}

/// A parent's column allocated, hashed and proved in tree C (the loops
/// over `drg_parents_proofs` and `exp_parents_proofs` in `Proof::synthesize`,
/// with `ColumnProof::alloc` and `Column::alloc`).
fn parent_column(
    cs: &mut AssignmentCs,
    parent: ColumnOpening,
    layers: usize,
    tree: [usize; 3],
) -> Result<Vec<AllocatedNum<Scalar>>, Error> {
    let column = parent
        .rows
        .iter()
        .map(|&row| AllocatedNum::alloc(&mut *cs, || Ok(row)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(synthesis)?;
    if column.len() != layers {
        return Err(Error::Invalid(format!(
            "a parent column of {} layers beside one of {layers}",
            column.len()
        )));
    }
    let hash = column_hash(cs, &column)?;
    inclusion(cs, parent.path, &hash, tree, TreeHash::Poseidon)?;
    Ok(column)
}

/// Appends challenge `proof`'s inputs and aux values to `cs`, exactly as
/// `Proof::synthesize` allocates them. `replica_id` is the replica id's
/// bits as the partition's prefix decomposed them, bytes in order with each
/// byte's bits most significant first (`reverse_bit_numbering` of its
/// `to_bits_le`); nothing else of the prefix is read: the roots only
/// appear in constraints.
pub fn synthesize<Tree: MerkleTreeTrait>(
    cs: &mut AssignmentCs,
    proof: ChallengeProof,
    replica_id: &[Bit],
) -> Result<(), Error> {
    let ChallengeProof {
        data_leaf,
        comm_d_path,
        challenge,
        comm_r_last_path,
        comm_c_path,
        drg_parents,
        exp_parents,
    } = proof;
    if drg_parents.is_empty() || exp_parents.is_empty() {
        return Err(Error::Invalid("a PoRep challenge without DRG or expander parents".into()));
    }

    let tree = tree_shape::<Tree>()?;
    let data_leaf = AllocatedNum::alloc(&mut *cs, || Ok(data_leaf)).map_err(synthesis)?;
    inclusion(cs, comm_d_path, &data_leaf, [2, 0, 0], TreeHash::Sha256)?;

    let layers = drg_parents[0].rows.len();
    let drg = drg_parents
        .into_iter()
        .map(|parent| parent_column(cs, parent, layers, tree))
        .collect::<Result<Vec<_>, _>>()?;
    let exp = exp_parents
        .into_iter()
        .map(|parent| parent_column(cs, parent, layers, tree))
        .collect::<Result<Vec<_>, _>>()?;

    let node = UInt64::alloc(&mut *cs, Some(challenge)).map_err(synthesis)?;
    node.pack_into_input(&mut *cs).map_err(synthesis)?;
    let node_bits = light(&node.to_bits_be())?;

    let mut labels = Vec::with_capacity(layers);
    for layer in 1..=layers {
        // Layer 1 reads only the DRG parents; the expander parents' columns
        // start at layer 1 too, so layer l reads their row l - 1.
        let mut parents = Vec::with_capacity(drg.len() + exp.len());
        for column in &drg {
            parents.push(byte_bits(cs, &column[layer - 1])?);
        }
        if layer > 1 {
            for column in &exp {
                parents.push(byte_bits(cs, &column[layer - 2])?);
            }
        }
        // Repeated to 37, as the reference repeats them (14 + 14 + 9, or
        // the 6 DRG parents six times and the first once more).
        let mut expanded: Vec<&[Bit]> = parents.iter().map(Vec::as_slice).collect();
        if layer > 1 {
            let first_nine = parents.get(..9).ok_or_else(|| {
                Error::Invalid(format!("{} parents of a label, fewer than 9", parents.len()))
            })?;
            expanded.extend(parents.iter().map(Vec::as_slice));
            expanded.extend(first_nine.iter().map(Vec::as_slice));
        } else {
            for _ in 0..5 {
                expanded.extend(parents.iter().map(Vec::as_slice));
            }
            expanded.push(&parents[0]);
        }
        labels.push(label(cs, replica_id, &expanded, layer as u32, &node_bits)?);
    }

    let key = labels.last().ok_or_else(|| Error::Invalid("a PoRep challenge of no layers".into()))?;
    let encoded = encode(&mut *cs, key, &data_leaf).map_err(synthesis)?;
    inclusion(cs, comm_r_last_path, &encoded, tree, TreeHash::Poseidon)?;

    let column = column_hash(cs, &labels)?;
    inclusion(cs, comm_c_path, &column, tree, TreeHash::Poseidon)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use filecoin_hashers::sha256::Sha256Hasher;
    use filecoin_hashers::PoseidonArity;
    use generic_array::typenum::{U0, U2, U8};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
    use storage_proofs_core::gadgets::variables::Root;
    use storage_proofs_core::merkle::{DiskStore, MerkleTreeWrapper};

    /// `inclusion` against the reference `PoRCircuit` of the tree
    /// `MerkleTreeWrapper<H, _, U, V, W>` on a random path (assignment mode
    /// does not check it leads anywhere): the same inputs and aux values.
    fn agrees<H, U, V, W>(hash: TreeHash, base_levels: usize, rng: &mut ChaCha8Rng)
    where
        H: 'static + Hasher,
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        let arities = [U::to_usize(), V::to_usize(), W::to_usize()];
        let level = |arity: usize, rng: &mut ChaCha8Rng| {
            let siblings = (1..arity).map(|_| Some(Scalar::random(&mut *rng))).collect();
            (siblings, Some(rng.gen_range(0..arity)))
        };
        let mut path: PathOptions = (0..base_levels).map(|_| level(arities[0], rng)).collect();
        for &arity in &arities[1..] {
            if arity > 0 {
                path.push(level(arity, rng));
            }
        }
        let mut scratch = AssignmentCs::default();
        let leaf = AllocatedNum::alloc(&mut scratch, || Ok(Scalar::random(&mut *rng))).unwrap();
        let root = AllocatedNum::alloc(&mut scratch, || Ok(Scalar::random(&mut *rng))).unwrap();

        let mut theirs = AssignmentCs::default();
        PoRCircuit::<MerkleTreeWrapper<H, DiskStore<H::Domain>, U, V, W>>::synthesize(
            &mut theirs,
            Root::Var(leaf.clone()),
            AuthPath::<H, U, V, W>::from(path.clone()),
            Root::Var(root),
            true,
        )
        .unwrap();
        let mut ours = AssignmentCs::default();
        inclusion(&mut ours, path, &leaf, arities, hash).unwrap();
        assert!(ours.inputs == theirs.inputs, "{arities:?}: inputs differ");
        assert_eq!(ours.aux.len(), theirs.aux.len(), "{arities:?}");
        assert!(ours.aux.values() == theirs.aux.values(), "{arities:?}: aux differs");
    }

    #[test]
    fn inclusion_allocates_what_porcircuit_allocates() {
        let mut rng = ChaCha8Rng::seed_from_u64(30);
        // Tree D; trees C and R at 2 KiB, 32 GiB and 64 GiB (base, sub-tree, top).
        agrees::<Sha256Hasher, U2, U0, U0>(TreeHash::Sha256, 5, &mut rng);
        agrees::<PoseidonHasher, U8, U0, U0>(TreeHash::Poseidon, 2, &mut rng);
        agrees::<PoseidonHasher, U8, U8, U0>(TreeHash::Poseidon, 3, &mut rng);
        agrees::<PoseidonHasher, U8, U8, U2>(TreeHash::Poseidon, 3, &mut rng);
    }
}
