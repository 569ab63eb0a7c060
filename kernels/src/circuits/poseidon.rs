//! Poseidon over the BLS12-381 scalar field: width 3 (rate 2, capacity 1),
//! S-box x^5, 8 full and 57 partial rounds, with the round constants and MDS
//! matrix of ark-crypto-primitives' Grain LFSR. [`hash2`] is the 2-to-1
//! compression of the Merkle trees; [`hash2_gadget`] is the same function in
//! R1CS.

use std::ops::Range;
use std::sync::OnceLock;

use ark_crypto_primitives::sponge::poseidon::find_poseidon_ark_and_mds;
use ark_ff::{Field, Zero};
use ark_relations::r1cs::{ConstraintSystemRef, SynthesisError};

use super::Wire;
use crate::Fr;

/// Elements of the permutation's state.
pub const WIDTH: usize = 3;
/// Elements absorbed per permutation.
pub const RATE: usize = 2;
/// Full rounds (every element through the S-box), half before and half after the partial ones.
pub const FULL_ROUNDS: usize = 8;
/// Partial rounds (the first element alone through the S-box).
pub const PARTIAL_ROUNDS: usize = 57;
/// The S-box's exponent.
pub const ALPHA: u64 = 5;
/// x^5 as x², x⁴, x⁵: three multiplications.
pub const CONSTRAINTS_PER_SBOX: usize = 3;
/// Constraints of one [`hash2_gadget`]: every state element in the full
/// rounds, the first one in the partial rounds.
pub const HASH2_CONSTRAINTS: usize = CONSTRAINTS_PER_SBOX * (FULL_ROUNDS * WIDTH + PARTIAL_ROUNDS);

const PRIME_BITS: u64 = 255;

/// The round constants (one row per round) and the MDS matrix.
pub struct PoseidonConstants {
    /// One row of constants per round, added to the state before its S-box.
    pub round_constants: Vec<[Fr; WIDTH]>,
    /// The mixing matrix applied after each round's S-box.
    pub mds: [[Fr; WIDTH]; WIDTH],
}

/// The constants, derived once per process.
pub fn constants() -> &'static PoseidonConstants {
    static CONSTANTS: OnceLock<PoseidonConstants> = OnceLock::new();
    CONSTANTS.get_or_init(|| {
        let (ark, mds) =
            find_poseidon_ark_and_mds::<Fr>(PRIME_BITS, RATE, FULL_ROUNDS as u64, PARTIAL_ROUNDS as u64, 0);
        let row = |values: &Vec<Fr>| -> [Fr; WIDTH] {
            values.as_slice().try_into().expect("Grain LFSR rows have the state width")
        };
        PoseidonConstants {
            round_constants: ark.iter().map(row).collect(),
            mds: [row(&mds[0]), row(&mds[1]), row(&mds[2])],
        }
    })
}

/// The partial rounds, which apply the S-box to the first state element only,
/// sit between the two halves of the full rounds.
const PARTIAL_ROUND_RANGE: Range<usize> = FULL_ROUNDS / 2..FULL_ROUNDS / 2 + PARTIAL_ROUNDS;

/// How many state elements go through the S-box in `round`.
fn sbox_width(round: usize) -> usize {
    if PARTIAL_ROUND_RANGE.contains(&round) {
        1
    } else {
        WIDTH
    }
}

/// The Poseidon permutation.
pub fn permute(state: &mut [Fr; WIDTH]) {
    let constants = constants();
    for (round, round_constants) in constants.round_constants.iter().enumerate() {
        for (element, constant) in state.iter_mut().zip(round_constants) {
            *element += constant;
        }
        for element in &mut state[..sbox_width(round)] {
            *element = element.pow([ALPHA]);
        }
        *state = constants.mds.map(|mds_row| mds_row.iter().zip(state.iter()).map(|(m, x)| *m * x).sum());
    }
}

/// The 2-to-1 hash: [0, left, right] permuted, the first rate element out.
/// Equals a `PoseidonSponge` that absorbs [left, right] and squeezes one
/// element.
pub fn hash2(left: Fr, right: Fr) -> Fr {
    let mut state = [Fr::zero(), left, right];
    permute(&mut state);
    state[1]
}

