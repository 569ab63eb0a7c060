//! The host's half of fixed-base multiplication on the device
//! (kernels/cuda/fixed_base.cuh): the generator's window table in the
//! kernels' layout and the conversion of the affine points they write back.
//! Compiled without `cuda` too, so that the host-compiled check of the
//! kernels' arithmetic (tests/host/fixed_base_host.rs) runs in every CI build on
//! the same table the device gets.

use ark_bls12_381::{Fq, Fq2};
use ark_ec::CurveGroup;
use ark_ff::{BigInt, Fp};
use rayon::prelude::*;

use crate::key_source::{G1_WORDS, G2_WORDS};
use crate::{G1Affine, G2Affine};

/// Bits per window. 13: 20 windows, so 20 mixed additions per scalar, over
/// a table of 20 x 4096 points (7.9 MB in G1, 15.7 MB in G2) that stays in
/// the device's L2 cache (50 MB on an H100); c = 16 would save 4 additions
/// but read a 50 MB / 100 MB table from DRAM at random.
pub const WINDOW_BITS: u32 = 13;

/// Windows of `c` bits that cover a 255-bit scalar with signed digits: one
/// bit beyond the scalar, so the last window never carries out.
pub fn windows(c: u32) -> u32 {
    256u32.div_ceil(c)
}

/// The window table of `g` for `c`-bit signed digits, as fixed_base.cuh
/// reads it: entry w * 2^(c-1) + d - 1 is d * 2^(c*w) * g (d in
/// 1..=2^(c-1)), affine.
pub fn table<C: CurveGroup>(g: C, c: u32) -> Vec<C::Affine> {
    let half = 1usize << (c - 1);
    let bases: Vec<C> = std::iter::successors(Some(g), |b| {
        let mut next = *b;
        (0..c).for_each(|_| {
            next.double_in_place();
        });
        Some(next)
    })
    .take(windows(c) as usize)
    .collect();
    let projective: Vec<C> = bases
        .par_iter()
        .flat_map_iter(|&base| std::iter::successors(Some(base), move |p| Some(*p + base)).take(half))
        .collect();
    C::normalize_batch(&projective)
}

fn fq(w: &[u64]) -> Fq {
    Fp::new_unchecked(BigInt([w[0], w[1], w[2], w[3], w[4], w[5]]))
}

/// A G1 point from the kernels' affine layout (`key_source::g1_words`'s
/// inverse: all zeros is the identity).
pub fn g1_from_words(w: &[u64]) -> G1Affine {
    assert_eq!(w.len(), G1_WORDS, "one G1 point");
    if w.iter().all(|&x| x == 0) {
        return G1Affine::identity();
    }
    G1Affine::new_unchecked(fq(&w[0..6]), fq(&w[6..12]))
}

/// A G2 point from the kernels' affine layout (`key_source::g2_words`'s
/// inverse).
pub fn g2_from_words(w: &[u64]) -> G2Affine {
    assert_eq!(w.len(), G2_WORDS, "one G2 point");
    if w.iter().all(|&x| x == 0) {
        return G2Affine::identity();
    }
    let f2 = |o: usize| Fq2::new(fq(&w[o..o + 6]), fq(&w[o + 6..o + 12]));
    G2Affine::new_unchecked(f2(0), f2(12))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_source::{g1_words, g2_words};
    use crate::{G1Projective, G2Projective};
    use ark_ec::PrimeGroup;
    use ark_ff::Field;

    #[test]
    fn table_entries_are_digit_multiples_of_the_window_base() {
        let c = 4;
        let g = G1Projective::generator();
        let t = table(g, c);
        assert_eq!(t.len(), windows(c) as usize * 8);
        for w in [0usize, 1, windows(c) as usize - 1] {
            for d in [1u64, 5, 8] {
                let want = g * crate::Fr::from(2u64).pow([(c as u64) * w as u64]) * crate::Fr::from(d);
                assert_eq!(t[w * 8 + d as usize - 1], want.into_affine(), "window {w} digit {d}");
            }
        }
    }

    #[test]
    fn windows_cover_the_scalar_and_a_carry() {
        for c in 1..=16 {
            assert!(windows(c) * c >= 256 && (windows(c) - 1) * c < 256);
        }
    }

    #[test]
    fn points_survive_the_kernels_layout() {
        let p = (G1Projective::generator() * crate::Fr::from(7u64)).into_affine();
        let q = (G2Projective::generator() * crate::Fr::from(9u64)).into_affine();
        let (mut w1, mut w2) = ([0u64; G1_WORDS], [0u64; G2_WORDS]);
        g1_words(&p, &mut w1);
        g2_words(&q, &mut w2);
        assert_eq!(g1_from_words(&w1), p);
        assert_eq!(g2_from_words(&w2), q);
        g1_words(&G1Affine::identity(), &mut w1);
        assert_eq!(g1_from_words(&w1), G1Affine::identity());
        g2_words(&G2Affine::identity(), &mut w2);
        assert_eq!(g2_from_words(&w2), G2Affine::identity());
    }
}
