//! Jobs and partitions: submitted, finished (by outcome, with their
//! durations and those of each stage), deadlines missed, attempts retried.

use std::time::Duration;

use super::metric::{counter, histogram, MetricDef};
use crate::model::{Priority, Stage};

/// `cuzk_jobs_submitted_total`: the load coming in, by priority.
pub const JOBS_SUBMITTED: MetricDef =
    counter("cuzk_jobs_submitted_total", "jobs", &["priority"], "Jobs accepted, by priority.");
/// `cuzk_jobs_finished_total`: how jobs end, to alert on failures.
pub const JOBS_FINISHED: MetricDef = counter(
    "cuzk_jobs_finished_total",
    "jobs",
    &["outcome"],
    "Jobs that reached a final state, by outcome (done, failed, cancelled).",
);
/// `cuzk_partitions_finished_total`: how partitions end, the proving
/// throughput's unit.
pub const PARTITIONS_FINISHED: MetricDef = counter(
    "cuzk_partitions_finished_total",
    "partitions",
    &["outcome"],
    "Partitions that reached a final state, by outcome.",
);
/// `cuzk_jobs_deadline_missed_total`: jobs that ended late, to alert on missed
/// deadlines of urgent work.
pub const DEADLINES_MISSED: MetricDef = counter(
    "cuzk_jobs_deadline_missed_total",
    "jobs",
    &["priority"],
    "Jobs that ended after their deadline, by priority.",
);
/// `cuzk_job_duration_seconds`: how long jobs take end to end, by outcome.
pub const JOB_DURATION: MetricDef =
    histogram("cuzk_job_duration_seconds", &["outcome"], "Time from submission to a job's final state.");
/// `cuzk_stage_duration_seconds`: how long partitions spend in each part of the
/// pipeline, waits included, to find where latency comes from.
pub const STAGE_DURATION: MetricDef = histogram(
    "cuzk_stage_duration_seconds",
    &["stage"],
    "Time a partition spent in each stage (queue_wait, synthesis, gpu_wait, gpu, finalize_wait, finalize).",
);
/// `cuzk_partition_retries_total`: failed attempts that were tried again, by
/// the stage that failed.
pub const PARTITION_RETRIES: MetricDef = counter(
    "cuzk_partition_retries_total",
    "partitions",
    &["stage"],
    "Partitions queued again after a failed attempt, by the stage that failed (synthesizing, proving, finalizing).",
);

/// A partition's timings: each the time between entering two stages, by
/// the name `cuzk_stage_duration_seconds` and the job view give it.
pub const STAGE_SPANS: [(&str, Stage, Stage); 6] = [
    ("queue_wait", Stage::Queued, Stage::Synthesizing),
    ("synthesis", Stage::Synthesizing, Stage::WaitingGpu),
    ("gpu_wait", Stage::WaitingGpu, Stage::Proving),
    ("gpu", Stage::Proving, Stage::WaitingFinalizer),
    ("finalize_wait", Stage::WaitingFinalizer, Stage::Finalizing),
    ("finalize", Stage::Finalizing, Stage::Done),
];

/// Starts the counters of every priority and outcome at zero, and registers
/// the histograms of every stage and outcome (empty buckets: their panels
/// show zero instead of "No data" before the first job).
pub(super) fn start_at_zero() {
    for (stage, _, _) in STAGE_SPANS {
        let _ = metrics::histogram!(STAGE_DURATION.name, "stage" => stage);
    }
    for stage in [Stage::Synthesizing, Stage::Proving, Stage::Finalizing] {
        metrics::counter!(PARTITION_RETRIES.name, "stage" => stage.as_str()).absolute(0);
    }
    for priority in Priority::ALL {
        metrics::counter!(JOBS_SUBMITTED.name, "priority" => priority.as_str()).absolute(0);
        metrics::counter!(DEADLINES_MISSED.name, "priority" => priority.as_str()).absolute(0);
    }
    for outcome in [Stage::Done, Stage::Failed, Stage::Cancelled] {
        let _ = metrics::histogram!(JOB_DURATION.name, "outcome" => outcome.as_str());
        metrics::counter!(JOBS_FINISHED.name, "outcome" => outcome.as_str()).absolute(0);
        metrics::counter!(PARTITIONS_FINISHED.name, "outcome" => outcome.as_str()).absolute(0);
    }
}

/// A job was accepted (by the tracker, or by a fleet node's database).
pub struct JobSubmitted<'a> {
    /// Its id, for the log line only (never a label).
    pub job: &'a str,
    /// Who submitted it, for the log line.
    pub tenant: &'a str,
    /// The shape it proves, for the log line.
    pub circuit_id: &'a str,
    /// How many partitions it has, for the log line.
    pub partitions: u32,
    /// The counter's label.
    pub priority: Priority,
}

impl JobSubmitted<'_> {
    /// Logs the submission and counts it under its priority.
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

/// A job reached its final state.
pub struct JobFinished<'a> {
    /// Its id, for the log line only.
    pub job: &'a str,
    /// Done, failed or cancelled: the counter's and histogram's label.
    pub outcome: Stage,
    /// From submission to the final state: the histogram's observation.
    pub elapsed: Duration,
    /// Why it failed, if it did: logged as a warning.
    pub error: Option<&'a str>,
}

impl JobFinished<'_> {
    /// Logs the job's end (a warning when it failed), counts it and records its
    /// duration, by outcome.
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

/// A job ended after its deadline.
pub struct DeadlineMissed<'a> {
    /// Its id, for the log line only.
    pub job: &'a str,
    /// The counter's label: missed deadlines matter by priority.
    pub priority: Priority,
    /// How it ended, for the log line.
    pub outcome: Stage,
}

impl DeadlineMissed<'_> {
    /// Logs a warning and counts the miss under the job's priority.
    pub fn emit(&self) {
        log::warn!("job {} missed its deadline ({})", self.job, self.outcome.as_str());
        metrics::counter!(DEADLINES_MISSED.name, "priority" => self.priority.as_str()).increment(1);
    }
}

/// A partition reached its final state.
pub struct PartitionFinished<'a> {
    /// Its `job/index` name, for the log line only.
    pub partition: &'a str,
    /// Done, failed or cancelled: the counter's label.
    pub outcome: Stage,
    /// (stage name, duration) for the stages the partition went through.
    pub stages: &'a [(&'static str, Duration)],
}

impl PartitionFinished<'_> {
    /// Logs the partition's end, counts it by outcome and records each of its
    /// stage durations.
    pub fn emit(&self) {
        log::debug!("partition {} {} {:?}", self.partition, self.outcome.as_str(), self.stages);
        metrics::counter!(PARTITIONS_FINISHED.name, "outcome" => self.outcome.as_str()).increment(1);
        for (stage, duration) in self.stages {
            metrics::histogram!(STAGE_DURATION.name, "stage" => *stage).record(duration.as_secs_f64());
        }
    }
}

/// A partition failed an attempt and goes back to the synthesis queue.
pub struct PartitionRetried<'a> {
    /// Its `job/index` name, for the log line only.
    pub partition: &'a str,
    /// The stage whose attempt failed: the counter's label.
    pub stage: Stage,
    /// Which attempt failed (1 for the first), for the log line.
    pub attempt: u32,
    /// Why it failed, logged with the retry.
    pub error: &'a str,
}

impl PartitionRetried<'_> {
    /// Logs a warning with the error and counts the retry under its stage.
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
