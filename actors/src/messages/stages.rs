//! Work handed to the stage actors: a partition to synthesize (from the
//! dispatcher), to prove (from the dispatcher, into a GPU worker's mailbox)
//! and to finalize (from the GPU worker that proved it).

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::Payload;
use crate::model::JobSpec;

/// The dispatcher hands a partition whose reservation was granted to the
/// synthesis pool; a synthesis thread synthesizes it and reports
/// `SynthesisDone`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Synthesize {
    /// The partition's job, with the work the backend synthesizes.
    pub job: Arc<JobSpec>,
    /// The partition's index in its job.
    pub index: u32,
}

/// The dispatcher hands a synthesized partition to a GPU worker, which runs
/// prove_start on it and passes it on to the finalizers.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ProvePartition {
    /// The partition's job.
    pub job: Arc<JobSpec>,
    /// The partition's index in its job.
    pub index: u32,
    /// The synthesized partition, from synthesis.
    pub input: Payload,
    /// When the dispatcher put it in this worker's mailbox.
    pub handed_at: Instant,
}

/// A GPU worker hands a partition out of prove_start to the finalizers; one of
/// their threads runs prove_finish and reports the proof.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Finalize {
    /// The partition's job.
    pub job: Arc<JobSpec>,
    /// The partition's index in its job.
    pub index: u32,
    /// What prove_start left for prove_finish.
    pub input: Payload,
}
