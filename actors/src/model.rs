//! The vocabulary shared by all actors and their messages: jobs,
//! partitions, stages, priorities, proofs, GPU workers and what they do.

use std::any::Any;
use std::cmp::Reverse;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::time;

/// A job's name, made by the daemon at submission (a UUID): how the API, the
/// store and every message refer to the job.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobId(pub String);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whose job it is: a name from the daemon's token configuration. A tenant
/// reads, cancels and reuses idempotency keys of its own jobs only. Stores
/// written before tenants existed read back as the default tenant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tenant(pub String);

impl Tenant {
    /// The tenant of a token that names none, of jobs stored before tenants
    /// existed, and of every caller when the daemon has no tokens.
    pub const DEFAULT: &'static str = "default";

    /// The name, as labels and log lines take it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tenant {
    fn default() -> Self {
        Tenant(Self::DEFAULT.to_string())
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which tenants' jobs a question may see: every tenant's (an admin, or
/// the daemon itself), or one tenant's, to whom another's job does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantScope {
    /// Every tenant's jobs: an admin's or the daemon's own question.
    All,
    /// This tenant's jobs alone.
    Only(Tenant),
}

impl TenantScope {
    /// Whether a job of `tenant` is visible in this scope.
    pub fn sees(&self, tenant: &Tenant) -> bool {
        match self {
            TenantScope::All => true,
            TenantScope::Only(own) => own == tenant,
        }
    }
}

/// Scheduling class; honoured at every queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Bulk work that may wait behind everything else.
    Low,
    /// What a job gets when its caller names no priority.
    #[default]
    Normal,
    /// Goes ahead of normal and low work in every queue.
    High,
    /// Work with a hard time limit (a WinningPoSt): ahead of everything, with
    /// synthesis slots and GPU workers of its own.
    Critical,
}

impl Priority {
    /// Every priority, lowest first, for metrics that need a series for each.
    pub const ALL: [Priority; 4] = [Priority::Low, Priority::Normal, Priority::High, Priority::Critical];

    /// The name the API and metric labels use.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }
}

/// A partition's place in the pipeline. The order is the order of progress:
/// a partition never moves back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Accepted, waiting for the dispatcher to start it.
    Queued,
    /// Waiting for the budget to grant its memory.
    WaitingBudget,
    /// Being synthesized on a synthesis thread.
    Synthesizing,
    /// Synthesized, waiting for a GPU worker to start it.
    WaitingGpu,
    /// In prove_start on a GPU worker.
    Proving,
    /// Out of the GPU, waiting for a finalizer thread.
    WaitingFinalizer,
    /// In prove_finish on a finalizer.
    Finalizing,
    /// Proved: its proof is kept.
    Done,
    /// Its job failed (a permanent error, or attempts used up).
    Failed,
    /// Its job was cancelled before the partition was proved.
    Cancelled,
}

/// Every stage, in order.
pub const STAGES: [Stage; Stage::COUNT] = [
    Stage::Queued,
    Stage::WaitingBudget,
    Stage::Synthesizing,
    Stage::WaitingGpu,
    Stage::Proving,
    Stage::WaitingFinalizer,
    Stage::Finalizing,
    Stage::Done,
    Stage::Failed,
    Stage::Cancelled,
];

impl Stage {
    /// How many stages there are: the size of per-stage count arrays.
    pub const COUNT: usize = 10;

    /// Whether the partition has stopped for good: no stage comes after it.
    pub fn is_terminal(self) -> bool {
        matches!(self, Stage::Done | Stage::Failed | Stage::Cancelled)
    }

    /// The name the API and metric labels use.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Queued => "queued",
            Stage::WaitingBudget => "waiting_budget",
            Stage::Synthesizing => "synthesizing",
            Stage::WaitingGpu => "waiting_gpu",
            Stage::Proving => "proving",
            Stage::WaitingFinalizer => "waiting_finalizer",
            Stage::Finalizing => "finalizing",
            Stage::Done => "done",
            Stage::Failed => "failed",
            Stage::Cancelled => "cancelled",
        }
    }
}

/// Identifies one partition of one job: the unique key of every queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    /// The job it belongs to.
    pub job: JobId,
    /// Its place in the job, from 0: which part of the job's work the
    /// backend proves, and where its proof goes among the job's proofs.
    pub index: u32,
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.job, self.index)
    }
}

/// Queue order: higher priority first, then older job, then lower partition
/// index. Unique per partition because `seq` is unique per job.
pub type QueueOrder = (Reverse<Priority>, u64, u32);

