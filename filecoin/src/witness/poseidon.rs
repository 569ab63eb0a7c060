//! Poseidon without linear combinations: the values neptune 11's circuit
//! (`neptune::circuit::poseidon_hash`, the one filecoin-hashers and
//! storage-proofs call) allocates, in its order. The circuit carries the
//! state between S-boxes as linear combinations and scales them by the MDS
//! matrices term by term (about 10 ms per arity-8 hash on a loaded core),
//! which assignment mode discards; here the state is field values.
//!
//! What the circuit allocates, per element of the state (the domain tag,
//! then the preimage):
//! - first full round: the tag's S-box is computed as a constant; each
//!   preimage element (already allocated) gets (x + k)^2, its square and
//!   (x + k)·x^4 + k' (`quintic_s_box_pre_add`);
//! - every other full round, and each partial round for the first element
//!   only: the element itself (the product of the previous MDS step is a
//!   linear combination, allocated on entry), x^2, x^4 and x^4·x + k (no
//!   k in the terminal round);
//! - after the rounds: the result (element 1), allocated.
//!
//! The MDS step after each round is the full matrix, or before the partial
//! rounds `pre_sparse_matrix`, and in them the sparse matrices, chosen by
//! the round index as the circuit chooses them.

use bellperson::gadgets::num::AllocatedNum;
use bellperson::SynthesisError;
use blstrs::Scalar;
use ff::Field;
use neptune::poseidon::{Arity, PoseidonConstants};

use crate::assignment::AssignmentCs;
use crate::convert::fr_from_blstrs;

/// `value` appended to the aux assignment (an allocation whose variable
/// nothing reads).
fn alloc(cs: &mut AssignmentCs, value: Scalar) -> Scalar {
    cs.aux.push(fr_from_blstrs(&value));
    value
}

/// The Poseidon hash of `preimage` with `constants`, its allocations
/// appended to `cs`; the result allocated last, as the circuit's.
pub fn poseidon_hash<A: Arity<Scalar>>(
    cs: &mut AssignmentCs,
    preimage: &[AllocatedNum<Scalar>],
    constants: &PoseidonConstants<Scalar, A>,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let width = constants.width();
    assert_eq!(preimage.len() + 1, width, "a preimage of the constants' arity");
    let mut state = Vec::with_capacity(width);
    state.push(constants.domain_tag);
    for num in preimage {
        state.push(num.get_value().ok_or(SynthesisError::AssignmentMissing)?);
    }
    let keys = &constants.compressed_round_constants;
    let mut offset = 0;
    // The circuit counts full rounds by `full_rounds / 2` and picks the
    // MDS matrices by `half_full_rounds`; both are kept as it does.
    let half = constants.full_rounds / 2;
    let mut round = 0;

    // The first full round: pre- and post-round keys.
    let (pre, post) = (&keys[offset..offset + width], &keys[offset + width..offset + 2 * width]);
    offset += 2 * width;
    for (i, x) in state.iter_mut().enumerate() {
        let shifted = *x + pre[i];
        let x4 = if i == 0 {
            shifted.square().square()
        } else {
            let x2 = alloc(cs, shifted.square());
            alloc(cs, x2.square())
        };
        *x = shifted * x4 + post[i];
        if i > 0 {
            alloc(cs, *x);
        }
    }
    mix(&mut state, constants, round);
    round += 1;

    let full_round = |state: &mut Vec<Scalar>, cs: &mut AssignmentCs, post: Option<&[Scalar]>| {
        for (i, x) in state.iter_mut().enumerate() {
            *x = s_box(cs, *x, post.map(|keys| keys[i]));
        }
    };
    for _ in 1..half {
        full_round(&mut state, cs, Some(&keys[offset..offset + width]));
        offset += width;
        mix(&mut state, constants, round);
        round += 1;
    }
    for _ in 0..constants.partial_rounds {
        state[0] = s_box(cs, state[0], Some(keys[offset]));
        offset += 1;
        mix(&mut state, constants, round);
        round += 1;
    }
    for _ in 1..half {
        full_round(&mut state, cs, Some(&keys[offset..offset + width]));
        offset += width;
        mix(&mut state, constants, round);
        round += 1;
    }
    full_round(&mut state, cs, None);
    mix(&mut state, constants, round);

    let result = state[1];
    AllocatedNum::alloc(&mut *cs, || Ok(result))
}

/// `quintic_s_box` on an element the previous MDS step left as a linear
/// combination: x allocated, then x^2, x^4 and x^5 (+ k).
fn s_box(cs: &mut AssignmentCs, x: Scalar, key: Option<Scalar>) -> Scalar {
    let x = alloc(cs, x);
    let x2 = alloc(cs, x.square());
    let x4 = alloc(cs, x2.square());
    alloc(cs, x * x4 + key.unwrap_or(Scalar::ZERO))
}

/// The MDS step after round `round` (`PoseidonCircuit::product_mds`).
fn mix<A: Arity<Scalar>>(state: &mut Vec<Scalar>, constants: &PoseidonConstants<Scalar, A>, round: usize) {
    let half = constants.half_full_rounds;
    let sparse_offset = half - 1;
    let dense = |state: &mut Vec<Scalar>, matrix: &[Vec<Scalar>]| {
        let product =
            (0..state.len()).map(|j| state.iter().zip(matrix).map(|(x, row)| *x * row[j]).sum()).collect();
        *state = product;
    };
    if round == sparse_offset {
        dense(state, &constants.pre_sparse_matrix);
    } else if round > sparse_offset && round < half + constants.partial_rounds {
        let sparse = &constants.sparse_matrixes[round - sparse_offset - 1];
        let first = state[0];
        let head = state.iter().zip(&sparse.w_hat).map(|(x, w)| *x * w).sum();
        for (x, v) in state[1..].iter_mut().zip(&sparse.v_rest) {
            *x += first * v;
        }
        state[0] = head;
    } else {
        dense(state, &constants.mds_matrices.m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::{
        POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8,
    };
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Our hash and neptune's circuit on the same random preimage: the same
    /// aux values in the same order, the same result.
    fn agrees<A: Arity<Scalar>>(constants: &PoseidonConstants<Scalar, A>, rng: &mut ChaCha8Rng) {
        let mut inputs = AssignmentCs::default();
        let preimage: Vec<AllocatedNum<Scalar>> = (0..constants.width() - 1)
            .map(|_| AllocatedNum::alloc(&mut inputs, || Ok(Scalar::random(&mut *rng))).unwrap())
            .collect();
        let mut theirs = AssignmentCs::default();
        let expected = neptune::circuit::poseidon_hash(&mut theirs, preimage.clone(), constants).unwrap();
        let mut ours = AssignmentCs::default();
        let hash = poseidon_hash(&mut ours, &preimage, constants).unwrap();
        assert_eq!(hash.get_value(), expected.get_value());
        assert_eq!(ours.aux.len(), theirs.aux.len(), "width {}", constants.width());
        assert!(ours.aux.values() == theirs.aux.values(), "width {}: aux differs", constants.width());
    }

    #[test]
    fn allocates_what_neptunes_circuit_allocates() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for _ in 0..3 {
            agrees(&*POSEIDON_CONSTANTS_2, &mut rng);
            agrees(&*POSEIDON_CONSTANTS_4, &mut rng);
            agrees(&*POSEIDON_CONSTANTS_8, &mut rng);
            agrees(&*POSEIDON_CONSTANTS_11, &mut rng);
        }
    }
}
