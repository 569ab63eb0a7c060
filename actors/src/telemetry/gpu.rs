//! GPU workers: each span's phases, every second accounted busy, failed or
//! idle by cause, idle gaps, utilization, the state each worker is in, and each
//! device's kernel-active time.

use std::time::Duration;

use super::metric::{gauge, histogram, seconds_counter, MetricDef};
use crate::model::{Activity, IdleCause, WorkerId, WorkerTime};

/// `cuzk_gpu_phase_duration_seconds`: where a GPU worker's stage time goes,
/// phase by phase, to find the step that limits a device.
pub const GPU_PHASE_DURATION: MetricDef = histogram(
    "cuzk_gpu_phase_duration_seconds",
    &["device", "worker", "phase"],
    "Duration of each phase of a GPU worker's span (wait_input, upload, ntt, msm_*, download, handoff; the CUDA engine's host steps before its first GPU event, lease and resident; cpu_wait, which is not a step but the part of the stage the worker's thread waited for a CPU, Linux only; the sim backend's host, device_wait, device).",
);
/// `cuzk_gpu_busy_seconds_total`: a worker's time spent proving; its rate is
/// the worker's useful utilization.
pub const GPU_BUSY: MetricDef = seconds_counter(
    "cuzk_gpu_busy_seconds_total",
    &["device", "worker"],
    "Seconds a GPU worker spent in stages that proved their partition; a stage's time is added when it ends.",
);
/// `cuzk_gpu_failed_seconds_total`: a worker's time lost to stages that failed,
/// kept apart so that it is counted neither busy nor idle.
pub const GPU_FAILED: MetricDef = seconds_counter(
    "cuzk_gpu_failed_seconds_total",
    &["device", "worker"],
    "Seconds a GPU worker spent in stages that failed (neither busy nor idle); a stage's time is added when it ends.",
);
/// `cuzk_gpu_idle_seconds_total`: a worker's idle time by what it waited for,
/// to tell which part of the pipeline starves the GPUs.
pub const GPU_IDLE: MetricDef = seconds_counter(
    "cuzk_gpu_idle_seconds_total",
    &["device", "worker", "cause"],
    "Seconds a GPU worker was idle, by cause (no_work, synthesis, budget, paced, handoff); advances while time passes. Busy plus failed plus idle is wall time, less the stage in progress.",
);
/// Idle gaps: 100 microseconds to 5 minutes.
const GAP_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0, 60.0, 120.0, 300.0,
];
/// `cuzk_gpu_idle_gap_seconds`: how long each idle interval lasts, to tell many
/// short hand-off gaps from a few long stalls.
pub const GPU_IDLE_GAP: MetricDef = MetricDef {
    buckets: GAP_BUCKETS,
    ..histogram(
        "cuzk_gpu_idle_gap_seconds",
        &["device", "worker"],
        "Length of each idle interval of a GPU worker, from the end of one span (or start-up) to the start of the next.",
    )
};
/// `cuzk_gpu_kernel_active_seconds_total`: how much of the time a device really
/// ran kernels, beside the workers' stage time.
pub const GPU_KERNEL_ACTIVE: MetricDef = seconds_counter(
    "cuzk_gpu_kernel_active_seconds_total",
    &["device"],
    "Seconds a device had kernels of some partition running: the union over its workers' calls, from the CUDA engine's events (the sim backend: its simulated device time; 0 on the CPU backend, which has no device). Its rate is the device's kernel-active fraction.",
);
/// `cuzk_gpu_utilization_ratio`: a worker's recent busy fraction, for
/// dashboards that want one number per worker.
pub const GPU_UTILIZATION: MetricDef = gauge(
    "cuzk_gpu_utilization_ratio",
    "ratio",
    &["device", "worker"],
    "Fraction of the last 60 seconds a GPU worker spent in stages that proved their partition (failed stages excluded), counted as they end.",
);
/// `cuzk_gpu_worker_state`: what each worker does right now, one series per
/// state.
pub const GPU_WORKER_STATE: MetricDef = gauge(
    "cuzk_gpu_worker_state",
    "boolean",
    &["device", "worker", "state"],
    "1 for the state a GPU worker is in now (proving, or idle by cause: no_work, synthesis, budget, paced, handoff), 0 for the others.",
);

/// A GPU worker started proving a partition (logged only).
pub struct GpuSpanStarted<'a> {
    /// The worker, in the log line.
    pub worker: WorkerId,
    /// The partition's `job/index` name.
    pub partition: &'a str,
}

impl GpuSpanStarted<'_> {
    /// Logs the start at debug level; the metrics wait for the span's end.
    pub fn emit(&self) {
        log::debug!("{} starts {}", self.worker, self.partition);
    }
}

