//! Fixed-base multiplication on the device: many scalars times the G1 or G2
//! generator, returned as affine points equal to arkworks'
//! (`BatchMulPreprocessing::batch_mul`'s). The Groth16 setup's work at real
//! size (cuzk-filecoin's `CudaFixedBase`). The kernels are in
//! cuda/fixed_base.cuh; the generators' window tables are computed once on
//! the host (`crate::fixed_base::table`) and stay on the device.
//!
//! Per batch of at most [`BATCH`] scalars: upload (Montgomery form, the
//! bytes arkworks holds), to plain integers (`k_msm_from_mont`), one thread
//! per scalar summing its windows' table entries (`k_g*_fixed_base`), the
//! batched affine conversion (`k_g*_to_affine`, one inversion per
//! [`SEGMENT`] points), download.

use ark_ec::{CurveGroup, PrimeGroup};
use rayon::prelude::*;
use rustacuda::stream::Stream;

use super::gpu::{DBuf, DevFr, DevG1Affine, DevG2Affine, DevPtr, DeviceElement, Gpu, Launch, Res, Workspace};
use super::msm::{fr_dev, from_mont, MsmGroup, G1, G2};
use crate::fixed_base::{g1_from_words, g2_from_words, table, windows, WINDOW_BITS};
use crate::{Fr, G1Projective, G2Projective};

/// Scalars per batch: bounds the device memory of one batch (G2: 2^22 x
/// (32 + 288 + 192) bytes = 2.1 GB) while giving the device 16 times the
/// threads it holds at once.
pub const BATCH: usize = 1 << 22;

/// Points per thread of the affine conversion: its one inversion (about 570
/// Fq products) costs 36 products per point, against about 220 for a G1
/// point's 20 mixed additions, and 2^22 points still make 2^18 threads.
const SEGMENT: usize = 16;

/// Threads per block of both kernels.
const THREADS: u32 = 128;

/// A `k_g*_fixed_base` launcher.
type Mul<A, J> = fn(&Gpu, &Stream, Launch, DevPtr<DevFr>, DevPtr<A>, u32, u32, u32, DevPtr<J>) -> Res<()>;
/// A `k_g*_to_affine` launcher.
type ToAffine<A, J> = fn(&Gpu, &Stream, Launch, DevPtr<J>, DevPtr<A>, u32, u32) -> Res<()>;

/// A group's fixed-base kernels and the host's form of their results.
pub trait FixedBaseGroup: MsmGroup<Affine: Sync> {
    /// The group's k_*_fixed_base launcher.
    const MUL: Mul<Self::Affine, Self::Jac>;
    /// The group's k_*_to_affine launcher.
    const TO_AFFINE: ToAffine<Self::Affine, Self::Jac>;
    /// An affine point the kernels wrote, as the host's.
    fn from_affine(p: &Self::Affine) -> <Self::Curve as CurveGroup>::Affine;
}

impl FixedBaseGroup for G1 {
    const MUL: Mul<DevG1Affine, Self::Jac> = Gpu::k_g1_fixed_base;
    const TO_AFFINE: ToAffine<DevG1Affine, Self::Jac> = Gpu::k_g1_to_affine;
    fn from_affine(p: &DevG1Affine) -> crate::G1Affine {
        g1_from_words(&p.0)
    }
}

impl FixedBaseGroup for G2 {
    const MUL: Mul<DevG2Affine, Self::Jac> = Gpu::k_g2_fixed_base;
    const TO_AFFINE: ToAffine<DevG2Affine, Self::Jac> = Gpu::k_g2_to_affine;
    fn from_affine(p: &DevG2Affine) -> crate::G2Affine {
        g2_from_words(&p.0)
    }
}

/// One device's fixed-base multiplier: its context, a workspace, and the
/// two generators' tables. Fields drop in order, the context last (`Drop`
/// makes it current first).
pub struct FixedBase {
    g1_table: DBuf<DevG1Affine>,
    g2_table: DBuf<DevG2Affine>,
    ws: Workspace,
    gpu: Gpu,
}

impl FixedBase {
    /// Opens device `ordinal` and uploads the generators' tables.
    pub fn new(ordinal: usize) -> Res<Self> {
        let gpu = Gpu::new(ordinal)?;
        gpu.enter()?;
        let ws = Workspace::new(true, 0)?;
        let g1_table = ws.upload_owned(&G1::to_device(&table(G1Projective::generator(), WINDOW_BITS)))?;
        let g2_table = ws.upload_owned(&G2::to_device(&table(G2Projective::generator(), WINDOW_BITS)))?;
        ws.synchronize("uploading the generators' tables")?;
        Ok(Self { g1_table, g2_table, ws, gpu })
    }

    /// The device's name, for the log.
    pub fn device_name(&self) -> String {
        self.gpu.device.name().unwrap_or_default()
    }

    /// s * G1's generator for each scalar, affine.
    pub fn g1(&self, scalars: &[Fr]) -> Res<Vec<crate::G1Affine>> {
        self.mul::<G1>(&self.g1_table, scalars)
    }

    /// s * G2's generator for each scalar, affine.
    pub fn g2(&self, scalars: &[Fr]) -> Res<Vec<crate::G2Affine>> {
        self.mul::<G2>(&self.g2_table, scalars)
    }

    fn mul<G: FixedBaseGroup>(
        &self,
        table: &DBuf<G::Affine>,
        scalars: &[Fr],
    ) -> Res<Vec<<G::Curve as CurveGroup>::Affine>> {
        self.gpu.enter()?;
        let (gpu, ws) = (&self.gpu, &self.ws);
        let mut out = Vec::with_capacity(scalars.len());
        let mut host = vec![G::Affine::ZERO; BATCH.min(scalars.len())];
        for batch in scalars.chunks(BATCH) {
            let n = batch.len();
            let mut sc = ws.buffer::<DevFr>(n)?;
            ws.upload(&mut sc, fr_dev(batch))?;
            from_mont(gpu, ws, sc.ptr(), sc.ptr(), n)?;
            let jac = ws.buffer::<G::Jac>(n)?;
            let nwin = windows(WINDOW_BITS);
            let launch = Launch::over(n, THREADS);
            (G::MUL)(gpu, &ws.stream, launch, sc.ptr(), table.ptr(), WINDOW_BITS, nwin, n as u32, jac.ptr())?;
            let aff = ws.buffer::<G::Affine>(n)?;
            let stride = n.div_ceil(SEGMENT);
            let launch = Launch::over(stride, THREADS);
            (G::TO_AFFINE)(gpu, &ws.stream, launch, jac.ptr(), aff.ptr(), n as u32, stride as u32)?;
            aff.download(&mut host[..n], &ws.stream)?;
            ws.synchronize("fixed-base multiplication")?;
            out.par_extend(host[..n].par_iter().map(G::from_affine));
        }
        Ok(out)
    }
}

impl Drop for FixedBase {
    fn drop(&mut self) {
        // The buffers and the workspace are freed in this context.
        let _ = self.gpu.enter();
    }
}
