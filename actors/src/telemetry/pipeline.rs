//! The pipeline around the GPUs: queue depths and partitions in each stage,
//! the memory budget, the pacer, and stage actors restarted after a panic.

use std::time::Duration;

use super::metric::{counter, gauge, MetricDef};

/// `cuzk_queue_depth`: partitions waiting before synthesis, for memory and
/// before a GPU, to see which queue the pipeline backs up in.
pub const QUEUE_DEPTH: MetricDef = gauge(
    "cuzk_queue_depth",
    "partitions",
    &["stage"],
    "Partitions waiting at each stage (synthesis, budget, gpu).",
);
/// `cuzk_partitions_active`: partitions being worked on per stage, to see
/// whether synthesis and finalization keep up with the GPUs.
pub const PARTITIONS_ACTIVE: MetricDef = gauge(
    "cuzk_partitions_active",
    "partitions",
    &["stage"],
    "Partitions being worked on in each stage (synthesis, gpu, finalize).",
);
/// `cuzk_budget_used_bytes`: memory reserved by partitions in flight.
pub const BUDGET_USED: MetricDef =
    gauge("cuzk_budget_used_bytes", "bytes", &[], "Bytes of the memory budget currently reserved.");
/// `cuzk_budget_resident_bytes`: memory the backend keeps across partitions,
/// which the budget counts as used.
pub const BUDGET_RESIDENT: MetricDef = gauge(
    "cuzk_budget_resident_bytes",
    "bytes",
    &[],
    "Bytes of the budget held by the backend across partitions (proving keys, matrices).",
);
/// `cuzk_budget_limit_bytes`: the budget's size, the line the other two budget
/// gauges are read against.
pub const BUDGET_LIMIT: MetricDef =
    gauge("cuzk_budget_limit_bytes", "bytes", &[], "Size of the memory budget.");
/// `cuzk_pacer_interval_seconds`: the pacer's output, the time between
/// synthesis starts.
pub const PACER_INTERVAL: MetricDef = gauge(
    "cuzk_pacer_interval_seconds",
    "seconds",
    &[],
    "Interval the pacer keeps between starts of partition syntheses.",
);
/// `cuzk_pacer_gpu_ema_seconds`: the GPU time per partition the pacer measured,
/// its feed-forward.
pub const PACER_GPU_EMA: MetricDef = gauge(
    "cuzk_pacer_gpu_ema_seconds",
    "seconds",
    &[],
    "EMA of GPU worker busy time per partition (the pacer's feed-forward, before dividing by workers).",
);
/// `cuzk_pacer_integral`: the pacer's integral term, to see it wind up or
/// settle.
pub const PACER_INTEGRAL: MetricDef =
    gauge("cuzk_pacer_integral", "partitions", &[], "The pacer's accumulated buffer error.");
/// `cuzk_pacer_buffer_target`: the buffer the pacer aims for, to read the queue
/// depth against.
pub const PACER_TARGET: MetricDef = gauge(
    "cuzk_pacer_buffer_target",
    "partitions",
    &[],
    "Synthesized partitions the pacer aims to keep waiting for the GPUs.",
);
/// `cuzk_pacer_bootstrapping`: whether the pacer runs unmeasured, filling the
/// pipeline freely.
pub const PACER_BOOTSTRAPPING: MetricDef = gauge(
    "cuzk_pacer_bootstrapping",
    "boolean",
    &[],
    "1 while the pacer bootstraps (before the first GPU completion, or after the pipeline ran empty).",
);
/// `cuzk_actor_restarts_total`: stage actors restarted after a panic, to alert
/// on backend crashes.
pub const ACTOR_RESTARTS: MetricDef = counter(
    "cuzk_actor_restarts_total",
    "restarts",
    &["actor"],
    "Stage actors restarted after a panic in a stage body (synthesis, gpu_worker, finalizer).",
);

/// Starts every stage actor's restart counter at zero.
pub(super) fn start_at_zero() {
    for actor in ["synthesis", "gpu_worker", "finalizer"] {
        metrics::counter!(ACTOR_RESTARTS.name, "actor" => actor).absolute(0);
    }
}

/// Depth of the queues and the number of partitions in progress, as the
/// dispatcher sees them.
pub struct QueueDepths {
    /// Partitions waiting for a synthesis slot.
    pub synthesis: usize,
    /// Partitions waiting for memory from the budget.
    pub budget: usize,
    /// Synthesized partitions waiting for a GPU worker.
    pub gpu: usize,
    /// Partitions being synthesized now.
    pub synthesizing: usize,
    /// Partitions on a GPU worker now.
    pub proving: usize,
}

impl QueueDepths {
    /// Sets the queue-depth and active-partition gauges of synthesis and the
    /// GPUs.
    pub fn emit(&self) {
        metrics::gauge!(QUEUE_DEPTH.name, "stage" => "synthesis").set(self.synthesis as f64);
        metrics::gauge!(QUEUE_DEPTH.name, "stage" => "budget").set(self.budget as f64);
        metrics::gauge!(QUEUE_DEPTH.name, "stage" => "gpu").set(self.gpu as f64);
        metrics::gauge!(PARTITIONS_ACTIVE.name, "stage" => "synthesis").set(self.synthesizing as f64);
        metrics::gauge!(PARTITIONS_ACTIVE.name, "stage" => "gpu").set(self.proving as f64);
    }
}

/// Partitions the finalizers are working on.
pub struct FinalizerLoad {
    /// How many, after a finalizer took or finished one.
    pub active: usize,
}

impl FinalizerLoad {
    /// Sets the finalize stage's active-partition gauge.
    pub fn emit(&self) {
        metrics::gauge!(PARTITIONS_ACTIVE.name, "stage" => "finalize").set(self.active as f64);
    }
}

/// The memory budget after a reservation or release.
pub struct BudgetChanged {
    /// Bytes reserved now.
    pub used: u64,
    /// Bytes the backend holds across partitions (keys, matrices).
    pub resident: u64,
    /// The budget's size.
    pub limit: u64,
}

impl BudgetChanged {
    /// Sets the budget's used, resident and limit gauges.
    pub fn emit(&self) {
        metrics::gauge!(BUDGET_USED.name).set(self.used as f64);
        metrics::gauge!(BUDGET_RESIDENT.name).set(self.resident as f64);
        metrics::gauge!(BUDGET_LIMIT.name).set(self.limit as f64);
    }
}

/// The pacer's state after it recomputed its interval.
pub struct PacerUpdated {
    /// The interval it keeps between starts of syntheses.
    pub interval: Duration,
    /// Its EMA of GPU busy seconds per partition (its feed-forward).
    pub ema_gpu: f64,
    /// Its accumulated buffer error.
    pub integral: f64,
    /// Synthesized partitions it aims to keep waiting for the GPUs.
    pub target: usize,
    /// Whether it bootstraps (no GPU completion yet, or the pipeline ran
    /// empty).
    pub bootstrapping: bool,
}

impl PacerUpdated {
    /// Logs the pacer's state at trace level and sets its gauges.
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

/// A stage actor panicked in a stage body and is being restarted.
pub struct ActorRestarted<'a> {
    /// Which kind of stage actor (synthesis, gpu_worker, finalizer): the
    /// counter's label.
    pub actor: &'static str,
    /// The panic's message, logged as an error.
    pub error: &'a str,
}

impl ActorRestarted<'_> {
    /// Logs the panic as an error and counts the restart under the actor's
    /// kind.
    pub fn emit(&self) {
        log::error!("restarting {} after: {}", self.actor, self.error);
        metrics::counter!(ACTOR_RESTARTS.name, "actor" => self.actor).increment(1);
    }
}
