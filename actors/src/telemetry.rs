//! The metrics catalogue and the events that feed it.
//!
//! Every metric the daemon exports is declared once in [`CATALOGUE`] (name,
//! type, unit, labels, help, buckets); docs/metrics.md lists the same, and a
//! test keeps catalogue, docs and `/metrics` in agreement. Every event that is
//! both logged and counted is one type here whose `emit` does both.

use std::time::Duration;

use crate::model::{Activity, IdleCause, Priority, Stage, WorkerId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    /// A counter of fractional amounts (seconds). The `metrics` crate's
    /// counters are integers, so these are kept as gauges that only ever
    /// increase, and [`fix_exposition`] declares them as counters.
    FloatCounter,
    Gauge,
    Histogram,
}

impl MetricKind {
    /// The Prometheus type.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter | MetricKind::FloatCounter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

#[derive(Debug)]
pub struct MetricDef {
    pub name: &'static str,
    pub kind: MetricKind,
    pub unit: &'static str,
    pub labels: &'static [&'static str],
    pub help: &'static str,
    /// Upper bounds of histogram buckets (empty for other kinds).
    pub buckets: &'static [f64],
}

/// Stage and latency buckets: 1 ms to 10 minutes.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
];

/// Database round trips: 100 µs (loopback) to 10 s (a database in trouble).
const DATABASE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 10.0,
];

const fn counter(
    name: &'static str,
    unit: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        kind: MetricKind::Counter,
        unit,
        labels,
        help,
        buckets: &[],
    }
}

const fn gauge(
    name: &'static str,
    unit: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        kind: MetricKind::Gauge,
        unit,
        labels,
        help,
        buckets: &[],
    }
}

const fn histogram(
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        kind: MetricKind::Histogram,
        unit: "seconds",
        labels,
        help,
        buckets: DURATION_BUCKETS,
    }
}

