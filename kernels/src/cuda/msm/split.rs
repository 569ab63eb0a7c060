//! The 0/1 split: where at least 1/SPLIT_SHARE of an MSM's scalars are 0
//! or 1 (most of a PoRep witness), the zeros are dropped, the ones' points
//! become one bucket that the bucket levels sum, and only the rest go on to
//! the sort, compacted, with their point indices.

use crate::cuda::gpu::{DBuf, DevFr, DevPtr, Gpu, Launch, Res, Workspace, MSM_SPLIT_ROUNDS};

use super::layout::THREADS;
use super::sort::filled;

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

/// The ones of the 0/1 split as a single bucket, in the layout the bucket
/// levels read (entries 0..n).
pub(super) struct OnesBucket {
    /// Entries: the scalars equal to 1.
    pub(super) n: usize,
    /// Point indices.
    pub(super) list: DBuf<u32>,
    /// [0, n]: the bucket's first entry and the end of its entries.
    pub(super) off: DBuf<u32>,
}

/// Scalars split by `k_msm_split`: the ones' point indices, and the others
/// compacted with theirs, which the sort takes instead of all n.
pub(super) struct Split {
    /// How many scalars are 1.
    n_ones: usize,
    /// How many are neither 0 nor 1.
    pub(super) n_others: usize,
    /// Point indices of the ones.
    ones: DBuf<u32>,
    /// Point indices of the others, in the order of `others`.
    pub(super) others_idx: DBuf<u32>,
    /// The other scalars, compacted.
    pub(super) others: DBuf<DevFr>,
    /// The split's output cursors, kept with its outputs until the plan is
    /// made (stream order frees them after the sort's kernels are queued).
    _cursor: DBuf<u32>,
}

/// Splits n plain scalars at `scalars` where `rule` says so (`None`: every
/// scalar goes to the sort).
pub(super) fn split(
    gpu: &Gpu,
    ws: &Workspace,
    scalars: DevPtr<DevFr>,
    n: usize,
    rule: ZeroOne,
) -> Res<Option<Split>> {
    let split = match rule {
        ZeroOne::Off => None,
        ZeroOne::Auto if n == 0 => None,
        ZeroOne::Auto => {
            let (ones, others) = count_classes(gpu, ws, scalars, n)?;
            ((n - others) * SPLIT_SHARE >= n).then_some((ones, others))
        }
    };
    let Some((n_ones, n_others)) = split else {
        return Ok(None);
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
    Ok(Some(Split { n_ones, n_others, ones, others_idx, others, _cursor: cursor }))
}

impl Split {
    /// The ones as the bucket the levels sum, or `None` when there are none
    /// (after the others are sorted: these are the plan's last launches).
    pub(super) fn ones_bucket(self, gpu: &Gpu, ws: &Workspace) -> Res<Option<OnesBucket>> {
        if self.n_ones == 0 {
            return Ok(None);
        }
        // [0, n]: n in both words, then 0 into the first.
        let off = filled(gpu, ws, 2, self.n_ones as u32)?;
        gpu.k_fill_u32(&ws.stream, Launch::new(1, 32), off.ptr(), 1, 0)?;
        Ok(Some(OnesBucket { n: self.n_ones, list: self.ones, off }))
    }
}

/// How many of n plain scalars are 1 and how many are neither 0 nor 1
/// (waits for the stream).
fn count_classes(gpu: &Gpu, ws: &Workspace, scalars: DevPtr<DevFr>, n: usize) -> Res<(usize, usize)> {
    let counts = filled(gpu, ws, 2, 0)?;
    // A grid of a few blocks per SM's worth: each thread strides over many
    // scalars, so the counters see few atomics.
    let blocks = n.div_ceil(THREADS as usize).min(1024) as u32;
    gpu.k_msm_count_classes(&ws.stream, Launch::new(blocks, THREADS), scalars, n as u32, counts.ptr())?;
    let mut host = [0u32; 2];
    counts.download(&mut host, &ws.stream)?;
    ws.synchronize("counting 0/1 scalars")?;
    Ok((host[0] as usize, host[1] as usize))
}
