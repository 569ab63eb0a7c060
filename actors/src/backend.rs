//! The seam between scheduling and proving math. The daemon implements
//! [`Backend`] on top of cuzk-kernels (CPU or CUDA engines) or the simulated
//! backend; the actors only move opaque payloads between stages.

use std::any::Any;
use std::time::Duration;

use crate::error::{ErrorKind, StageError, StagePanic};
use crate::model::JobSpec;

/// One stage's output, opaque to the actors.
pub struct Payload(pub Box<dyn Any + Send>);

impl Payload {
    /// Wraps a stage's output of any type so that the actors can carry it to
    /// the next stage without knowing what it is.
    pub fn new<T: Any + Send>(value: T) -> Self {
        Self(Box::new(value))
    }

    /// Takes the value back. A payload of another type is a backend bug,
    /// so the failure is permanent.
    pub fn take<T: Any>(self) -> Result<T, StageError> {
        self.0
            .downcast::<T>()
            .map(|b| *b)
            .map_err(|_| StageError::permanent(WrongPayload { expected: std::any::type_name::<T>() }))
    }
}

/// A stage got a payload of a type it does not take.
#[derive(Debug, thiserror::Error)]
#[error("stage payload is not a {expected}")]
pub struct WrongPayload {
    /// The type the stage expected, for the error text.
    pub expected: &'static str,
}

/// Named phase durations within a stage (for spans and histograms).
pub type Phases = Vec<(&'static str, Duration)>;

/// What synthesis returns for one partition: the input of its prove_start.
pub struct Synthesized {
    /// The synthesized circuit, handed to a GPU worker's prove_start.
    pub payload: Payload,
    /// How long synthesis's steps took, for the partition's spans and the phase
    /// histograms.
    pub phases: Phases,
}

/// What prove_start returns for one partition: the input of its prove_finish,
/// and what the GPU worker reports about the call.
pub struct Started {
    /// The partial proof, handed to a finalizer's prove_finish.
    pub payload: Payload,
    /// Bytes released during prove_start (a, b and c).
    pub freed_bytes: u64,
    /// How long prove_start's steps took, for the worker's span and the phase
    /// histograms.
    pub phases: Phases,
    /// How long the call's kernels ran while no earlier call's did on its
    /// device, so that the calls' shares add up to the device's
    /// kernel-active time; None where the backend sees no device kernels.
    pub device_active: Option<Duration>,
}

/// What prove_finish returns for one partition: its proof, which the finalizer
/// hands to the tracker.
pub struct Finished {
    /// The proof, serialized by the backend (arkworks compressed).
    pub proof: Vec<u8>,
    /// The public inputs, serialized the same way.
    pub public_inputs: Vec<Vec<u8>>,
    /// How long prove_finish's steps took, for the partition's phases and the
    /// histograms.
    pub phases: Phases,
}

/// Stage bodies. Each call blocks its calling thread; the actors give every
/// stage threads of its own. Errors say whether another attempt could
/// succeed; their text is what a job reports.
pub trait Backend: Send + Sync + 'static {
    /// "cpu", "cuda" or "sim".
    fn name(&self) -> &str;
    /// The proving devices, by index; each gets `workers_per_device` workers.
    fn devices(&self) -> Vec<String>;
    /// Synthesizes one partition of `job` on a synthesis thread, after the
    /// budget granted its reservation.
    fn synthesize(&self, job: &JobSpec, partition: u32) -> Result<Synthesized, StageError>;
    /// Runs the GPU part of one partition's proof on `device`, on the GPU
    /// worker's thread; its output goes to a finalizer.
    fn prove_start(
        &self,
        device: usize,
        job: &JobSpec,
        partition: u32,
        input: Payload,
    ) -> Result<Started, StageError>;
    /// Ends one partition's proof on a finalizer thread (what is left after the
    /// GPU, assembly, optional verification) and serializes it.
    fn prove_finish(&self, job: &JobSpec, partition: u32, input: Payload) -> Result<Finished, StageError>;
    /// Host bytes the backend keeps across partitions (proving keys,
    /// matrices); the budget counts them as used.
    fn resident_bytes(&self) -> u64 {
        0
    }
    /// Each device's memory plan (the CUDA engine's: what stays resident,
    /// what streams, how many workers prove at once), as `/v1/status`
    /// shows it under `devices`; nothing for backends without a device
    /// plan.
    fn device_memory(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// Of `resident_bytes`, those held by work that ends by itself (a
    /// circuit's setup, a parameter file's load): the budget lets a
    /// partition that fits without them wait for them, and refuses only
    /// one that can never fit.
    fn transient_bytes(&self) -> u64 {
        0
    }
    /// Told of every job the tracker takes on (accepted, restored
    /// unfinished, or claimed from the fleet), before its partitions are
    /// queued: work a job will need that is shared with others (a circuit's
    /// setup) can count it among its users while it still waits in the
    /// queue. Called on the tracker's thread, so it must not block.
    fn accepted(&self, _job: &JobSpec) {}
}

/// Runs a stage body, turning a panic into a retryable failure so that a
/// bad input or a backend bug fails one attempt of one partition instead of
/// killing a stage thread.
pub fn run_stage<T>(
    stage: &'static str,
    body: impl FnOnce() -> Result<T, StageError>,
) -> Result<T, StageError> {
    run_stage_as(stage, ErrorKind::Retryable, body)
}

/// [`run_stage`] with the kind a panic is given: a backend whose stage body
/// is a function of the job's input alone (a Filecoin partition's
/// synthesis) makes its panics permanent, since every attempt would panic
/// the same way. The failure still says it panicked, so the actor that ran
/// it restarts.
pub fn run_stage_as<T>(
    stage: &'static str,
    on_panic: ErrorKind,
    body: impl FnOnce() -> Result<T, StageError>,
) -> Result<T, StageError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(StageError::new(on_panic, StagePanic { stage, message }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_takes_the_kind_the_stage_gives_it() {
        let panics = || -> Result<(), StageError> { panic!("index out of bounds") };
        let retried = run_stage("prove_start", panics).unwrap_err();
        assert_eq!((retried.kind(), retried.panicked()), (ErrorKind::Retryable, true));
        let failed = run_stage_as("synthesis", ErrorKind::Permanent, panics).unwrap_err();
        assert_eq!((failed.kind(), failed.panicked()), (ErrorKind::Permanent, true));
        assert_eq!(failed.to_string(), "synthesis panicked: index out of bounds");
        assert_eq!(run_stage_as("synthesis", ErrorKind::Permanent, || Ok(3)).unwrap(), 3);
    }
}
