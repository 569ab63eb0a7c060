//! Proving math for cuzk. Knows nothing of actors or HTTP.
//!
//! - [`circuits`]: the circuit registry and the built-in circuits.
//! - [`groth16`]: Groth16 split into the three stages cuzk schedules
//!   (synthesize, prove_start, prove_finish), a file each, beside the prepared
//!   circuit they share.
//! - [`r1cs`]: the compiled R1CS a proof's a, b and c are evaluated from.
//! - [`key_source`]: a key's queries read range by range from elsewhere
//!   than the host's memory (a parameter file).
//! - [`setup`]: circuit-specific setup that can be stopped part way.
//! - [`cpu`]: the CPU engine for prove_start.
//! - `cuda` (feature `cuda`): the GPU engine.
//! - [`device_plan`]: what a device keeps resident, streams and runs at
//!   once, planned from its memory (the CUDA engine's, tested without one).
//! - [`fixed_base`]: the window tables of the device's fixed-base
//!   multiplication (the Groth16 setup's generators).
//! - [`host`]: what the host machine has (its memory), for default budgets.
//! - `synthetic` (feature `bench-internals`): made-up compiled matrices and
//!   satisfying assignments for tests and benchmarks.

#![warn(missing_docs)]

pub mod circuits;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device_plan;
pub mod fixed_base;
pub mod groth16;
pub mod host;
pub mod key_source;
pub mod r1cs;
pub mod setup;
#[cfg(feature = "bench-internals")]
pub mod synthetic;

pub use ark_bls12_381::{Bls12_381, Fr, G1Affine, G1Projective, G2Affine, G2Projective};

/// Errors from the proving stages. The text is what a job reports;
/// [`KernelError::retryable`] is what the scheduler decides a retry on.
// Clone: the calls of a shared pass over a streamed key all get its error.
#[derive(Clone, Debug, thiserror::Error)]
pub enum KernelError {
    /// The circuit could not be synthesized (a bad witness, a gadget's error).
    #[error("synthesis failed: {0}")]
    Synthesis(String),
    /// The witness breaks the constraint of this index.
    #[error("witness does not satisfy constraint {0}")]
    Unsatisfied(usize),
    /// The device failed.
    #[error("device error: {0}")]
    Device(DeviceError),
    /// The proving key does not fit the circuit, or could not be read.
    #[error("proving key: {0}")]
    Key(String),
    /// A setup stopped because its caller asked it to
    /// ([`setup::generate_key`]): nothing is wrong with the circuit.
    #[error("setup stopped: no one waits for it")]
    Cancelled,
}

impl KernelError {
    /// Whether the same job may succeed if proved again.
    ///
    /// A device fault (a failed launch, device memory exhausted by
    /// concurrent jobs, a lost or reset GPU, host threads that could not
    /// start) says something about the engine's state at that moment, not
    /// about the job: another attempt, later or on another device, can pass.
    /// A witness that does not satisfy the circuit, a proving key that does
    /// not fit it, or a circuit that cannot be synthesized fail the same way
    /// every time, so retrying them only spends a worker.
    pub fn retryable(&self) -> bool {
        match self {
            KernelError::Device(e) => e.retryable(),
            KernelError::Synthesis(_) | KernelError::Unsatisfied(_) | KernelError::Key(_) => false,
            // Asked for again, a cancelled setup starts over.
            KernelError::Cancelled => true,
        }
    }
}

/// A failure of a proving engine's device (or of the host resources it
/// runs on): which call failed and the error it returned.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{call}: {cause}")]
pub struct DeviceError {
    /// The call that failed, with what it was asked for ("cuMemAlloc of
    /// 4096 bytes", "launching k_scan_sums"), so a report names the step.
    pub call: String,
    /// What the call returned, kept typed so that callers decide on it
    /// (see [`DeviceError::retryable`]) instead of parsing text.
    pub cause: DeviceCause,
}

