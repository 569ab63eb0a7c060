//! Conversions between blstrs' scalar (the reference circuits' field) and
//! arkworks' `Fr` (the daemon's engines). Both are the BLS12-381 scalar field
//! and both hold an element the same way: Montgomery form with R = 2^256 mod r
//! in four little-endian `u64` limbs (blstrs documents it for `blst_fr`;
//! arkworks' `MontBackend` keeps `BigInt<4>` limbs). A conversion is therefore
//! a copy of the limbs, with no field arithmetic: `tests` checks it against
//! the conversion through the canonical bytes on random elements. A
//! partition's assignment is millions of elements, so this matters (the
//! canonical route cost about a sixth of PoRep's recording).

use ark_bls12_381::Fr;
use ark_ff::BigInt;
use blst::blst_fr;

/// The arkworks element equal to `s`.
pub fn fr_from_blstrs(s: &blstrs::Scalar) -> Fr {
    Fr::new_unchecked(BigInt(blst_fr::from(*s).l))
}

/// The blstrs element equal to `f`.
pub fn fr_to_blstrs(f: &Fr) -> blstrs::Scalar {
    blstrs::Scalar::from(blst_fr { l: f.0 .0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::{BigInteger256, Field, PrimeField, UniformRand};
    use ff::{Field as _, PrimeField as _};

    /// The conversion through canonical little-endian bytes, which depends on
    /// neither crate's internal form: what the limb copy must equal.
    fn through_bytes(s: &blstrs::Scalar) -> Fr {
        let bytes = s.to_repr();
        let mut limbs = [0u64; 4];
        for (limb, chunk) in limbs.iter_mut().zip(bytes.as_ref().chunks_exact(8)) {
            *limb = u64::from_le_bytes(chunk.try_into().unwrap());
        }
        Fr::from_bigint(BigInteger256::new(limbs)).unwrap()
    }

    #[test]
    fn limb_copy_equals_the_canonical_conversion() {
        let mut rng = rand::thread_rng();
        let edges = [
            blstrs::Scalar::ZERO,
            blstrs::Scalar::ONE,
            -blstrs::Scalar::ONE,
            blstrs::Scalar::from(2u64),
            blstrs::Scalar::ROOT_OF_UNITY,
        ];
        let random = (0..10_000).map(|_| blstrs::Scalar::random(&mut rng));
        for s in edges.into_iter().chain(random) {
            let f = fr_from_blstrs(&s);
            assert_eq!(f, through_bytes(&s));
            assert_eq!(fr_to_blstrs(&f), s);
        }
        for _ in 0..10_000 {
            let f = Fr::rand(&mut rng);
            assert_eq!(through_bytes(&fr_to_blstrs(&f)), f);
        }
    }

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
