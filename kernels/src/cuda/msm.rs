//! Host side of the Pippenger MSM (kernels in cuda/msm.cuh): point and scalar
//! layouts, the sorted-bucket plan, the accumulation levels and the final
//! Horner step over the window sums.

use ark_bls12_381::{Fq, Fq2, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{AdditiveGroup, CurveGroup};
use ark_ff::{BigInt, Fp};
use ark_std::Zero;
use rayon::prelude::*;
use rustacuda::stream::Stream;

use super::gpu::{
    DBuf, DevFr, DevG1Affine, DevG1Jac, DevG2Affine, DevG2Jac, DevPtr, DeviceElement, Gpu, Launch,
    Res, FQ_WORDS, MSM_SEG, SCAN_PER_THREAD, SCAN_THREADS,
};
use crate::Fr;

/// Entries one work item of a bucket level sums.
pub const LEVEL_K: u32 = 32;
/// Threads per block of the elementwise kernels.
const THREADS: u32 = 256;

/// A group an MSM runs in: its device layouts, conversions and kernels, so
/// that one `accumulate` serves G1 and G2 with typed buffers.
pub trait MsmGroup {
    /// The host's curve (projective form; its `Affine` is what keys hold).
    type Curve: CurveGroup;
    /// An affine base as the kernels read it.
    type Affine: DeviceElement;
    /// A Jacobian point as the kernels write it.
    type Jac: DeviceElement;

    /// Bases in the kernels' layout (identity: all zeros).
    fn to_device(points: &[<Self::Curve as CurveGroup>::Affine]) -> Vec<Self::Affine>;
    /// A Jacobian point the kernels wrote, as the host's point.
    fn from_device(p: &Self::Jac) -> Self::Curve;

    /// The group's k_*_level0 launcher.
    const LEVEL0: Level0<Self::Affine, Self::Jac>;
    /// The group's k_*_level_n launcher.
    const LEVEL_N: LevelN<Self::Jac>;
    /// The group's k_*_segments launcher.
    const SEGMENTS: Segments<Self::Jac>;
    /// The group's k_*_window_sum launcher.
    const WINDOW_SUM: WindowSum<Self::Jac>;
    /// The group's point-formula test kernel (test_g*_ops).
    const TEST_OPS: TestOps<Self::Affine, Self::Jac>;
}

/// A k_*_level0 launcher: bases of `A`, partial sums of `J` out.
type Level0<A, J> = fn(
    &Gpu,
    &Stream,
    Launch,
    DevPtr<A>,
    DevPtr<u32>,
    DevPtr<u32>,
    DevPtr<u32>,
    DevPtr<u32>,
    u32,
    u32,
    DevPtr<J>,
) -> Res<()>;
/// A k_*_level_n launcher.
type LevelN<J> = fn(
    &Gpu,
    &Stream,
    Launch,
    DevPtr<J>,
    DevPtr<u32>,
    DevPtr<u32>,
    DevPtr<u32>,
    u32,
    u32,
    DevPtr<J>,
) -> Res<()>;
/// A k_*_segments launcher.
type Segments<J> =
    fn(&Gpu, &Stream, Launch, DevPtr<J>, DevPtr<u32>, DevPtr<u32>, u32, u32, DevPtr<J>) -> Res<()>;
/// A k_*_window_sum launcher.
type WindowSum<J> = fn(&Gpu, &Stream, Launch, DevPtr<J>, u32, DevPtr<J>) -> Res<()>;
/// A test_g*_ops launcher.
pub type TestOps<A, J> = fn(&Gpu, &Stream, Launch, DevPtr<A>, DevPtr<A>, DevPtr<J>, u32) -> Res<()>;

/// BLS12-381 G1.
pub struct G1;
/// BLS12-381 G2.
pub struct G2;

impl MsmGroup for G1 {
    type Curve = G1Projective;
    type Affine = DevG1Affine;
    type Jac = DevG1Jac;

    fn to_device(points: &[G1Affine]) -> Vec<DevG1Affine> {
        points_to_device(points, |p, o: &mut DevG1Affine| {
            if !p.infinity {
                o.0[..6].copy_from_slice(&p.x.0 .0);
                o.0[6..].copy_from_slice(&p.y.0 .0);
            }
        })
    }

    fn from_device(p: &DevG1Jac) -> G1Projective {
        let w = &p.0;
        let z = fq_from(&w[12..18]);
        if z.is_zero() {
            return G1Projective::zero();
        }
        G1Projective::new_unchecked(fq_from(&w[0..6]), fq_from(&w[6..12]), z)
    }

    const LEVEL0: Level0<DevG1Affine, DevG1Jac> = Gpu::k_g1_level0;
    const LEVEL_N: LevelN<DevG1Jac> = Gpu::k_g1_level_n;
    const SEGMENTS: Segments<DevG1Jac> = Gpu::k_g1_segments;
    const WINDOW_SUM: WindowSum<DevG1Jac> = Gpu::k_g1_window_sum;
    const TEST_OPS: TestOps<DevG1Affine, DevG1Jac> = Gpu::test_g1_ops;
}

impl MsmGroup for G2 {
    type Curve = G2Projective;
    type Affine = DevG2Affine;
    type Jac = DevG2Jac;

    fn to_device(points: &[G2Affine]) -> Vec<DevG2Affine> {
        points_to_device(points, |p, o: &mut DevG2Affine| {
            if !p.infinity {
                for (i, f) in [p.x.c0, p.x.c1, p.y.c0, p.y.c1].iter().enumerate() {
                    o.0[i * FQ_WORDS..(i + 1) * FQ_WORDS].copy_from_slice(&f.0 .0);
                }
            }
        })
    }

    fn from_device(p: &DevG2Jac) -> G2Projective {
        let f2 = |o: usize| Fq2::new(fq_from(&p.0[o..o + 6]), fq_from(&p.0[o + 6..o + 12]));
        let z = f2(24);
        if z.is_zero() {
            return G2Projective::zero();
        }
        G2Projective::new_unchecked(f2(0), f2(12), z)
    }

    const LEVEL0: Level0<DevG2Affine, DevG2Jac> = Gpu::k_g2_level0;
    const LEVEL_N: LevelN<DevG2Jac> = Gpu::k_g2_level_n;
    const SEGMENTS: Segments<DevG2Jac> = Gpu::k_g2_segments;
    const WINDOW_SUM: WindowSum<DevG2Jac> = Gpu::k_g2_window_sum;
    const TEST_OPS: TestOps<DevG2Affine, DevG2Jac> = Gpu::test_g2_ops;
}

/// Points in the kernels' layout, in parallel: `fill` writes a point's
/// coordinates into a zeroed element (left zero: the identity).
fn points_to_device<P: Sync, D: DeviceElement + Send>(
    points: &[P],
    fill: impl Fn(&P, &mut D) + Sync + Send,
) -> Vec<D> {
    points
        .par_iter()
        .map(|p| {
            let mut o = D::ZERO;
            fill(p, &mut o);
            o
        })
        .collect()
}

/// Field elements as the kernels read them (Montgomery form), without copying.
pub fn fr_dev(s: &[Fr]) -> &[DevFr] {
    assert_eq!(std::mem::size_of::<Fr>(), std::mem::size_of::<DevFr>());
    assert_eq!(std::mem::align_of::<Fr>(), std::mem::align_of::<DevFr>());
    // SAFETY: Fr is Fp(BigInt<4>, PhantomData): one [u64; 4] and a ZST, the
    // size and alignment of DevFr (checked above); the GPU reads the words as
    // 8 little-endian u32 limbs.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const DevFr, s.len()) }
}

/// Field elements from the kernels' words (Montgomery form).
pub fn fr_from_dev(d: &[DevFr]) -> Vec<Fr> {
    d.iter().map(|w| Fp::new_unchecked(BigInt(w.0))).collect()
}

fn fq_from(w: &[u64]) -> Fq {
    Fp::new_unchecked(BigInt([w[0], w[1], w[2], w[3], w[4], w[5]]))
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
    /// Scalars sorted.
    pub n: usize,
    /// Window width in bits; the host's Horner step doubles c times per window.
    pub c: u32,
    /// Windows per scalar.
    pub nwin: u32,
    /// Buckets per window: 2^(c-1).
    pub nbw: u32,
    /// Entries per bucket (plus one zero entry, so the scan ends with the total).
    cnt: DBuf<u32>,
    /// First entry of each bucket in `list`.
    off: DBuf<u32>,
    /// Point indices by bucket, the sign in the top bit.
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

/// Exclusive scan of `len` u32 at `input` into `out` (may alias); `sums`
/// holds one entry per tile of SCAN_THREADS * SCAN_PER_THREAD.
pub fn scan(
    gpu: &Gpu,
    stream: &Stream,
    input: DevPtr<u32>,
    out: DevPtr<u32>,
    len: usize,
    sums: &DBuf<u32>,
) -> Res<()> {
    let tiles = len.div_ceil((SCAN_THREADS * SCAN_PER_THREAD) as usize);
    assert!(sums.bytes() >= (tiles * std::mem::size_of::<u32>()) as u64);
    let n = len as u32;
    gpu.k_scan_tiles(
        stream,
        Launch::new(tiles as u32, SCAN_THREADS),
        input,
        out,
        n,
        sums.ptr(),
    )?;
    gpu.k_scan_sums(
        stream,
        Launch::new(1, SCAN_THREADS),
        sums.ptr(),
        tiles as u32,
    )?;
    gpu.k_scan_add(stream, Launch::over(len, THREADS), out, n, sums.ptr())
}

/// A `sums` buffer for scans of up to `len` entries.
fn scan_sums(len: usize) -> Res<DBuf<u32>> {
    DBuf::new(len.div_ceil((SCAN_THREADS * SCAN_PER_THREAD) as usize))
}

/// Converts n Montgomery scalars at `mont` into plain integers at `plain`.
pub fn from_mont(
    gpu: &Gpu,
    stream: &Stream,
    mont: DevPtr<DevFr>,
    plain: DevPtr<DevFr>,
    n: usize,
) -> Res<()> {
    gpu.k_msm_from_mont(stream, Launch::over(n, THREADS), mont, plain, n as u32)
}

/// Sorts n plain scalars at `scalars` into buckets.
pub fn plan(gpu: &Gpu, stream: &Stream, scalars: DevPtr<DevFr>, n: usize) -> Res<Plan> {
    let c = window_bits(n);
    let nwin = 255 / c + 1;
    let nbw = 1u32 << (c - 1);
    let nb = (nwin * nbw) as usize;
    let cnt = DBuf::<u32>::new(nb + 1)?;
    let off = DBuf::<u32>::new(nb + 1)?;
    let list = DBuf::<u32>::new(n * nwin as usize)?;
    let sums = scan_sums(nb + 1)?;
    let nb1 = (nb + 1) as u32;
    gpu.k_fill_u32(stream, Launch::over(nb + 1, THREADS), cnt.ptr(), nb1, 0)?;
    let n32 = n as u32;
    gpu.k_msm_histogram(
        stream,
        Launch::over(n, THREADS),
        scalars,
        n32,
        c,
        nwin,
        cnt.ptr(),
    )?;
    scan(gpu, stream, cnt.ptr(), off.ptr(), nb + 1, &sums)?;
    // The scatter advances a cursor per bucket: a copy of the offsets.
    let cursor = DBuf::<u32>::new(nb + 1)?;
    gpu.k_copy_u32(
        stream,
        Launch::over(nb + 1, THREADS),
        off.ptr(),
        cursor.ptr(),
        nb1,
    )?;
    gpu.k_msm_scatter(
        stream,
        Launch::over(n, THREADS),
        scalars,
        n32,
        c,
        nwin,
        cursor.ptr(),
        list.ptr(),
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

/// Buckets accumulated for one MSM: the plan's nwin window sums written to
/// `out` (stream-ordered).
pub fn accumulate<G: MsmGroup>(
    gpu: &Gpu,
    stream: &Stream,
    plan: &Plan,
    bases: DevPtr<G::Affine>,
    out: DevPtr<G::Jac>,
) -> Res<()> {
    let nb = plan.nb() as usize;
    let k = LEVEL_K;
    let entries = plan.n * plan.nwin as usize;
    let cap0 = entries.div_ceil(k as usize) + nb;
    let pts = [DBuf::<G::Jac>::new(cap0)?, DBuf::<G::Jac>::new(cap0)?];
    let items = [DBuf::<u32>::new(nb + 1)?, DBuf::<u32>::new(nb + 1)?];
    let ioff = [DBuf::<u32>::new(nb + 1)?, DBuf::<u32>::new(nb + 1)?];
    let sums = scan_sums(nb + 1)?;
    let nb32 = nb as u32;
    let items_launch = Launch::over(nb + 1, THREADS);

    // level 0
    gpu.k_msm_items(
        stream,
        items_launch,
        plan.cnt.ptr(),
        items[0].ptr(),
        nb32,
        k,
    )?;
    scan(gpu, stream, items[0].ptr(), ioff[0].ptr(), nb + 1, &sums)?;
    (G::LEVEL0)(
        gpu,
        stream,
        Launch::over(cap0, 128),
        bases,
        plan.list.ptr(),
        plan.off.ptr(),
        plan.cnt.ptr(),
        ioff[0].ptr(),
        nb32,
        k,
        pts[0].ptr(),
    )?;
    let mut cur = 0usize;
    let mut bound = plan.n.div_ceil(k as usize); // max partials per bucket
    let mut cap = cap0;
    while bound > 1 {
        let nxt = 1 - cur;
        gpu.k_msm_items(
            stream,
            items_launch,
            items[cur].ptr(),
            items[nxt].ptr(),
            nb32,
            k,
        )?;
        scan(
            gpu,
            stream,
            items[nxt].ptr(),
            ioff[nxt].ptr(),
            nb + 1,
            &sums,
        )?;
        cap = cap.div_ceil(k as usize) + nb;
        (G::LEVEL_N)(
            gpu,
            stream,
            Launch::over(cap, 128),
            pts[cur].ptr(),
            ioff[cur].ptr(),
            items[cur].ptr(),
            ioff[nxt].ptr(),
            nb32,
            k,
            pts[nxt].ptr(),
        )?;
        cur = nxt;
        bound = bound.div_ceil(k as usize);
    }
    // window reduction
    let segs = (plan.nbw as usize).div_ceil(MSM_SEG as usize);
    let seg_buf = DBuf::<G::Jac>::new(segs * plan.nwin as usize)?;
    (G::SEGMENTS)(
        gpu,
        stream,
        Launch::over(segs * plan.nwin as usize, 64),
        pts[cur].ptr(),
        ioff[cur].ptr(),
        items[cur].ptr(),
        plan.nbw,
        plan.nwin,
        seg_buf.ptr(),
    )?;
    let block = 128;
    let shared = block * std::mem::size_of::<G::Jac>() as u32;
    (G::WINDOW_SUM)(
        gpu,
        stream,
        Launch::new(plan.nwin, block).shared(shared),
        seg_buf.ptr(),
        segs as u32,
        out,
    )?;
    // Temporaries drop here: cuMemFree synchronizes with outstanding work.
    drop((pts, items, ioff, sums, seg_buf));
    Ok(())
}

/// Sum of 2^(c*w) * W_w over the window sums (host side, exact).
pub fn combine<G: MsmGroup>(windows: &[G::Jac], c: u32) -> G::Curve {
    let mut acc = G::Curve::zero();
    for w in windows.iter().rev() {
        for _ in 0..c {
            acc.double_in_place();
        }
        acc += G::from_device(w);
    }
    acc
}

/// Window sums an MSM of n points produces (one Jacobian point each).
pub fn windows(n: usize) -> usize {
    (255 / window_bits(n) + 1) as usize
}
