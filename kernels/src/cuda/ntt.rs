//! Host side of the NTT (kernels in cuda/ntt.cuh) and of the Groth16 H step.
//!
//! Per domain size the device keeps one twiddle table (the powers W^k of
//! the domain's generator for k <= n/2, which every stage of both
//! directions reads: cuda/ntt.cuh) and small two-level tables for the coset
//! scalings (i -> lo[i mod L] * hi[i / L], L = min(n, 1024)), all computed
//! on the host from ark-poly's own domain so that every constant is
//! arkworks'.

use ark_ff::{FftField, Field, One};
use ark_poly::EvaluationDomain;
use rayon::prelude::*;
use rustacuda::stream::Stream;

use super::gpu::{
    DBuf, DevFr, DevPtr, Gpu, Launch, Res, Workspace, NTT_SCALE_LOAD, NTT_SCALE_NONE, NTT_SCALE_STORE,
    NTT_THREADS,
};
use super::msm::fr_dev;
use crate::groth16::Domain;
use crate::{Fr, KernelError};

/// Threads per block of the elementwise kernels.
const THREADS: u32 = 256;
/// log2 of the elements one k_ntt_pass block holds in shared memory:
/// NTT_THREADS = 2^8 threads (4 elements each) and 2^10 * 32 bytes of shared
/// memory, inside every device's default limits.
const SHARED_LOG: u32 = NTT_THREADS.trailing_zeros() + 2;
/// Most stages of a pass after the first when more than one such pass is
/// needed: leaves at least 2^(SHARED_LOG - 8) = 4 consecutive elements (128
/// bytes) per row of a block. 8 rather than 7 takes 2^25 and 2^26 to two
/// later passes instead of three (-1% at 2^26, docs/gpu.md run 57). Stages
/// that fit one pass (SHARED_LOG or fewer) run in one, with as many columns
/// as are left: at 2^20 two passes instead of three (-2%, run 57).
const MAX_PASS_STAGES: u32 = 8;

/// Powers base^0 .. base^(len-1), times `scale`, computed in parallel chunks.
pub fn powers(base: Fr, scale: Fr, len: usize) -> Vec<Fr> {
    let mut out = vec![Fr::one(); len];
    const CHUNK: usize = 1 << 14;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, chunk)| {
        let mut x = scale * base.pow([(ci * CHUNK) as u64]);
        for o in chunk.iter_mut() {
            *o = x;
            x *= base;
        }
    });
    out
}

/// A scaling i -> scale * base^i as two small tables, which the passes of
/// a transform apply on the way (`Fold`).
struct Scaling {
    /// scale-free powers base^j for j < L.
    lo: DBuf<DevFr>,
    /// scale * base^(L*j) for j < n / L.
    hi: DBuf<DevFr>,
    /// log2 L.
    logl: u32,
}

impl Scaling {
    fn new(base: Fr, scale: Fr, n: usize, ws: &Workspace) -> Res<Self> {
        let l = n.min(1024);
        let logl = l.trailing_zeros();
        let lo = powers(base, Fr::one(), l);
        let hi = powers(base.pow([l as u64]), scale, n / l);
        Ok(Self { lo: ws.upload_owned(fr_dev(&lo))?, hi: ws.upload_owned(fr_dev(&hi))?, logl })
    }
    fn bytes(&self) -> u64 {
        self.lo.bytes() + self.hi.bytes()
    }
}

