//! What a run recorded, turned into figures: per device the busy fraction
//! and the idle gaps between `device` phases, throughput against the
//! pipeline's bound, the buffer and pacer over the measured window, and the
//! worker monitor's own accounting of the workers' time.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use cuzk_actors::messages::{SpanFinished, WorkerReport};
use cuzk_actors::pacer::PacerStatus;
use serde::Serialize;

use super::observe::{QueueSample, Run};
use super::plan::Plan;

/// A closed interval in seconds since the run started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Interval {
    pub(super) start: f64,
    pub(super) end: f64,
}

/// When the span's device phase ran: it starts after the phases before it
/// (host staging, waiting for the device).
pub(super) fn device_phase(span: &SpanFinished, run: &Run) -> Option<Interval> {
    let position = span.phases.iter().position(|(name, _)| *name == "device")?;
    let before: Duration = span.phases[..position].iter().map(|(_, d)| *d).sum();
    let start = run.seconds(span.start) + before.as_secs_f64();
    Some(Interval { start, end: start + span.phases[position].1.as_secs_f64() })
}

/// Sorted, overlapping intervals merged: when a device was busy.
pub(super) fn merge(mut intervals: Vec<Interval>) -> Vec<Interval> {
    intervals.sort_by(|a, b| a.start.total_cmp(&b.start));
    let mut merged: Vec<Interval> = Vec::with_capacity(intervals.len());
    for interval in intervals {
        match merged.last_mut() {
            Some(last) if interval.start <= last.end => last.end = last.end.max(interval.end),
            _ => merged.push(interval),
        }
    }
    merged
}

/// The idle periods within `window` around merged busy intervals.
fn idle_gaps(busy: &[Interval], (from, to): (f64, f64)) -> Vec<f64> {
    let mut gaps = Vec::new();
    let mut idle_since = from;
    for interval in busy.iter().filter(|i| i.end > from && i.start < to) {
        if interval.start > idle_since {
            gaps.push(interval.start - idle_since);
        }
        idle_since = idle_since.max(interval.end);
    }
    if to > idle_since {
        gaps.push(to - idle_since);
    }
    gaps
}

/// Nearest-rank percentile of sorted values (0 when empty).
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n => sorted[((fraction * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// The figures, as `--json` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulerReport {
    /// One entry per simulated device: is it kept busy?
    pub devices: Vec<DeviceFigures>,
    /// Partitions proved per second over the bound min(GPU, synthesis).
    pub throughput_ratio_to_bound: f64,
    /// The most memory reserved at once: the budget must not be the limit.
    pub budget_peak_bytes: u64,
    /// The budget the daemon ran with.
    pub budget_limit_bytes: u64,
    /// Partitions proved per second in the window.
    pub throughput_per_s: f64,
    /// Devices over the mean device phase.
    pub gpu_capacity_per_s: f64,
    /// Synthesis threads over the mean synthesis time.
    pub synthesis_capacity_per_s: f64,
    /// Mean `device` phase of the partitions proved in the window.
    pub mean_device_ms: f64,
    /// Mean synthesis stage over every partition synthesized.
    pub mean_synthesis_ms: f64,
    /// Whether synthesized partitions were always there for the GPUs.
    pub buffer: BufferFigures,
    /// min, median and max of every numeric field of the pacer's status
    /// over the measured window (a field without a value yet is left out).
    pub pacer: BTreeMap<String, Spread>,
    /// GET /v1/status answered per second (with --status-load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_served_per_s: Option<f64>,
    /// All workers' time in the window as the daemon's monitor accounted
    /// it: `busy` and each idle cause, as fractions summing to 1.
    pub worker_time: BTreeMap<String, f64>,
    /// What was run, defaults resolved, so that a report can be repeated.
    pub settings: Settings,
}

/// One simulated device's share of the measured window.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceFigures {
    /// The simulated device's index.
    pub device: usize,
    /// Time in `device` phases over the measured window's length.
    pub busy_fraction: f64,
    /// Idle gaps between device phases: the median, the tail and the worst
    /// (nearest-rank percentiles).
    pub idle_gap_p50_ms: f64,
    /// The 99th percentile gap.
    pub idle_gap_p99_ms: f64,
    /// The longest gap.
    pub idle_gap_max_ms: f64,
    /// How many idle gaps the window had.
    pub idle_gaps: usize,
    /// Partitions whose span ended in the window.
    pub partitions: usize,
}

/// The queue of synthesized partitions waiting for a GPU worker, sampled
/// every 50 ms over the measured window.
#[derive(Clone, Debug, Serialize)]
pub struct BufferFigures {
    /// Samples in the window.
    pub samples: usize,
    /// Samples taken while partitions were waiting for synthesis.
    pub samples_with_work_queued: usize,
    /// The most waiting in those samples.
    pub max_waiting_gpu: usize,
    /// Samples with an empty buffer while partitions waited for synthesis.
    pub drained_while_queued: usize,
    /// The pacer's buffer target (none without samples in the window).
    pub target: Option<f64>,
    /// Largest waiting_gpu - (target + GPU workers); at most 1 is the target.
    pub max_excess_over_target_plus_workers: Option<f64>,
}

/// How one pacer field moved over the window.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    /// The least value sampled.
    pub min: f64,
    /// The median sample.
    pub p50: f64,
    /// The greatest value sampled.
    pub max: f64,
}

