//! Random inputs for the GPU benchmark and, behind feature `testutil`, the
//! GPU tests (fresh each run).
//!
//! Points: s_c*G + j*R for random s_c per chunk and a random R, then one
//! batch normalization: distinct pseudo-random curve points at the cost of
//! one addition each, instead of a scalar multiplication each.

use ark_ec::{CurveGroup, PrimeGroup};
use ark_ff::UniformRand;
use ark_groth16::{ProvingKey, VerifyingKey};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::groth16::{PreparedCircuit, Selection, Synthesized};
use crate::r1cs::Matrices;
use crate::{Bls12_381, Fr, G1Affine, G1Projective, G2Affine, G2Projective};

pub fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    t.as_nanos() as u64 ^ (std::process::id() as u64) << 40
}

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
    let starts: Vec<G::ScalarField> = (0..n.div_ceil(CHUNK))
        .map(|_| G::ScalarField::rand(&mut r))
        .collect();
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

pub fn random_g1(n: usize, seed: u64) -> Vec<G1Affine> {
    random_points::<G1Projective>(n, seed)
}

pub fn random_g2(n: usize, seed: u64) -> Vec<G2Affine> {
    random_points::<G2Projective>(n, seed)
}

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
fn scalars(n: usize, seed: u64, draw: impl Fn(&mut ChaCha20Rng, usize) -> Fr + Sync) -> Vec<Fr> {
    const CHUNK: usize = 1 << 14;
    (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .flat_map_iter(|ci| {
            let mut r = rng(seed ^ (ci as u64).wrapping_mul(0x9e3779b97f4a7c15));
            let len = CHUNK.min(n - ci * CHUNK);
            let draw = &draw;
            (0..len).map(move |i| draw(&mut r, i))
        })
        .collect()
}

/// A proving key with random bases (not a real setup) and a `Synthesized`
/// with random a, b, c and assignment, for timing prove_start at domain size
/// n = 2^log_n: the work is exactly a real partition's, the proof is not
/// valid. `bits_pct` percent of the witness are bits (`mostly_bits`; 0:
/// every value random).
pub fn fabricated_partition(
    log_n: u32,
    g1_pool: &[G1Affine],
    g2_pool: &[G2Affine],
    bits_pct: u64,
) -> (PreparedCircuit, impl Fn(u64) -> Synthesized) {
    let n = 1usize << log_n;
    let num_inputs = 2;
    let num_vars = n; // witness count close to the constraint count
    let take1 = |len: usize, off: usize| -> Vec<G1Affine> {
        (0..len)
            .map(|i| g1_pool[(i + off) % g1_pool.len()])
            .collect()
    };
    let pk = ProvingKey::<Bls12_381> {
        vk: VerifyingKey::default(),
        beta_g1: g1_pool[0],
        delta_g1: g1_pool[1],
        a_query: take1(num_vars, 0),
        b_g1_query: take1(num_vars, 7),
        b_g2_query: (0..num_vars).map(|i| g2_pool[i % g2_pool.len()]).collect(),
        h_query: take1(n - 1, 13),
        l_query: take1(num_vars - num_inputs, 29),
    };
    let matrices = Matrices::empty(num_inputs, num_vars - num_inputs);
    let circuit = PreparedCircuit {
        circuit_id: format!("fabricated-2^{log_n}"),
        pk,
        matrices,
        num_inputs,
        num_constraints: n - num_inputs,
        domain_size: n,
        a_selection: Selection::All,
        b_selection: Selection::All,
    };
    let make = move |s: u64| {
        let mut assignment = if bits_pct == 0 {
            random_fr(num_vars, s)
        } else {
            mostly_bits(num_vars, bits_pct, s)
        };
        assignment[0] = Fr::from(1u64);
        Synthesized {
            a: random_fr(n, s ^ 1),
            b: random_fr(n, s ^ 2),
            c: random_fr(n, s ^ 3),
            assignment,
            num_inputs,
        }
    };
    (circuit, make)
}
