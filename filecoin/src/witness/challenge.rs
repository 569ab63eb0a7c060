//! One PoRep challenge's assignment: what storage-proofs-porep 19.1.0's
//! `stacked::circuit::params::Proof::synthesize` allocates, in its order,
//! with the SHA-256 hashing (the SDR labels of `create_label_circuit` and
//! tree D's path, whose hasher is `Sha256Function`) done by the values-only
//! SHA-256 and everything else by the reference gadgets themselves
//! (allocations, bit decompositions, `UInt64`, multipacking, the encoding,
//! Poseidon column hashes and the `PoRCircuit` paths of trees C and R).
//!
//! `Proof::synthesize`, its `enforce_inclusion`, the column allocation and
//! hash (`column.rs`, `hash.rs`) are private to storage-proofs-porep, and
//! `create_label_circuit` and `Sha256Function::hash_multi_leaf_circuit` call
//! the SHA-256 gadget inside: each is mirrored here, allocation for
//! allocation, and says which function it mirrors.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::PrimeField;
use filecoin_hashers::{Hasher, POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2};
use generic_array::typenum::{U11, U2};
use neptune::circuit::poseidon_hash;
use storage_proofs_core::gadgets::encode::encode;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::{DiskStore, MerkleTreeTrait, MerkleTreeWrapper};
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::TOTAL_PARENTS;

use super::assignment::AssignmentCs;
use super::bits::{Bit, Word};
use super::sha256::{digest_bytes, sha256};
use super::vanilla::{ChallengeProof, PathOptions};
use crate::Error;

/// What every challenge of a partition reads from the partition's prefix.
pub struct Shared {
    /// The replica id's bits, bytes in order with each byte's bits most
    /// significant first (`reverse_bit_numbering` of its `to_bits_le`).
    pub replica_id: Vec<Bit>,
    /// The allocated comm_d (tree D's root).
    pub comm_d: AllocatedNum<Scalar>,
    /// The allocated comm_c (tree C's root).
    pub comm_c: AllocatedNum<Scalar>,
    /// The allocated comm_r_last (tree R's root).
    pub comm_r_last: AllocatedNum<Scalar>,
}

fn synthesis(e: SynthesisError) -> Error {
    Error::Synthesis(e.to_string())
}

/// The light bits of gadget-made booleans.
fn light(bits: &[Boolean]) -> Result<Vec<Bit>, Error> {
    bits.iter()
        .map(|b| Bit::from_boolean(b).map_err(synthesis))
        .collect()
}

