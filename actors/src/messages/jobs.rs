//! What the daemon asks the tracker: submit, restore, cancel, limit and
//! watch jobs, and the views it answers with (what the HTTP API returns).

use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix::prelude::*;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::model::{JobId, NewJob, Priority, ProofRecord, Reservation, Stage, Tenant, TenantScope};
use crate::store::{Committed, PartitionDetail, StoredJob};

/// Accepts a job (or returns the existing one for a repeated idempotency
/// key of the same tenant).
#[derive(Message)]
#[rtype(result = "SubmitOutcome")]
pub struct SubmitJob(pub NewJob);

/// The tracker's answer to a [`SubmitJob`]: the job created, the existing one
/// its idempotency key names, or why it was refused.
#[derive(Debug)]
pub struct SubmitOutcome {
    /// The job the caller is told of: the new one, the existing one of a
    /// repeated key, or the refused one's intended name.
    pub id: JobId,
    /// False when an idempotency key matched an existing job.
    pub created: bool,
    /// The job's status at the answer (queued, for a new one).
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

/// Why a submission was refused for too many unfinished jobs, for the caller's
/// error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFull {
    /// Unfinished jobs counted against `limit`.
    pub unfinished: usize,
    /// The limit that was reached: the daemon's, or the tenant's when
    /// `tenant` is set.
    pub limit: usize,
    /// The tenant whose own limit was reached (None: the daemon-wide one).
    pub tenant: Option<Tenant>,
}

/// Jobs read back from the store on start, in submission order. Must reach
/// the tracker before any new submission.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RestoreJobs(pub Vec<RestoredJob>);

/// A job read back from the store on start, as [`RestoreJobs`] hands it to the
/// tracker.
pub enum RestoredJob {
    /// An ended job, kept for its status and proofs until retention expires.
    Finished(StoredJob),
    /// Its work rebuilt from the recorded request.
    Unfinished {
        /// The job's record and the state of its partitions.
        stored: StoredJob,
        /// The backend's description of the work, which the unproved partitions
        /// are synthesized from.
        work: Arc<dyn Any + Send + Sync>,
        /// What each of its partitions asks the budget for.
        reservation: Reservation,
    },
}

/// Unfinished jobs by circuit (a registered family or a Filecoin kind):
/// the load per kind gRPC's `GetStatus` shows. Kept up to date as jobs
/// change, so answering costs the circuits in use, not the jobs.
#[derive(Message)]
#[rtype(result = "BTreeMap<String, CircuitLoad>")]
pub struct GetCircuitLoad;

/// One circuit's unfinished jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CircuitLoad {
    /// No partition started yet.
    pub queued: usize,
    /// At least one partition past the queue.
    pub running: usize,
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

/// The tracker to itself: the store has committed the end of a done job
/// (its `Finished` write, and with it every proof queued before it), which
/// until now showed as running.
#[derive(Message)]
#[rtype(result = "()")]
pub struct EndCommitted(pub JobId);

/// A job's view; None for a job that does not exist or that the scope does
/// not see (the same answer, so that a tenant learns nothing of another's).
#[derive(Message)]
#[rtype(result = "Option<JobView>")]
pub struct GetJob(pub JobId, pub TenantScope);

/// A done job's proofs; NotFound also for a job the scope does not see.
#[derive(Message)]
#[rtype(result = "Result<ProofsView, ProofsError>")]
pub struct GetProofs(pub JobId, pub TenantScope);

/// Asks to hear when a job ends; None for a job that does not exist or
/// that the scope does not see. Costs the tracker one channel per watcher,
/// kept until the job ends, so any number of callers may wait on a job
/// without asking again.
#[derive(Message)]
#[rtype(result = "Option<JobEnding>")]
pub struct WatchJob(pub JobId, pub TenantScope);

/// Resolves with a job's final status once it ends (at once for a job that
/// has ended), or with None when whoever watched it gave up without an end
/// to tell: the tracker stopped, or, on a fleet node, the job left it.
pub struct JobEnding(oneshot::Receiver<JobStatus>);

impl JobEnding {
    /// The sender the watcher keeps (its send is the job's end) and the
    /// ending the caller awaits.
    pub fn channel() -> (oneshot::Sender<JobStatus>, JobEnding) {
        let (end, ending) = oneshot::channel();
        (end, JobEnding(ending))
    }
}

impl Future for JobEnding {
    type Output = Option<JobStatus>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(Result::ok)
    }
}

