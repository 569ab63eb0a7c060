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

use super::bases::TiledKey;
use super::msm::MsmGroup;
use crate::groth16::{Abc, PreparedCircuit, Selection, Synthesized};
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
/// Written in place, each chunk by the thread that draws it: a collected
/// parallel flat_map concatenates per-thread lists on one thread, and the
/// shared-pass benchmark makes several partitions of 2^26-2^27 scalars per
/// round (the same values as the flat_map drew).
fn scalars(n: usize, seed: u64, draw: impl Fn(&mut ChaCha20Rng, usize) -> Fr + Sync) -> Vec<Fr> {
    const CHUNK: usize = 1 << 14;
    let mut out = vec![Fr::from(0u64); n];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(ci, chunk)| {
            let mut r = rng(seed ^ (ci as u64).wrapping_mul(0x9e3779b97f4a7c15));
            for (i, x) in chunk.iter_mut().enumerate() {
                *x = draw(&mut r, i);
            }
        });
    out
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
        let assignment = if bits_pct == 0 {
            random_fr(num_vars, s)
        } else {
            mostly_bits(num_vars, bits_pct, s)
        };
        with_random_abc(n, assignment, num_inputs, s)
    };
    (circuit, make)
}

/// Counts of Filecoin's 32 GiB PoRep partition (`cuzk-bench shape`,
/// docs/benchmarks.md "Circuit shapes"): constraints with the input
/// constraints, public inputs with the constant one, aux variables, aux
/// variables in A, variables in B (inputs and aux). Domain 2^27.
pub const POREP_32G: [usize; 5] = [130_278_869, 328, 130_169_893, 129_753_292, 33_112_282];

/// `n` of `of` indices, spread evenly (the densities' pattern is not what
/// the kernels' time depends on; their counts are).
fn spread(n: usize, of: usize, first: u32) -> Vec<u32> {
    (0..of)
        .filter(|&i| (i + 1) * n / of > i * n / of)
        .map(|i| first + i as u32)
        .collect()
}

/// A partition of PoRep's shape at domain 2^log_n: the 32 GiB counts
/// (POREP_32G) scaled by 2^(log_n - 27), A and B as sparse as PoRep's
/// (gathered scalars, as Filecoin's keys are), bases tiled from the pools
/// (a `TiledKey`: never held in arkworks' form), and a witness of which
/// `bits_pct` percent are bits. Returns the circuit (its pk holds only
/// the points prove_finish reads), the bases and the input maker.
pub fn porep_shaped_partition(
    log_n: u32,
    g1_pool: &[G1Affine],
    g2_pool: &[G2Affine],
    bits_pct: u64,
) -> (
    PreparedCircuit,
    TiledKey,
    impl Fn(u64) -> Synthesized + Sync,
) {
    let [constraints, inputs, aux, a_aux, b_vars] = POREP_32G;
    let scale = |x: usize| ((x as u128 * (1u128 << log_n)) >> 27) as usize;
    let (num_constraints, aux, a_aux, b_vars) =
        (scale(constraints), scale(aux), scale(a_aux), scale(b_vars));
    let n = 1usize << log_n;
    let num_inputs = inputs;
    let m = num_inputs + aux;
    // Indices into assignment[1..]: every input after the constant one in
    // A, then the A-dense aux; B over all variables after the constant one.
    let mut a_sel: Vec<u32> = (0..num_inputs as u32 - 1).collect();
    a_sel.extend(spread(a_aux, aux, num_inputs as u32 - 1));
    let b_sel = spread(b_vars - 1, m - 1, 0);
    let key = TiledKey {
        g1: super::msm::G1::to_device(g1_pool),
        g2: super::msm::G2::to_device(g2_pool),
        lens: [1 + a_sel.len(), 1 + b_sel.len(), aux, n - 1],
    };
    let pk = ProvingKey::<Bls12_381> {
        vk: VerifyingKey::default(),
        beta_g1: g1_pool[0],
        delta_g1: g1_pool[1],
        a_query: vec![g1_pool[0]],
        b_g1_query: vec![g1_pool[7]],
        b_g2_query: vec![g2_pool[0]],
        h_query: Vec::new(),
        l_query: Vec::new(),
    };
    let circuit = PreparedCircuit {
        circuit_id: format!("porep-shaped-2^{log_n}"),
        pk,
        matrices: Matrices::empty(num_inputs, aux),
        num_inputs,
        num_constraints,
        domain_size: n,
        a_selection: Selection::Only(a_sel),
        b_selection: Selection::Only(b_sel),
    };
    let make = move |s: u64| with_random_abc(n, mostly_bits(m, bits_pct, s), num_inputs, s);
    (circuit, key, make)
}

/// A partition's inputs from its assignment (the constant one set first)
/// and random a, b, c over the domain of n.
fn with_random_abc(n: usize, mut assignment: Vec<Fr>, num_inputs: usize, s: u64) -> Synthesized {
    assignment[0] = Fr::from(1u64);
    Synthesized {
        abc: Abc::Host {
            a: random_fr(n, s ^ 1),
            b: random_fr(n, s ^ 2),
            c: random_fr(n, s ^ 3),
        },
        assignment,
        num_inputs,
    }
}
