//! Host side of the NTT (kernels in cuda/ntt.cuh) and of the Groth16 H step.
//!
//! Per domain size the device keeps the twiddle tables (w^k and w^-k for
//! k < n/2) and small two-level tables for the coset scalings
//! (i -> lo[i mod L] * hi[i / L], L = min(n, 1024)), all computed on the host
//! from ark-poly's own domain so that every constant is arkworks'.

use ark_ff::{FftField, Field, One};
use ark_poly::EvaluationDomain;
use rayon::prelude::*;
use rustacuda::stream::Stream;

use super::gpu::{blocks, DBuf, Gpu, Res};
use super::msm::fr_words;
use crate::cuda_args;
use crate::groth16::Domain;
use crate::Fr;

const THREADS: u32 = 256;
const SHARED_LOG: u32 = 10;

/// Powers base^0 .. base^(len-1), times `scale`, computed in parallel chunks.
pub fn powers(base: Fr, scale: Fr, len: usize) -> Vec<Fr> {
    let mut out = vec![Fr::one(); len];
    const CHUNK: usize = 1 << 14;
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(ci, chunk)| {
            let mut x = scale * base.pow([(ci * CHUNK) as u64]);
            for o in chunk.iter_mut() {
                *o = x;
                x *= base;
            }
        });
    out
}

/// A coset scaling i -> scale * base^i as two small tables.
pub struct Scaling {
    lo: DBuf<u64>,
    hi: DBuf<u64>,
    logl: u32,
}

impl Scaling {
    fn new(base: Fr, scale: Fr, n: usize, stream: &Stream) -> Res<Self> {
        let l = n.min(1024);
        let logl = l.trailing_zeros();
        let lo = powers(base, Fr::one(), l);
        let hi = powers(base.pow([l as u64]), scale, n / l);
        let mut dlo = DBuf::new(lo.len() * 4)?;
        let mut dhi = DBuf::new(hi.len() * 4)?;
        dlo.upload(fr_words(&lo), stream)?;
        dhi.upload(fr_words(&hi), stream)?;
        Ok(Self {
            lo: dlo,
            hi: dhi,
            logl,
        })
    }
    fn bytes(&self) -> u64 {
        self.lo.bytes() + self.hi.bytes()
    }
}

/// Everything the device needs for NTTs of one size.
pub struct NttTables {
    pub n: usize,
    pub logn: u32,
    tw_fwd: DBuf<u64>,
    tw_inv: DBuf<u64>,
    /// g^i
    pub coset: Scaling,
    /// g^i / n (inverse NTT followed by a coset NTT)
    pub coset_ninv: Scaling,
    /// g^-i / n (coset inverse NTT)
    pub coset_inv_ninv: Scaling,
    /// 1/n, 1/Z(g)
    consts: DBuf<u64>,
}

impl NttTables {
    pub fn new(gpu: &Gpu, n: usize) -> Res<Self> {
        let domain = Domain::new(n)
            .ok_or_else(|| crate::KernelError::Device(format!("no NTT domain of size {n}")))?;
        assert_eq!(domain.size(), n);
        let stream = gpu.stream()?;
        let half = (n / 2).max(1);
        let fwd = powers(domain.group_gen, Fr::one(), half);
        let inv = powers(domain.group_gen_inv, Fr::one(), half);
        let mut tw_fwd = DBuf::new(half * 4)?;
        let mut tw_inv = DBuf::new(half * 4)?;
        tw_fwd.upload(fr_words(&fwd), &stream)?;
        tw_inv.upload(fr_words(&inv), &stream)?;
        let g = Fr::GENERATOR;
        let g_inv = g.inverse().expect("generator is nonzero");
        let coset = Scaling::new(g, Fr::one(), n, &stream)?;
        let coset_ninv = Scaling::new(g, domain.size_inv, n, &stream)?;
        let coset_inv_ninv = Scaling::new(g_inv, domain.size_inv, n, &stream)?;
        let z_inv = domain
            .evaluate_vanishing_polynomial(g)
            .inverse()
            .expect("the vanishing polynomial is nonzero off the domain");
        let mut consts = DBuf::new(8)?;
        consts.upload(fr_words(&[domain.size_inv, z_inv]), &stream)?;
        stream
            .synchronize()
            .map_err(super::gpu::dev_err("uploading NTT tables"))?;
        Ok(Self {
            n,
            logn: n.trailing_zeros(),
            tw_fwd,
            tw_inv,
            coset,
            coset_ninv,
            coset_inv_ninv,
            consts,
        })
    }