pub const JOBS_SUBMITTED: MetricDef = counter(
    "cuzk_jobs_submitted_total",
    "jobs",
    &["priority"],
    "Jobs accepted, by priority.",
);
pub const JOBS_FINISHED: MetricDef = counter(
    "cuzk_jobs_finished_total",
    "jobs",
    &["outcome"],
    "Jobs that reached a final state, by outcome (done, failed, cancelled).",
);
pub const PARTITIONS_FINISHED: MetricDef = counter(
    "cuzk_partitions_finished_total",
    "partitions",
    &["outcome"],
    "Partitions that reached a final state, by outcome.",
);
pub const DEADLINES_MISSED: MetricDef = counter(
    "cuzk_jobs_deadline_missed_total",
    "jobs",
    &["priority"],
    "Jobs that ended after their deadline, by priority.",
);
pub const JOB_DURATION: MetricDef = histogram(
    "cuzk_job_duration_seconds",
    &["outcome"],
    "Time from submission to a job's final state.",
);
pub const STAGE_DURATION: MetricDef = histogram(
    "cuzk_stage_duration_seconds",
    &["stage"],
    "Time a partition spent in each stage (queue_wait, synthesis, gpu_wait, gpu, finalize_wait, finalize).",
);
pub const GPU_PHASE_DURATION: MetricDef = histogram(
    "cuzk_gpu_phase_duration_seconds",
    &["device", "worker", "phase"],
    "Duration of each phase of a GPU worker's span (wait_input, upload, ntt, msm_*, download, handoff; the sim backend's host, device_wait, device).",
);
pub const QUEUE_DEPTH: MetricDef = gauge(
    "cuzk_queue_depth",
    "partitions",
    &["stage"],
    "Partitions waiting at each stage (synthesis, budget, gpu).",
);
pub const PARTITIONS_ACTIVE: MetricDef = gauge(
    "cuzk_partitions_active",
    "partitions",
    &["stage"],
    "Partitions being worked on in each stage (synthesis, gpu, finalize).",
);
pub const GPU_BUSY: MetricDef = MetricDef {
    name: "cuzk_gpu_busy_seconds_total",
    kind: MetricKind::FloatCounter,
    unit: "seconds",
    labels: &["device", "worker"],
    help: "Seconds a GPU worker spent proving partitions; advances while a partition runs.",
    buckets: &[],
};
pub const GPU_IDLE: MetricDef = MetricDef {
    name: "cuzk_gpu_idle_seconds_total",
    kind: MetricKind::FloatCounter,
    unit: "seconds",
    labels: &["device", "worker", "cause"],
    help: "Seconds a GPU worker was idle, by cause (no_work, synthesis, budget, paced, handoff). Busy plus idle is wall time.",
    buckets: &[],
};
/// Idle gaps: 100 microseconds to 5 minutes.
const GAP_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
pub const GPU_IDLE_GAP: MetricDef = MetricDef {
    name: "cuzk_gpu_idle_gap_seconds",
    kind: MetricKind::Histogram,
    unit: "seconds",
    labels: &["device", "worker"],
    help: "Length of each idle interval of a GPU worker, from the end of one span (or start-up) to the start of the next.",
    buckets: GAP_BUCKETS,
};
pub const GPU_KERNEL_ACTIVE: MetricDef = MetricDef {
    name: "cuzk_gpu_kernel_active_seconds_total",
    kind: MetricKind::FloatCounter,
    unit: "seconds",
    labels: &["device"],
    help: "Seconds a device had kernels of some partition running: the union over its workers' calls, from the CUDA engine's events (the sim backend: its simulated device time; 0 on the CPU backend, which has no device). Its rate is the device's kernel-active fraction.",
    buckets: &[],
};
pub const GPU_UTILIZATION: MetricDef = gauge(
    "cuzk_gpu_utilization_ratio",
    "ratio",
    &["device", "worker"],
    "Fraction of the last 60 seconds a GPU worker spent proving.",
);
pub const GPU_WORKER_STATE: MetricDef = gauge(
    "cuzk_gpu_worker_state",
    "boolean",
    &["device", "worker", "state"],
    "1 for the state a GPU worker is in now (proving, or idle by cause: no_work, synthesis, budget, paced, handoff), 0 for the others.",
);
pub const BUDGET_USED: MetricDef = gauge(
    "cuzk_budget_used_bytes",
    "bytes",
    &[],
    "Bytes of the memory budget currently reserved.",
);
pub const BUDGET_RESIDENT: MetricDef = gauge(
    "cuzk_budget_resident_bytes",
    "bytes",
    &[],
    "Bytes of the budget held by the backend across partitions (proving keys, matrices).",
);
pub const BUDGET_LIMIT: MetricDef = gauge(
    "cuzk_budget_limit_bytes",
    "bytes",
    &[],
    "Size of the memory budget.",
);
pub const PACER_INTERVAL: MetricDef = gauge(
    "cuzk_pacer_interval_seconds",
    "seconds",
    &[],
    "Interval the pacer keeps between starts of partition syntheses.",
);
pub const PACER_GPU_EMA: MetricDef = gauge(
    "cuzk_pacer_gpu_ema_seconds",
    "seconds",
    &[],
    "EMA of GPU worker busy time per partition (the pacer's feed-forward, before dividing by workers).",
);
pub const PACER_INTEGRAL: MetricDef = gauge(
    "cuzk_pacer_integral",
    "partitions",
    &[],
    "The pacer's accumulated buffer error.",
);
pub const PACER_TARGET: MetricDef = gauge(
    "cuzk_pacer_buffer_target",
    "partitions",
    &[],
    "Synthesized partitions the pacer aims to keep waiting for the GPUs.",
);
pub const PACER_BOOTSTRAPPING: MetricDef = gauge(
    "cuzk_pacer_bootstrapping",
    "boolean",
    &[],
    "1 while the pacer bootstraps (before the first GPU completion, or after the pipeline ran empty).",
);
pub const PARTITION_RETRIES: MetricDef = counter(
    "cuzk_partition_retries_total",
    "partitions",
    &["stage"],
    "Partitions queued again after a failed attempt, by the stage that failed (synthesizing, proving, finalizing).",
);
pub const ACTOR_RESTARTS: MetricDef = counter(
    "cuzk_actor_restarts_total",
    "restarts",
    &["actor"],
    "Stage actors restarted after a panic in a stage body (synthesis, gpu_worker, finalizer).",
);
pub const HTTP_REQUESTS: MetricDef = counter(
    "cuzk_http_requests_total",
    "requests",
    &["route", "status"],
    "HTTP requests served, by route pattern and status code.",
);
pub const STORE_WRITE_FAILURES: MetricDef = counter(
    "cuzk_store_write_failures_total",
    "transactions",
    &[],
    "Job store transactions that failed to commit (disk full, I/O error); their writes are retried, new jobs refused until one succeeds.",
);
pub const STORE_WRITABLE: MetricDef = gauge(
    "cuzk_store_writable",
    "boolean",
    &[],
    "1 while the job store's last commit succeeded, 0 while it is failing.",
);
pub const STORE_DAMAGE: MetricDef = counter(
    "cuzk_store_damage_total",
    "incidents",
    &["kind"],
    "Damage found in the job store on start, by kind (record: a record failed its own checksum although its page passed, and was dropped; unreadable: the file failed redb's integrity check or could not be opened, and was moved aside and its intact records salvaged; missing: a store that existed is gone or empty).",
);
pub const TENANT_REFUSALS: MetricDef = counter(
    "cuzk_tenant_refusals_total",
    "requests",
    &["tenant", "reason"],
    "Submissions refused (429) by a tenant's own limit, by tenant (the configured ones) and reason (queue_full: its max_queued_jobs; rate_limited: its submit rate).",
);
pub const TOKEN_RELOADS: MetricDef = counter(
    "cuzk_token_reloads_total",
    "reloads",
    &["outcome"],
    "Reloads of the tokens and tenants on SIGHUP, by outcome (ok; failed: the old ones stay).",
);

