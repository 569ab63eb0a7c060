//! The fabricated partitions the benchmark proves: a proving key with
//! random bases (not a real setup) and a random a, b, c and witness, so the
//! work is exactly a real partition's and the proof is not valid. Two
//! kinds: `fabricated_partition`, every query dense at a 2^k domain, and
//! `porep_shaped_partition`, Filecoin's 32 GiB PoRep partition scaled to a
//! 2^k domain, whose bases are a `TiledKey` (a few random points repeated;
//! the engine takes any `KeyBases`), since the 32 GiB key in arkworks' form
//! would take 50 GB of host memory.

use ark_groth16::{ProvingKey, VerifyingKey};
use rayon::prelude::*;

use cuzk_kernels::cuda::bases::{Fingerprint, KeyBases, Query};
use cuzk_kernels::cuda::gpu::{DevG1Affine, DevG2Affine};
use cuzk_kernels::cuda::inputs::{mostly_bits, random_fr};
use cuzk_kernels::cuda::msm::{MsmGroup, G1, G2};
use cuzk_kernels::groth16::{Abc, PreparedCircuit, Selection, Synthesized};
use cuzk_kernels::r1cs::Matrices;
use cuzk_kernels::{Bls12_381, Fr, G1Affine, G2Affine, KernelError};

use super::args::GpuBenchArgs;

/// A proving key with random bases (not a real setup) and a `Synthesized`
/// with random a, b, c and assignment, for timing prove_start at domain size
/// n = 2^log_n: the work is exactly a real partition's, the proof is not
/// valid. `bits_pct` percent of the witness are bits (`mostly_bits`; 0:
/// every value random).
pub(super) fn fabricated_partition(
    log_n: u32,
    g1_pool: &[G1Affine],
    g2_pool: &[G2Affine],
    bits_pct: u64,
) -> (PreparedCircuit, impl Fn(u64) -> Synthesized) {
    let n = 1usize << log_n;
    let num_inputs = 2;
    let num_vars = n; // witness count close to the constraint count
    let take1 = |len: usize, off: usize| -> Vec<G1Affine> {
        (0..len).map(|i| g1_pool[(i + off) % g1_pool.len()]).collect()
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
        key_source: None,
        matrices,
        num_inputs,
        num_constraints: n - num_inputs,
        domain_size: n,
        a_selection: Selection::All,
        b_selection: Selection::All,
    };
    let make = move |s: u64| {
        let assignment =
            if bits_pct == 0 { random_fr(num_vars, s) } else { mostly_bits(num_vars, bits_pct, s) };
        with_random_abc(n, assignment, num_inputs, s)
    };
    (circuit, make)
}

/// Counts of Filecoin's 32 GiB PoRep partition (`cuzk-bench shape`,
/// docs/benchmarks.md "Circuit shapes"): constraints with the input
/// constraints, public inputs with the constant one, aux variables, aux
/// variables in A, variables in B (inputs and aux). Domain 2^27.
const POREP_32G: [usize; 5] = [130_278_869, 328, 130_169_893, 129_753_292, 33_112_282];

/// `n` of `of` indices, spread evenly (the densities' pattern is not what
/// the kernels' time depends on; their counts are).
fn spread(n: usize, of: usize, first: u32) -> Vec<u32> {
    (0..of).filter(|&i| (i + 1) * n / of > i * n / of).map(|i| first + i as u32).collect()
}

