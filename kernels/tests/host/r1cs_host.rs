//! The device's constraint evaluation (kernels/cuda/r1cs.cuh) checked on
//! the host on every build, GPU or not: the C++ harness in tests/r1cs_host/
//! runs the kernels' row functions over the layout `r1cs::Flattened` writes,
//! and its a, b, c and first unsatisfied row must be `Matrices::evaluate`'s,
//! on made-up matrices with every case the evaluators tell apart (long,
//! empty and input-reading rows, a coefficient table beyond a block's
//! shared copy), on the PoRep-like shape, with every row long or none, and
//! with witnesses that break a row. The GPU tests then check what nvcc made
//! of the same functions.

use crate::cxx;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use ark_ff::{BigInt, Fp, One};
use cuzk_kernels::r1cs::{Flattened, Matrices};
use cuzk_kernels::synthetic;
use cuzk_kernels::{Fr, KernelError};

/// The CUDA engine's long-row length (kernels/src/cuda/r1cs.rs's
/// LONG_ROW, which a build without `cuda` does not have).
const LONG_ROW: u32 = 32;
/// Coefficients a block copies to shared memory (SHARED_COEFFS there).
const SHARED: u32 = 256;

fn harness() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| cxx::harness("r1cs_host"))
}

fn seed() -> u64 {
    let s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

fn words(x: &Fr) -> [u64; 4] {
    x.0 .0
}

/// The harness's a, b, c over a domain of n and its first unsatisfied row.
fn device_rows(
    m: &Matrices,
    z: &[Fr],
    n: usize,
    long_len: u32,
    nsh: u32,
    name: &str,
) -> ([Vec<Fr>; 3], Option<usize>) {
    let flat = Flattened::new(m, long_len).unwrap();
    let mut bytes = Vec::new();
    let header = [
        flat.rows(),
        m.num_inputs(),
        n,
        z.len(),
        flat.coeffs().len(),
        flat.minus_one() as usize,
        long_len as usize,
        flat.long_rows().len(),
        flat.end_words(),
        flat.terms(),
    ];
    header.iter().for_each(|&h| bytes.extend((h as u32).to_le_bytes()));
    (0..flat.end_words()).for_each(|w| bytes.extend(flat.end_pair(w).to_le_bytes()));
    (0..flat.terms()).for_each(|t| bytes.extend(flat.term(t).to_le_bytes()));
    let elements = |bytes: &mut Vec<u8>, xs: &[Fr]| {
        for x in xs {
            words(x).iter().for_each(|w| bytes.extend(w.to_le_bytes()));
        }
    };
    elements(&mut bytes, flat.coeffs());
    flat.long_rows().iter().for_each(|r| bytes.extend(r.to_le_bytes()));
    elements(&mut bytes, z);
    let out = cxx::run(harness(), name, &bytes, &nsh.to_string());
    assert_eq!(out.len(), 3 * n * 32 + 4);
    let element = |j: usize| -> Fr {
        let w: [u64; 4] =
            std::array::from_fn(|l| u64::from_le_bytes(out[32 * j + 8 * l..][..8].try_into().unwrap()));
        Fp::new_unchecked(BigInt(w))
    };
    let abc = std::array::from_fn(|k| (0..n).map(|i| element(k * n + i)).collect());
    let bad = u32::from_le_bytes(out[3 * n * 32..].try_into().unwrap());
    (abc, (bad != u32::MAX).then_some(bad as usize))
}

/// The harness's a, b, c equal the host's for a satisfying assignment.
fn check_equal(m: &Matrices, z: &[Fr], n: usize, long_len: u32, nsh: u32, name: &str) {
    let want = m.evaluate(z, n).expect("the assignment satisfies the matrices");
    let (got, bad) = device_rows(m, z, n, long_len, nsh, name);
    assert_eq!(bad, None, "{name}: a row found unsatisfied");
    for k in 0..3 {
        if let Some(i) = (0..n).find(|&i| got[k][i] != want[k][i]) {
            panic!("{name}: matrix {k} differs first at row {i} of {n}");
        }
    }
}

#[test]
fn the_kernels_rows_equal_the_host_evaluation() {
    let s = seed();
    let (m, z) = synthetic::mixed(3000, s);
    let n = (m.num_constraints() + m.num_inputs()).next_power_of_two();
    check_equal(&m, &z, n, LONG_ROW, SHARED, "mixed");
    // Zero padding beyond the input rows.
    check_equal(&m, &z, 2 * n, LONG_ROW, SHARED, "mixed-padded");
    // Every non-empty row through the warp's lanes, no shared copy; then no
    // row long and the whole table shared.
    check_equal(&m, &z, n, 0, 0, "all-long");
    check_equal(&m, &z, n, u32::MAX, u32::MAX, "none-long");
    let (m, z) = synthetic::porep_like(20_000, 328, s);
    let n = (m.num_constraints() + m.num_inputs()).next_power_of_two();
    check_equal(&m, &z, n, LONG_ROW, SHARED, "porep-like");
}

#[test]
fn the_kernels_report_the_first_row_the_host_finds_unsatisfied() {
    let s = seed();
    let rows = 2000;
    let (m, z) = synthetic::mixed(rows, s);
    let n = (rows + m.num_inputs()).next_power_of_two();
    // w_i, the variable only row i reads: variables are the 5 inputs, then
    // rows / 2 + 8 free ones, then w.
    let w = |i: usize| 5 + rows / 2 + 8 + i;
    for (name, broken) in [("one", vec![1733]), ("two", vec![1900, 411]), ("long", vec![0])] {
        let mut bad = z.clone();
        broken.iter().for_each(|&i| bad[w(i)] += Fr::one());
        let first = *broken.iter().min().unwrap();
        assert!(matches!(m.evaluate(&bad, n), Err(KernelError::Unsatisfied(r)) if r == first));
        for long_len in [LONG_ROW, 0] {
            let (_, found) = device_rows(&m, &bad, n, long_len, SHARED, name);
            assert_eq!(found, Some(first), "{name}, long rows above {long_len} terms");
        }
    }
}