pub const FLEET_CLAIMED: MetricDef = counter(
    "cuzk_fleet_claimed_partitions_total",
    "partitions",
    &[],
    "Partitions this node claimed from the fleet's shared queue (PostgreSQL store only).",
);
pub const FLEET_RECLAIMED: MetricDef = counter(
    "cuzk_fleet_reclaimed_partitions_total",
    "partitions",
    &[],
    "Claimed partitions whose earlier lease had run out: work taken over from a node that stopped or stalled.",
);
pub const FLEET_RENEWALS: MetricDef = counter(
    "cuzk_fleet_lease_renewals_total",
    "leases",
    &[],
    "Leases this node renewed, one per partition per renewal.",
);
pub const FLEET_LEASES_LOST: MetricDef = counter(
    "cuzk_fleet_leases_lost_total",
    "leases",
    &[],
    "Partitions this node held whose lease it found gone (run out and taken over, or the job ended elsewhere): their work stops and its result is not recorded.",
);
pub const FLEET_HELD: MetricDef = gauge(
    "cuzk_fleet_held_partitions",
    "partitions",
    &[],
    "Partitions this node holds leases on now.",
);
pub const FLEET_DB: MetricDef = MetricDef {
    buckets: DATABASE_BUCKETS,
    ..histogram(
        "cuzk_fleet_db_seconds",
        &["op"],
        "Round trips to the fleet's database, by operation (claim, renew, submit, read, cancel, status).",
    )
};
/// The operations `cuzk_fleet_db_seconds` is labelled with.
pub const FLEET_DB_OPS: &[&str] = &["claim", "renew", "submit", "read", "cancel", "status"];

pub const CATALOGUE: &[MetricDef] = &[
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
    HTTP_REQUESTS,
    STORE_WRITE_FAILURES,
    STORE_WRITABLE,
    STORE_DAMAGE,
    TENANT_REFUSALS,
    TOKEN_RELOADS,
    FLEET_CLAIMED,
    FLEET_RECLAIMED,
    FLEET_RENEWALS,
    FLEET_LEASES_LOST,
    FLEET_HELD,
    FLEET_DB,
];

