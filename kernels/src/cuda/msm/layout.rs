//! The MSM's data in the kernels' layout: bases as the kernels' affine
//! points (all zeros: the identity) and the Jacobian points they write back
//! as the host's; Fr scalars as the kernels' words (Montgomery form, the
//! same bytes as arkworks'), their conversion to plain integers on the
//! device (what the sort reads digits from) and their gather by index; and
//! `MsmGroup`, which binds G1 and G2 to their layouts and kernels so that
//! one driver serves both.

use ark_bls12_381::{Fq, Fq2, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::CurveGroup;
use ark_ff::{BigInt, Fp};
use ark_std::Zero;
use rayon::prelude::*;
use rustacuda::stream::Stream;

use crate::cuda::gpu::{
    DevFr, DevG1Affine, DevG1Jac, DevG2Affine, DevG2Jac, DevPtr, DeviceElement, Gpu, Launch, Res, Workspace,
};
use crate::key_source::{g1_words, g2_words};
use crate::Fr;

/// Threads per block of the elementwise kernels.
pub(super) const THREADS: u32 = 256;

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
type Level0<A, J> =
    fn(&Gpu, &Stream, Launch, DevPtr<A>, DevPtr<u32>, DevPtr<u32>, u32, u32, u32, DevPtr<J>) -> Res<()>;
/// A k_*_spans launcher.
type Spans<J> =
    fn(&Gpu, &Stream, Launch, DevPtr<J>, DevPtr<u32>, u32, u32, u32, DevPtr<u32>, DevPtr<u32>) -> Res<()>;
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
        points_to_device(points, out, |p, o: &mut DevG1Affine| g1_words(p, &mut o.0))
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
        points_to_device(points, out, |p, o: &mut DevG2Affine| g2_words(p, &mut o.0))
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
/// whole element (`key_source::g1_words`: the identity all zeros).
fn points_to_device<P: Sync, D: Send>(points: &[P], out: &mut [D], fill: impl Fn(&P, &mut D) + Sync + Send) {
    assert_eq!(points.len(), out.len(), "one element per point");
    out.par_iter_mut().zip(points.par_iter()).for_each(|(o, p)| fill(p, o));
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

/// Converts n Montgomery scalars at `mont` into plain integers at `plain`.
pub fn from_mont(gpu: &Gpu, ws: &Workspace, mont: DevPtr<DevFr>, plain: DevPtr<DevFr>, n: usize) -> Res<()> {
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
    gpu.k_msm_gather(&ws.stream, Launch::over(n, THREADS), values, idx, out, n as u32)
}
