//! A fast Groth16 setup for Filecoin's circuits that writes *test-only*
//! parameters (random toxic waste, known to this process) in the exact layout,
//! names and conventions filecoin-proofs reads: bellperson 0.27's generator
//! (generator.rs) reproduced over arkworks with batched fixed-base
//! multiplication. The multiplications of the generators, nearly all of
//! the work at real size, go through [`FixedBaseMul`]: [`CpuFixedBase`] (on
//! every core) by default, the device with feature `cuda`
//! (`crate::gpu_setup::CudaFixedBase`).
//!
//! bellperson's conventions kept: ONE is input 0 and every input gets the
//! constraint A = x_i after the circuit's own; h has m − 1 points; a, b_g1 and
//! b_g2 leave out the variables whose polynomial is zero at tau (the identity
//! points bellperson filters), so they line up with the prover's densities.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use ark_bls12_381::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::scalar_mul::BatchMulPreprocessing;
use ark_ec::{CurveGroup, PrimeGroup};
use ark_ff::{Field, One, UniformRand, Zero};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use ark_serialize::CanonicalSerialize;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::params::{write_vk, ParamPaths, ParamsWriter, QueryCounts, VerifyingKey};
use crate::record::Shape;
use crate::shape_cache::ShapeCache;
use crate::{Error, Kind};

/// Outputs above this size are refused unless forced (the 2 KiB PoRep file is
/// about 1.1 GB).
pub const SIZE_LIMIT: u64 = 512 << 20;

/// Scalars multiplied per batch on the CPU: bounds the projective points
/// held at once.
const BATCH: usize = 1 << 18;

/// The setup's replaceable part, as arkworks' Groth16 makes its QAP
/// reduction a trait with a default: multiplying the fixed generators of G1
/// and G2 by many scalars (ic, h, l, a and b_g1 in G1, b_g2 in G2), nearly
/// all of a real-size setup's work. Every implementation returns the same
/// affine points for the same scalars, so the files written are the same
/// bytes whichever one runs.
pub trait FixedBaseMul: Sync {
    /// Scalars the setup hands over at once (it computes the h scalars
    /// batch by batch): as many as one call uses well.
    fn batch(&self) -> usize {
        BATCH
    }
    /// Told, before a key's first product, how many G1 and G2 products the
    /// key takes in all (the CPU sizes its tables by them); default: nothing.
    fn prepare(&self, _g1: usize, _g2: usize) {}
    /// s * G1's generator for each scalar, affine.
    fn g1(&self, scalars: &[Fr]) -> Result<Vec<G1Affine>, Error>;
    /// s * G2's generator for each scalar, affine.
    fn g2(&self, scalars: &[Fr]) -> Result<Vec<G2Affine>, Error>;
}

/// The default [`FixedBaseMul`]: arkworks' batched fixed-base
/// multiplication on every core, each generator's table made once, its
/// windows sized for the first key's count (`prepare`; a batch of
/// [`BATCH`] when not told).
#[derive(Default)]
pub struct CpuFixedBase {
    g1: OnceLock<BatchMulPreprocessing<G1Projective>>,
    g2: OnceLock<BatchMulPreprocessing<G2Projective>>,
}

impl FixedBaseMul for CpuFixedBase {
    fn prepare(&self, g1: usize, g2: usize) {
        self.g1.get_or_init(|| BatchMulPreprocessing::new(G1Projective::generator(), g1.max(1)));
        self.g2.get_or_init(|| BatchMulPreprocessing::new(G2Projective::generator(), g2.max(1)));
    }
    fn g1(&self, scalars: &[Fr]) -> Result<Vec<G1Affine>, Error> {
        let table = self.g1.get_or_init(|| BatchMulPreprocessing::new(G1Projective::generator(), BATCH));
        Ok(table.batch_mul(scalars))
    }
    fn g2(&self, scalars: &[Fr]) -> Result<Vec<G2Affine>, Error> {
        let table = self.g2.get_or_init(|| BatchMulPreprocessing::new(G2Projective::generator(), BATCH));
        Ok(table.batch_mul(scalars))
    }
}

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

/// What one setup writes: which circuits, at what size, where.
#[derive(Clone, Copy)]
pub struct Generate<'a> {
    /// The sector size of every circuit.
    pub sector_size: u64,
    /// The circuits, one key each, made in this order.
    pub kinds: &'a [Kind],
    /// The directory written, named as filecoin-proofs names its files
    /// (what it reads as `FIL_PROOFS_PARAMETER_CACHE`).
    pub out: &'a Path,
    /// Write `.params` files larger than [`SIZE_LIMIT`] too.
    pub force: bool,
    /// Also keep each blank circuit's compiled shape here, recorded anyway
    /// for the evaluation at tau: a daemon whose shape cache this is reads
    /// it back at its first preload instead of recording the circuit again
    /// (about two minutes for a 32 GiB PoRep).
    pub shapes: Option<&'a ShapeCache<'a>>,
}