/// Rewrites the exporter's text so that float counters are typed `counter`.
pub fn fix_exposition(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let float_counter = line.strip_prefix("# TYPE ").and_then(|rest| {
            let name = rest.strip_suffix(" gauge")?;
            CATALOGUE
                .iter()
                .find(|d| d.name == name && d.kind == MetricKind::FloatCounter)
        });
        match float_counter {
            Some(def) => {
                out.push_str("# TYPE ");
                out.push_str(def.name);
                out.push_str(" counter");
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Registers help texts and units with the installed recorder, and starts
/// the labelled counters at zero for every known label value, so that they
/// are scraped (and rated, and charted) before their first event.
pub fn describe_all() {
    for stage in [Stage::Synthesizing, Stage::Proving, Stage::Finalizing] {
        metrics::counter!(PARTITION_RETRIES.name, "stage" => stage.as_str()).absolute(0);
    }
    for kind in StoreDamageKind::ALL {
        metrics::counter!(STORE_DAMAGE.name, "kind" => kind.as_str()).absolute(0);
    }
    metrics::counter!(STORE_WRITE_FAILURES.name).absolute(0);
    for def in [FLEET_CLAIMED, FLEET_RECLAIMED, FLEET_RENEWALS, FLEET_LEASES_LOST] {
        metrics::counter!(def.name).absolute(0);
    }
    metrics::gauge!(FLEET_HELD.name).set(0.0);
    for op in FLEET_DB_OPS {
        // Registered, so that it is scraped before its first observation.
        let _ = metrics::histogram!(FLEET_DB.name, "op" => *op);
    }
    for actor in ["synthesis", "gpu_worker", "finalizer"] {
        metrics::counter!(ACTOR_RESTARTS.name, "actor" => actor).absolute(0);
    }
    for priority in Priority::ALL {
        metrics::counter!(JOBS_SUBMITTED.name, "priority" => priority.as_str()).absolute(0);
        metrics::counter!(DEADLINES_MISSED.name, "priority" => priority.as_str()).absolute(0);
    }
    for outcome in [TokensReloaded::OK, TokensReloaded::FAILED] {
        metrics::counter!(TOKEN_RELOADS.name, "outcome" => outcome).absolute(0);
    }
    for outcome in [Stage::Done, Stage::Failed, Stage::Cancelled] {
        metrics::counter!(JOBS_FINISHED.name, "outcome" => outcome.as_str()).absolute(0);
        metrics::counter!(PARTITIONS_FINISHED.name, "outcome" => outcome.as_str()).absolute(0);
    }
    for def in CATALOGUE {
        match def.kind {
            MetricKind::Counter => metrics::describe_counter!(def.name, def.help),
            MetricKind::Gauge | MetricKind::FloatCounter => {
                metrics::describe_gauge!(def.name, def.help)
            }
            MetricKind::Histogram => {
                metrics::describe_histogram!(def.name, metrics::Unit::Seconds, def.help)
            }
        }
    }
}

pub struct JobSubmitted<'a> {
    pub job: &'a str,
    pub tenant: &'a str,
    pub circuit_id: &'a str,
    pub partitions: u32,
    pub priority: Priority,
}

impl JobSubmitted<'_> {
    pub fn emit(&self) {
        log::info!(
            "job {} submitted by tenant {}: {} x{} priority {}",
            self.job,
            self.tenant,
            self.circuit_id,
            self.partitions,
            self.priority.as_str()
        );
        metrics::counter!(JOBS_SUBMITTED.name, "priority" => self.priority.as_str()).increment(1);
    }
}

pub struct JobFinished<'a> {
    pub job: &'a str,
    pub outcome: Stage,
    pub elapsed: Duration,
    pub error: Option<&'a str>,
}

impl JobFinished<'_> {
    pub fn emit(&self) {
        match self.error {
            Some(error) => log::warn!(
                "job {} {} after {:.3}s: {error}",
                self.job,
                self.outcome.as_str(),
                self.elapsed.as_secs_f64()
            ),
            None => log::info!(
                "job {} {} after {:.3}s",
                self.job,
                self.outcome.as_str(),
                self.elapsed.as_secs_f64()
            ),
        }
        metrics::counter!(JOBS_FINISHED.name, "outcome" => self.outcome.as_str()).increment(1);
        metrics::histogram!(JOB_DURATION.name, "outcome" => self.outcome.as_str())
            .record(self.elapsed.as_secs_f64());
    }
}