/// A GPU worker finished a partition's span: its phases timed.
pub struct GpuSpanFinished<'a> {
    /// Device and worker: the histograms' labels.
    pub worker: WorkerId,
    /// The partition's `job/index` name, for the log line only.
    pub partition: &'a str,
    /// The span's length, for the log line.
    pub busy: Duration,
    /// Hand-off before the span (see `SpanFinished::waited`).
    pub waited: Duration,
    /// (phase name, duration) for each phase the backend timed.
    pub phases: &'a [(&'static str, Duration)],
    /// The call's share of its device's kernel-active time
    /// (`Started::device_active`).
    pub device_active: Option<Duration>,
}

impl GpuSpanFinished<'_> {
    /// Logs the span and records its phases (the hand-off wait included) and
    /// its device's kernel-active time.
    pub fn emit(&self) {
        log::debug!(
            "{} proved {} in {:.3}s {:?}",
            self.worker,
            self.partition,
            self.busy.as_secs_f64(),
            self.phases
        );
        let waited = [(WAIT_INPUT, self.waited)];
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
    /// Device and worker: the counters' labels.
    pub worker: WorkerId,
    /// Busy, failed or idle by cause: which counter advances.
    pub time: WorkerTime,
    /// How far it advances.
    pub elapsed: Duration,
}

impl WorkerTimeAccounted {
    /// Advances the busy, failed or idle counter the time belongs to.
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        let seconds = self.elapsed.as_secs_f64();
        match self.time {
            WorkerTime::Busy => {
                metrics::gauge!(GPU_BUSY.name, "device" => device, "worker" => worker).increment(seconds)
            }
            WorkerTime::Failed => {
                metrics::gauge!(GPU_FAILED.name, "device" => device, "worker" => worker).increment(seconds)
            }
            WorkerTime::Idle(cause) => metrics::gauge!(
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

/// The phase every span has, whatever the backend: the wait for its input.
const WAIT_INPUT: &str = "wait_input";

/// A GPU worker exists: every series it feeds starts at zero, so that rates
/// and dashboards have data before the first partition.
pub struct WorkerRegistered {
    /// Whose series start at zero.
    pub worker: WorkerId,
    /// The state it starts in: 1 in the state gauge.
    pub activity: Activity,
}

impl WorkerRegistered {
    /// Starts every series of the worker at zero and sets its state gauge.
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        for counter in [GPU_BUSY, GPU_FAILED] {
            metrics::gauge!(counter.name, "device" => device.clone(), "worker" => worker.clone())
                .increment(0.0);
        }
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
        // Histograms exist once registered, with empty buckets: their
        // panels show zero instead of "No data" until the first gap or span.
        let _ =
            metrics::histogram!(GPU_IDLE_GAP.name, "device" => device.clone(), "worker" => worker.clone());
        let _ = metrics::histogram!(
            GPU_PHASE_DURATION.name,
            "device" => device.clone(),
            "worker" => worker.clone(),
            "phase" => WAIT_INPUT
        );
        metrics::gauge!(GPU_UTILIZATION.name, "device" => device, "worker" => worker).set(0.0);
        for activity in Activity::ALL {
            worker_state(self.worker, activity, if activity == self.activity { 1.0 } else { 0.0 });
        }
    }
}

/// A GPU worker went from one state to another (idle causes included).
pub struct WorkerStateChanged {
    /// Device and worker: the state gauge's labels.
    pub worker: WorkerId,
    /// The state left: set to 0.
    pub from: Activity,
    /// The state entered: set to 1.
    pub to: Activity,
}

impl WorkerStateChanged {
    /// Moves the worker's 1 in the state gauge from the old state to the new.
    pub fn emit(&self) {
        log::trace!("{} {} -> {}", self.worker, self.from.as_str(), self.to.as_str());
        worker_state(self.worker, self.from, 0.0);
        worker_state(self.worker, self.to, 1.0);
    }
}

/// An idle interval of a GPU worker ended with the start of a span.
pub struct IdleGapEnded {
    /// Device and worker: the histogram's labels.
    pub worker: WorkerId,
    /// The idle interval's length: the observation (logged when over 1 s).
    pub gap: Duration,
}

impl IdleGapEnded {
    /// Records the gap in the histogram, and logs it when it is long.
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        if self.gap > Duration::from_secs(1) {
            log::debug!("{} was idle {:.3}s", self.worker, self.gap.as_secs_f64());
        }
        metrics::histogram!(GPU_IDLE_GAP.name, "device" => device, "worker" => worker)
            .record(self.gap.as_secs_f64());
    }
}

/// A GPU worker's busy fraction over the monitor's last 60 seconds.
pub struct WorkerUtilization {
    /// Device and worker: the gauge's labels.
    pub worker: WorkerId,
    /// Busy time over wall time, 0 to 1.
    pub ratio: f64,
}

impl WorkerUtilization {
    /// Sets the worker's utilization gauge.
    pub fn emit(&self) {
        let (device, worker) = worker_labels(self.worker);
        metrics::gauge!(GPU_UTILIZATION.name, "device" => device, "worker" => worker).set(self.ratio);
    }
}