impl<'a> Generate<'a> {
    /// `kinds` at `sector_size` into `out`, within [`SIZE_LIMIT`], no shape kept.
    pub fn new(sector_size: u64, kinds: &'a [Kind], out: &'a Path) -> Self {
        Self { sector_size, kinds, out, force: false, shapes: None }
    }
}

/// Writes test-only `.params`, `.vk` and `.meta` files for each of
/// `what`'s kinds, the toxic waste from the operating system's generator
/// and the multiplications done by `mul` ([`CpuFixedBase`] unless a device
/// is at hand). A `.params` file larger than [`SIZE_LIMIT`] is refused
/// unless `what.force`.
pub fn generate(what: &Generate<'_>, mul: &dyn FixedBaseMul) -> Result<Vec<GeneratedFile>, Error> {
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    generate_from_seed(seed, what, mul)
}

/// [`generate`] with the toxic waste drawn from `seed`: for tests
/// that compare two engines' files (the same seed gives the same toxic
/// waste, so the same bytes). Never for keys anyone uses: whoever knows the
/// seed can forge proofs.
pub fn generate_from_seed(
    seed: [u8; 32],
    what: &Generate<'_>,
    mul: &dyn FixedBaseMul,
) -> Result<Vec<GeneratedFile>, Error> {
    let Generate { sector_size, kinds, out, force, shapes } = *what;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
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
            return Err(Error::TooLarge { path: paths.params, bytes: predicted, limit: SIZE_LIMIT });
        }
        log::info!(
            "{} {sector_size} B: {} constraints, {} inputs, {} aux recorded in {:.1?}",
            kind.cli_name(),
            blank.shape.num_constraints(),
            blank.shape.num_inputs(),
            blank.shape.num_aux(),
            start.elapsed()
        );
        let vk = write_params(&blank.shape, &paths.params, &mut rng, mul)?;
        if let Some(cache) = shapes {
            cache.store(&blank.cache_id, &blank.shape);
        }
        write_vk(&paths.vk, &vk)?;
        let meta = serde_json::to_vec(&blank.meta).map_err(|e| Error::Setup(e.to_string()))?;
        std::fs::write(&paths.meta, meta).map_err(|e| Error::io(&paths.meta, e))?;
        log::warn!("wrote TEST-ONLY parameters {} in {:.1?}", paths.params.display(), start.elapsed());
        for path in [paths.params, paths.vk, paths.meta] {
            let bytes = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
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
/// verifying key. `mul` does the multiplications of the generators.
pub fn write_params(
    shape: &Shape,
    path: &Path,
    rng: &mut impl RngCore,
    mul: &dyn FixedBaseMul,
) -> Result<VerifyingKey, Error> {
    let mut nonzero = || loop {
        let x = Fr::rand(&mut *rng);
        if !x.is_zero() {
            return x;
        }
    };
    let t =
        ToxicWaste { tau: nonzero(), alpha: nonzero(), beta: nonzero(), gamma: nonzero(), delta: nonzero() };
    let m = shape.domain_size();
    let domain = Radix2EvaluationDomain::<Fr>::new(m)
        .filter(|d| d.size() == m)
        .ok_or_else(|| Error::Setup(format!("no NTT domain of size {m}")))?;
    let started = Instant::now();
    let lagrange = domain.evaluate_all_lagrange_coefficients(t.tau);
    let lagrange_took = started.elapsed();
    let [at, bt, ct] = evaluate_at_tau(shape, &lagrange);
    drop(lagrange);
    log::info!(
        "{}: Lagrange coefficients at tau in {lagrange_took:.1?}, A, B, C at tau in {:.1?}",
        path.display(),
        started.elapsed() - lagrange_took
    );

    let counts = predicted_counts(shape);
    let n_inputs = shape.num_inputs();
    let gamma_inv = t.gamma.inverse().expect("gamma is nonzero");
    let delta_inv = t.delta.inverse().expect("delta is nonzero");
    let ext = |i: usize, inv: Fr| (t.beta * at[i] + t.alpha * bt[i] + ct[i]) * inv;

    let g1 = G1Projective::generator();
    let g2 = G2Projective::generator();
    let g1_count = counts.ic + counts.h + counts.l + counts.a + counts.b_g1;
    mul.prepare(g1_count, counts.b_g2);

    let ic_scalars: Vec<Fr> = (0..n_inputs).map(|i| ext(i, gamma_inv)).collect();
    let vk = VerifyingKey {
        alpha_g1: (g1 * t.alpha).into_affine(),
        beta_g1: (g1 * t.beta).into_affine(),
        beta_g2: (g2 * t.beta).into_affine(),
        gamma_g2: (g2 * t.gamma).into_affine(),
        delta_g1: (g1 * t.delta).into_affine(),
        delta_g2: (g2 * t.delta).into_affine(),
        ic: mul.g1(&ic_scalars)?,
    };

    let l_scalars: Vec<Fr> = (n_inputs..at.len()).into_par_iter().map(|i| ext(i, delta_inv)).collect();
    if let Some(j) = l_scalars.iter().position(Zero::is_zero) {
        return Err(Error::Setup(format!("aux variable {j} is unconstrained")));
    }
    let a_scalars: Vec<Fr> = at.iter().copied().filter(|x| !x.is_zero()).collect();
    let b_scalars: Vec<Fr> = bt.iter().copied().filter(|x| !x.is_zero()).collect();
    if a_scalars.len() != counts.a || b_scalars.len() != counts.b_g1 {
        return Err(Error::Setup("a polynomial vanishes at tau by chance; run the setup again".into()));
    }

    let tmp = path.with_extension("params.partial");
    let mut w = ParamsWriter::create(&tmp, &vk)?;
    let started = Instant::now();
    // h: tau^i · t(tau) / delta, i < m − 1, computed batch by batch, each
    // batch's powers in parallel runs from their own first power.
    let z_over_delta = domain.evaluate_vanishing_polynomial(t.tau) * delta_inv;
    let batch = mul.batch().max(1);
    let h_parts = (0..counts.h).step_by(batch).map(|start| {
        let len = batch.min(counts.h - start);
        mul.g1(&h_scalars(t.tau, z_over_delta, start, len))
    });
    write_query(&mut w, counts.h, h_parts)?;
    for scalars in [&l_scalars, &a_scalars, &b_scalars] {
        write_query(&mut w, scalars.len(), scalars.chunks(batch).map(|p| mul.g1(p)))?;
    }
    write_query(&mut w, b_scalars.len(), b_scalars.chunks(batch).map(|p| mul.g2(p)))?;
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

/// Writes one query of `count` points, multiplied part by part by `parts`
/// on a thread of its own while the previous part is serialized and
/// written: the device's (or the cores') products overlap the disk, which
/// at real size is the floor (48 GB for a 32 GiB PoRep key). At most two
/// parts wait for the writer.
fn write_query<P: CanonicalSerialize + Send + Sync>(
    w: &mut ParamsWriter,
    count: usize,
    parts: impl Iterator<Item = Result<Vec<P>, Error>> + Send,
) -> Result<(), Error> {
    w.begin(count)?;
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        s.spawn(move || {
            for part in parts {
                // The writer stopped (an error): stop multiplying.
                if tx.send(part).is_err() {
                    break;
                }
            }
        });
        rx.into_iter().try_for_each(|part| w.points(&part?))
    })
}