pub struct DeadlineMissed<'a> {
    pub job: &'a str,
    pub priority: Priority,
    pub outcome: Stage,
}

impl DeadlineMissed<'_> {
    pub fn emit(&self) {
        log::warn!("job {} missed its deadline ({})", self.job, self.outcome.as_str());
        metrics::counter!(DEADLINES_MISSED.name, "priority" => self.priority.as_str()).increment(1);
    }
}

pub struct PartitionFinished<'a> {
    pub partition: &'a str,
    pub outcome: Stage,
    /// (stage name, duration) for the stages the partition went through.
    pub stages: &'a [(&'static str, Duration)],
}

impl PartitionFinished<'_> {
    pub fn emit(&self) {
        log::debug!(
            "partition {} {} {:?}",
            self.partition,
            self.outcome.as_str(),
            self.stages
        );
        metrics::counter!(PARTITIONS_FINISHED.name, "outcome" => self.outcome.as_str())
            .increment(1);
        for (stage, duration) in self.stages {
            metrics::histogram!(STAGE_DURATION.name, "stage" => *stage)
                .record(duration.as_secs_f64());
        }
    }
}

pub struct GpuSpanStarted<'a> {
    pub worker: WorkerId,
    pub partition: &'a str,
}

impl GpuSpanStarted<'_> {
    pub fn emit(&self) {
        log::debug!("{} starts {}", self.worker, self.partition);
    }
}

pub struct GpuSpanFinished<'a> {
    pub worker: WorkerId,
    pub partition: &'a str,
    pub busy: Duration,
    /// Hand-off before the span (see `SpanFinished::waited`).
    pub waited: Duration,
    pub phases: &'a [(&'static str, Duration)],
    /// The call's share of its device's kernel-active time
    /// (`Started::device_active`).
    pub device_active: Option<Duration>,
}

impl GpuSpanFinished<'_> {
    pub fn emit(&self) {
        log::debug!(
            "{} proved {} in {:.3}s {:?}",
            self.worker,
            self.partition,
            self.busy.as_secs_f64(),
            self.phases
        );
        let waited = [("wait_input", self.waited)];
        for (phase, duration) in waited.iter().chain(self.phases) {
            metrics::histogram!(
                GPU_PHASE_DURATION.name,
                "device" => self.worker.device.to_string(),
                "worker" => self.worker.worker.to_string(),
                "phase" => *phase
            )
            .record(duration.as_secs_f64());
        }
        if let Some(active) = self.device_active {
            metrics::gauge!(GPU_KERNEL_ACTIVE.name, "device" => self.worker.device.to_string())
                .increment(active.as_secs_f64());
        }
    }
}

/// Time of one GPU worker accounted to what it was doing.
pub struct WorkerTimeAccounted {
    pub worker: WorkerId,
    pub activity: Activity,
    pub elapsed: Duration,
}

impl WorkerTimeAccounted {
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        let seconds = self.elapsed.as_secs_f64();
        match self.activity {
            Activity::Proving => {
                metrics::gauge!(GPU_BUSY.name, "device" => device, "worker" => worker)
                    .increment(seconds)
            }
            Activity::Idle(cause) => metrics::gauge!(
                GPU_IDLE.name,
                "device" => device,
                "worker" => worker,
                "cause" => cause.as_str()
            )
            .increment(seconds),
        }
    }
}

fn worker_labels(worker: WorkerId) -> (String, String) {
    (worker.device.to_string(), worker.worker.to_string())
}

fn worker_state(worker: WorkerId, activity: Activity, value: f64) {
    let (device, worker) = worker_labels(worker);
    metrics::gauge!(
        GPU_WORKER_STATE.name,
        "device" => device,
        "worker" => worker,
        "state" => activity.as_str()
    )
    .set(value);
}

/// A GPU worker exists: every series it feeds starts at zero, so that rates
/// and dashboards have data before the first partition.
pub struct WorkerRegistered {
    pub worker: WorkerId,
    pub activity: Activity,
}

