//! Host side of the Pippenger MSM (kernels in cuda/msm.cuh), one file per
//! step, as sppark keeps its MSM's sort and its bucket additions apart:
//!
//! - `layout`: bases, results and scalars in the kernels' layout, and the
//!   `MsmGroup` binding G1 and G2 to their kernels;
//! - `window`: the window plan (width, windows, the results' `Shape`);
//! - `split`: the 0/1 split (the zeros dropped, the ones one bucket);
//! - `sort`: the counting sort of the scalars into buckets;
//! - `reduce`: the bucket levels and the window sums.
//!
//! This file is the driver: `plan` runs the split and the sort once per
//! scalar vector, `accumulate` the reduction once per set of bases, and
//! `Results` / `combine` bring the window sums to the host for the last
//! Horner step.

mod layout;
mod reduce;
mod sort;
mod split;
mod window;

use ark_ec::AdditiveGroup;
use ark_std::Zero;
use rustacuda::stream::Stream;

use super::gpu::{DBuf, DevFr, DevPtr, DeviceElement, Gpu, Res, Workspace};
use sort::Buckets;
use split::OnesBucket;

pub use layout::{fr_dev, fr_from_dev, from_mont, gather, MsmGroup, TestOps, G1, G2};
pub use reduce::{level0_k, LEVEL_K};
pub use sort::scan;
pub use split::ZeroOne;
pub use window::{window_bits, Shape, OUT_SLOTS};

/// Scalars sorted into buckets: depends only on the scalars, so MSMs with the
/// same scalars (A, B1, B2) share one.
pub struct Plan {
    /// Scalars in the buckets (all of them, or those neither 0 nor 1).
    pub n: usize,
    /// The results' layout.
    pub shape: Shape,
    /// The scalars' buckets, per window.
    buckets: Buckets,
    /// The points to add once (scalar 1), with the split.
    ones: Option<OnesBucket>,
}

impl Plan {
    /// Device bytes the plan holds.
    pub fn bytes(&self) -> u64 {
        let ones = self.ones.as_ref().map_or(0, |o| o.list.bytes() + o.off.bytes());
        self.buckets.off.bytes() + self.buckets.list.bytes() + ones
    }
    fn nb(&self) -> u32 {
        self.shape.nwin * self.buckets.nbw
    }
}

/// Sorts n plain scalars at `scalars` into buckets, after splitting off
/// the zeros and ones where `rule` says so.
pub fn plan(gpu: &Gpu, ws: &Workspace, scalars: DevPtr<DevFr>, n: usize, rule: ZeroOne) -> Res<Plan> {
    let Some(split) = split::split(gpu, ws, scalars, n, rule)? else {
        let (shape, buckets) = sort::sort(gpu, ws, scalars, DevPtr::null(), n)?;
        return Ok(Plan { n, shape, buckets, ones: None });
    };
    let n = split.n_others;
    let (mut shape, buckets) = sort::sort(gpu, ws, split.others.ptr(), split.others_idx.ptr(), n)?;
    let ones = split.ones_bucket(gpu, ws)?;
    shape.ones = ones.is_some();
    Ok(Plan { n, shape, buckets, ones })
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
    let nwin = plan.shape.nwin as usize;
    if let Some(ones) = &plan.ones {
        reduce::ones_sum::<G>(gpu, ws, bases, ones, out.offset(nwin))?;
    }
    if nwin == 0 {
        return Ok(());
    }
    let nb = plan.nb() as usize;
    let buckets = reduce::reduce_buckets::<G>(
        gpu,
        ws,
        bases,
        plan.buckets.list.ptr(),
        plan.buckets.off.ptr(),
        nb,
        plan.n * nwin,
        plan.n,
    )?;
    reduce::window_sums::<G>(gpu, ws, &buckets, plan.buckets.nbw, nwin, out)
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
        Ok(Self { out: ws.buffer::<G::Jac>(parts.max(1) * OUT_SLOTS)?, shapes: Vec::with_capacity(parts) })
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
        Ok(Fetched { host, shapes: self.shapes })
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
