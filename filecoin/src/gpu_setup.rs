//! The setup's multiplications on a CUDA device (feature `cuda`): a
//! [`FixedBaseMul`] over cuzk-kernels' fixed-base kernels, so that a
//! real-size test-only key is made in minutes rather than hours. The rest of
//! the setup (the evaluation at tau, the file) stays on the host.

use ark_bls12_381::{Fr, G1Affine, G2Affine};
use cuzk_kernels::cuda::fixed_base::{FixedBase, BATCH};

use crate::setup::FixedBaseMul;
use crate::Error;

/// The device's fixed-base multiplier, for [`crate::setup::generate`].
pub struct CudaFixedBase(FixedBase);

impl CudaFixedBase {
    /// Opens CUDA device `ordinal` and uploads the generators' tables.
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        let fb = FixedBase::new(ordinal).map_err(device)?;
        log::info!("setup multiplications on CUDA device {ordinal} ({})", fb.device_name());
        Ok(Self(fb))
    }
}

fn device(e: cuzk_kernels::KernelError) -> Error {
    Error::Setup(format!("CUDA fixed-base multiplication: {e}"))
}

impl FixedBaseMul for CudaFixedBase {
    fn batch(&self) -> usize {
        BATCH
    }
    fn g1(&self, scalars: &[Fr]) -> Result<Vec<G1Affine>, Error> {
        self.0.g1(scalars).map_err(device)
    }
    fn g2(&self, scalars: &[Fr]) -> Result<Vec<G2Affine>, Error> {
        self.0.g2(scalars).map_err(device)
    }
}
