//! The scheduler's telemetry: its part of the metrics catalogue and the
//! events that feed it, one file per subject.
//!
//! | file | subject |
//! | --- | --- |
//! | `metric` | what a metric is ([`MetricDef`]), the constructors both parts of the catalogue use |
//! | `jobs` | jobs and partitions: submitted, finished, deadlines missed, retried |
//! | `gpu` | GPU workers: span phases, busy and idle time, idle gaps, states, kernel-active time |
//! | `pipeline` | queue depths, partitions per stage, the memory budget, the pacer, actor restarts |
//!
//! Every metric the scheduler feeds is declared once in [`SCHEDULER_METRICS`]
//! (name, type, unit, labels, help, buckets). The daemon declares its own
//! part (HTTP, job store, tenants, fleet) beside the code that emits it and
//! exports the union as its catalogue; docs/metrics.md lists the same, and
//! a test keeps catalogue, docs and `/metrics` in agreement. Every event that
//! is both logged and counted is one type whose `emit` does both.

mod gpu;
mod jobs;
mod metric;
mod pipeline;

pub use gpu::{
    GpuSpanFinished, GpuSpanStarted, IdleGapEnded, WorkerRegistered, WorkerStateChanged, WorkerTimeAccounted,
    WorkerUtilization, GPU_BUSY, GPU_FAILED, GPU_IDLE, GPU_IDLE_GAP, GPU_KERNEL_ACTIVE, GPU_PHASE_DURATION,
    GPU_UTILIZATION, GPU_WORKER_STATE,
};
pub use jobs::{
    DeadlineMissed, JobFinished, JobSubmitted, PartitionFinished, PartitionRetried, DEADLINES_MISSED,
    JOBS_FINISHED, JOBS_SUBMITTED, JOB_DURATION, PARTITIONS_FINISHED, PARTITION_RETRIES, STAGE_DURATION,
    STAGE_SPANS,
};
pub use metric::{counter, gauge, histogram, seconds_counter, MetricDef, MetricKind};
pub use pipeline::{
    ActorRestarted, BudgetChanged, FinalizerLoad, PacerUpdated, QueueDepths, ACTOR_RESTARTS, BUDGET_LIMIT,
    BUDGET_RESIDENT, BUDGET_USED, PACER_BOOTSTRAPPING, PACER_GPU_EMA, PACER_INTEGRAL, PACER_INTERVAL,
    PACER_TARGET, PARTITIONS_ACTIVE, QUEUE_DEPTH,
};

/// The scheduler's part of the catalogue, in the order docs/metrics.md
/// lists it.
pub const SCHEDULER_METRICS: &[MetricDef] = &[
    JOBS_SUBMITTED,
    JOBS_FINISHED,
    DEADLINES_MISSED,
    PARTITIONS_FINISHED,
    JOB_DURATION,
    STAGE_DURATION,
    GPU_PHASE_DURATION,
    QUEUE_DEPTH,
    PARTITIONS_ACTIVE,
    GPU_BUSY,
    GPU_FAILED,
    GPU_IDLE,
    GPU_IDLE_GAP,
    GPU_KERNEL_ACTIVE,
    GPU_UTILIZATION,
    GPU_WORKER_STATE,
    BUDGET_USED,
    BUDGET_RESIDENT,
    BUDGET_LIMIT,
    PACER_INTERVAL,
    PACER_GPU_EMA,
    PACER_INTEGRAL,
    PACER_TARGET,
    PACER_BOOTSTRAPPING,
    PARTITION_RETRIES,
    ACTOR_RESTARTS,
];

/// Starts the scheduler's labelled counters at zero for every known label
/// value, so that they are scraped (and rated, and charted) before their
/// first event. Call it once the process's recorder is installed.
pub fn start_at_zero() {
    jobs::start_at_zero();
    pipeline::start_at_zero();
}