/// Asks the tracker for its job and partition counts, for `/v1/status`.
#[derive(Message)]
#[rtype(result = "TrackerStatus")]
pub struct GetTrackerStatus;

/// A job's status, as the API shows it and the job counts are kept by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Accepted; none of its partitions has started yet.
    Queued,
    /// At least one of its partitions has started.
    Running,
    /// Every partition is proved: its proofs can be fetched.
    Done,
    /// A partition failed for good (a permanent error, or its attempts used
    /// up).
    Failed,
    /// Cancelled by its caller or an admin before it ended.
    Cancelled,
}

impl JobStatus {
    /// Every status, so that per-status counts and metrics have an entry for
    /// each.
    pub const ALL: [JobStatus; 5] =
        [JobStatus::Queued, JobStatus::Running, JobStatus::Done, JobStatus::Failed, JobStatus::Cancelled];

    /// Done, failed or cancelled: nothing about the job changes any more.
    pub fn has_ended(self) -> bool {
        matches!(self, JobStatus::Done | JobStatus::Failed | JobStatus::Cancelled)
    }

    /// The name the API and metric labels use.
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

/// A job as the API shows it, from the tracker (a single daemon) or from
/// the database (a fleet node, with the tracker's detail of what it holds).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Job))]
pub struct JobView {
    /// The job's name, which the caller fetches and cancels it by.
    pub id: JobId,
    /// Whose job it is (a caller sees only its own, or every one as admin).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub tenant: Tenant,
    /// Where the job is: queued, running, or how it ended.
    pub status: JobStatus,
    /// The circuit family or Filecoin kind the job named.
    pub circuit: String,
    /// The exact circuit shape it proves.
    pub circuit_id: String,
    /// The scheduling class it was submitted with.
    pub priority: Priority,
    /// When it was submitted, in Unix milliseconds.
    pub submitted_at_ms: u64,
    /// Present when the job has a deadline: whether it was (or is already) missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_missed: Option<bool>,
    /// Each partition's progress, in index order.
    pub partitions: Vec<PartitionView>,
    /// Why the job failed, present only when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Milliseconds per stage, summed over partitions, and `total`.
    pub timings_ms: BTreeMap<String, f64>,
}

impl JobView {
    /// A job's `timings_ms`: `total_ms` (its time since submission, to its
    /// end or now) and each stage's milliseconds summed over `partitions`.
    pub fn timings(total_ms: f64, partitions: &[PartitionView]) -> BTreeMap<String, f64> {
        let mut timings = BTreeMap::from([("total".to_string(), total_ms)]);
        for (name, ms) in partitions.iter().flat_map(|p| &p.detail.timings_ms) {
            if name != "total" {
                *timings.entry(name.clone()).or_insert(0.0) += ms;
            }
        }
        timings
    }
}

/// One partition of a job as the API shows it, in [`JobView`].
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Partition))]
pub struct PartitionView {
    /// Its place in the job, from 0.
    pub index: u32,
    /// The stage it is in, or how it ended.
    pub stage: Stage,
    /// Fleet: the node holding the partition, or the one that proved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why the partition failed, present only when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the node running it saw: timings, worker, GPU phases, attempts.
    #[serde(flatten)]
    pub detail: PartitionDetail,
}

/// A done job's proofs, the tracker's answer to [`GetProofs`], which the API
/// encodes as the circuit requires.
#[derive(Debug)]
pub struct ProofsView {
    /// The family or kind the job named (a Filecoin kind's view differs).
    pub circuit: String,
    /// The exact circuit shape the proofs are for.
    pub circuit_id: String,
    /// Each partition's index and proof, in index order.
    pub proofs: Vec<(u32, ProofRecord)>,
}

/// Why a [`GetProofs`] has no proofs to give.
#[derive(Debug, PartialEq)]
pub enum ProofsError {
    /// No such job, or one the caller's scope does not see.
    NotFound,
    /// The job is not done: still running, or it failed or was cancelled, as
    /// its status says.
    NotReady(JobStatus),
}

/// Job and partition counts, as `/v1/status` shows them.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrackerStatus {
    /// Jobs by status.
    pub jobs: BTreeMap<&'static str, usize>,
    /// Partitions of unfinished jobs by stage, from queued to finalizing:
    /// where every running job's partitions are, the finalizer's included.
    pub partitions: BTreeMap<&'static str, usize>,
}