/// Memory one partition holds, in two parts released at different times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// a, b and c: released when prove_start reports them freed.
    pub abc_bytes: u64,
    /// Witness, H, scalar copies and the rest: released at finalize.
    pub retained_bytes: u64,
}

impl Reservation {
    /// Everything the partition holds at its peak, which the budget must grant
    /// before synthesis.
    pub fn total(&self) -> u64 {
        self.abc_bytes + self.retained_bytes
    }
}

/// A job as the caller submits it.
pub struct NewJob {
    /// The name the job will be known by, chosen by the daemon before it is
    /// submitted.
    pub id: JobId,
    /// Its scheduling class in every queue.
    pub priority: Priority,
    /// How many partitions the job is proved in, each scheduled on its own.
    pub partitions: u32,
    /// The circuit family or Filecoin kind the job names: what per-circuit
    /// load counts are kept by.
    pub circuit: String,
    /// The exact circuit shape the job proves (its size included), as the API
    /// and log lines show it.
    pub circuit_id: String,
    /// Per partition.
    pub reservation: Reservation,
    /// The same key (of the same tenant) returns the same job.
    pub idempotency_key: Option<String>,
    /// Whose job it is: it scopes reads, cancels and idempotency keys.
    pub tenant: Tenant,
    /// Unfinished jobs of `tenant` at which the tracker refuses this one
    /// (None: only the daemon-wide limit). Given per submission, from the
    /// configuration the caller was admitted under, so a reload applies to
    /// the next submission without telling the tracker.
    pub tenant_max_unfinished: Option<usize>,
    /// The job should be done within this time of submission; a miss is
    /// reported (job status and metric), not enforced.
    pub deadline: Option<std::time::Duration>,
    /// The backend's own description of the work (circuit, witnesses).
    pub work: Arc<dyn Any + Send + Sync>,
    /// The request as the store records it. With a job store, only jobs
    /// that carry it are recorded, since it is what rebuilds `work` on
    /// restart; its digest tells a repeated idempotency key's body apart.
    pub request: Option<RecordedRequest>,
}

/// A request as recorded: the compact JSON a job is rebuilt from, and its
/// SHA-256, computed by the caller (off the tracker's thread).
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// The request's compact JSON, kept by the store.
    pub text: String,
    /// SHA-256 of `text`, compared when an idempotency key comes again.
    pub digest: [u8; 32],
}

/// A job once the tracker accepted it. A clone is the same job: it shares
/// the abandoned flag.
#[derive(Clone)]
pub struct JobSpec {
    /// The job's name, unique among the daemon's jobs.
    pub id: JobId,
    /// Submission order, unique per daemon.
    pub seq: u64,
    /// Its scheduling class, which orders its partitions in every queue.
    pub priority: Priority,
    /// How many partitions the job is proved in.
    pub partitions: u32,
    /// The circuit family or Filecoin kind the job names: what per-circuit
    /// load counts are kept by.
    pub circuit: String,
    /// The exact circuit shape it proves, shown by the API.
    pub circuit_id: String,
    /// What each partition asks the budget for.
    pub reservation: Reservation,
    /// The backend's own description of the work, handed to each stage.
    pub work: Arc<dyn Any + Send + Sync>,
    /// When it was submitted and when it should be done.
    pub submitted: Submitted,
    /// Set by the tracker when the job fails or is cancelled; stage actors
    /// check it at stage boundaries and skip the work.
    pub(crate) abandoned: Arc<AtomicBool>,
}

/// Whether a job was abandoned (failed or cancelled), read where the job
/// itself is not at hand. Default: a fresh flag that nothing sets, for a
/// caller that waits on no job's behalf.
#[derive(Clone, Debug, Default)]
pub struct Abandonment(Arc<AtomicBool>);

impl Abandonment {
    /// Whether the job has failed or was cancelled, so the work on its behalf
    /// can stop.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Whether both read the same job's flag.
    pub fn same_job(&self, other: &Abandonment) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// When a job was submitted, on both clocks, and by when it should be done.
#[derive(Clone, Copy, Debug)]
pub struct Submitted {
    /// The wall-clock time: what the API shows and the store keeps.
    pub wall: SystemTime,
    /// The same moment on the monotonic clock, which ages and timings count
    /// from.
    pub at: Instant,
    /// The deadline on the monotonic clock; a miss is reported, not
    /// enforced.
    pub deadline: Option<Instant>,
}

impl Submitted {
    /// A job submitted at `wall` (now, or when a restored job's record says:
    /// it keeps its age) that should be done `deadline` after it.
    pub fn new(wall: SystemTime, deadline: Option<Duration>) -> Self {
        let at = time::instant_at(wall);
        Self { wall, at, deadline: deadline.map(|d| at + d) }
    }

