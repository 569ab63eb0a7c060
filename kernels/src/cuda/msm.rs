//! Host side of the Pippenger MSM (kernels in cuda/msm.cuh): point and scalar
//! layouts, the sorted-bucket plan, the accumulation levels and the final
//! Horner step over the window sums.

use ark_bls12_381::{Fq, Fq2, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::AdditiveGroup;
use ark_ff::{BigInt, Fp};
use ark_std::Zero;
use rayon::prelude::*;
use rustacuda::stream::Stream;

use super::gpu::{blocks, DBuf, Gpu, Res};
use crate::cuda_args;
use crate::Fr;

/// u64 words per element on the GPU.
pub const FR_WORDS: usize = 4;
pub const G1_AFF_WORDS: usize = 12;
pub const G1_JAC_WORDS: usize = 18;
pub const G2_AFF_WORDS: usize = 24;
pub const G2_JAC_WORDS: usize = 36;

/// Entries one work item of a bucket level sums.
pub const LEVEL_K: u32 = 32;
const SEG: usize = 16;
const THREADS: u32 = 256;

/// Which group an MSM runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    G1,
    G2,
}

impl Group {
    fn jac_words(self) -> usize {
        match self {
            Group::G1 => G1_JAC_WORDS,
            Group::G2 => G2_JAC_WORDS,
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Group::G1 => "k_g1",
            Group::G2 => "k_g2",
        }
    }
}

/// The Montgomery words of a slice of field elements, without copying.
pub fn fr_words(s: &[Fr]) -> &[u64] {
    assert_eq!(std::mem::size_of::<Fr>(), 32);
    assert_eq!(std::mem::align_of::<Fr>(), 8);
    // SAFETY: Fr is Fp(BigInt<4>, PhantomData): one [u64; 4] and a ZST, size 32
    // (checked above); the GPU reads it as 8 little-endian u32 limbs.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u64, s.len() * FR_WORDS) }
}

fn fq_words(f: &Fq) -> [u64; 6] {
    f.0 .0
}

/// G1 affine points as the GPU reads them (x, y; identity = zeros).
pub fn g1_to_words(points: &[G1Affine]) -> Vec<u64> {
    let mut out = vec![0u64; points.len() * G1_AFF_WORDS];
    out.par_chunks_mut(G1_AFF_WORDS)
        .zip(points.par_iter())
        .for_each(|(o, p)| {
            if !p.infinity {
                o[..6].copy_from_slice(&fq_words(&p.x));
                o[6..].copy_from_slice(&fq_words(&p.y));
            }
        });
    out
}

pub fn g2_to_words(points: &[G2Affine]) -> Vec<u64> {
    let mut out = vec![0u64; points.len() * G2_AFF_WORDS];
    out.par_chunks_mut(G2_AFF_WORDS)
        .zip(points.par_iter())
        .for_each(|(o, p)| {
            if !p.infinity {
                o[0..6].copy_from_slice(&fq_words(&p.x.c0));
                o[6..12].copy_from_slice(&fq_words(&p.x.c1));
                o[12..18].copy_from_slice(&fq_words(&p.y.c0));
                o[18..24].copy_from_slice(&fq_words(&p.y.c1));
            }
        });
    out
}

fn fq_from(w: &[u64]) -> Fq {
    Fp::new_unchecked(BigInt([w[0], w[1], w[2], w[3], w[4], w[5]]))
}

pub fn g1_from_jac(w: &[u64]) -> G1Projective {
    let z = fq_from(&w[12..18]);
    if z.is_zero() {
        return G1Projective::zero();
    }
    G1Projective::new_unchecked(fq_from(&w[0..6]), fq_from(&w[6..12]), z)
}

pub fn g2_from_jac(w: &[u64]) -> G2Projective {
    let f2 = |o: usize| Fq2::new(fq_from(&w[o..o + 6]), fq_from(&w[o + 6..o + 12]));
    let z = f2(24);
    if z.is_zero() {
        return G2Projective::zero();
    }
    G2Projective::new_unchecked(f2(0), f2(12), z)
}

/// Window size for n points (override: CUZK_MSM_C).
pub fn window_bits(n: usize) -> u32 {
    if let Some(c) = std::env::var("CUZK_MSM_C")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        return c.clamp(4, 24);
    }
    let log = usize::BITS - n.max(1).leading_zeros();
    (log.saturating_sub(4)).clamp(6, 16)
}

/// Scalars sorted into buckets: depends only on the scalars, so MSMs with the
/// same scalars (A, B1, B2) share one.
pub struct Plan {
    pub n: usize,
    pub c: u32,
    pub nwin: u32,
    /// Buckets per window: 2^(c-1).
    pub nbw: u32,
    cnt: DBuf<u32>,
    off: DBuf<u32>,
    list: DBuf<u32>,
}

