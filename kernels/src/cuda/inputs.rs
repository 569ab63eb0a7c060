//! Random points and scalars for the GPU tests and cuzk-bench's GPU
//! benchmark (fresh each run; feature `bench-internals`).
//!
//! Points: s_c*G + j*R for random s_c per chunk and a random R, then one
//! batch normalization: distinct pseudo-random curve points at the cost of
//! one addition each, instead of a scalar multiplication each.

use ark_ec::{CurveGroup, PrimeGroup};
use ark_ff::UniformRand;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};

/// A seed from the clock, printed by the tests so that a failure can be replayed.
pub fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    t.as_nanos() as u64 ^ (std::process::id() as u64) << 40
}

/// The random generator of `seed`.
pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn random_points<G: CurveGroup + PrimeGroup>(n: usize, seed: u64) -> Vec<G::Affine>
where
    G::ScalarField: UniformRand,
{
    const CHUNK: usize = 4096;
    let mut r = rng(seed);
    let step = G::generator() * G::ScalarField::rand(&mut r);
    let starts: Vec<G::ScalarField> = (0..n.div_ceil(CHUNK)).map(|_| G::ScalarField::rand(&mut r)).collect();
    let proj: Vec<G> = starts
        .par_iter()
        .enumerate()
        .flat_map_iter(|(ci, s)| {
            let len = CHUNK.min(n - ci * CHUNK);
            let mut p = G::generator() * s;
            (0..len).map(move |_| {
                let out = p;
                p += step;
                out
            })
        })
        .collect();
    G::normalize_batch(&proj)
}

/// `n` random G1 points from `seed`.
pub fn random_g1(n: usize, seed: u64) -> Vec<G1Affine> {
    random_points::<G1Projective>(n, seed)
}

/// `n` random G2 points from `seed`.
pub fn random_g2(n: usize, seed: u64) -> Vec<G2Affine> {
    random_points::<G2Projective>(n, seed)
}

/// `n` random scalars from `seed`.
pub fn random_fr(n: usize, seed: u64) -> Vec<Fr> {
    scalars(n, seed, |r, _| Fr::rand(r))
}

/// Scalars of which about `bits_pct` percent are random bits (0 or 1, as
/// most of PoRep's witness: SHA-256 bits) and the rest random field
/// elements, with some r-1 and 2 among those (edge values of the buckets).
pub fn mostly_bits(n: usize, bits_pct: u64, seed: u64) -> Vec<Fr> {
    scalars(n, seed, |r, i| {
        let roll = r.next_u64();
        if roll % 100 < bits_pct {
            Fr::from((roll >> 32) & 1)
        } else if i % 13 == 0 {
            -Fr::from(1u64)
        } else if i % 17 == 0 {
            Fr::from(2u64)
        } else {
            Fr::rand(r)
        }
    })
}

/// n scalars drawn in parallel chunks, each chunk from its own stream of
/// `seed`: `draw` gets the chunk's generator and the index within the chunk.
/// Written in place, each chunk by the thread that draws it: a collected
/// parallel flat_map concatenates per-thread lists on one thread, and the
/// shared-pass benchmark makes several partitions of 2^26-2^27 scalars per
/// round (the same values as the flat_map drew).
fn scalars(n: usize, seed: u64, draw: impl Fn(&mut ChaCha20Rng, usize) -> Fr + Sync) -> Vec<Fr> {
    const CHUNK: usize = 1 << 14;
    let mut out = vec![Fr::from(0u64); n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, chunk)| {
        let mut r = rng(seed ^ (ci as u64).wrapping_mul(0x9e3779b97f4a7c15));
        for (i, x) in chunk.iter_mut().enumerate() {
            *x = draw(&mut r, i);
        }
    });
    out
}