    /// The deadline relative to submission, as the store keeps it.
    pub fn deadline_after(&self) -> Option<Duration> {
        self.deadline.map(|deadline| deadline - self.at)
    }
}

impl JobSpec {
    /// The same job without its work: what a finished job keeps, so that
    /// its inputs are freed once no stage holds them.
    pub(crate) fn without_work(&self) -> Self {
        Self { work: Arc::new(()), ..self.clone() }
    }

    /// Whether the job failed or was cancelled: a stage actor that sees it
    /// skips the partition's work.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// The job's abandoned flag, read-only, for work that outlives one
    /// stage on the job's behalf (a circuit's setup, stopped when every
    /// job waiting for it is abandoned).
    pub fn abandonment(&self) -> Abandonment {
        Abandonment(self.abandoned.clone())
    }

    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release)
    }

    /// The key of partition `index` of this job.
    pub fn key(&self, index: u32) -> PartitionKey {
        PartitionKey { job: self.id.clone(), index }
    }

    /// Where partition `index` of this job sorts in the queues.
    pub fn order(&self, index: u32) -> QueueOrder {
        (Reverse(self.priority), self.seq, index)
    }
}

/// A GPU worker: device index and worker index on that device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkerId {
    /// The device's index among the backend's devices, passed to prove_start.
    pub device: usize,
    /// The worker's index on its device: the general workers first, then the
    /// critical lane's.
    pub worker: usize,
}

/// Which partitions a GPU worker takes. A device's critical workers run
/// beside its general ones, so a critical partition starts at once instead
/// of behind the partitions the general workers hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// Any partition.
    General,
    /// `Priority::Critical` partitions only.
    Critical,
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpu{}/w{}", self.device, self.worker)
    }
}

/// A proved partition: what the finalizer hands the tracker, the tracker
/// serves and the store keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct ProofRecord {
    /// The proof, serialized by the backend (arkworks compressed).
    pub proof: Vec<u8>,
    /// The public inputs, serialized the same way.
    pub public_inputs: Vec<Vec<u8>>,
}

/// Why an idle GPU worker is idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleCause {
    /// Nothing queued anywhere.
    NoWork,
    /// Work is queued but no partition is synthesized yet.
    Synthesis,
    /// Partitions wait for memory and none is being synthesized.
    Budget,
    /// The pacer holds queued work back and none is being synthesized.
    Paced,
    /// A synthesized partition exists but has not reached the worker yet.
    Handoff,
}

impl IdleCause {
    /// Every cause: one idle counter and one metric series for each.
    pub const ALL: [IdleCause; 5] =
        [IdleCause::NoWork, IdleCause::Synthesis, IdleCause::Budget, IdleCause::Paced, IdleCause::Handoff];

    /// The name metric labels and the API use.
    pub fn as_str(self) -> &'static str {
        match self {
            IdleCause::NoWork => "no_work",
            IdleCause::Synthesis => "synthesis",
            IdleCause::Budget => "budget",
            IdleCause::Paced => "paced",
            IdleCause::Handoff => "handoff",
        }
    }
}

/// What a stretch of a GPU worker's time is accounted to: which of its
/// counters (`/v1/workers`, `cuzk_gpu_*_seconds_total`) it advances. A stage
/// is busy or failed by its outcome, so its time is accounted when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerTime {
    /// A stage that proved its partition.
    Busy,
    /// A stage that failed: the worker was occupied, but proved nothing.
    Failed,
    /// The worker had no stage to run, for this cause.
    Idle(IdleCause),
}

/// What a worker is doing: the value of `cuzk_gpu_worker_state{state}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Running prove_start.
    Proving,
    /// Waiting for work, for this cause.
    Idle(IdleCause),
}

impl Activity {
    /// Every activity, so that the gauge has a series for each from the start.
    pub const ALL: [Activity; 6] = [
        Activity::Proving,
        Activity::Idle(IdleCause::NoWork),
        Activity::Idle(IdleCause::Synthesis),
        Activity::Idle(IdleCause::Budget),
        Activity::Idle(IdleCause::Paced),
        Activity::Idle(IdleCause::Handoff),
    ];

    /// The label value of the `state` gauge.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Proving => "proving",
            Activity::Idle(cause) => cause.as_str(),
        }
    }
}
