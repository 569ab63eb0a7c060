//! The bucket reduction: each bucket's entries summed down to one point in
//! levels (level 0 in work items of consecutive sorted entries across
//! buckets, then levels of at most LEVEL_K partials of one bucket per item,
//! so a bucket with most of the points is still spread over many threads),
//! then each window's buckets into its window sum (running sums over
//! segments, then a block tree per window), and the 0/1 split's ones
//! bucket into its own result slot.

use crate::cuda::gpu::{
    DBuf, DevPtr, DeviceElement, Gpu, Launch, Res, Workspace, MSM_LEVEL_THREADS, MSM_SEG,
};

use super::layout::{MsmGroup, THREADS};
use super::sort::{filled, scan, scan_sums};
use super::split::OnesBucket;
use super::window::sweep_override;

/// Partials one work item of a bucket level >= 1 sums.
pub const LEVEL_K: u32 = 32;
/// Longest level-0 work item (entries), and the fewest items a longer one
/// must leave: about 20 waves of the device's resident level-0 threads
/// (132 SMs x 3 blocks x 128 on the H200), so that the last wave's tail
/// stays small.
const LEVEL0_K_MAX: u32 = 128;
const LEVEL0_MIN_ITEMS: usize = 1 << 20;

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

/// Buckets after the last level: one partial sum (or none) per bucket, at
/// `pts[off[b]]` when `cnt[b]` is 1.
pub(super) struct Partials<J: DeviceElement> {
    /// The last level's partial sums.
    pts: DBuf<J>,
    /// Where each bucket's partial sum is in `pts`.
    off: DBuf<u32>,
    /// Partial sums per bucket: 1, or 0 for an empty bucket.
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
pub(super) fn reduce_buckets<G: MsmGroup>(
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
            gpu.k_msm_items(&ws.stream, items_launch, cnt_cur.ptr(), cnt_nxt.ptr(), nb32, k, need.ptr())?;
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
    Ok(Partials { pts, off: off_cur, cnt: cnt_cur })
}

/// Threads per block of the window sums (`k_*_window_sum`: a block adds its
/// threads' points as a tree in shared memory).
const WINDOW_SUM_BLOCK: u32 = 128;

/// Window sums: each of `blocks` blocks sums `len` consecutive points of
/// `input` into `out[block]`.
fn block_sums<G: MsmGroup>(
    gpu: &Gpu,
    ws: &Workspace,
    input: DevPtr<G::Jac>,
    len: usize,
    blocks: usize,
    out: DevPtr<G::Jac>,
) -> Res<()> {
    let shared = WINDOW_SUM_BLOCK * std::mem::size_of::<G::Jac>() as u32;
    let l = Launch::new(blocks as u32, WINDOW_SUM_BLOCK).shared(shared);
    (G::WINDOW_SUM)(gpu, &ws.stream, l, input, len as u32, out)
}

/// The sum of the 0/1 split's ones into `out` (stream-ordered).
pub(super) fn ones_sum<G: MsmGroup>(
    gpu: &Gpu,
    ws: &Workspace,
    bases: DevPtr<G::Affine>,
    ones: &OnesBucket,
    out: DevPtr<G::Jac>,
) -> Res<()> {
    let partials = reduce_buckets::<G>(gpu, ws, bases, ones.list.ptr(), ones.off.ptr(), 1, ones.n, ones.n)?;
    // The one bucket ends as one point at pts[0] (its partials start
    // there at every level); a window sum over a single segment moves
    // it into its slot.
    block_sums::<G>(gpu, ws, partials.pts.ptr(), 1, 1, out)
}

/// The window sums of `nwin` windows of `nbw` reduced buckets each into
/// `out[0..nwin]` (stream-ordered).
pub(super) fn window_sums<G: MsmGroup>(
    gpu: &Gpu,
    ws: &Workspace,
    buckets: &Partials<G::Jac>,
    nbw: u32,
    nwin: usize,
    out: DevPtr<G::Jac>,
) -> Res<()> {
    let segs = (nbw as usize).div_ceil(MSM_SEG as usize);
    let seg_buf = ws.buffer::<G::Jac>(segs * nwin)?;
    (G::SEGMENTS)(
        gpu,
        &ws.stream,
        Launch::over(segs * nwin, 64),
        buckets.pts.ptr(),
        buckets.off.ptr(),
        buckets.cnt.ptr(),
        nbw,
        nwin as u32,
        seg_buf.ptr(),
    )?;
    // One block per window left all but nwin SMs idle while its threads
    // added 16 segments each in a row (1.1 ms of G2's 2^22 MSM, run 47), so
    // long windows go in two launches: slices of two segments per thread,
    // then each window's slice sums.
    let slices = (segs / (2 * WINDOW_SUM_BLOCK as usize)).max(1);
    if slices > 1 && segs.is_multiple_of(slices) {
        let part = ws.buffer::<G::Jac>(nwin * slices)?;
        block_sums::<G>(gpu, ws, seg_buf.ptr(), segs / slices, nwin * slices, part.ptr())?;
        block_sums::<G>(gpu, ws, part.ptr(), slices, nwin, out)
    } else {
        block_sums::<G>(gpu, ws, seg_buf.ptr(), segs, nwin, out)
    }
}
