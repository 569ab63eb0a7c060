//! The engines step of a start: the proving backend the configuration names
//! (CPU, CUDA or simulated), its devices, and how it sizes one partition's
//! reservation.

use std::sync::Arc;

use cuzk_actors::Backend;
use cuzk_kernels::groth16::ProveStartEngine;

use crate::backend::{Device, ProofJob, ProvingBackend};
use crate::config::{BackendKind, Config, ConfigError};
use crate::filecoin::CircuitLoading;
use crate::job_input::{self, ReservationRule};
use crate::keys::KeyStore;
use crate::sim::SimBackend;

/// Why no proving backend could be built.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// An engine could not start on its device.
    #[error("{0}")]
    Engine(#[from] cuzk_kernels::KernelError),
    /// `backend = "cuda"` on a host where none is found.
    #[error("backend = \"cuda\" but no CUDA device was found")]
    NoCudaDevice,
    /// A device of `cuda.devices` that is not there.
    #[error("CUDA device {0} does not exist")]
    NoSuchDevice(usize),
    /// `backend = "cuda"` in a build without the `cuda` feature.
    #[error("this cuzk was built without CUDA support; rebuild with --features cuda")]
    NoCudaSupport,
    /// A `[cuda]` setting out of its range.
    #[error(transparent)]
    Settings(#[from] ConfigError),
    /// `[sim]` names no profile, or one of its values is out of range.
    #[error(transparent)]
    Simulation(#[from] crate::sim::SimError),
}

/// What the daemon's other parts take from the backend it builds.
pub(super) struct Built {
    pub backend: Arc<dyn Backend>,
    /// How one partition's reservation is sized.
    pub reservation: ReservationRule,
    /// How Filecoin circuits are loaded: preloads load them the same way.
    pub loading: CircuitLoading,
    /// The devices' engines, which a preload warms with the loaded circuit.
    pub engines: Vec<Arc<dyn ProveStartEngine>>,
}

/// The backend the configuration names.
pub(super) fn backend(config: &Config, keys: Arc<KeyStore>) -> Result<Built, BackendError> {
    let proving = |devices: Vec<Device>| -> Built {
        let loading = CircuitLoading {
            shape_dir: Some(config.data_dir.join("shapes")),
            keep_free: config.store.min_free_bytes,
            ..CircuitLoading::default()
        };
        let engines = devices.iter().map(|d| d.engine.clone()).collect();
        let backend = ProvingBackend::new(config.backend.as_str(), keys, devices, &config.proving, loading);
        let reservation =
            job_input::proving_reservation(config.proving.filecoin_evaluation, backend.device_evaluation());
        let loading = backend.loading().clone();
        Built { backend: Arc::new(backend), reservation, loading, engines }
    };
    match config.backend {
        BackendKind::Cpu => Ok(proving(cpu_devices(config)?)),
        BackendKind::Cuda => Ok(proving(cuda_devices(config)?)),
        BackendKind::Sim => {
            let sim = SimBackend::from_config(&config.sim).map_err(BackendError::Simulation)?;
            let reservation = sim.profile().reservation;
            log::warn!("simulated backend ({}): proofs are not real", sim.profile().name);
            Ok(Built {
                backend: Arc::new(sim),
                reservation: Arc::new(move |_: &ProofJob| reservation),
                loading: CircuitLoading::default(),
                engines: Vec::new(),
            })
        }
    }
}

fn cpu_devices(config: &Config) -> Result<Vec<Device>, BackendError> {
    let threads = match config.cpu.threads_per_device {
        0 => crate::config::available_cores(),
        n => n,
    };
    (0..config.cpu.devices.max(1))
        .map(|i| {
            let engine = cuzk_kernels::cpu::CpuEngine::new(threads)?;
            Ok(Device { name: format!("cpu{i}"), engine: Arc::new(engine) })
        })
        .collect()
}

#[cfg(feature = "cuda")]
fn cuda_devices(config: &Config) -> Result<Vec<Device>, BackendError> {
    use cuzk_kernels::cuda::{detect_devices, CudaEngine, CudaOptions};
    let budgets = config.cuda.budgets()?;
    let (pass_partitions, pass_wait) = config.cuda.passes()?;
    let detected = detect_devices()?;
    let ordinals: Vec<usize> = if config.cuda.devices.is_empty() {
        detected.iter().map(|d| d.ordinal).collect()
    } else {
        config.cuda.devices.clone()
    };
    if ordinals.is_empty() {
        return Err(BackendError::NoCudaDevice);
    }
    let defaults = CudaOptions::default();
    // The plan gives every worker that calls a device its workspace: the
    // general ones share its slots, the critical lane's are reserved.
    let options = CudaOptions {
        g2_on_gpu: config.cuda.g2_on_gpu.unwrap_or(true),
        memory_limit: budgets.memory_limit,
        resident_budget: budgets.resident,
        pinned_budget: budgets.pinned,
        general_calls: config.scheduler.workers_per_device.max(1),
        urgent_calls: config.scheduler.critical_workers()?,
        pass_partitions: pass_partitions.unwrap_or(defaults.pass_partitions),
        pass_wait: pass_wait.unwrap_or(defaults.pass_wait),
        ..defaults
    };
    ordinals
        .into_iter()
        .map(|ordinal| {
            let info =
                detected.iter().find(|d| d.ordinal == ordinal).ok_or(BackendError::NoSuchDevice(ordinal))?;
            let engine = CudaEngine::new(ordinal, options.clone())?;
            Ok(Device { name: format!("cuda{ordinal} {}", info.name), engine: Arc::new(engine) })
        })
        .collect()
}

#[cfg(not(feature = "cuda"))]
fn cuda_devices(_: &Config) -> Result<Vec<Device>, BackendError> {
    Err(BackendError::NoCudaSupport)
}
