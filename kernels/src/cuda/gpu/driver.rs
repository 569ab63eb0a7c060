//! The driver's entry, once per process, and its errors as
//! `KernelError::Device`, each naming the call that failed.

use rustacuda::error::CudaError;

use crate::{DeviceCause, DeviceError, KernelError};

/// What every driver call of the engine returns.
pub type Res<T> = Result<T, KernelError>;

/// Maps a driver error of `call` to `KernelError::Device`, keeping the code.
pub fn driver(call: &str) -> impl Fn(CudaError) -> KernelError + '_ {
    move |e| KernelError::Device(DeviceError { call: call.to_string(), cause: DeviceCause::Driver(e) })
}

static INIT: std::sync::OnceLock<Result<(), CudaError>> = std::sync::OnceLock::new();

/// cuInit, once per process.
pub fn init() -> Res<()> {
    let r = *INIT.get_or_init(|| rustacuda::init(rustacuda::CudaFlags::empty()));
    r.map_err(driver("cuInit"))
}
