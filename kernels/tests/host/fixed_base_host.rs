//! The device's fixed-base multiplication (kernels/cuda/fixed_base.cuh)
//! checked on the host on every build, GPU or not: the C++ harness in
//! tests/fixed_base_host/ runs the kernels' `fb_mul` and `fb_to_affine` over
//! the table `fixed_base::table` builds, and every product must be
//! arkworks' `g * s`, for G1 and G2, with the scalars whose digits are
//! special (0, 1, r - 1, a digit of exactly 2^(c-1), a run of carries),
//! at the window width the engine uses and at a narrow one with many
//! windows, and with the affine conversion's segments of one point, a few,
//! or all of them.

use crate::cxx;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use ark_ec::{CurveGroup, PrimeGroup};
use ark_ff::{BigInteger, PrimeField, UniformRand};
use cuzk_kernels::fixed_base::{g1_from_words, g2_from_words, table, windows, WINDOW_BITS};
use cuzk_kernels::key_source::{g1_words, g2_words, G1_WORDS, G2_WORDS};
use cuzk_kernels::{Fr, G1Projective, G2Projective};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn harness() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| cxx::harness("fixed_base_host"))
}

fn seed() -> u64 {
    let s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

/// Scalars that exercise the digits' edge cases, then random ones, `n` in all.
fn scalars(n: usize, c: u32, rng: &mut ChaCha20Rng) -> Vec<Fr> {
    let half = Fr::from(1u64 << (c - 1));
    let all_ones = Fr::from((1u64 << c) - 1); // a digit of -1 and a carry
    let special = [
        Fr::from(0u64),
        Fr::from(1u64),
        -Fr::from(1u64),
        half,
        half + Fr::from(1u64),
        all_ones * Fr::from(1u64 << c) + all_ones,
        -half,
    ];
    special.into_iter().chain(std::iter::repeat_with(|| Fr::rand(rng))).take(n).collect()
}

/// The harness's products of `g` by `scalars` (c-bit windows, `stride`
/// conversion threads), as the kernels' affine words.
fn device_products(
    group: u32,
    table_words: &[u64],
    c: u32,
    scalars: &[Fr],
    stride: usize,
    name: &str,
) -> Vec<u64> {
    let mut bytes = Vec::new();
    [group, c, windows(c), scalars.len() as u32].iter().for_each(|h| bytes.extend(h.to_le_bytes()));
    table_words.iter().for_each(|w| bytes.extend(w.to_le_bytes()));
    for s in scalars {
        bytes.extend(s.into_bigint().to_bytes_le());
    }
    let out = cxx::run(harness(), name, &bytes, &stride.to_string());
    out.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect()
}

/// One group's cases (window bits, scalars, conversion threads) against
/// arkworks; each width's table made once.
fn check<C: CurveGroup<ScalarField = Fr> + PrimeGroup>(
    group: u32,
    words: usize,
    to_words: fn(&C::Affine, &mut [u64]),
    from_words: fn(&[u64]) -> C::Affine,
    cases: &[(u32, usize, usize)],
) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed());
    let g = C::generator();
    let mut tables: HashMap<u32, Vec<u64>> = HashMap::new();
    for &(c, n, stride) in cases {
        let t = tables.entry(c).or_insert_with(|| {
            let points = table(g, c);
            let mut w = vec![0u64; points.len() * words];
            points.iter().zip(w.chunks_mut(words)).for_each(|(p, w)| to_words(p, w));
            w
        });
        let s = scalars(n, c, &mut rng);
        let name = format!("g{group}-{c}-{n}-{stride}");
        let got = device_products(group, t, c, &s, stride, &name);
        assert_eq!(got.len(), n * words);
        for (i, (w, s)) in got.chunks(words).zip(&s).enumerate() {
            assert_eq!(from_words(w), (g * s).into_affine(), "{name}: product {i}");
        }
    }
}

#[test]
fn the_kernels_g1_products_equal_arkworks() {
    let cases = [
        (WINDOW_BITS, 1, 1),
        (WINDOW_BITS, 2, 1),
        (WINDOW_BITS, 1000, 7),
        (4, 300, 300),
        (WINDOW_BITS, 300, 1),
    ];
    check::<G1Projective>(1, G1_WORDS, g1_words, g1_from_words, &cases);
}

#[test]
fn the_kernels_g2_products_equal_arkworks() {
    let cases = [(WINDOW_BITS, 1, 1), (WINDOW_BITS, 2, 2), (WINDOW_BITS, 200, 9), (5, 60, 1)];
    check::<G2Projective>(2, G2_WORDS, g2_words, g2_from_words, &cases);
}