impl WorkerRegistered {
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        metrics::gauge!(GPU_BUSY.name, "device" => device.clone(), "worker" => worker.clone())
            .increment(0.0);
        metrics::gauge!(GPU_KERNEL_ACTIVE.name, "device" => device.clone()).increment(0.0);
        for cause in IdleCause::ALL {
            metrics::gauge!(
                GPU_IDLE.name,
                "device" => device.clone(),
                "worker" => worker.clone(),
                "cause" => cause.as_str()
            )
            .increment(0.0);
        }
        metrics::gauge!(GPU_UTILIZATION.name, "device" => device, "worker" => worker).set(0.0);
        for activity in Activity::ALL {
            worker_state(self.worker, activity, if activity == self.activity { 1.0 } else { 0.0 });
        }
    }
}

/// A GPU worker went from one state to another (idle causes included).
pub struct WorkerStateChanged {
    pub worker: WorkerId,
    pub from: Activity,
    pub to: Activity,
}

impl WorkerStateChanged {
    pub fn emit(&self) {
        log::trace!("{} {} -> {}", self.worker, self.from.as_str(), self.to.as_str());
        worker_state(self.worker, self.from, 0.0);
        worker_state(self.worker, self.to, 1.0);
    }
}

/// An idle interval of a GPU worker ended with the start of a span.
pub struct IdleGapEnded {
    pub worker: WorkerId,
    pub gap: Duration,
}

impl IdleGapEnded {
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        if self.gap > Duration::from_secs(1) {
            log::debug!("{} was idle {:.3}s", self.worker, self.gap.as_secs_f64());
        }
        metrics::histogram!(GPU_IDLE_GAP.name, "device" => device, "worker" => worker)
            .record(self.gap.as_secs_f64());
    }
}

pub struct WorkerUtilization {
    pub worker: WorkerId,
    pub ratio: f64,
}

impl WorkerUtilization {
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        metrics::gauge!(GPU_UTILIZATION.name, "device" => device, "worker" => worker)
            .set(self.ratio);
    }
}

/// Depth of the queues and the number of partitions in progress, as the
/// dispatcher sees them.
pub struct QueueDepths {
    pub synthesis: usize,
    pub budget: usize,
    pub gpu: usize,
    pub synthesizing: usize,
    pub proving: usize,
}

impl QueueDepths {
    pub fn emit(&self) {
        metrics::gauge!(QUEUE_DEPTH.name, "stage" => "synthesis").set(self.synthesis as f64);
        metrics::gauge!(QUEUE_DEPTH.name, "stage" => "budget").set(self.budget as f64);
        metrics::gauge!(QUEUE_DEPTH.name, "stage" => "gpu").set(self.gpu as f64);
        metrics::gauge!(PARTITIONS_ACTIVE.name, "stage" => "synthesis")
            .set(self.synthesizing as f64);
        metrics::gauge!(PARTITIONS_ACTIVE.name, "stage" => "gpu").set(self.proving as f64);
    }
}

pub struct FinalizerLoad {
    pub active: usize,
}

impl FinalizerLoad {
    pub fn emit(&self) {
        metrics::gauge!(PARTITIONS_ACTIVE.name, "stage" => "finalize").set(self.active as f64);
    }
}

pub struct BudgetChanged {
    pub used: u64,
    pub resident: u64,
    pub limit: u64,
}

impl BudgetChanged {
    pub fn emit(&self) {
        metrics::gauge!(BUDGET_USED.name).set(self.used as f64);
        metrics::gauge!(BUDGET_RESIDENT.name).set(self.resident as f64);
        metrics::gauge!(BUDGET_LIMIT.name).set(self.limit as f64);
    }
}

pub struct PacerUpdated {
    pub interval: Duration,
    pub ema_gpu: f64,
    pub integral: f64,
    pub target: usize,
    pub bootstrapping: bool,
}

