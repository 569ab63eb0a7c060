//! Compiled matrices made up for tests and benchmarks (feature `bench-internals`),
//! each with an assignment that satisfies every row: [`porep_like`], the
//! shape of 32 GiB PoRep at any size, built in parallel (4 M rows in 9 s on
//! 2 cores, so 2^27 in about 35 s on 16), and [`mixed`], small ones through [`MatricesBuilder`] with
//! every case an evaluator tells apart.
//!
//! Row i's C starts with plus or minus w_i, a variable of its own that no
//! other term reads, and A, B and the rest of C read only the other
//! variables, so w_i = ±(A_i · B_i − rest_i) satisfies row i whatever the
//! other rows hold: [`solve`] computes every w_i at once.

use ark_ff::{Field, One, UniformRand, Zero};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::r1cs::{Matrices, MatricesBuilder, Term, Var};
use crate::Fr;

/// Rows generated per chunk, each chunk from its own stream of the seed.
const CHUNK: usize = 1 << 14;

fn chunk_rng(seed: u64, chunk: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ (chunk as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// One matrix's rows of a chunk: ends from the chunk's first term, terms.
type ChunkRows = (Vec<u64>, Vec<Term>);

/// Matrices of `rows` constraints over `inputs` inputs (the constant one
/// first) shaped like 32 GiB PoRep's (docs/benchmarks.md, "Circuit shapes":
/// 5.5 terms per constraint, as many aux variables as constraints, a B
/// query of a quarter of them) and an assignment that satisfies them. The
/// variables: the inputs, rows / 4 free ones (random values), then w_i per
/// row. Terms read the free variables near their row's share of them (a
/// window of 64) 88% of the time, any free variable 10%, an input 2%;
/// coefficients are one (85%), minus one (10%) or another of the table's
/// 295 entries (one, minus one, 2^1..2^253, 40 random constants). A has 1-3
/// terms, and every 256th row is a bit packing of 64-263 terms with
/// coefficients 2^j (a long row); B is the booleanity check's 1 - x 40% of
/// the time, else one term; C is ±w_i and 0-2 more terms.
pub fn porep_like(rows: usize, inputs: usize, seed: u64) -> (Matrices, Vec<Fr>) {
    assert!(inputs >= 1, "the constant one is an input");
    let free = (rows / 4).max(1);
    let mut table = vec![Fr::one(), -Fr::one()];
    table.extend((1..254u64).map(|j| Fr::from(2u64).pow([j])));
    let mut r = chunk_rng(seed, usize::MAX);
    table.extend((0..40).map(|_| Fr::rand(&mut r)));
    let ncoeffs = table.len() as u32;
    let chunks: Vec<[ChunkRows; 3]> = (0..rows.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut r = chunk_rng(seed, c);
            let mut out: [ChunkRows; 3] = Default::default();
            for i in c * CHUNK..rows.min((c + 1) * CHUNK) {
                let near = (i as u64 * free as u64 / rows as u64) as i64;
                let var = |r: &mut ChaCha8Rng| -> u32 {
                    let free_var = |v: i64| (inputs as i64 + v) as u32;
                    match r.gen_range(0..100) {
                        0..2 => r.gen_range(0..inputs) as u32,
                        2..12 => free_var(r.gen_range(0..free) as i64),
                        _ => free_var((near + r.gen_range(-32..32)).clamp(0, free as i64 - 1)),
                    }
                };
                let coeff = |r: &mut ChaCha8Rng| match r.gen_range(0..100) {
                    0..85 => 0,
                    85..95 => 1,
                    _ => r.gen_range(2..ncoeffs),
                };
                let [a, b, c] = &mut out;
                if i % 256 == 255 {
                    let len = 64 + r.gen_range(0..200);
                    a.1.extend((0..len).map(|j| Term { var: var(&mut r), coeff: 2 + j % 253 }));
                } else {
                    let len = [1, 1, 1, 1, 1, 1, 1, 2, 2, 3][r.gen_range(0..10)];
                    a.1.extend((0..len).map(|_| Term { var: var(&mut r), coeff: coeff(&mut r) }));
                }
                if r.gen_range(0..100) < 40 {
                    b.1.push(Term { var: 0, coeff: 0 });
                    b.1.push(Term { var: var(&mut r), coeff: 1 });
                } else {
                    b.1.push(Term { var: var(&mut r), coeff: coeff(&mut r) });
                }
                let w = (inputs + free + i) as u32;
                c.1.push(Term { var: w, coeff: r.gen_range(0..2) });
                let extra = r.gen_range(0..3);
                c.1.extend((0..extra).map(|_| Term { var: var(&mut r), coeff: coeff(&mut r) }));
                for (ends, terms) in [a, b, c] {
                    ends.push(terms.len() as u64);
                }
            }
            out
        })
        .collect();
    let parts = std::array::from_fn(|k| {
        let total = chunks.iter().map(|ch| ch[k].1.len()).sum();
        let (mut ends, mut terms) = (Vec::with_capacity(rows), Vec::with_capacity(total));
        for ch in &chunks {
            let at = terms.len() as u64;
            ends.extend(ch[k].0.iter().map(|e| e + at));
            terms.extend_from_slice(&ch[k].1);
        }
        (ends, terms)
    });
    drop(chunks);
    let matrices = Matrices::from_parts(inputs, free + rows, table, parts)
        .expect("the generator's indices are in range");
    let assignment = solve(&matrices, inputs + free, seed);
    (matrices, assignment)
}

/// Small matrices of `rows` constraints through the builder, with every
/// case an evaluator tells apart: 5 inputs read among the aux variables,
/// empty rows, rows of 1-5 terms, every 7th A row long (33-400 terms) and
/// every 50th B row longer (2000), coefficients one, minus one, zero
/// (dropped) and 300 random constants (a table larger than what a block
/// keeps in shared memory), and an assignment that satisfies them.
pub fn mixed(rows: usize, seed: u64) -> (Matrices, Vec<Fr>) {
    let mut r = chunk_rng(seed, 0);
    let (inputs, free) = (5, rows / 2 + 8);
    let pool: Vec<Fr> = (0..300).map(|_| Fr::rand(&mut r)).collect();
    let mut b = MatricesBuilder::default();
    for i in 0..rows {
        let term = |r: &mut ChaCha8Rng| -> (Fr, Var) {
            let coeff = match r.gen_range(0..100) {
                0..60 => Fr::one(),
                60..75 => -Fr::one(),
                75..95 => pool[r.gen_range(0..pool.len())],
                _ => Fr::zero(),
            };
            let var = if r.gen_range(0..10) == 0 {
                Var::Input(r.gen_range(0..inputs))
            } else {
                Var::Aux(r.gen_range(0..free))
            };
            (coeff, var)
        };
        let short = |r: &mut ChaCha8Rng| [0, 1, 1, 1, 2, 3, 5][r.gen_range(0..7)];
        let a_len = if i % 7 == 0 { r.gen_range(33..400) } else { short(&mut r) };
        let b_len = if i % 50 == 1 { 2000 } else { short(&mut r) };
        let a: Vec<_> = (0..a_len).map(|_| term(&mut r)).collect();
        let bv: Vec<_> = (0..b_len).map(|_| term(&mut r)).collect();
        let sign = if r.gen_bool(0.5) { Fr::one() } else { -Fr::one() };
        let mut c = vec![(sign, Var::Aux(free + i))];
        c.extend((0..short(&mut r)).map(|_| term(&mut r)));
        for (k, row) in [a, bv, c].into_iter().enumerate() {
            b.push_row(k, row).expect("small indices");
        }
    }
    let matrices = b.finish(inputs, free + rows);
    let assignment = solve(&matrices, inputs + free, seed);
    (matrices, assignment)
}

/// The assignment of matrices whose row i's C starts with ±1 times
/// variable `first_w + i` and reads it nowhere else: the constant one, the
/// variables before `first_w` random, each w_i solving its row.
pub fn solve(matrices: &Matrices, first_w: usize, seed: u64) -> Vec<Fr> {
    let vars = matrices.num_inputs() + matrices.num_aux();
    let mut assignment = vec![Fr::zero(); vars];
    (assignment[..first_w].par_chunks_mut(CHUNK).enumerate()).for_each(|(c, chunk)| {
        let mut r = chunk_rng(seed ^ 1, c);
        chunk.iter_mut().for_each(|x| *x = Fr::rand(&mut r));
    });
    assignment[0] = Fr::one();
    let value = |k: usize, i: usize, skip: usize| -> Fr {
        (matrices.row(k, i).skip(skip)).fold(Fr::zero(), |acc, (c, v)| acc + *c * assignment[v])
    };
    let w: Vec<Fr> = (0..matrices.num_constraints())
        .into_par_iter()
        .map(|i| {
            let (sign, _) = matrices.row(2, i).next().expect("C starts with w_i");
            // The sign is one or minus one: its own inverse.
            *sign * (value(0, i, 0) * value(1, i, 0) - value(2, i, 1))
        })
        .collect();
    assignment[first_w..].copy_from_slice(&w);
    assignment
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::r1cs::Flattened;

    #[test]
    fn porep_like_matrices_are_satisfied_and_shaped_like_porep() {
        let (rows, inputs) = (50_000, 328);
        let (m, z) = porep_like(rows, inputs, 3);
        let n = (rows + inputs).next_power_of_two();
        assert!(m.evaluate(&z, n).is_ok(), "every row holds");
        assert_eq!((m.num_inputs(), m.num_aux()), (inputs, rows / 4 + rows));
        let terms: usize = (0..3).map(|k| m.num_terms(k)).sum();
        let per_row = terms as f64 / rows as f64;
        assert!((5.0..6.0).contains(&per_row), "{per_row} terms per constraint");
        assert_eq!(m.coeffs().len(), 295);
        let flat = Flattened::new(&m, 32).unwrap();
        assert_eq!(flat.long_rows().len(), rows / 256, "the bit packings");
        // Deterministic per seed, different across seeds.
        assert_eq!(porep_like(1000, 3, 3).0.fingerprint(), porep_like(1000, 3, 3).0.fingerprint());
        assert_ne!(porep_like(1000, 3, 3).0.fingerprint(), porep_like(1000, 3, 4).0.fingerprint());
        // A changed witness value breaks the row that reads it.
        let mut bad = z.clone();
        bad[inputs + rows / 4 + 77] += Fr::one();
        assert!(matches!(m.evaluate(&bad, n), Err(crate::KernelError::Unsatisfied(77))));
    }

    #[test]
    fn mixed_matrices_are_satisfied_and_hold_every_case() {
        let (m, z) = mixed(700, 5);
        assert!(m.evaluate(&z, 1024).is_ok(), "every row holds");
        assert!(m.coeffs().len() > 256, "a table beyond a block's shared copy");
        let flat = Flattened::new(&m, 32).unwrap();
        assert!(flat.long_rows().len() >= 100);
        let empty = (0..700).filter(|&i| m.row(0, i).next().is_none()).count();
        assert!(empty > 0, "empty rows");
        let reads_inputs = (0..700).any(|i| m.row(1, i).any(|(_, v)| (1..5).contains(&v)));
        assert!(reads_inputs, "inputs among the terms");
    }
}