impl Plan {
    pub fn bytes(&self) -> u64 {
        self.cnt.bytes() + self.off.bytes() + self.list.bytes()
    }
    fn nb(&self) -> u32 {
        self.nwin * self.nbw
    }
}

/// Exclusive scan of `len` u32 at `input` into `out` (may alias).
pub fn scan(
    gpu: &Gpu,
    stream: &Stream,
    input: u64,
    out: u64,
    len: usize,
    sums: &DBuf<u32>,
) -> Res<()> {
    const TILE: usize = 512 * 8;
    let tiles = len.div_ceil(TILE);
    assert!(sums.len() >= tiles);
    let (n, s) = (len as u32, sums.ptr());
    gpu.launch(
        stream,
        "k_scan_tiles",
        tiles as u32,
        512,
        0,
        &cuda_args![input, out, n, s],
    )?;
    let m = tiles as u32;
    gpu.launch(stream, "k_scan_sums", 1, 512, 0, &cuda_args![s, m])?;
    gpu.launch(
        stream,
        "k_scan_add",
        blocks(len, THREADS),
        THREADS,
        0,
        &cuda_args![out, n, s],
    )
}

pub fn fill_u32(gpu: &Gpu, stream: &Stream, ptr: u64, len: usize, value: u32) -> Res<()> {
    let n = len as u32;
    gpu.launch(
        stream,
        "k_fill_u32",
        blocks(len, THREADS),
        THREADS,
        0,
        &cuda_args![ptr, n, value],
    )
}

/// Converts n Montgomery scalars at `mont` into plain integers at `std`.
pub fn from_mont(gpu: &Gpu, stream: &Stream, mont: u64, std: u64, n: usize) -> Res<()> {
    let n32 = n as u32;
    gpu.launch(
        stream,
        "k_msm_from_mont",
        blocks(n, THREADS),
        THREADS,
        0,
        &cuda_args![mont, std, n32],
    )
}

/// Sorts n plain scalars at `scalars` into buckets.
pub fn plan(gpu: &Gpu, stream: &Stream, scalars: u64, n: usize) -> Res<Plan> {
    let c = window_bits(n);
    let nwin = 255 / c + 1;
    let nbw = 1u32 << (c - 1);
    let nb = (nwin * nbw) as usize;
    let cnt = DBuf::<u32>::new(nb + 1)?;
    let off = DBuf::<u32>::new(nb + 1)?;
    let list = DBuf::<u32>::new(n * nwin as usize)?;
    let sums = DBuf::<u32>::new((nb + 1).div_ceil(4096))?;
    fill_u32(gpu, stream, cnt.ptr(), nb + 1, 0)?;
    let n32 = n as u32;
    let (sp, cp, op, lp) = (scalars, cnt.ptr(), off.ptr(), list.ptr());
    gpu.launch(
        stream,
        "k_msm_histogram",
        blocks(n, THREADS),
        THREADS,
        0,
        &cuda_args![sp, n32, c, nwin, cp],
    )?;
    scan(gpu, stream, cp, op, nb + 1, &sums)?;
    // cursor: reuse `sums`-free copy of off in a scratch buffer
    let cursor = DBuf::<u32>::new(nb + 1)?;
    let (cur, nb1) = (cursor.ptr(), (nb + 1) as u32);
    gpu.launch(
        stream,
        "k_copy_u32",
        blocks(nb + 1, THREADS),
        THREADS,
        0,
        &cuda_args![op, cur, nb1],
    )?;
    gpu.launch(
        stream,
        "k_msm_scatter",
        blocks(n, THREADS),
        THREADS,
        0,
        &cuda_args![sp, n32, c, nwin, cur, lp],
    )?;
    // cuMemFree waits for the work queued on these buffers (an implicit
    // synchronization), so dropping the scratch buffers here is safe.
    drop((cursor, sums));
    Ok(Plan {
        n,
        c,
        nwin,
        nbw,
        cnt,
        off,
        list,
    })
}

