//! The seam between scheduling and proving math. The daemon implements
//! [`Backend`] on top of cuzk-kernels (CPU or CUDA engines) or the simulated
//! backend; the actors only move opaque payloads between stages.

use std::any::Any;
use std::time::Duration;

use crate::model::JobSpec;

/// One stage's output, opaque to the actors.
pub struct Payload(pub Box<dyn Any + Send>);

impl Payload {
    pub fn new<T: Any + Send>(value: T) -> Self {
        Self(Box::new(value))
    }

    /// Takes the value back; the error names the type that was expected.
    pub fn take<T: Any>(self) -> Result<T, String> {
        self.0
            .downcast::<T>()
            .map(|b| *b)
            .map_err(|_| format!("stage payload is not a {}", std::any::type_name::<T>()))
    }
}

/// Named phase durations within a stage (for spans and histograms).
pub type Phases = Vec<(&'static str, Duration)>;

pub struct Synthesized {
    pub payload: Payload,
    pub phases: Phases,
}

pub struct Started {
    pub payload: Payload,
    /// Bytes released during prove_start (a, b and c).
    pub freed_bytes: u64,
    pub phases: Phases,
}

pub struct Finished {
    /// The proof, serialized by the backend (arkworks compressed).
    pub proof: Vec<u8>,
    /// The public inputs, serialized the same way.
    pub public_inputs: Vec<Vec<u8>>,
    pub phases: Phases,
}

/// Stage bodies. Each call blocks its calling thread; the actors give every
/// stage threads of its own. Errors are texts a job reports.
pub trait Backend: Send + Sync + 'static {
    /// "cpu", "cuda" or "sim".
    fn name(&self) -> &str;
    /// The proving devices, by index; each gets `workers_per_device` workers.
    fn devices(&self) -> Vec<String>;
    fn synthesize(&self, job: &JobSpec, partition: u32) -> Result<Synthesized, String>;
    fn prove_start(
        &self,
        device: usize,
        job: &JobSpec,
        partition: u32,
        input: Payload,
    ) -> Result<Started, String>;
    fn prove_finish(
        &self,
        job: &JobSpec,
        partition: u32,
        input: Payload,
    ) -> Result<Finished, String>;
    /// Host bytes the backend keeps across partitions (proving keys,
    /// matrices); the budget counts them as used.
    fn resident_bytes(&self) -> u64 {
        0
    }
}

/// A stage body that returned an error or panicked.
#[derive(Debug)]
pub struct StageFailure {
    pub error: String,
    /// The body panicked: the actor that ran it restarts before its next
    /// message, in case the panic left it inconsistent.
    pub panicked: bool,
}

/// Runs a stage body, turning a panic into a failure so that a bad input or a
/// backend bug fails one attempt of one partition instead of killing a stage
/// thread.
pub fn run_stage<T>(
    stage: &str,
    body: impl FnOnce() -> Result<T, String>,
) -> Result<T, StageFailure> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(result) => result.map_err(|error| StageFailure { error, panicked: false }),
        Err(panic) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(StageFailure {
                error: format!("{stage} panicked: {text}"),
                panicked: true,
            })
        }
    }
}