/// The run's settings, each as the command line gave it or as its default
/// resolved (docs/scheduler-bench.md explains each).
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// The simulated backend's profile.
    pub profile: String,
    /// Simulated devices.
    pub devices: usize,
    /// General workers per device.
    pub workers_per_device: usize,
    /// Partitions synthesized at once.
    pub synthesis_threads: usize,
    /// Finalizer threads.
    pub finalizer_threads: usize,
    /// The profile's stage times are multiplied by this.
    pub time_scale: f64,
    /// Each stage time varies by up to this fraction either way.
    pub jitter: f64,
    /// Seconds run before the window is measured.
    pub warmup_s: f64,
    /// Seconds of the measured window.
    pub duration_s: f64,
    /// `/v1/status` reads per second during the run.
    pub status_load_rps: f64,
    /// Extra milliseconds every finalization takes (real time).
    pub finalizer_stall_ms: u64,
    /// Whether the pacer paces synthesis.
    pub pacer_enabled: bool,
}

impl SchedulerReport {
    pub(super) fn new(plan: &Plan, run: &Run, mean_synthesis_s: f64) -> Self {
        let window = plan.window();
        let seconds = window.1 - window.0;
        let in_window = |at: f64| at >= window.0 && at <= window.1;
        let finished: Vec<&SpanFinished> =
            run.spans.iter().filter(|s| s.ok && in_window(run.seconds(s.end))).collect();
        let devices: Vec<DeviceFigures> = (0..plan.args.devices)
            .map(|device| {
                let busy = merge(
                    run.spans
                        .iter()
                        .filter(|s| s.worker.device == device)
                        .filter_map(|s| device_phase(s, run))
                        .collect(),
                );
                let busy_seconds: f64 =
                    busy.iter().map(|i| (i.end.min(window.1) - i.start.max(window.0)).max(0.0)).sum();
                let mut gaps = idle_gaps(&busy, window);
                gaps.sort_by(f64::total_cmp);
                DeviceFigures {
                    device,
                    busy_fraction: busy_seconds / seconds,
                    idle_gap_p50_ms: percentile(&gaps, 0.50) * 1e3,
                    idle_gap_p99_ms: percentile(&gaps, 0.99) * 1e3,
                    idle_gap_max_ms: gaps.last().copied().unwrap_or(0.0) * 1e3,
                    idle_gaps: gaps.len(),
                    partitions: finished.iter().filter(|s| s.worker.device == device).count(),
                }
            })
            .collect();
        let device_seconds: Vec<f64> =
            finished.iter().filter_map(|s| device_phase(s, run)).map(|i| i.end - i.start).collect();
        let mean_device_s = mean(&device_seconds);
        let gpu_capacity_per_s = plan.args.devices as f64 / mean_device_s;
        let synthesis_capacity_per_s = plan.synthesis_threads as f64 / mean_synthesis_s;
        let throughput_per_s = finished.len() as f64 / seconds;
        let window_samples: Vec<&QueueSample> = run.samples.iter().filter(|s| in_window(s.at)).collect();
        Self {
            devices,
            throughput_ratio_to_bound: throughput_per_s / gpu_capacity_per_s.min(synthesis_capacity_per_s),
            budget_peak_bytes: run.budget.peak_bytes,
            budget_limit_bytes: run.budget.limit_bytes,
            throughput_per_s,
            gpu_capacity_per_s,
            synthesis_capacity_per_s,
            mean_device_ms: mean_device_s * 1e3,
            mean_synthesis_ms: mean_synthesis_s * 1e3,
            buffer: BufferFigures::new(&window_samples, plan.workers()),
            pacer: pacer_spreads(&window_samples),
            status_served_per_s: run.status_served_per_s,
            worker_time: worker_time_shares(&run.accounts),
            settings: Settings {
                profile: plan.profile.name.into(),
                devices: plan.args.devices,
                workers_per_device: plan.args.workers_per_device,
                synthesis_threads: plan.synthesis_threads,
                finalizer_threads: plan.finalizer_threads,
                time_scale: plan.args.time_scale,
                jitter: plan.args.jitter,
                warmup_s: plan.warmup.as_secs_f64(),
                duration_s: seconds,
                status_load_rps: plan.args.status_load,
                finalizer_stall_ms: plan.args.finalizer_stall_ms,
                pacer_enabled: !plan.args.no_pacer,
            },
        }
    }
}

