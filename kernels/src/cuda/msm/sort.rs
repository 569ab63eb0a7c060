//! The counting sort of the scalars into buckets, one set per signed
//! c-bit window: a histogram of the digits (atomics), the exclusive scan of
//! the counts into each bucket's first entry, and the scatter of the point
//! indices (the sign in the top bit) into their buckets. The scan and the
//! fill are also the later steps' (the 0/1 split's cursors, the bucket
//! levels' offsets).

use crate::cuda::gpu::{DBuf, DevFr, DevPtr, Gpu, Launch, Res, Workspace, SCAN_PER_THREAD, SCAN_THREADS};

use super::layout::THREADS;
use super::window::{window_bits, Shape};

/// Scalars sorted into their windows' buckets.
pub(super) struct Buckets {
    /// Buckets per window: 2^(c-1).
    pub(super) nbw: u32,
    /// First entry of each bucket in `list`, and (entry nb) the total: the
    /// exclusive scan of the buckets' counts.
    pub(super) off: DBuf<u32>,
    /// Point indices by bucket, the sign in the top bit.
    pub(super) list: DBuf<u32>,
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
    gpu.k_scan_tiles(&ws.stream, Launch::new(tiles as u32, SCAN_THREADS), input, out, n, sums.ptr())?;
    gpu.k_scan_sums(&ws.stream, Launch::new(1, SCAN_THREADS), sums.ptr(), tiles as u32)?;
    gpu.k_scan_add(&ws.stream, Launch::over(len, THREADS), out, n, sums.ptr())
}

/// A `sums` buffer for scans of up to `len` entries.
pub(super) fn scan_sums(ws: &Workspace, len: usize) -> Res<DBuf<u32>> {
    ws.buffer(len.div_ceil((SCAN_THREADS * SCAN_PER_THREAD) as usize))
}

/// A buffer of `len` u32 set to `v` (stream-ordered).
pub(super) fn filled(gpu: &Gpu, ws: &Workspace, len: usize, v: u32) -> Res<DBuf<u32>> {
    let b = ws.buffer::<u32>(len)?;
    gpu.k_fill_u32(&ws.stream, Launch::over(len, THREADS), b.ptr(), len as u32, v)?;
    Ok(b)
}

/// The counting sort of n plain scalars into signed-digit buckets; `map`
/// (or null: the identity) gives each scalar's point index. Returns the
/// results' layout (no ones: the split adds them) and the buckets.
pub(super) fn sort(
    gpu: &Gpu,
    ws: &Workspace,
    scalars: DevPtr<DevFr>,
    map: DevPtr<u32>,
    n: usize,
) -> Res<(Shape, Buckets)> {
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
    let sorted = |off, list| {
        let shape = Shape { c, nwin, ones: false };
        (shape, Buckets { nbw, off, list })
    };
    if n == 0 {
        return Ok(sorted(off, list));
    }
    let sums = scan_sums(ws, nb + 1)?;
    let n32 = n as u32;
    gpu.k_msm_histogram(&ws.stream, Launch::over(n, THREADS), scalars, n32, c, nwin, cnt.ptr())?;
    scan(gpu, ws, cnt.ptr(), off.ptr(), nb + 1, &sums)?;
    // The scatter advances a cursor per bucket: a copy of the offsets, in
    // the counts' buffer, which the scan has read.
    let cursor = cnt;
    gpu.k_copy_u32(&ws.stream, Launch::over(nb + 1, THREADS), off.ptr(), cursor.ptr(), (nb + 1) as u32)?;
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
    Ok(sorted(off, list))
}
