//! What the daemon asks the tracker: submit, restore, cancel and limit jobs,
//! and the views it answers with (what the HTTP API returns).

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;
use serde::Serialize;

use crate::model::{JobId, NewJob, Priority, ProofRecord, Reservation, Stage, Tenant, TenantScope};
use crate::store::{Committed, StoredJob};

/// Accepts a job (or returns the existing one for a repeated idempotency
/// key of the same tenant).
#[derive(Message)]
#[rtype(result = "SubmitOutcome")]
pub struct SubmitJob(pub NewJob);

#[derive(Debug)]
pub struct SubmitOutcome {
    pub id: JobId,
    /// False when an idempotency key matched an existing job.
    pub created: bool,
    pub status: JobStatus,
    /// With a store: resolves once the new job is durable. Awaited by the
    /// caller, never by the tracker.
    pub durable: Option<Committed>,
    /// Set when the job was refused because too many jobs are unfinished
    /// (the daemon's or its tenant's); nothing was queued.
    pub queue_full: Option<QueueFull>,
    /// The idempotency key belongs to job `id`, created from another body;
    /// nothing was queued.
    pub key_conflict: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFull {
    /// Unfinished jobs counted against `limit`.
    pub unfinished: usize,
    pub limit: usize,
    /// The tenant whose own limit was reached (None: the daemon-wide one).
    pub tenant: Option<Tenant>,
}

/// Jobs read back from the store on start, in submission order. Must reach
/// the tracker before any new submission.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RestoreJobs(pub Vec<RestoredJob>);

pub enum RestoredJob {
    Finished(StoredJob),
    /// Its work rebuilt from the recorded request.
    Unfinished {
        stored: StoredJob,
        work: Arc<dyn Any + Send + Sync>,
        reservation: Reservation,
    },
}

/// Partitions past the queue and not yet finished: what a graceful
/// shutdown waits for.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CountRunningPartitions;

/// Sets how many unfinished (queued or running) jobs SubmitJob accepts.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetMaxUnfinished(pub Option<usize>);

/// Cancels a job: queued partitions are dropped, running ones stop at their
/// next stage boundary. Answers the job's status after the call; None for
/// a job that does not exist or that the scope does not see.
#[derive(Message)]
#[rtype(result = "Option<JobStatus>")]
pub struct CancelJob(pub JobId, pub TenantScope);

/// A job's view; None for a job that does not exist or that the scope does
/// not see (the same answer, so that a tenant learns nothing of another's).
#[derive(Message)]
#[rtype(result = "Option<JobView>")]
pub struct GetJob(pub JobId, pub TenantScope);

/// A done job's proofs; NotFound also for a job the scope does not see.
#[derive(Message)]
#[rtype(result = "Result<ProofsView, ProofsError>")]
pub struct GetProofs(pub JobId, pub TenantScope);

#[derive(Message)]
#[rtype(result = "TrackerStatus")]
pub struct GetTrackerStatus;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Done,
        JobStatus::Failed,
        JobStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobView {
    pub id: JobId,
    /// Whose job it is (a caller sees only its own, or every one as admin).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: Tenant,
    pub status: JobStatus,
    pub circuit: String,
    pub circuit_id: String,
    pub priority: Priority,
    pub submitted_at_ms: u64,
    /// Present when the job has a deadline: whether it was (or is already) missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_missed: Option<bool>,
    pub partitions: Vec<PartitionView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Milliseconds per stage, summed over partitions, and `total`.
    pub timings_ms: BTreeMap<&'static str, f64>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PartitionView {
    pub index: u32,
    pub stage: Stage,
    /// Milliseconds in each stage it went through, and `total`.
    pub timings_ms: BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Fleet: the node holding the partition, or the one that proved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_phases_ms: BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub attempts: u32,
    /// The error of the last failed attempt, when the partition was retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_after: Option<String>,
}

#[derive(Debug)]
pub struct ProofsView {
    /// The family or kind the job named (a Filecoin kind's view differs).
    pub circuit: String,
    pub circuit_id: String,
    pub proofs: Vec<(u32, ProofRecord)>,
}

#[derive(Debug, PartialEq)]
pub enum ProofsError {
    NotFound,
    NotReady(JobStatus),
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrackerStatus {
    /// Jobs by status.
    pub jobs: BTreeMap<&'static str, usize>,
    /// Partitions of unfinished jobs by stage, from queued to finalizing:
    /// where every running job's partitions are, the finalizer's included.
    pub partitions: BTreeMap<&'static str, usize>,
}