/// x^5 in three constraints.
fn sbox_gadget(x: &Wire, cs: &ConstraintSystemRef<Fr>) -> Result<Wire, SynthesisError> {
    let x2 = x.product(x, cs)?;
    let x4 = x2.product(&x2, cs)?;
    x4.product(x, cs)
}

/// [`hash2`] in R1CS: [`HASH2_CONSTRAINTS`] constraints, as many new
/// witnesses. Round constants and the MDS matrix only reshape linear
/// combinations.
pub fn hash2_gadget(left: &Wire, right: &Wire, cs: &ConstraintSystemRef<Fr>) -> Result<Wire, SynthesisError> {
    let constants = constants();
    let mut state = [Wire::constant(Fr::zero()), left.clone(), right.clone()];
    for (round, round_constants) in constants.round_constants.iter().enumerate() {
        let sboxed_elements = sbox_width(round);
        for (index, element) in state.iter_mut().enumerate() {
            let shifted = element.clone().plus_constant(round_constants[index]);
            *element = if index < sboxed_elements { sbox_gadget(&shifted, cs)? } else { shifted };
        }
        state = constants.mds.map(|mds_row| Wire::weighted_sum(mds_row.into_iter().zip(&state)));
    }
    let [_, output, _] = state;
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_crypto_primitives::sponge::poseidon::{PoseidonConfig, PoseidonSponge};
    use ark_crypto_primitives::sponge::CryptographicSponge;
    use ark_relations::r1cs::ConstraintSystem;
    use ark_std::UniformRand;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn sponge_hash2(left: Fr, right: Fr) -> Fr {
        let (ark, mds) =
            find_poseidon_ark_and_mds::<Fr>(PRIME_BITS, RATE, FULL_ROUNDS as u64, PARTIAL_ROUNDS as u64, 0);
        let config = PoseidonConfig::new(FULL_ROUNDS, PARTIAL_ROUNDS, ALPHA, mds, ark, RATE, WIDTH - RATE);
        let mut sponge = PoseidonSponge::new(&config);
        sponge.absorb(&vec![left, right]);
        sponge.squeeze_field_elements::<Fr>(1)[0]
    }

    #[test]
    fn hash2_equals_the_arkworks_sponge() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for _ in 0..4 {
            let (left, right) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
            assert_eq!(hash2(left, right), sponge_hash2(left, right));
        }
        assert_eq!(hash2(Fr::zero(), Fr::zero()), sponge_hash2(Fr::zero(), Fr::zero()));
    }

    #[test]
    fn hash2_is_pinned() {
        // Roots clients computed and stored proving keys depend on the constants.
        let expected = "37068251774887509885063625701815026138353041152735229476479055620962268601796";
        assert_eq!(hash2(Fr::from(1u64), Fr::from(2u64)).to_string(), expected);
    }

    #[test]
    fn gadget_matches_native_hash_and_is_satisfied() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let (left, right) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let cs = ConstraintSystem::<Fr>::new_ref();
        let left_wire = Wire::witness(&cs, left).unwrap();
        let right_wire = Wire::witness(&cs, right).unwrap();
        let output = hash2_gadget(&left_wire, &right_wire, &cs).unwrap();
        let expected = Wire::input(&cs, hash2(left, right)).unwrap();
        output.enforce_equal(&expected, &cs).unwrap();

        assert_eq!(output.value(), hash2(left, right));
        assert_eq!(cs.num_constraints(), HASH2_CONSTRAINTS + 1);
        assert_eq!(cs.num_witness_variables(), 2 + HASH2_CONSTRAINTS);
        assert!(cs.is_satisfied().unwrap());

        // Corrupting any one S-box output breaks the system.
        cs.borrow_mut().unwrap().witness_assignment[2 + 100] += Fr::ONE;
        assert!(!cs.is_satisfied().unwrap());
    }

    #[test]
    fn gadget_rejects_a_wrong_claimed_output() {
        let cs = ConstraintSystem::<Fr>::new_ref();
        let left = Wire::witness(&cs, Fr::from(1u64)).unwrap();
        let right = Wire::witness(&cs, Fr::from(2u64)).unwrap();
        let output = hash2_gadget(&left, &right, &cs).unwrap();
        let wrong = Wire::input(&cs, hash2(Fr::from(2u64), Fr::from(1u64))).unwrap();
        output.enforce_equal(&wrong, &cs).unwrap();
        assert!(!cs.is_satisfied().unwrap());
    }
}
