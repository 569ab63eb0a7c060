//! A fast Groth16 setup for Filecoin's circuits that writes *test-only*
//! parameters (random toxic waste, known to this process) in the exact layout,
//! names and conventions filecoin-proofs reads: bellperson 0.27's generator
//! (generator.rs) reproduced over arkworks with batched fixed-base
//! multiplication on every core.
//!
//! bellperson's conventions kept: ONE is input 0 and every input gets the
//! constraint A = x_i after the circuit's own; h has m − 1 points; a, b_g1 and
//! b_g2 leave out the variables whose polynomial is zero at tau (the identity
//! points bellperson filters), so they line up with the prover's densities.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ark_bls12_381::{Fr, G1Projective, G2Projective};
use ark_ec::scalar_mul::BatchMulPreprocessing;
use ark_ec::{CurveGroup, PrimeGroup};
use ark_ff::{Field, UniformRand, Zero};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::params::{write_vk, ParamPaths, ParamsWriter, QueryCounts, VerifyingKey};
use crate::record::Shape;
use crate::{Error, Kind};

/// Outputs above this size are refused unless forced (the 2 KiB PoRep file is
/// about 1.1 GB).
pub const SIZE_LIMIT: u64 = 512 << 20;

/// Scalars multiplied per batch: bounds the projective points held at once.
const BATCH: usize = 1 << 18;

/// One file written by [`generate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// The circuit the file belongs to.
    pub kind: Kind,
    /// Where it was written (`.params`, `.vk` or `.meta`).
    pub path: PathBuf,
    /// Its size, for the CLI's report.
    pub bytes: u64,
}

/// Writes test-only `.params`, `.vk` and `.meta` files for each kind at
/// `sector_size` into `out`, named as filecoin-proofs names them. A `.params`
/// file larger than [`SIZE_LIMIT`] is refused unless `force`.
pub fn generate(
    sector_size: u64,
    kinds: &[Kind],
    out: &Path,
    force: bool,
) -> Result<Vec<GeneratedFile>, Error> {
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    log::warn!(
        "generating TEST-ONLY Filecoin parameters: random toxic waste from seed {} (anyone with it can forge proofs)",
        hex::encode(seed)
    );
    let mut rng = ChaCha20Rng::from_seed(seed);
    let mut written = Vec::new();
    for &kind in kinds {
        let start = Instant::now();
        let blank = kind.blank(sector_size)?;
        let paths = ParamPaths::new(out, &blank.cache_id);
        let predicted = predicted_counts(&blank.shape).file_bytes();
        if predicted > SIZE_LIMIT && !force {
            return Err(Error::TooLarge {
                path: paths.params,
                bytes: predicted,
                limit: SIZE_LIMIT,
            });
        }
        log::info!(
            "{} {sector_size} B: {} constraints, {} inputs, {} aux recorded in {:.1?}",
            kind.cli_name(),
            blank.shape.num_constraints(),
            blank.shape.num_inputs(),
            blank.shape.num_aux(),
            start.elapsed()
        );
        let vk = write_params(&blank.shape, &paths.params, &mut rng)?;
        write_vk(&paths.vk, &vk)?;
        let meta = serde_json::to_vec(&blank.meta).map_err(|e| Error::Setup(e.to_string()))?;
        std::fs::write(&paths.meta, meta).map_err(|e| Error::io(&paths.meta, e))?;
        log::warn!(
            "wrote TEST-ONLY parameters {} in {:.1?}",
            paths.params.display(),
            start.elapsed()
        );
        for path in [paths.params, paths.vk, paths.meta] {
            let bytes = std::fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .len();
            written.push(GeneratedFile { kind, path, bytes });
        }
    }
    Ok(written)
}

/// The query lengths a setup of `shape` gives (exact unless some polynomial
/// vanishes at tau by chance, which the setup refuses).
pub fn predicted_counts(shape: &Shape) -> QueryCounts {
    let d = &shape.densities;
    QueryCounts {
        ic: shape.num_inputs(),
        h: shape.domain_size() - 1,
        l: shape.num_aux(),
        a: d.a_query_len(),
        b_g1: d.b_query_len(),
        b_g2: d.b_query_len(),
    }
}

/// The secret scalars of one setup.
struct ToxicWaste {
    /// The point the QAP polynomials are evaluated at.
    tau: Fr,
    /// alpha and beta tie A, B and C together in the verification equation.
    alpha: Fr,
    beta: Fr,
    /// Divides the public inputs' part (ic).
    gamma: Fr,
    /// Divides the prover's part (l, h).
    delta: Fr,
}