    pub fn bytes(&self) -> u64 {
        self.tw_fwd.bytes()
            + self.tw_inv.bytes()
            + self.coset.bytes()
            + self.coset_ninv.bytes()
            + self.coset_inv_ninv.bytes()
            + self.consts.bytes()
    }

    /// In-place NTT (natural order in and out), forward or inverse, without
    /// any scaling. `scratch` holds n elements (used when n > 2^10).
    pub fn ntt_raw(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        data: u64,
        scratch: u64,
        inverse: bool,
    ) -> Res<()> {
        let (n, logn) = (self.n as u32, self.logn);
        if n <= 1 {
            return Ok(());
        }
        let tw = if inverse {
            self.tw_inv.ptr()
        } else {
            self.tw_fwd.ptr()
        };
        let s = logn.min(SHARED_LOG);
        let chunk = 1u32 << s;
        let gather = 1u32;
        let first_out = if logn > s { scratch } else { data };
        gpu.launch(
            stream,
            "k_ntt_shared",
            n / chunk,
            chunk / 2,
            chunk * 32,
            &cuda_args![data, first_out, tw, n, logn, s, gather],
        )?;
        let mut p = s;
        while p < logn {
            let t = (logn - p).min(3);
            let name = match t {
                1 => "k_ntt_radix1",
                2 => "k_ntt_radix2",
                _ => "k_ntt_radix3",
            };
            let groups = self.n >> t;
            let out = if p + t == logn { data } else { scratch };
            gpu.launch(
                stream,
                name,
                blocks(groups, 128),
                128,
                0,
                &cuda_args![scratch, out, tw, n, p],
            )?;
            p += t;
        }
        Ok(())
    }

    pub fn scale(&self, gpu: &Gpu, stream: &Stream, data: u64, s: &Scaling) -> Res<()> {
        let n = self.n as u32;
        let (lo, hi, logl) = (s.lo.ptr(), s.hi.ptr(), s.logl);
        gpu.launch(
            stream,
            "k_fr_scale_lohi",
            blocks(self.n, THREADS),
            THREADS,
            0,
            &cuda_args![data, n, lo, hi, logl],
        )
    }

    pub fn scale_ninv(&self, gpu: &Gpu, stream: &Stream, data: u64) -> Res<()> {
        let n = self.n as u32;
        let k = self.consts.ptr();
        gpu.launch(
            stream,
            "k_fr_scale_const",
            blocks(self.n, THREADS),
            THREADS,
            0,
            &cuda_args![data, n, k],
        )
    }

    /// arkworks' `fft_in_place` (coset: `get_coset(GENERATOR)`'s).
    pub fn fft(&self, gpu: &Gpu, stream: &Stream, data: u64, scratch: u64, coset: bool) -> Res<()> {
        if coset {
            self.scale(gpu, stream, data, &self.coset)?;
        }
        self.ntt_raw(gpu, stream, data, scratch, false)
    }

    /// arkworks' `ifft_in_place` (coset: `get_coset(GENERATOR)`'s).
    pub fn ifft(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        data: u64,
        scratch: u64,
        coset: bool,
    ) -> Res<()> {
        self.ntt_raw(gpu, stream, data, scratch, true)?;
        if coset {
            self.scale(gpu, stream, data, &self.coset_inv_ninv)
        } else {
            self.scale_ninv(gpu, stream, data)
        }
    }

    /// H of the libsnark reduction, exactly `compute_h_cpu`: a, b, c in
    /// place; the result in a.
    pub fn compute_h(
        &self,
        gpu: &Gpu,
        stream: &Stream,
        a: u64,
        b: u64,
        c: u64,
        scratch: u64,
    ) -> Res<()> {
        for x in [a, b, c] {
            self.ntt_raw(gpu, stream, x, scratch, true)?;
            self.scale(gpu, stream, x, &self.coset_ninv)?;
            self.ntt_raw(gpu, stream, x, scratch, false)?;
        }
        let n = self.n as u32;
        let zinv = self.consts.ptr() + 32;
        gpu.launch(
            stream,
            "k_h_pointwise",
            blocks(self.n, THREADS),
            THREADS,
            0,
            &cuda_args![a, b, c, n, zinv],
        )?;
        self.ifft(gpu, stream, a, scratch, true)
    }
}