/// `reverse_bit_numbering(num.to_bits_le(cs))`: the 255 allocated bits of
/// `num`, padded with a constant to 32 bytes, each byte most significant bit
/// first; how both the labels and tree D's hash read a field element.
fn byte_bits(cs: &mut AssignmentCs, num: &AllocatedNum<Scalar>) -> Result<Vec<Bit>, Error> {
    light(&reverse_bit_numbering(
        num.to_bits_le(&mut *cs).map_err(synthesis)?,
    ))
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
        while message.len() % multiple != 0 {
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

/// Tree D's inclusion: `PoRCircuit::synthesize` for the binary SHA-256
/// tree with a private root (storage-proofs-core `gadgets/por.rs`, base
/// path only, as `AuthPath::from` puts every level of a binary tree there):
/// per level the index bit, the sibling, the insertion and the hash; then
/// the index bits packed into public inputs. The leaf and the root are
/// already allocated, and the root's equality allocates nothing.
fn comm_d_inclusion(
    cs: &mut AssignmentCs,
    path: PathOptions,
    leaf: &AllocatedNum<Scalar>,
) -> Result<(), Error> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len());
    for (hashes, index) in path {
        if hashes.len() != 1 {
            return Err(Error::Invalid(format!(
                "tree D's path has {} siblings at a level, not 1",
                hashes.len()
            )));
        }
        let bit = AllocatedBit::alloc(&mut *cs, index.map(|i| i & 1 == 1)).map_err(synthesis)?;
        let bit = Boolean::from(bit);
        index_bits.push(bit.clone());
        let siblings = hashes
            .into_iter()
            .map(|h| AllocatedNum::alloc(&mut *cs, || h.ok_or(SynthesisError::AssignmentMissing)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(synthesis)?;
        let inserted = insert(cs, &cur, &[bit], &siblings).map_err(synthesis)?;
        cur = sha256_leaves(cs, &inserted)?;
    }
    multipack::pack_into_inputs(&mut *cs, &index_bits).map_err(synthesis)
}

/// `enforce_inclusion` (private in `params.rs`) for trees C and R: the
/// reference `PoRCircuit` over the tree's hasher and arities, root private.
fn enforce_inclusion<Tree: MerkleTreeTrait>(
    cs: &mut AssignmentCs,
    path: PathOptions,
    root: &AllocatedNum<Scalar>,
    leaf: &AllocatedNum<Scalar>,
) -> Result<(), Error> {
    type Wrapped<T> = MerkleTreeWrapper<
        <T as MerkleTreeTrait>::Hasher,
        DiskStore<<<T as MerkleTreeTrait>::Hasher as Hasher>::Domain>,
        <T as MerkleTreeTrait>::Arity,
        <T as MerkleTreeTrait>::SubTreeArity,
        <T as MerkleTreeTrait>::TopTreeArity,
    >;
    let path: AuthPath<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> =
        path.into();
    PoRCircuit::<Wrapped<Tree>>::synthesize(
        &mut *cs,
        Root::Var(leaf.clone()),
        path,
        Root::Var(root.clone()),
        true,
    )
    .map_err(synthesis)
}

/// `hash_single_column` (private in `hash.rs`): Poseidon over the column's
/// values, for the two column heights it supports.
fn column_hash(
    cs: &mut AssignmentCs,
    column: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, Error> {
    match column.len() {
        2 => poseidon_hash::<_, Scalar, U2>(&mut *cs, column.to_vec(), &POSEIDON_CONSTANTS_2),
        11 => poseidon_hash::<_, Scalar, U11>(&mut *cs, column.to_vec(), &POSEIDON_CONSTANTS_11),
        n => {
            return Err(Error::Invalid(format!(
                "a column of {n} layers (2 or 11 are hashed)"
            )))
        }
    }
    .map_err(synthesis)
}

/// A parent's column allocated, hashed and proved in tree C (the loops
/// over `drg_parents_proofs` and `exp_parents_proofs` in `Proof::synthesize`,
/// with `ColumnProof::alloc` and `Column::alloc`).
fn parent_column<Tree: MerkleTreeTrait>(
    cs: &mut AssignmentCs,
    parent: super::vanilla::ColumnOpening,
    layers: usize,
    comm_c: &AllocatedNum<Scalar>,
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
    enforce_inclusion::<Tree>(cs, parent.path, comm_c, &hash)?;
    Ok(column)
}

/// Appends challenge `proof`'s inputs and aux values to `cs`, exactly as
/// `Proof::synthesize` allocates them.
pub fn synthesize<Tree: MerkleTreeTrait>(
    cs: &mut AssignmentCs,
    proof: ChallengeProof,
    shared: &Shared,
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
        return Err(Error::Invalid(
            "a PoRep challenge without DRG or expander parents".into(),
        ));
    }

    let data_leaf = AllocatedNum::alloc(&mut *cs, || Ok(data_leaf)).map_err(synthesis)?;
    comm_d_inclusion(cs, comm_d_path, &data_leaf)?;

    let layers = drg_parents[0].rows.len();
    let drg = drg_parents
        .into_iter()
        .map(|parent| parent_column::<Tree>(cs, parent, layers, &shared.comm_c))
        .collect::<Result<Vec<_>, _>>()?;
    let exp = exp_parents
        .into_iter()
        .map(|parent| parent_column::<Tree>(cs, parent, layers, &shared.comm_c))
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
                Error::Invalid(format!(
                    "{} parents of a label, fewer than 9",
                    parents.len()
                ))
            })?;
            expanded.extend(parents.iter().map(Vec::as_slice));
            expanded.extend(first_nine.iter().map(Vec::as_slice));
        } else {
            for _ in 0..5 {
                expanded.extend(parents.iter().map(Vec::as_slice));
            }
            expanded.push(&parents[0]);
        }
        labels.push(label(
            cs,
            &shared.replica_id,
            &expanded,
            layer as u32,
            &node_bits,
        )?);
    }

    let key = labels
        .last()
        .ok_or_else(|| Error::Invalid("a PoRep challenge of no layers".into()))?;
    let encoded = encode(&mut *cs, key, &data_leaf).map_err(synthesis)?;
    enforce_inclusion::<Tree>(cs, comm_r_last_path, &shared.comm_r_last, &encoded)?;

    let column = column_hash(cs, &labels)?;
    enforce_inclusion::<Tree>(cs, comm_c_path, &shared.comm_c, &column)
}