/// The scaling a transform applies to its input or its output: folded into
/// its first pass's loads or its last pass's stores, so that it costs a
/// product per element and no pass of its own over the data.
#[derive(Clone, Copy)]
enum Fold<'a> {
    None,
    /// Input i times the scaling's factor i (before the transform).
    Before(&'a Scaling),
    /// Output i times the scaling's factor i (after the transform).
    After(&'a Scaling),
    /// Every output times 1/n.
    AfterNinv,
}

/// Everything the device needs for NTTs of one size.
pub struct NttTables {
    /// The domain size.
    pub n: usize,
    /// log2 n.
    pub logn: u32,
    /// W^k for k <= n/2, W the domain's generator: every stage's twiddles,
    /// forward and inverse (cuda/ntt.cuh, `twiddle`). One table of n/2
    /// elements where one per stage and direction took 2n: 2.1 GB instead
    /// of 8.6 at 2^27 (issue 37).
    tw: DBuf<DevFr>,
    /// g^i
    coset: Scaling,
    /// g^i / n (inverse NTT followed by a coset NTT)
    coset_ninv: Scaling,
    /// g^-i / n (coset inverse NTT)
    coset_inv_ninv: Scaling,
    /// 1/n, 1/Z(g)
    consts: DBuf<DevFr>,
}

impl NttTables {
    /// The tables of size n, uploaded through `ws` (waits for the upload).
    pub fn new(n: usize, ws: &Workspace) -> Res<Self> {
        let domain =
            Domain::new(n).ok_or_else(|| KernelError::Synthesis(format!("no NTT domain of size {n}")))?;
        assert_eq!(domain.size(), n);
        let tw = ws.upload_owned(fr_dev(&powers(domain.group_gen, Fr::one(), n / 2 + 1)))?;
        let g = Fr::GENERATOR;
        let g_inv = g.inverse().expect("generator is nonzero");
        let coset = Scaling::new(g, Fr::one(), n, ws)?;
        let coset_ninv = Scaling::new(g, domain.size_inv, n, ws)?;
        let coset_inv_ninv = Scaling::new(g_inv, domain.size_inv, n, ws)?;
        let z_inv = domain
            .evaluate_vanishing_polynomial(g)
            .inverse()
            .expect("the vanishing polynomial is nonzero off the domain");
        let consts = ws.upload_owned(fr_dev(&[domain.size_inv, z_inv]))?;
        ws.synchronize("uploading NTT tables")?;
        Ok(Self { n, logn: n.trailing_zeros(), tw, coset, coset_ninv, coset_inv_ninv, consts })
    }

    /// Device bytes the tables of size n take (what `bytes` will report),
    /// for the resident budget before they are built: the twiddle table
    /// of n/2 + 1, three scalings of min(n, 1024) + n / min(n, 1024), two
    /// constants.
    pub fn bytes_for(n: usize) -> u64 {
        let l = n.min(1024);
        let elements = n / 2 + 1 + 3 * (l + n / l) + 2;
        (elements * std::mem::size_of::<DevFr>()) as u64
    }

    /// Device bytes of the tables.
    pub fn bytes(&self) -> u64 {
        self.tw.bytes()
            + self.coset.bytes()
            + self.coset_ninv.bytes()
            + self.coset_inv_ninv.bytes()
            + self.consts.bytes()
    }

    /// In-place NTT (natural order in and out), forward or inverse, with
    /// `fold`'s scaling. `scratch` holds n elements (used when n > 2^10).
    fn ntt_raw(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        data: DevPtr<DevFr>,
        scratch: DevPtr<DevFr>,
        inverse: bool,
        fold: Fold,
    ) -> Res<()> {
        let (n, logn) = (self.n as u32, self.logn);
        if n <= 1 {
            return Ok(());
        }
        // First pass: the bit-reversal gather and up to SHARED_LOG stages,
        // one column; then the remaining stages in one pass if they fit,
        // else split evenly over the fewest passes of at most
        // MAX_PASS_STAGES, each with as many columns as fill the shared
        // chunk.
        let first = logn.min(SHARED_LOG);
        let mut passes = vec![(0, first, 0)];
        let mut p = first;
        while p < logn {
            let left = logn - p;
            let count = if left <= SHARED_LOG { 1 } else { left.div_ceil(MAX_PASS_STAGES) };
            let s = left.div_ceil(count);
            passes.push((p, s, SHARED_LOG - s));
            p += s;
        }
        let last = passes.len() - 1;
        let none = DevPtr::null();
        let (lo, hi, logl) = match fold {
            Fold::None => (none, none, 0),
            Fold::Before(t) | Fold::After(t) => (t.lo.ptr(), t.hi.ptr(), t.logl),
            Fold::AfterNinv => (self.consts.ptr(), none, 0),
        };
        for (k, &(p, s, c)) in passes.iter().enumerate() {
            let input = if k == 0 { data } else { scratch };
            let out = if k == last { data } else { scratch };
            let chunk = 1u32 << (s + c);
            let shared = chunk * std::mem::size_of::<DevFr>() as u32;
            let gather = u32::from(k == 0);
            let scale_at = match fold {
                Fold::Before(_) if k == 0 => NTT_SCALE_LOAD,
                Fold::After(_) | Fold::AfterNinv if k == last => NTT_SCALE_STORE,
                _ => NTT_SCALE_NONE,
            };
            let l = Launch::new(n / chunk, (chunk / 4).max(1)).shared(shared);
            gpu.k_ntt_pass(
                stream,
                l,
                input,
                out,
                self.tw.ptr(),
                u32::from(inverse),
                logn,
                p,
                s,
                c,
                gather,
                lo,
                hi,
                logl,
                scale_at,
            )?;
        }
        Ok(())
    }

    /// arkworks' `fft_in_place`, or with `inverse` its `ifft_in_place`
    /// (coset: `get_coset(GENERATOR)`'s).
    pub fn ntt(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        data: DevPtr<DevFr>,
        scratch: DevPtr<DevFr>,
        inverse: bool,
        coset: bool,
    ) -> Res<()> {
        let fold = match (inverse, coset) {
            (false, false) => Fold::None,
            (false, true) => Fold::Before(&self.coset),
            (true, false) => Fold::AfterNinv,
            (true, true) => Fold::After(&self.coset_inv_ninv),
        };
        self.ntt_raw(gpu, stream, data, scratch, inverse, fold)
    }

    /// One of a, b, c of the libsnark reduction (`compute_h_cpu`), in place:
    /// its evaluations on the domain become those on the coset. Each input
    /// can go as soon as its own upload has arrived; `h_from_cosets` follows
    /// once all three have.
    pub fn to_coset(&self, gpu: &Gpu, stream: &Stream, x: DevPtr<DevFr>, scratch: DevPtr<DevFr>) -> Res<()> {
        self.ntt_raw(gpu, stream, x, scratch, true, Fold::After(&self.coset_ninv))?;
        self.ntt_raw(gpu, stream, x, scratch, false, Fold::None)
    }

    /// H of the libsnark reduction, exactly `compute_h_cpu`, from a, b, c
    /// on the coset (`to_coset` of each); the result in a.
    pub fn h_from_cosets(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        a: DevPtr<DevFr>,
        b: DevPtr<DevFr>,
        c: DevPtr<DevFr>,
        scratch: DevPtr<DevFr>,
    ) -> Res<()> {
        gpu.k_h_pointwise(
            stream,
            Launch::over(self.n, THREADS),
            a,
            b,
            c,
            self.n as u32,
            self.consts.ptr_at(1),
        )?;
        self.ntt(gpu, stream, a, scratch, true, true)
    }
}