/// Shares of busy, failed and idle-by-cause time between two account
/// snapshots.
fn worker_time_shares(accounts: &[Vec<WorkerReport>]) -> BTreeMap<String, f64> {
    let [before, after] = accounts else {
        return BTreeMap::new();
    };
    let mut seconds = BTreeMap::<String, f64>::new();
    for (b, a) in before.iter().zip(after) {
        *seconds.entry("busy".into()).or_default() += a.busy_seconds - b.busy_seconds;
        *seconds.entry("failed".into()).or_default() += a.failed_seconds - b.failed_seconds;
        for (cause, idle) in &a.idle_seconds {
            *seconds.entry(cause.to_string()).or_default() += idle - b.idle_seconds[cause];
        }
    }
    let total: f64 = seconds.values().sum();
    if total > 0.0 {
        seconds.values_mut().for_each(|s| *s /= total);
    }
    seconds
}

/// The pacer's numeric fields by name, each while it has a value (the
/// EMAs have none before the first measurement).
fn pacer_numbers(pacer: &PacerStatus) -> [(&'static str, Option<f64>); 6] {
    [
        ("interval_ms", Some(pacer.interval_ms)),
        ("ema_gpu_ms", pacer.ema_gpu_ms),
        ("ema_synthesis_ms", pacer.ema_synthesis_ms),
        ("integral", Some(pacer.integral)),
        ("target_buffer", Some(pacer.target_buffer as f64)),
        ("buffer", Some(pacer.buffer as f64)),
    ]
}

impl BufferFigures {
    fn new(samples: &[&QueueSample], workers: usize) -> Self {
        let queued: Vec<&&QueueSample> = samples.iter().filter(|s| s.waiting_synthesis > 0).collect();
        let excess = samples
            .iter()
            .map(|s| s.waiting_gpu as f64 - s.pacer.target_buffer as f64 - workers as f64)
            .reduce(f64::max);
        Self {
            samples: samples.len(),
            samples_with_work_queued: queued.len(),
            max_waiting_gpu: queued.iter().map(|s| s.waiting_gpu).max().unwrap_or(0),
            drained_while_queued: queued.iter().filter(|s| s.waiting_gpu == 0).count(),
            target: samples.first().map(|s| s.pacer.target_buffer as f64),
            max_excess_over_target_plus_workers: excess,
        }
    }
}

fn pacer_spreads(samples: &[&QueueSample]) -> BTreeMap<String, Spread> {
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for sample in samples {
        for (name, value) in pacer_numbers(&sample.pacer) {
            if let Some(number) = value {
                series.entry(name.to_string()).or_default().push(number);
            }
        }
    }
    series
        .into_iter()
        .map(|(name, mut values)| {
            values.sort_by(f64::total_cmp);
            let spread =
                Spread { min: values[0], p50: percentile(&values, 0.5), max: values[values.len() - 1] };
            (name, spread)
        })
        .collect()
}

impl fmt::Display for SchedulerReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        writeln!(
            f,
            "scheduler benchmark: {}, {} devices x {} workers, {} synthesis / {} finalizer threads, \
             time scale {}, jitter {}",
            s.profile,
            s.devices,
            s.workers_per_device,
            s.synthesis_threads,
            s.finalizer_threads,
            s.time_scale,
            s.jitter
        )?;
        writeln!(
            f,
            "measured {:.1} s after {:.1} s warm-up; status load {}/s; finalizer stall {} ms; pacer {}\n",
            s.duration_s,
            s.warmup_s,
            s.status_load_rps,
            s.finalizer_stall_ms,
            if s.pacer_enabled { "on" } else { "off" }
        )?;
        writeln!(
            f,
            "{:<8} {:>8} {:>12} {:>12} {:>12} {:>6} {:>10}",
            "device", "busy", "gap p50 ms", "gap p99 ms", "gap max ms", "gaps", "partitions"
        )?;
        for d in &self.devices {
            writeln!(
                f,
                "{:<8} {:>7.3}% {:>12.3} {:>12.3} {:>12.3} {:>6} {:>10}",
                d.device,
                100.0 * d.busy_fraction,
                d.idle_gap_p50_ms,
                d.idle_gap_p99_ms,
                d.idle_gap_max_ms,
                d.idle_gaps,
                d.partitions
            )?;
        }
        writeln!(
            f,
            "\nthroughput  {:.2} partitions/s = {:.4} x bound (GPU {:.2}/s from {:.2} ms device time, \
             synthesis {:.2}/s from {:.1} ms)",
            self.throughput_per_s,
            self.throughput_ratio_to_bound,
            self.gpu_capacity_per_s,
            self.mean_device_ms,
            self.synthesis_capacity_per_s,
            self.mean_synthesis_ms
        )?;
        const GIB: f64 = (1u64 << 30) as f64;
        writeln!(
            f,
            "budget      peak {:.1} GiB of {:.1} GiB",
            self.budget_peak_bytes as f64 / GIB,
            self.budget_limit_bytes as f64 / GIB
        )?;
        let b = &self.buffer;
        let target = match (b.target, b.max_excess_over_target_plus_workers) {
            (Some(target), Some(excess)) => {
                format!("target {target}, max excess over target + workers {excess}")
            }
            _ => "no sample in the window".into(),
        };
        writeln!(
            f,
            "buffer      waiting_gpu max {} ({target}); empty while work queued in {} of {} samples",
            b.max_waiting_gpu, b.drained_while_queued, b.samples_with_work_queued
        )?;
        for (name, spread) in &self.pacer {
            writeln!(
                f,
                "pacer       {name:<14} min {:.3}  p50 {:.3}  max {:.3}",
                spread.min, spread.p50, spread.max
            )?;
        }
        if let Some(served) = self.status_served_per_s {
            writeln!(f, "status      {served:.0} requests/s answered")?;
        }
        let shares: Vec<String> =
            self.worker_time.iter().map(|(name, share)| format!("{name} {:.2}%", 100.0 * share)).collect();
        writeln!(f, "worker time {}", shares.join(", "))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(start: f64, end: f64) -> Interval {
        Interval { start, end }
    }

    #[test]
    fn merging_joins_overlapping_device_phases() {
        let merged = merge(vec![interval(3.0, 4.0), interval(0.0, 1.0), interval(0.5, 2.0)]);
        assert_eq!(merged, vec![interval(0.0, 2.0), interval(3.0, 4.0)]);
    }

    #[test]
    fn idle_gaps_cover_the_window_outside_busy_time() {
        let busy = [interval(0.0, 1.0), interval(1.5, 2.0), interval(2.0, 3.5), interval(5.0, 6.0)];
        let gaps = idle_gaps(&busy, (0.5, 4.0));
        assert_eq!(gaps, vec![0.5, 0.5]);
        assert_eq!(idle_gaps(&[], (1.0, 2.0)), vec![1.0]);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 0.5), 50.0);
        assert_eq!(percentile(&sorted, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
    }
}