/// tau^i · scale for i in start..start + len, in runs of RUN powers on
/// every core (each run starts from its own power of tau).
fn h_scalars(tau: Fr, scale: Fr, start: usize, len: usize) -> Vec<Fr> {
    const RUN: usize = 1 << 12;
    let mut out = vec![Fr::zero(); len];
    out.par_chunks_mut(RUN).enumerate().for_each(|(r, run)| {
        let mut power = tau.pow([(start + r * RUN) as u64]) * scale;
        for s in run {
            *s = power;
            power *= tau;
        }
    });
    out
}

/// A(tau), B(tau), C(tau) per variable (inputs, then aux): each column of the
/// matrices against the Lagrange basis at tau, the input constraints A = x_i
/// included. Each matrix's variables are split into a range per core; each
/// range's task reads every row and sums the terms of its own variables, so
/// the products (the cost) are spread over the cores with no shared
/// accumulator, at the price of each task reading all the terms.
fn evaluate_at_tau(shape: &Shape, lagrange: &[Fr]) -> [Vec<Fr>; 3] {
    let m = &shape.matrices;
    let n_vars = shape.num_inputs() + shape.num_aux();
    let span = n_vars.div_ceil(rayon::current_num_threads()).max(1);
    let column_sums = |k: usize| {
        let mut acc = vec![Fr::zero(); n_vars];
        acc.par_chunks_mut(span).enumerate().for_each(|(c, part)| {
            let first = c * span;
            for (i, l) in lagrange.iter().enumerate().take(m.num_constraints()) {
                for (coeff, var) in m.row(k, i) {
                    let Some(sum) = var.checked_sub(first).and_then(|j| part.get_mut(j)) else {
                        continue;
                    };
                    if coeff.is_one() {
                        *sum += l;
                    } else {
                        *sum += *coeff * l;
                    }
                }
            }
        });
        acc
    };
    let mut at = column_sums(0);
    let (bt, ct) = (column_sums(1), column_sums(2));
    for (i, acc) in at.iter_mut().take(shape.num_inputs()).enumerate() {
        *acc += lagrange[m.num_constraints() + i];
    }
    [at, bt, ct]
}