/// Runs the setup for `shape` and streams the `.params` file to `path` (through
/// a temporary name, so a reader never sees half a file); returns the
/// verifying key.
pub fn write_params(
    shape: &Shape,
    path: &Path,
    rng: &mut impl RngCore,
) -> Result<VerifyingKey, Error> {
    let mut nonzero = || loop {
        let x = Fr::rand(&mut *rng);
        if !x.is_zero() {
            return x;
        }
    };
    let t = ToxicWaste {
        tau: nonzero(),
        alpha: nonzero(),
        beta: nonzero(),
        gamma: nonzero(),
        delta: nonzero(),
    };
    let m = shape.domain_size();
    let domain = Radix2EvaluationDomain::<Fr>::new(m)
        .filter(|d| d.size() == m)
        .ok_or_else(|| Error::Setup(format!("no NTT domain of size {m}")))?;
    let lagrange = domain.evaluate_all_lagrange_coefficients(t.tau);
    let [at, bt, ct] = evaluate_at_tau(shape, &lagrange);
    drop(lagrange);

    let counts = predicted_counts(shape);
    let n_inputs = shape.num_inputs();
    let gamma_inv = t.gamma.inverse().expect("gamma is nonzero");
    let delta_inv = t.delta.inverse().expect("delta is nonzero");
    let ext = |i: usize, inv: Fr| (t.beta * at[i] + t.alpha * bt[i] + ct[i]) * inv;

    let g1 = G1Projective::generator();
    let g2 = G2Projective::generator();
    let g1_count = counts.ic + counts.h + counts.l + counts.a + counts.b_g1;
    let g1_table = BatchMulPreprocessing::new(g1, g1_count);
    let g2_table = BatchMulPreprocessing::new(g2, counts.b_g2);

    let ic_scalars: Vec<Fr> = (0..n_inputs).map(|i| ext(i, gamma_inv)).collect();
    let vk = VerifyingKey {
        alpha_g1: (g1 * t.alpha).into_affine(),
        beta_g1: (g1 * t.beta).into_affine(),
        beta_g2: (g2 * t.beta).into_affine(),
        gamma_g2: (g2 * t.gamma).into_affine(),
        delta_g1: (g1 * t.delta).into_affine(),
        delta_g2: (g2 * t.delta).into_affine(),
        ic: g1_table.batch_mul(&ic_scalars),
    };

    let l_scalars: Vec<Fr> = (n_inputs..at.len()).map(|i| ext(i, delta_inv)).collect();
    if let Some(j) = l_scalars.iter().position(Zero::is_zero) {
        return Err(Error::Setup(format!("aux variable {j} is unconstrained")));
    }
    let a_scalars: Vec<Fr> = at.iter().copied().filter(|x| !x.is_zero()).collect();
    let b_scalars: Vec<Fr> = bt.iter().copied().filter(|x| !x.is_zero()).collect();
    if a_scalars.len() != counts.a || b_scalars.len() != counts.b_g1 {
        return Err(Error::Setup(
            "a polynomial vanishes at tau by chance; run the setup again".into(),
        ));
    }

    let tmp = path.with_extension("params.partial");
    let mut w = ParamsWriter::create(&tmp, &vk)?;
    let started = Instant::now();
    // h: tau^i · t(tau) / delta, i < m − 1, computed batch by batch.
    let z_over_delta = domain.evaluate_vanishing_polynomial(t.tau) * delta_inv;
    w.begin(counts.h)?;
    for start in (0..counts.h).step_by(BATCH) {
        let len = BATCH.min(counts.h - start);
        let mut power = t.tau.pow([start as u64]) * z_over_delta;
        let scalars: Vec<Fr> = (0..len)
            .map(|_| {
                let s = power;
                power *= t.tau;
                s
            })
            .collect();
        w.points(&g1_table.batch_mul(&scalars))?;
    }
    for scalars in [&l_scalars, &a_scalars, &b_scalars] {
        w.begin(scalars.len())?;
        for batch in scalars.chunks(BATCH) {
            w.points(&g1_table.batch_mul(batch))?;
        }
    }
    w.begin(b_scalars.len())?;
    for batch in b_scalars.chunks(BATCH) {
        w.points(&g2_table.batch_mul(batch))?;
    }
    w.finish()?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    log::info!(
        "{}: {} G1 and {} G2 points in {:.1?}",
        path.display(),
        g1_count,
        counts.b_g2,
        started.elapsed()
    );
    Ok(vk)
}

/// A(tau), B(tau), C(tau) per variable (inputs, then aux): each column of the
/// matrices against the Lagrange basis at tau, the input constraints A = x_i
/// included. The three run in parallel.
fn evaluate_at_tau(shape: &Shape, lagrange: &[Fr]) -> [Vec<Fr>; 3] {
    let m = &shape.matrices;
    let n_vars = shape.num_inputs() + shape.num_aux();
    let column_sums = |k: usize| {
        let mut acc = vec![Fr::zero(); n_vars];
        for (i, l) in lagrange.iter().enumerate().take(m.num_constraints()) {
            for (coeff, var) in m.row(k, i) {
                acc[var] += *coeff * l;
            }
        }
        acc
    };
    let (mut at, (bt, ct)) = rayon::join(
        || column_sums(0),
        || rayon::join(|| column_sums(1), || column_sums(2)),
    );
    for (i, acc) in at.iter_mut().take(shape.num_inputs()).enumerate() {
        *acc += lagrange[m.num_constraints() + i];
    }
    [at, bt, ct]
}