/// A partition of PoRep's shape at domain 2^log_n: the 32 GiB counts
/// (POREP_32G) scaled by 2^(log_n - 27), A and B as sparse as PoRep's
/// (gathered scalars, as Filecoin's keys are), bases tiled from the pools
/// (a `TiledKey`: never held in arkworks' form), and a witness of which
/// `bits_pct` percent are bits. Returns the circuit (its pk holds only
/// the points prove_finish reads), the bases and the input maker.
fn porep_shaped_partition(
    log_n: u32,
    g1_pool: &[G1Affine],
    g2_pool: &[G2Affine],
    bits_pct: u64,
) -> (PreparedCircuit, TiledKey, impl Fn(u64) -> Synthesized + Sync) {
    let [constraints, inputs, aux, a_aux, b_vars] = POREP_32G;
    let scale = |x: usize| ((x as u128 * (1u128 << log_n)) >> 27) as usize;
    let (num_constraints, aux, a_aux, b_vars) = (scale(constraints), scale(aux), scale(a_aux), scale(b_vars));
    let n = 1usize << log_n;
    let num_inputs = inputs;
    let m = num_inputs + aux;
    // Indices into assignment[1..]: every input after the constant one in
    // A, then the A-dense aux; B over all variables after the constant one.
    let mut a_sel: Vec<u32> = (0..num_inputs as u32 - 1).collect();
    a_sel.extend(spread(a_aux, aux, num_inputs as u32 - 1));
    let b_sel = spread(b_vars - 1, m - 1, 0);
    let key = TiledKey {
        g1: G1::to_device(g1_pool),
        g2: G2::to_device(g2_pool),
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
        // The bench passes its TiledKey as the bases itself.
        key_source: None,
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
        abc: Abc::Host { a: random_fr(n, s ^ 1), b: random_fr(n, s ^ 2), c: random_fr(n, s ^ 3) },
        assignment,
        num_inputs,
    }
}

/// What the PoRep-shaped sections (porep.rs, pass.rs, urgency.rs) draw
/// on: the command's arguments, the run's random bases, which their keys
/// tile, and the run's seed.
pub(super) struct PorepInputs<'a> {
    /// The command's arguments (domains, bit share, budgets, devices).
    pub(super) args: &'a GpuBenchArgs,
    /// Distinct G1 points the keys tile (2^20 at most: a larger pool saves
    /// no memory traffic, see `TiledKey`).
    pub(super) g1_pool: &'a [G1Affine],
    /// Distinct G2 points, likewise.
    pub(super) g2_pool: &'a [G2Affine],
    /// The run's seed, from which each section derives its witnesses'.
    pub(super) seed: u64,
}

impl PorepInputs<'_> {
    /// A PoRep-shaped partition at 2^log_n with the arguments' bit share
    /// (`porep_shaped_partition`).
    pub(super) fn partition(
        &self,
        log_n: u32,
    ) -> (PreparedCircuit, TiledKey, impl Fn(u64) -> Synthesized + Sync) {
        let pct = self.args.porep_bits_pct;
        porep_shaped_partition(log_n, self.g1_pool, self.g2_pool, pct)
    }
}

/// A key made of a few distinct points repeated (the benchmark's
/// PoRep-shaped partitions): point i of a query is `g1[(i + offset) %
/// g1.len()]`, each query at its own offset. The kernels' work does not
/// depend on which valid points they add; pools larger than the device's
/// L2 cache (50 MB) save no memory traffic either.
pub(super) struct TiledKey {
    /// Distinct G1 points, in the kernels' layout.
    g1: Vec<DevG1Affine>,
    /// Distinct G2 points.
    g2: Vec<DevG2Affine>,
    /// Lengths of A, B (G1 and G2), L and H.
    lens: [usize; 4],
}

impl KeyBases for TiledKey {
    fn len(&self, q: Query) -> usize {
        self.lens[q as usize]
    }
    fn fingerprint(&self) -> Fingerprint {
        Fingerprint { lens: self.lens, points: self.g1[..2.min(self.g1.len())].to_vec() }
    }
    fn g1(&self, q: Query, start: usize, out: &mut [DevG1Affine]) -> Result<(), KernelError> {
        let offset = [0, 7, 29, 13][q as usize];
        tile(&self.g1, start + offset, out);
        Ok(())
    }
    fn g2(&self, start: usize, out: &mut [DevG2Affine]) -> Result<(), KernelError> {
        tile(&self.g2, start, out);
        Ok(())
    }
}

fn tile<T: Copy + Send + Sync>(pool: &[T], start: usize, out: &mut [T]) {
    out.par_iter_mut().enumerate().for_each(|(i, o)| *o = pool[(start + i) % pool.len()]);
}
