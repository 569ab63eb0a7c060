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
    pub job: Arc<JobSpec>,
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

#[derive(Message)]
#[rtype(result = "()")]
pub struct SynthesisDone {
    pub job: Arc<JobSpec>,
    pub index: u32,
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
    pub job: JobId,
}

#[derive(Message)]
#[rtype(result = "QueueStatus")]
pub struct GetQueueStatus;

#[derive(Debug, Clone, Serialize, MessageResponse)]
pub struct QueueStatus {
    pub waiting_synthesis: usize,
    pub waiting_budget: usize,
    pub synthesizing: usize,
    pub waiting_gpu: usize,
    pub assigned_to_workers: usize,
    pub pacer: PacerStatus,
}
