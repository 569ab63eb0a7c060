//! Conversions between blstrs' scalar (the reference circuits' field) and
//! arkworks' `Fr` (the daemon's engines). Both are the BLS12-381 scalar field;
//! the conversion goes through the canonical little-endian limbs, so it does not
//! depend on either crate's internal (Montgomery) representation.

use ark_bls12_381::Fr;
use ark_ff::{BigInteger256, PrimeField};
use ff::PrimeField as _;

/// The arkworks element equal to `s`.
pub fn fr_from_blstrs(s: &blstrs::Scalar) -> Fr {
    let bytes = s.to_repr();
    let mut limbs = [0u64; 4];
    for (limb, chunk) in limbs.iter_mut().zip(bytes.as_ref().chunks_exact(8)) {
        *limb = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
    }
    // blstrs only holds canonical values, so the limbs are below the modulus.
    Fr::from_bigint(BigInteger256::new(limbs)).expect("a blstrs scalar is canonical")
}

/// The blstrs element equal to `f`.
pub fn fr_to_blstrs(f: &Fr) -> blstrs::Scalar {
    let mut bytes = [0u8; 32];
    for (chunk, limb) in bytes.chunks_exact_mut(8).zip(f.into_bigint().0) {
        chunk.copy_from_slice(&limb.to_le_bytes());
    }
    blstrs::Scalar::from_repr_vartime(bytes).expect("an arkworks Fr is canonical")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::{Field, UniformRand};
    use ff::Field as _;

    #[test]
    fn conversion_preserves_arithmetic() {
        let mut rng = rand::thread_rng();
        for _ in 0..100 {
            let a = Fr::rand(&mut rng);
            let b = Fr::rand(&mut rng);
            let (x, y) = (fr_to_blstrs(&a), fr_to_blstrs(&b));
            assert_eq!(fr_from_blstrs(&(x * y)), a * b);
            assert_eq!(fr_from_blstrs(&(x + y)), a + b);
            assert_eq!(fr_from_blstrs(&x.invert().unwrap()), a.inverse().unwrap());
        }
        assert_eq!(fr_from_blstrs(&blstrs::Scalar::ONE), Fr::ONE);
        assert_eq!(fr_from_blstrs(&-blstrs::Scalar::ONE), -Fr::ONE);
    }

    #[test]
    fn fields_share_generator_and_root_of_unity() {
        assert_eq!(
            fr_from_blstrs(&blstrs::Scalar::MULTIPLICATIVE_GENERATOR),
            <Fr as ark_ff::FftField>::GENERATOR
        );
        assert_eq!(
            fr_from_blstrs(&blstrs::Scalar::ROOT_OF_UNITY),
            <Fr as ark_ff::FftField>::TWO_ADIC_ROOT_OF_UNITY
        );
    }
}
