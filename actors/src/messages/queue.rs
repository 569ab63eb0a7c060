//! Messages to the dispatcher: partitions to queue and jobs to drop (from
//! the tracker), stage results that free a synthesis slot or a GPU worker
//! (from the stage actors), the shutdown hold and the queue view.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde::Serialize;

use crate::backend::Synthesized;
use crate::error::StageError;
use crate::model::{JobId, JobSpec};
use crate::pacer::PacerStatus;

/// Partitions of a job to queue: all of a newly accepted job, those not yet
/// proved after a restart, or the one to try again after a failed attempt.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Enqueue {
    /// The job the partitions belong to, which orders them in the queues.
    pub job: Arc<JobSpec>,
    /// The indexes of the partitions to queue.
    pub partitions: Vec<u32>,
}

impl Enqueue {
    /// Every partition of a job.
    pub fn all(job: Arc<JobSpec>) -> Self {
        let partitions = (0..job.partitions).collect();
        Self { job, partitions }
    }
}

/// Starts no more queued partitions (graceful shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub struct HoldQueued;

/// A synthesis thread finished (or failed) a partition: the dispatcher frees
/// its slot and queues the result for a GPU worker, or reports the failure to
/// the tracker.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SynthesisDone {
    /// The partition's job.
    pub job: Arc<JobSpec>,
    /// The partition's index in its job.
    pub index: u32,
    /// The synthesized partition, or why synthesis failed.
    pub result: Result<Synthesized, StageError>,
}

/// A GPU worker finished (or failed) one partition it was given.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkerDone {
    /// The worker's index in the dispatcher's worker list.
    pub slot: usize,
    /// Time the worker spent on it; `None` when it skipped or failed it.
    pub busy: Option<Duration>,
}

/// Drops every queued partition of a job (failed or cancelled) and returns
/// their budget; partitions in flight are skipped at their next stage.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DropJob {
    /// The job whose partitions to drop.
    pub job: JobId,
}

/// Asks the dispatcher for its queues, for `/v1/status`.
#[derive(Message)]
#[rtype(result = "QueueStatus")]
pub struct GetQueueStatus;

/// The dispatcher's queues, as `/v1/status` shows them under `queues`.
#[derive(Debug, Clone, Serialize, MessageResponse)]
pub struct QueueStatus {
    /// Partitions queued for a synthesis slot.
    pub waiting_synthesis: usize,
    /// Partitions that took a synthesis slot and wait for the budget to grant
    /// their memory.
    pub waiting_budget: usize,
    /// Partitions being synthesized.
    pub synthesizing: usize,
    /// Synthesized partitions waiting for a GPU worker.
    pub waiting_gpu: usize,
    /// Partitions handed to GPU workers and not yet done: the ones they run and
    /// those in their mailboxes (lookahead).
    pub assigned_to_workers: usize,
    /// The pacer's state.
    pub pacer: PacerStatus,
}