/// Why a device call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceCause {
    /// The CUDA driver's error code.
    #[cfg(feature = "cuda")]
    Driver(rustacuda::error::CudaError),
    /// The engine itself failed or refused, not the driver: its threads
    /// could not start, its device-memory budget is held by keys in use, a
    /// lock was poisoned by a panic on another call. The text says which.
    Engine(String),
    /// The device's memory plan (device_plan.rs) cannot hold what the call
    /// needs: the device is too small for the circuit, or something the
    /// plan did not foresee holds its memory. The text says which, and the
    /// setting to change. Not retried: the same plan fails the same way.
    Memory(String),
}

impl std::fmt::Display for DeviceCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            #[cfg(feature = "cuda")]
            DeviceCause::Driver(rustacuda::error::CudaError::OutOfMemory) => f.write_str(
                "OutOfMemory: device memory ran out beyond the engine's memory plan (another process on the card, or a call larger than planned; /v1/status shows the plan; [cuda] memory_limit_bytes lowers it)",
            ),
            #[cfg(feature = "cuda")]
            DeviceCause::Driver(e) => write!(f, "{e:?}"),
            DeviceCause::Engine(s) | DeviceCause::Memory(s) => f.write_str(s),
        }
    }
}

impl DeviceError {
    /// A call the device's memory plan cannot hold (see
    /// [`DeviceCause::Memory`]).
    pub fn memory(call: impl Into<String>, why: impl std::fmt::Display) -> KernelError {
        KernelError::Device(DeviceError { call: call.into(), cause: DeviceCause::Memory(why.to_string()) })
    }

    /// A failure of `call` inside the engine (not from the driver).
    pub fn engine(call: impl Into<String>, error: impl std::fmt::Display) -> KernelError {
        KernelError::Device(DeviceError { call: call.into(), cause: DeviceCause::Engine(error.to_string()) })
    }

    /// Whether another attempt can succeed. Driver errors are retryable
    /// except those that say the request itself is wrong and would be
    /// refused again on any device: an invalid argument (a launch or an
    /// allocation outside the driver's limits for this job's size), a
    /// kernel missing from the module (a build defect), and device memory
    /// run out, which the engine's memory plan sized every call against:
    /// running out says the plan or the card's sharing is wrong, and three
    /// more attempts under the same plan only fail three more times (issue
    /// 37: 50 partitions failed three times each).
    pub fn retryable(&self) -> bool {
        match &self.cause {
            #[cfg(feature = "cuda")]
            DeviceCause::Driver(e) => !matches!(
                e,
                rustacuda::error::CudaError::InvalidValue
                    | rustacuda::error::CudaError::NotFound
                    | rustacuda::error::CudaError::OutOfMemory
            ),
            DeviceCause::Engine(_) => true,
            DeviceCause::Memory(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_device_faults_are_retryable() {
        assert!(!KernelError::Synthesis("no matrices".into()).retryable());
        assert!(!KernelError::Unsatisfied(3).retryable());
        assert!(!KernelError::Key("wrong length".into()).retryable());
        let busy = DeviceError::engine("locking the workspaces", "poisoned");
        assert!(busy.retryable());
        assert!(busy.to_string().contains("locking the workspaces: poisoned"));
        let planned = DeviceError::memory("making room for 8602615872 bytes", "held by keys in use");
        assert!(!planned.retryable(), "a device memory plan that cannot hold a call is final");
        assert!(planned.to_string().contains("making room for 8602615872 bytes: held"));
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn driver_errors_keep_their_code_and_decide_the_retry() {
        use rustacuda::error::CudaError;
        let err = |code| {
            KernelError::Device(DeviceError {
                call: "launching k_scan_sums".into(),
                cause: DeviceCause::Driver(code),
            })
        };
        assert!(err(CudaError::LaunchFailed).retryable());
        assert!(!err(CudaError::OutOfMemory).retryable());
        assert!(err(CudaError::OutOfMemory).to_string().contains("memory_limit_bytes"));
        assert!(!err(CudaError::InvalidValue).retryable());
        assert!(!err(CudaError::NotFound).retryable());
        match err(CudaError::OutOfMemory) {
            KernelError::Device(e) => {
                assert_eq!(e.cause, DeviceCause::Driver(CudaError::OutOfMemory));
                assert_eq!(e.call, "launching k_scan_sums");
            }
            other => panic!("not a device error: {other}"),
        }
    }
}