/// Buckets accumulated for one MSM: the window sums in `out` (nwin Jacobian
/// points at `out_ptr`), written stream-ordered.
pub fn accumulate(
    gpu: &Gpu,
    stream: &Stream,
    plan: &Plan,
    group: Group,
    bases: u64,
    out_ptr: u64,
) -> Res<()> {
    let nb = plan.nb() as usize;
    let jw = group.jac_words();
    let pre = group.prefix();
    let k = LEVEL_K;
    let entries = plan.n * plan.nwin as usize;
    let cap0 = entries.div_ceil(k as usize) + nb;
    let pts = [DBuf::<u64>::new(cap0 * jw)?, DBuf::<u64>::new(cap0 * jw)?];
    let items = [DBuf::<u32>::new(nb + 1)?, DBuf::<u32>::new(nb + 1)?];
    let ioff = [DBuf::<u32>::new(nb + 1)?, DBuf::<u32>::new(nb + 1)?];
    let sums = DBuf::<u32>::new((nb + 1).div_ceil(4096))?;
    let nb32 = nb as u32;

    // level 0
    let (cp, op, lp) = (plan.cnt.ptr(), plan.off.ptr(), plan.list.ptr());
    let (it, io, po) = (items[0].ptr(), ioff[0].ptr(), pts[0].ptr());
    gpu.launch(
        stream,
        "k_msm_items",
        blocks(nb + 1, THREADS),
        THREADS,
        0,
        &cuda_args![cp, it, nb32, k],
    )?;
    scan(gpu, stream, it, io, nb + 1, &sums)?;
    let name = format!("{pre}_level0");
    gpu.launch(
        stream,
        &name,
        blocks(cap0, 128),
        128,
        0,
        &cuda_args![bases, lp, op, cp, io, nb32, k, po],
    )?;
    let mut cur = 0usize;
    let mut bound = plan.n.div_ceil(k as usize); // max partials per bucket
    let mut cap = cap0;
    while bound > 1 {
        let nxt = 1 - cur;
        let (cnt_p, off_p, in_p) = (items[cur].ptr(), ioff[cur].ptr(), pts[cur].ptr());
        let (it, io, po) = (items[nxt].ptr(), ioff[nxt].ptr(), pts[nxt].ptr());
        gpu.launch(
            stream,
            "k_msm_items",
            blocks(nb + 1, THREADS),
            THREADS,
            0,
            &cuda_args![cnt_p, it, nb32, k],
        )?;
        scan(gpu, stream, it, io, nb + 1, &sums)?;
        cap = cap.div_ceil(k as usize) + nb;
        let name = format!("{pre}_levelN");
        gpu.launch(
            stream,
            &name,
            blocks(cap, 128),
            128,
            0,
            &cuda_args![in_p, off_p, cnt_p, io, nb32, k, po],
        )?;
        cur = nxt;
        bound = bound.div_ceil(k as usize);
    }
    // window reduction
    let segs = (plan.nbw as usize).div_ceil(SEG);
    let seg_buf = DBuf::<u64>::new(segs * plan.nwin as usize * jw)?;
    let (pp, ip, cp2, sp) = (
        pts[cur].ptr(),
        ioff[cur].ptr(),
        items[cur].ptr(),
        seg_buf.ptr(),
    );
    let (nbw, nwin) = (plan.nbw, plan.nwin);
    let name = format!("{pre}_segments");
    gpu.launch(
        stream,
        &name,
        blocks(segs * nwin as usize, 64),
        64,
        0,
        &cuda_args![pp, ip, cp2, nbw, nwin, sp],
    )?;
    let segs32 = segs as u32;
    let name = format!("{pre}_window_sum");
    let shared = (128 * jw * 8) as u32;
    gpu.launch(
        stream,
        &name,
        nwin,
        128,
        shared,
        &cuda_args![sp, segs32, out_ptr],
    )?;
    // Temporaries drop here: cuMemFree synchronizes with outstanding work.
    drop((pts, items, ioff, sums, seg_buf));
    Ok(())
}

/// Sum of 2^(c*w) * W_w over the window sums (host side, exact).
pub fn combine_g1(words: &[u64], c: u32) -> G1Projective {
    let wins: Vec<G1Projective> = words.chunks(G1_JAC_WORDS).map(g1_from_jac).collect();
    let mut acc = G1Projective::zero();
    for w in wins.iter().rev() {
        for _ in 0..c {
            acc.double_in_place();
        }
        acc += w;
    }
    acc
}

pub fn combine_g2(words: &[u64], c: u32) -> G2Projective {
    let wins: Vec<G2Projective> = words.chunks(G2_JAC_WORDS).map(g2_from_jac).collect();
    let mut acc = G2Projective::zero();
    for w in wins.iter().rev() {
        for _ in 0..c {
            acc.double_in_place();
        }
        acc += w;
    }
    acc
}

/// Words a window-sum buffer needs for an MSM of n points.
pub fn window_words(n: usize, group: Group) -> usize {
    let c = window_bits(n);
    (255 / c + 1) as usize * group.jac_words()
}