impl PacerUpdated {
    pub fn emit(&self) {
        log::trace!(
            "pacer: interval {:.1} ms, gpu ema {:.1} ms, integral {:.2}, bootstrapping {}",
            self.interval.as_secs_f64() * 1e3,
            self.ema_gpu * 1e3,
            self.integral,
            self.bootstrapping
        );
        metrics::gauge!(PACER_INTERVAL.name).set(self.interval.as_secs_f64());
        metrics::gauge!(PACER_GPU_EMA.name).set(self.ema_gpu);
        metrics::gauge!(PACER_INTEGRAL.name).set(self.integral);
        metrics::gauge!(PACER_TARGET.name).set(self.target as f64);
        metrics::gauge!(PACER_BOOTSTRAPPING.name).set(if self.bootstrapping { 1.0 } else { 0.0 });
    }
}

/// A partition failed an attempt and goes back to the synthesis queue.
pub struct PartitionRetried<'a> {
    pub partition: &'a str,
    pub stage: Stage,
    pub attempt: u32,
    pub error: &'a str,
}

impl PartitionRetried<'_> {
    pub fn emit(&self) {
        log::warn!(
            "partition {} failed while {} (attempt {}), retrying: {}",
            self.partition,
            self.stage.as_str(),
            self.attempt,
            self.error
        );
        metrics::counter!(PARTITION_RETRIES.name, "stage" => self.stage.as_str()).increment(1);
    }
}

/// A stage actor panicked in a stage body and is being restarted.
pub struct ActorRestarted<'a> {
    pub actor: &'static str,
    pub error: &'a str,
}

impl ActorRestarted<'_> {
    pub fn emit(&self) {
        log::error!("restarting {} after: {}", self.actor, self.error);
        metrics::counter!(ACTOR_RESTARTS.name, "actor" => self.actor).increment(1);
    }
}

pub struct HttpRequest<'a> {
    pub route: &'a str,
    pub status: u16,
}

impl HttpRequest<'_> {
    pub fn emit(&self) {
        metrics::counter!(HTTP_REQUESTS.name, "route" => self.route.to_string(), "status" => self.status.to_string())
            .increment(1);
    }
}

/// A job store commit failed; its writes wait for the store to recover.
pub struct StoreWriteFailed<'a> {
    pub writes: usize,
    pub error: &'a str,
}

impl StoreWriteFailed<'_> {
    pub fn emit(&self) {
        log::error!("job store: {} writes not committed: {}", self.writes, self.error);
        metrics::counter!(STORE_WRITE_FAILURES.name).increment(1);
        metrics::gauge!(STORE_WRITABLE.name).set(0.0);
    }
}

/// A job store commit succeeded after failures, or the store opened.
pub struct StoreWritable {
    /// Failed commits before this one (0 when the store just opened).
    pub after_failures: u64,
}

impl StoreWritable {
    pub fn emit(&self) {
        if self.after_failures > 0 {
            log::info!("job store: writable again after {} failed commits", self.after_failures);
        }
        metrics::gauge!(STORE_WRITABLE.name).set(1.0);
    }
}

/// Partitions a fleet node claimed; `reclaimed` of them had a lease that
/// ran out before.
pub struct FleetClaimed {
    pub partitions: usize,
    pub reclaimed: usize,
}

impl FleetClaimed {
    pub fn emit(&self) {
        log::debug!("fleet: claimed {} partitions ({} taken over)", self.partitions, self.reclaimed);
        metrics::counter!(FLEET_CLAIMED.name).increment(self.partitions as u64);
        metrics::counter!(FLEET_RECLAIMED.name).increment(self.reclaimed as u64);
    }
}

/// A fleet node renewed `renewed` leases and holds `held` partitions.
pub struct FleetRenewed {
    pub renewed: usize,
    pub held: usize,
}

impl FleetRenewed {
    pub fn emit(&self) {
        metrics::counter!(FLEET_RENEWALS.name).increment(self.renewed as u64);
        metrics::gauge!(FLEET_HELD.name).set(self.held as f64);
    }
}

/// A lease a fleet node held was gone `when` it looked (at renewal, or
/// when recording the partition's result).
pub struct FleetLeaseLost<'a> {
    pub partition: &'a str,
    pub when: &'a str,
}

