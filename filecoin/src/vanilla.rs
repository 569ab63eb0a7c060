//! What every kind checks of a request's values before the reference code
//! sees them, and how it runs the reference's own vanilla verification.
//! filecoin-proofs turns 32-byte values into field elements with `expect`
//! and walks Merkle paths with `insert` and slices, so a value that is not a
//! field element, or a path of another shape than its tree's, makes it panic:
//! in the vanilla verification and again in synthesis. Checked here first,
//! such a request is refused with a reason; what still makes the reference
//! panic is caught (`reference`) and refused as well.

use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use blstrs::Scalar as Fr;
use ff::PrimeField;
use filecoin_hashers::{Domain, Hasher};
use storage_proofs_core::merkle::MerkleProofTrait;
use typenum::Unsigned;

use crate::Error;

/// Refuses `bytes` unless they are a field element: Fr's canonical 32-byte
/// little-endian encoding, as every commitment, randomness and tree node is.
pub(crate) fn field_element(what: impl Display, bytes: &[u8]) -> Result<(), Error> {
    let repr: Option<[u8; 32]> = bytes.try_into().ok();
    match repr.map(|repr| bool::from(Fr::from_repr(repr).is_some())) {
        Some(true) => Ok(()),
        _ => Err(Error::Invalid(format!("{what} is not a field element"))),
    }
}

/// Refuses a Merkle inclusion proof that does not have the shape of a path
/// in a tree of `leaves` leaves (the proof's tree type: its arities): as many
/// levels as the tree is high, each with one sibling fewer than its arity
/// and a position below the arity, and every node a field element. The
/// reference verifies a path with `insert(index, ..)`, which panics for a
/// position beyond the siblings, and does not check the length everywhere.
pub(crate) fn merkle_proof<P: MerkleProofTrait>(
    what: impl Display,
    proof: &P,
    leaves: usize,
) -> Result<(), Error> {
    let path = proof.path();
    let expected = proof.expected_len(leaves);
    if path.len() != expected {
        return Err(Error::Invalid(format!(
            "{what}: a path of {} levels, a tree of {leaves} leaves has {expected}",
            path.len()
        )));
    }
    // The base tree's levels, then one level of the sub-tree's arity and
    // one of the top tree's, where the tree has them.
    let (sub, top) = (P::SubTreeArity::to_usize(), P::TopTreeArity::to_usize());
    let upper: Vec<usize> = [sub, top].into_iter().filter(|&a| a > 0).collect();
    let base = expected - upper.len();
    let arities = std::iter::repeat_n(P::Arity::to_usize(), base).chain(upper);
    for (level, ((siblings, index), arity)) in path.iter().zip(arities).enumerate() {
        if siblings.len() + 1 != arity || *index >= arity {
            return Err(Error::Invalid(format!(
                "{what}: level {level} has {} siblings and index {index}; a node of arity {arity} has {} and an index below {arity}",
                siblings.len(),
                arity - 1
            )));
        }
        for sibling in siblings {
            domain(format_args!("{what}: a sibling at level {level}"), sibling)?;
        }
    }
    domain(format_args!("{what}: its leaf"), &proof.leaf())?;
    domain(format_args!("{what}: its root"), &proof.root())
}

/// [`field_element`] of a hasher's node.
pub(crate) fn domain<D: Domain>(what: impl Display, node: &D) -> Result<(), Error> {
    field_element(what, node.as_ref())
}

/// The nodes of a sector of `sector_size` bytes: the leaves of its trees.
pub(crate) fn nodes<H: Hasher>(sector_size: u64) -> usize {
    (sector_size as usize) / std::mem::size_of::<H::Domain>()
}

/// Runs reference code over a request's values (its vanilla verification),
/// refusing the request when the code panics: the checks above leave the
/// reference nothing it is known to panic on, but the reference is not
/// ours, and a panic at submit must refuse the request rather than fail the
/// handler.
pub(crate) fn reference<T>(what: impl Display, run: impl FnOnce() -> T) -> Result<T, Error> {
    catch_unwind(AssertUnwindSafe(run)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Error::Invalid(format!("{what}: malformed (filecoin-proofs panicked on it: {message})"))
    })
}

/// Decodes vanilla proofs as filecoin-proofs-api does (bincode), naming the
/// first that does not decode as `what`.
pub(crate) fn deserialize<T: serde::de::DeserializeOwned>(
    proofs: &[Vec<u8>],
    what: String,
) -> Result<Vec<T>, Error> {
    proofs
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            bincode::deserialize(bytes).map_err(|e| {
                Error::Invalid(format!("vanilla proof {i} does not deserialize as a {what}: {e}"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use ff::Field;

    use super::*;

    #[test]
    fn field_elements_are_canonical_encodings_below_the_modulus() {
        assert!(field_element("zero", &[0; 32]).is_ok());
        // r - 1 is the largest field element; r itself is not one.
        let r_minus_1 = (-Fr::ONE).to_repr();
        assert!(field_element("r - 1", &r_minus_1).is_ok());
        let mut r = r_minus_1;
        r[0] += 1;
        assert_eq!(
            field_element("comm_d_new", &r).unwrap_err().to_string(),
            "invalid request: comm_d_new is not a field element"
        );
        assert!(field_element("all ones", &[0xff; 32]).is_err());
        assert!(field_element("short", &[0; 31]).is_err());
    }

    #[test]
    fn a_panic_in_reference_code_refuses_the_request() {
        assert_eq!(reference("x", || 7).unwrap(), 7);
        let refused = reference("vanilla proof 2", || -> u8 { panic!("from_repr failure") });
        assert_eq!(
            refused.unwrap_err().to_string(),
            "invalid request: vanilla proof 2: malformed (filecoin-proofs panicked on it: from_repr failure)"
        );
    }
}
