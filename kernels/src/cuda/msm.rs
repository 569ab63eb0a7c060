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
    Res, Workspace, FQ_WORDS, MSM_LEVEL_THREADS, MSM_SEG, MSM_SPLIT_ROUNDS, SCAN_PER_THREAD,
    SCAN_THREADS,
};
use crate::Fr;

/// Partials one work item of a bucket level >= 1 sums.
pub const LEVEL_K: u32 = 32;
/// Longest level-0 work item (entries), and the fewest items a longer one
/// must leave: about 20 waves of the device's resident level-0 threads
/// (132 SMs x 3 blocks x 128 on the H200), so that the last wave's tail
/// stays small.
const LEVEL0_K_MAX: u32 = 128;
const LEVEL0_MIN_ITEMS: usize = 1 << 20;
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

    /// Bases in the kernels' layout (identity: all zeros), written into
    /// `out` (as long as `points`): a key's queries are converted range by
    /// range, straight into staging or pinned memory.
    fn write_device(points: &[<Self::Curve as CurveGroup>::Affine], out: &mut [Self::Affine]);
    /// Bases in the kernels' layout, as a new vector.
    fn to_device(points: &[<Self::Curve as CurveGroup>::Affine]) -> Vec<Self::Affine> {
        let mut out = vec![Self::Affine::ZERO; points.len()];
        Self::write_device(points, &mut out);
        out
    }
    /// A Jacobian point the kernels wrote, as the host's point.
    fn from_device(p: &Self::Jac) -> Self::Curve;

    /// The group's k_*_level0 launcher.
    const LEVEL0: Level0<Self::Affine, Self::Jac>;
    /// The group's k_*_spans launcher.
    const SPANS: Spans<Self::Jac>;
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
    u32,
    u32,
    u32,
    DevPtr<J>,
) -> Res<()>;
/// A k_*_spans launcher.
type Spans<J> = fn(
    &Gpu,
    &Stream,
    Launch,
    DevPtr<J>,
    DevPtr<u32>,
    u32,
    u32,
    u32,
    DevPtr<u32>,
    DevPtr<u32>,
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
    u32,
    DevPtr<u32>,
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

    fn write_device(points: &[G1Affine], out: &mut [DevG1Affine]) {
        points_to_device(points, out, |p, o: &mut DevG1Affine| {
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
    const SPANS: Spans<DevG1Jac> = Gpu::k_g1_spans;
    const LEVEL_N: LevelN<DevG1Jac> = Gpu::k_g1_level_n;
    const SEGMENTS: Segments<DevG1Jac> = Gpu::k_g1_segments;
    const WINDOW_SUM: WindowSum<DevG1Jac> = Gpu::k_g1_window_sum;
    const TEST_OPS: TestOps<DevG1Affine, DevG1Jac> = Gpu::test_g1_ops;
}

impl MsmGroup for G2 {
    type Curve = G2Projective;
    type Affine = DevG2Affine;
    type Jac = DevG2Jac;

    fn write_device(points: &[G2Affine], out: &mut [DevG2Affine]) {
        points_to_device(points, out, |p, o: &mut DevG2Affine| {
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
    const SPANS: Spans<DevG2Jac> = Gpu::k_g2_spans;
    const LEVEL_N: LevelN<DevG2Jac> = Gpu::k_g2_level_n;
    const SEGMENTS: Segments<DevG2Jac> = Gpu::k_g2_segments;
    const WINDOW_SUM: WindowSum<DevG2Jac> = Gpu::k_g2_window_sum;
    const TEST_OPS: TestOps<DevG2Affine, DevG2Jac> = Gpu::test_g2_ops;
}

/// Points in the kernels' layout into `out`, in parallel: `fill` writes a
/// point's coordinates into a zeroed element (left zero: the identity).
fn points_to_device<P: Sync, D: DeviceElement + Send + Sync>(
    points: &[P],
    out: &mut [D],
    fill: impl Fn(&P, &mut D) + Sync + Send,
) {
    assert_eq!(points.len(), out.len(), "one element per point");
    out.par_iter_mut()
        .zip(points.par_iter())
        .for_each(|(o, p)| {
            *o = D::ZERO;
            fill(p, o);
        });
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

/// Smallest window width: the `CUZK_MSM_C` override is clamped to it, and
/// it bounds the number of window sums.
const MIN_C: u32 = 4;

/// Result slots an MSM may write (window sums of the narrowest window, plus
/// the sum of the ones): callers reserve this many per MSM.
pub const OUT_SLOTS: usize = (255 / MIN_C + 1) as usize + 1;

/// A sweep's override of a plan choice: the environment variable `name` as
/// a number, if it is one.
fn sweep_override(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok())
}

/// Window size for n points (override: CUZK_MSM_C).
pub fn window_bits(n: usize) -> u32 {
    if let Some(c) = sweep_override("CUZK_MSM_C") {
        return c.clamp(MIN_C, 24);
    }
    // Measured on the H200 (docs/gpu.md, runs 41-42; random scalars): 20
    // bits from 1.5 x 2^26 points (a 32 GiB PoRep's H: 2^27 - 1), where 13
    // windows beat 15 of 17 bits (G1: 973 against 998 ms at 2^27); 17 bits
    // from 2^23 (15 windows: 507 against 520 ms for 16 bits at 2^26, 133.0
    // against 133.9 at 2^24); 16 from 2^21 (G2 at 2^22: 113.0 against
    // 116.3 ms for 15 bits, where G1 gains 1.4% from 15: one plan serves
    // both groups, and G2 is the one near its target); 15 below (17
    // windows: G1 12.0 against 13.1 ms at 2^20). 15 and 17 divide 255
    // (msm.cuh: halved scalars need c * nwin >= 255).
    if n >= 3 << 25 {
        return 20;
    }
    if n >= 1 << 23 {
        return 17;
    }
    if n >= 1 << 21 {
        return 16;
    }
    let log = usize::BITS - n.max(1).leading_zeros();
    (log.saturating_sub(4)).clamp(6, 15)
}

/// Entries per level-0 work item for `entries` sorted entries (override:
/// CUZK_MSM_K0, for sweeps): the longest of 32, 64 and 128 that leaves at
/// least LEVEL0_MIN_ITEMS items. Every item but the last writes one partial
/// sum (plus one per bucket that starts inside it), which the levels above
/// add in Jacobian coordinates, a fuller addition than level 0's: with 32
/// entries per item those additions and conversions were about 7% of level
/// 0's work at 2^24 points (buckets of 256 entries, 9 partials each); with
/// 128 about 2%.
pub fn level0_k(entries: usize) -> u32 {
    if let Some(k) = sweep_override("CUZK_MSM_K0") {
        return k.clamp(1, 1024);
    }
    let mut k = LEVEL_K;
    while k < LEVEL0_K_MAX && entries / (2 * k as usize) >= LEVEL0_MIN_ITEMS {
        k *= 2;
    }
    k
}

/// Whether an MSM sums its scalars equal to 1 directly and skips its zeros
/// (the 0/1 fast path) or sorts every scalar into buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroOne {
    /// Decided per call from the scalars, counted on the device: the split
    /// when at least 1/SPLIT_SHARE of them are 0 or 1.
    Auto,
    /// Every scalar through the buckets (the plain Pippenger, for comparison).
    Off,
}

/// The split pays once this fraction (1/SPLIT_SHARE) of the scalars are 0
/// or 1: it costs a pass over the scalars and a compacted copy of the rest,
/// and saves sorting the zeros and ones (all of whose digits but one are 0;
/// the ones all land in one bucket, whose atomics serialize).
const SPLIT_SHARE: usize = 8;

/// Threads per block of the split (any multiple of 32 up to 1024).
const SPLIT_THREADS: u32 = 256;

/// What an MSM's results are: `nwin` window sums in 2^c, then the sum of the
/// ones when `ones`. Outlives the plan (the host combines after the download).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Window width in bits; the host's Horner step doubles c times per window.
    pub c: u32,
    /// Window sums written (0 when no scalar goes through the buckets).
    pub nwin: u32,
    /// Whether slot `nwin` holds the sum of the points whose scalar is 1.
    pub ones: bool,
}

impl Shape {
    /// Slots written, at most OUT_SLOTS.
    pub fn outputs(&self) -> usize {
        self.nwin as usize + self.ones as usize
    }
}

/// The ones of the 0/1 split as a single bucket, in the layout the bucket
/// levels read (entries 0..n).
struct OnesBucket {
    n: usize,
    /// Point indices.
    list: DBuf<u32>,
    /// [0, n]: the bucket's first entry and the end of its entries.
    off: DBuf<u32>,
}

/// Scalars sorted into buckets: depends only on the scalars, so MSMs with the
/// same scalars (A, B1, B2) share one.
pub struct Plan {
    /// Scalars in the buckets (all of them, or those neither 0 nor 1).
    pub n: usize,
    /// The results' layout.
    pub shape: Shape,
    /// Buckets per window: 2^(c-1).
    nbw: u32,
    /// First entry of each bucket in `list`, and (entry nb) the total: the
    /// exclusive scan of the buckets' counts.
    off: DBuf<u32>,
    /// Point indices by bucket, the sign in the top bit.
    list: DBuf<u32>,
    /// The points to add once (scalar 1), with the split.
    ones: Option<OnesBucket>,
}

impl Plan {
    pub fn bytes(&self) -> u64 {
        let ones = self
            .ones
            .as_ref()
            .map_or(0, |o| o.list.bytes() + o.off.bytes());
        self.off.bytes() + self.list.bytes() + ones
    }
    fn nb(&self) -> u32 {
        self.shape.nwin * self.nbw
    }
}

/// Exclusive scan of `len` u32 at `input` into `out` (may alias); `sums`
/// holds one entry per tile of SCAN_THREADS * SCAN_PER_THREAD.
pub fn scan(
    gpu: &Gpu,
    ws: &Workspace,
    input: DevPtr<u32>,
    out: DevPtr<u32>,
    len: usize,
    sums: &DBuf<u32>,
) -> Res<()> {
    let tiles = len.div_ceil((SCAN_THREADS * SCAN_PER_THREAD) as usize);
    assert!(sums.bytes() >= (tiles * std::mem::size_of::<u32>()) as u64);
    let n = len as u32;
    gpu.k_scan_tiles(
        &ws.stream,
        Launch::new(tiles as u32, SCAN_THREADS),
        input,
        out,
        n,
        sums.ptr(),
    )?;
    gpu.k_scan_sums(
        &ws.stream,
        Launch::new(1, SCAN_THREADS),
        sums.ptr(),
        tiles as u32,
    )?;
    gpu.k_scan_add(&ws.stream, Launch::over(len, THREADS), out, n, sums.ptr())
}

/// A `sums` buffer for scans of up to `len` entries.
fn scan_sums(ws: &Workspace, len: usize) -> Res<DBuf<u32>> {
    ws.buffer(len.div_ceil((SCAN_THREADS * SCAN_PER_THREAD) as usize))
}

/// Converts n Montgomery scalars at `mont` into plain integers at `plain`.
pub fn from_mont(
    gpu: &Gpu,
    ws: &Workspace,
    mont: DevPtr<DevFr>,
    plain: DevPtr<DevFr>,
    n: usize,
) -> Res<()> {
    gpu.k_msm_from_mont(&ws.stream, Launch::over(n, THREADS), mont, plain, n as u32)
}

/// The n scalars of `values` at the indices `idx`, into `out`
/// (stream-ordered).
pub fn gather(
    gpu: &Gpu,
    ws: &Workspace,
    values: DevPtr<DevFr>,
    idx: DevPtr<u32>,
    out: DevPtr<DevFr>,
    n: usize,
) -> Res<()> {
    gpu.k_msm_gather(
        &ws.stream,
        Launch::over(n, THREADS),
        values,
        idx,
        out,
        n as u32,
    )
}

/// A buffer of `len` u32 set to `v` (stream-ordered).
fn filled(gpu: &Gpu, ws: &Workspace, len: usize, v: u32) -> Res<DBuf<u32>> {
    let b = ws.buffer::<u32>(len)?;
    gpu.k_fill_u32(
        &ws.stream,
        Launch::over(len, THREADS),
        b.ptr(),
        len as u32,
        v,
    )?;
    Ok(b)
}

/// How many of n plain scalars are 1 and how many are neither 0 nor 1
/// (waits for the stream).
fn count_classes(
    gpu: &Gpu,
    ws: &Workspace,
    scalars: DevPtr<DevFr>,
    n: usize,
) -> Res<(usize, usize)> {
    let counts = filled(gpu, ws, 2, 0)?;
    // A grid of a few blocks per SM's worth: each thread strides over many
    // scalars, so the counters see few atomics.
    let blocks = n.div_ceil(THREADS as usize).min(1024) as u32;
    gpu.k_msm_count_classes(
        &ws.stream,
        Launch::new(blocks, THREADS),
        scalars,
        n as u32,
        counts.ptr(),
    )?;
    let mut host = [0u32; 2];
    counts.download(&mut host, &ws.stream)?;
    ws.synchronize("counting 0/1 scalars")?;
    Ok((host[0] as usize, host[1] as usize))
}

/// Sorts n plain scalars at `scalars` into buckets, after splitting off
/// the zeros and ones where `rule` says so.
pub fn plan(
    gpu: &Gpu,
    ws: &Workspace,
    scalars: DevPtr<DevFr>,
    n: usize,
    rule: ZeroOne,
) -> Res<Plan> {
    let split = match rule {
        ZeroOne::Off => None,
        ZeroOne::Auto if n == 0 => None,
        ZeroOne::Auto => {
            let (ones, others) = count_classes(gpu, ws, scalars, n)?;
            ((n - others) * SPLIT_SHARE >= n).then_some((ones, others))
        }
    };
    let Some((n_ones, n_others)) = split else {
        return sort(gpu, ws, scalars, DevPtr::null(), n);
    };
    let ones = ws.buffer::<u32>(n_ones)?;
    let others_idx = ws.buffer::<u32>(n_others)?;
    let others = ws.buffer::<DevFr>(n_others)?;
    let cursor = filled(gpu, ws, 2, 0)?;
    let tile = (SPLIT_THREADS * MSM_SPLIT_ROUNDS) as usize;
    gpu.k_msm_split(
        &ws.stream,
        Launch::new(n.div_ceil(tile) as u32, SPLIT_THREADS),
        scalars,
        n as u32,
        cursor.ptr(),
        ones.ptr(),
        others_idx.ptr(),
        others.ptr(),
    )?;
    let mut plan = sort(gpu, ws, others.ptr(), others_idx.ptr(), n_others)?;
    if n_ones > 0 {
        // [0, n]: n in both words, then 0 into the first.
        let off = filled(gpu, ws, 2, n_ones as u32)?;
        gpu.k_fill_u32(&ws.stream, Launch::new(1, 32), off.ptr(), 1, 0)?;
        plan.ones = Some(OnesBucket {
            n: n_ones,
            list: ones,
            off,
        });
        plan.shape.ones = true;
    }
    Ok(plan)
}

/// The counting sort of n plain scalars into signed-digit buckets; `map`
/// (or null: the identity) gives each scalar's point index.
fn sort(
    gpu: &Gpu,
    ws: &Workspace,
    scalars: DevPtr<DevFr>,
    map: DevPtr<u32>,
    n: usize,
) -> Res<Plan> {
    let c = window_bits(n);
    // Halved scalars are below 2^254, so c * nwin >= 255 leaves the top
    // window's digit at most 2^(c-1), with no carry out of it (msm.cuh).
    let nwin = if n == 0 { 0 } else { 255u32.div_ceil(c) };
    let nbw = 1u32 << (c - 1);
    let nb = (nwin * nbw) as usize;
    // Entries per bucket, plus one zero entry so that the scan ends with
    // the total.
    let cnt = filled(gpu, ws, nb + 1, 0)?;
    let off = ws.buffer::<u32>(nb + 1)?;
    let list = ws.buffer::<u32>(n * nwin as usize)?;
    let plan = |off, list| Plan {
        n,
        shape: Shape {
            c,
            nwin,
            ones: false,
        },
        nbw,
        off,
        list,
        ones: None,
    };
    if n == 0 {
        return Ok(plan(off, list));
    }
    let sums = scan_sums(ws, nb + 1)?;
    let n32 = n as u32;
    gpu.k_msm_histogram(
        &ws.stream,
        Launch::over(n, THREADS),
        scalars,
        n32,
        c,
        nwin,
        cnt.ptr(),
    )?;
    scan(gpu, ws, cnt.ptr(), off.ptr(), nb + 1, &sums)?;
    // The scatter advances a cursor per bucket: a copy of the offsets, in
    // the counts' buffer, which the scan has read.
    let cursor = cnt;
    gpu.k_copy_u32(
        &ws.stream,
        Launch::over(nb + 1, THREADS),
        off.ptr(),
        cursor.ptr(),
        (nb + 1) as u32,
    )?;
    gpu.k_msm_scatter(
        &ws.stream,
        Launch::over(n, THREADS),
        scalars,
        map,
        n32,
        c,
        nwin,
        cursor.ptr(),
        list.ptr(),
    )?;
    Ok(plan(off, list))
}

/// Buckets after the last level: one partial sum (or none) per bucket, at
/// `pts[off[b]]` when `cnt[b]` is 1.
struct Partials<J: DeviceElement> {
    pts: DBuf<J>,
    off: DBuf<u32>,
    cnt: DBuf<u32>,
}

/// Sums each of nb buckets (entries `off[b]..off[b + 1]` of `list`, `off`
/// the exclusive scan of their counts; at most `most` in one bucket,
/// `entries` at most in all) down to one partial sum per bucket: level 0 in
/// work items of `level0_k` consecutive entries across buckets, then levels
/// of at most LEVEL_K partials of one bucket per work item. The levels are
/// as many as `most` could need; only the device knows the largest bucket,
/// and reading it back would stop the host mid-MSM (run 53: the streamed
/// 32 GiB shape 9% slower, the saturated device 3-5%), so a level that finds
/// one partial per bucket is a copy there instead.
#[allow(clippy::too_many_arguments)]
fn reduce_buckets<G: MsmGroup>(
    gpu: &Gpu,
    ws: &Workspace,
    bases: DevPtr<G::Affine>,
    list: DevPtr<u32>,
    off: DevPtr<u32>,
    nb: usize,
    entries: usize,
    most: usize,
) -> Res<Partials<G::Jac>> {
    let k0 = level0_k(entries);
    let k = LEVEL_K;
    let ku = k as usize;
    // Level 0's slots: one per item, then one per bucket (heads of the
    // buckets that start inside an item).
    let items = entries.div_ceil(k0 as usize);
    let cap0 = items + nb;
    let nb32 = nb as u32;
    let pts0 = ws.buffer::<G::Jac>(cap0)?;
    (G::LEVEL0)(
        gpu,
        &ws.stream,
        Launch::over(items, MSM_LEVEL_THREADS),
        bases,
        list,
        off,
        nb32,
        k0,
        items as u32,
        pts0.ptr(),
    )?;
    let spans = [ws.buffer::<u32>(nb + 1)?, ws.buffer::<u32>(nb + 1)?];
    // Blocks of 64: a thread may add two points (the level kernels' many
    // registers).
    (G::SPANS)(
        gpu,
        &ws.stream,
        Launch::over(nb, 64),
        pts0.ptr(),
        off,
        nb32,
        k0,
        items as u32,
        spans[0].ptr(),
        spans[1].ptr(),
    )?;
    let [mut off_cur, mut cnt_cur] = spans;
    let mut pts = pts0;
    // Partials per bucket: one per item it touches, less its head's.
    let mut bound = most.saturating_sub(1).div_ceil(k0 as usize) + 1;
    let mut cap = cap0;
    if bound > 1 {
        let sums = scan_sums(ws, nb + 1)?;
        let items_launch = Launch::over(nb + 1, THREADS);
        // Level 1 reads level 0's slots through the spans; each level after
        // it reads the one before in order (`off` the scan of `cnt`).
        let mut compact = 0;
        while bound > 1 {
            let cnt_nxt = ws.buffer::<u32>(nb + 1)?;
            let off_nxt = ws.buffer::<u32>(nb + 1)?;
            let need = filled(gpu, ws, 1, 0)?;
            gpu.k_msm_items(
                &ws.stream,
                items_launch,
                cnt_cur.ptr(),
                cnt_nxt.ptr(),
                nb32,
                k,
                need.ptr(),
            )?;
            scan(gpu, ws, cnt_nxt.ptr(), off_nxt.ptr(), nb + 1, &sums)?;
            cap = cap.div_ceil(ku) + nb;
            let nxt = ws.buffer::<G::Jac>(cap)?;
            (G::LEVEL_N)(
                gpu,
                &ws.stream,
                Launch::over(cap, MSM_LEVEL_THREADS),
                pts.ptr(),
                off_cur.ptr(),
                cnt_cur.ptr(),
                off_nxt.ptr(),
                nb32,
                k,
                compact,
                need.ptr(),
                nxt.ptr(),
            )?;
            // The level's inputs go back to the pool here: stream order
            // keeps them until its kernels have read them.
            (pts, off_cur, cnt_cur) = (nxt, off_nxt, cnt_nxt);
            bound = bound.div_ceil(ku);
            compact = 1;
        }
    }
    Ok(Partials {
        pts,
        off: off_cur,
        cnt: cnt_cur,
    })
}

/// One MSM over the plan's scalars: its `shape.outputs()` results written to
/// `out` (stream-ordered): the window sums, then the sum of the ones.
pub fn accumulate<G: MsmGroup>(
    gpu: &Gpu,
    ws: &Workspace,
    plan: &Plan,
    bases: DevPtr<G::Affine>,
    out: DevPtr<G::Jac>,
) -> Res<()> {
    let block = 128;
    let shared = block * std::mem::size_of::<G::Jac>() as u32;
    // Window sums: each block sums `len` consecutive points of `input` into
    // `out[block]`.
    let sum = |input: DevPtr<G::Jac>, len: usize, blocks: usize, out: DevPtr<G::Jac>| {
        let l = Launch::new(blocks as u32, block).shared(shared);
        (G::WINDOW_SUM)(gpu, &ws.stream, l, input, len as u32, out)
    };
    let nwin = plan.shape.nwin as usize;
    if let Some(ones) = &plan.ones {
        let partials = reduce_buckets::<G>(
            gpu,
            ws,
            bases,
            ones.list.ptr(),
            ones.off.ptr(),
            1,
            ones.n,
            ones.n,
        )?;
        // The one bucket ends as one point at pts[0] (its partials start
        // there at every level); a window sum over a single segment moves
        // it into its slot.
        sum(partials.pts.ptr(), 1, 1, out.offset(nwin))?;
    }
    if nwin == 0 {
        return Ok(());
    }
    let nb = plan.nb() as usize;
    let buckets = reduce_buckets::<G>(
        gpu,
        ws,
        bases,
        plan.list.ptr(),
        plan.off.ptr(),
        nb,
        plan.n * nwin,
        plan.n,
    )?;
    // window reduction
    let segs = (plan.nbw as usize).div_ceil(MSM_SEG as usize);
    let seg_buf = ws.buffer::<G::Jac>(segs * nwin)?;
    (G::SEGMENTS)(
        gpu,
        &ws.stream,
        Launch::over(segs * nwin, 64),
        buckets.pts.ptr(),
        buckets.off.ptr(),
        buckets.cnt.ptr(),
        plan.nbw,
        nwin as u32,
        seg_buf.ptr(),
    )?;
    // One block per window left all but nwin SMs idle while its threads
    // added 16 segments each in a row (1.1 ms of G2's 2^22 MSM, run 47), so
    // long windows go in two launches: slices of two segments per thread,
    // then each window's slice sums.
    let slices = (segs / (2 * block as usize)).max(1);
    if slices > 1 && segs.is_multiple_of(slices) {
        let part = ws.buffer::<G::Jac>(nwin * slices)?;
        sum(seg_buf.ptr(), segs / slices, nwin * slices, part.ptr())?;
        sum(part.ptr(), slices, nwin, out)?;
    } else {
        sum(seg_buf.ptr(), segs, nwin, out)?;
    }
    Ok(())
}

/// The MSM's value from its results (host side, exact): the sum of
/// 2^(c*w) * W_w over the window sums, plus the sum of the ones.
pub fn combine<G: MsmGroup>(results: &[G::Jac], shape: Shape) -> G::Curve {
    let (windows, rest) = results[..shape.outputs()].split_at(shape.nwin as usize);
    let mut acc = G::Curve::zero();
    for w in windows.iter().rev() {
        for _ in 0..shape.c {
            acc.double_in_place();
        }
        acc += G::from_device(w);
    }
    for p in rest {
        acc += G::from_device(p);
    }
    acc
}

/// One MSM's results on the device: OUT_SLOTS per part (a resident MSM is
/// one part, a streamed one a part per chunk of its bases) and each part's
/// shape. Its value is the sum of the parts' values.
pub struct Results<G: MsmGroup> {
    /// The parts' result slots, OUT_SLOTS each.
    out: DBuf<G::Jac>,
    /// Shapes of the parts written so far.
    shapes: Vec<Shape>,
}

impl<G: MsmGroup> Results<G> {
    /// Room for `parts` parts.
    pub fn new(ws: &Workspace, parts: usize) -> Res<Self> {
        Ok(Self {
            out: ws.buffer::<G::Jac>(parts.max(1) * OUT_SLOTS)?,
            shapes: Vec::with_capacity(parts),
        })
    }

    /// Accumulates the next part: `plan`'s scalars against `bases`.
    pub fn accumulate(
        &mut self,
        gpu: &Gpu,
        ws: &Workspace,
        plan: &Plan,
        bases: DevPtr<G::Affine>,
    ) -> Res<()> {
        let slot = self.out.ptr_at(self.shapes.len() * OUT_SLOTS);
        accumulate::<G>(gpu, ws, plan, bases, slot)?;
        self.shapes.push(plan.shape);
        Ok(())
    }

    /// Queues the download of the results on `stream`; the value is ready
    /// once the stream has passed it (`Fetched::value`).
    pub fn fetch(self, stream: &Stream) -> Res<Fetched<G>> {
        let mut host = vec![G::Jac::ZERO; self.shapes.len() * OUT_SLOTS];
        self.out.download(&mut host, stream)?;
        Ok(Fetched {
            host,
            shapes: self.shapes,
        })
    }
}

/// The results of MSMs over one scalar vector: the G1 queries', and B's
/// G2 query's when it ran.
pub type GroupResults = (Vec<Results<G1>>, Option<Results<G2>>);

/// An MSM's results on their way to the host (see `Results::fetch`).
pub struct Fetched<G: MsmGroup> {
    host: Vec<G::Jac>,
    shapes: Vec<Shape>,
}

impl<G: MsmGroup> Fetched<G> {
    /// The MSM's value (after the download's stream was synchronized).
    pub fn value(&self) -> G::Curve {
        self.shapes
            .iter()
            .enumerate()
            .map(|(i, &shape)| combine::<G>(&self.host[i * OUT_SLOTS..], shape))
            .sum()
    }
}