impl FleetLeaseLost<'_> {
    pub fn emit(&self) {
        log::warn!(
            "fleet: lease on {} gone when {}: run out and taken over, or its job ended elsewhere; this node's work on it is dropped",
            self.partition,
            self.when
        );
        metrics::counter!(FLEET_LEASES_LOST.name).increment(1);
    }
}

/// One round trip to the fleet's database.
pub struct FleetDb {
    /// One of `FLEET_DB_OPS`.
    pub op: &'static str,
    pub elapsed: Duration,
}

impl FleetDb {
    pub fn emit(&self) {
        metrics::histogram!(FLEET_DB.name, "op" => self.op).record(self.elapsed.as_secs_f64());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreDamageKind {
    /// A record failed its checksum; it was dropped after the file was copied aside.
    Record,
    /// The file could not be read; it was moved aside and its intact records salvaged.
    Unreadable,
    /// A store that existed is gone or empty.
    Missing,
}

impl StoreDamageKind {
    pub const ALL: [StoreDamageKind; 3] =
        [StoreDamageKind::Record, StoreDamageKind::Unreadable, StoreDamageKind::Missing];

    pub fn as_str(self) -> &'static str {
        match self {
            StoreDamageKind::Record => "record",
            StoreDamageKind::Unreadable => "unreadable",
            StoreDamageKind::Missing => "missing",
        }
    }
}

/// Damage found in the job store on start.
pub struct StoreDamage<'a> {
    pub kind: StoreDamageKind,
    pub detail: &'a str,
}

impl StoreDamage<'_> {
    pub fn emit(&self) {
        log::error!("job store damaged ({}): {}", self.kind.as_str(), self.detail);
        metrics::counter!(STORE_DAMAGE.name, "kind" => self.kind.as_str()).increment(1);
    }
}

/// Why a tenant's own limit refused a submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantLimit {
    /// Its unfinished jobs reached its `max_queued_jobs`.
    QueueFull,
    /// Its submit-rate bucket was empty.
    RateLimited,
}

impl TenantLimit {
    pub const ALL: [TenantLimit; 2] = [TenantLimit::QueueFull, TenantLimit::RateLimited];

    pub fn as_str(self) -> &'static str {
        match self {
            TenantLimit::QueueFull => "queue_full",
            TenantLimit::RateLimited => "rate_limited",
        }
    }
}

/// The tenants the configuration names (on start and after each reload):
/// their refusal counters start at zero. Counters already counting keep
/// their counts, so a reload resets nothing.
pub struct TenantsConfigured<'a> {
    pub tenants: &'a [&'a str],
}

impl TenantsConfigured<'_> {
    pub fn emit(&self) {
        for tenant in self.tenants {
            for reason in TenantLimit::ALL {
                metrics::counter!(TENANT_REFUSALS.name, "tenant" => tenant.to_string(), "reason" => reason.as_str())
                    .increment(0);
            }
        }
    }
}

/// A submission answered 429 by its tenant's own limit.
pub struct TenantRefused<'a> {
    pub tenant: &'a str,
    pub reason: TenantLimit,
}

impl TenantRefused<'_> {
    pub fn emit(&self) {
        log::debug!("tenant {}: submission refused ({})", self.tenant, self.reason.as_str());
        metrics::counter!(TENANT_REFUSALS.name, "tenant" => self.tenant.to_string(), "reason" => self.reason.as_str())
            .increment(1);
    }
}

/// The tokens were read again on SIGHUP: `Ok(tokens now in force)`, or why
/// the reload failed (the previous tokens stay in force).
pub struct TokensReloaded<'a> {
    pub outcome: Result<usize, &'a str>,
}

impl TokensReloaded<'_> {
    const OK: &'static str = "ok";
    const FAILED: &'static str = "failed";

    pub fn emit(&self) {
        let outcome = match self.outcome {
            Ok(tokens) => {
                log::info!("SIGHUP: tokens and tenants reloaded ({tokens} tokens)");
                Self::OK
            }
            Err(error) => {
                log::error!("SIGHUP: reload failed, the previous tokens stay in force: {error}");
                Self::FAILED
            }
        };
        metrics::counter!(TOKEN_RELOADS.name, "outcome" => outcome).increment(1);
    }
}
