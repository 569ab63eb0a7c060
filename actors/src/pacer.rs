//! The pacer: how often the dispatcher may start synthesizing the next
//! partition, so that the buffer of synthesized partitions waiting for a GPU
//! stays near its target instead of draining (idle GPUs) or piling up
//! (memory held for nothing).
//!
//! A PI controller. Feed-forward: an EMA of the GPU time per partition
//! divided by the number of GPU workers, where the time per partition is
//! Δ(sum of worker busy time) / Δ(partitions) between updates: idle time and
//! pipeline fill never enter it. Feedback: the buffer against the target.
//!
//! The buffer answers a release only one synthesis later, and a controller
//! fed the buffer alone oscillates over that delay (measured: interval
//! swinging 0 to 100 ms, buffer 0 to 22, GPUs starving every half second;
//! docs/benchmarks.md). So the feedback acts on the *projected* buffer: the
//! partitions synthesized plus those being synthesized, less the ones the
//! GPUs will take while a synthesis runs (synthesis-time EMA over the
//! feed-forward interval). A release moves it at once, so there is no delay
//! in the loop. Releases also stop outright while the projection exceeds
//! the target by the number of workers.
//!
//! Before the first GPU completion (and again whenever the pipeline runs
//! truly empty) it bootstraps: partitions start freely until the pipeline
//! holds `target + workers`, or as many as there are synthesis slots if
//! those are more. Nothing is measured yet, so a slot left idle saves
//! nothing (the budget still bounds memory), and a kind whose synthesis is
//! many times its GPU stage pays a whole synthesis round for each one: a
//! 32 GiB SnapDeals update (16 partitions, 27 s of synthesis against 1.4 s
//! of GPU) started 6 of them, with 8 slots, and the other 10 only after
//! the first GPU completion (docs/benchmarks.md).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::telemetry;

/// How the pacer is tuned: the `pacer` section of the daemon's configuration.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PacerConfig {
    /// Off: a partition starts as soon as a synthesis slot and the budget allow
    /// it, with no pacing.
    pub enabled: bool,
    /// Synthesized partitions to keep waiting for the GPUs.
    pub target_buffer: usize,
    /// Proportional gain, per partition of buffer error.
    pub kp: f64,
    /// Integral gain, per partition of accumulated error.
    pub ki: f64,
    /// Weight of the newest sample in the GPU-time EMA.
    pub alpha: f64,
    /// |integral| never exceeds this (anti-windup).
    pub integral_limit: f64,
    /// The shortest interval between starts the controller may set.
    pub min_interval_ms: u64,
    /// The longest interval between starts the controller may set, so that a
    /// bad measurement cannot stall synthesis for long.
    pub max_interval_ms: u64,
}

impl Default for PacerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            target_buffer: 4,
            kp: 0.5,
            ki: 0.02,
            alpha: 0.2,
            integral_limit: 25.0,
            min_interval_ms: 0,
            max_interval_ms: 60_000,
        }
    }
}

/// What the pacer says about starting the next partition now.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Start it now.
    Now,
    /// Not before this instant.
    At(Instant),
    /// Not until a GPU completion changes the picture (bootstrap is full).
    Hold,
}

/// The pacer's state as `/v1/status` shows it under `queues.pacer`.
#[derive(Clone, Debug, Serialize)]
pub struct PacerStatus {
    /// Whether pacing is on at all.
    pub enabled: bool,
    /// Whether it is still filling the pipeline before the first GPU completion
    /// (or after the pipeline ran empty), with nothing measured.
    pub bootstrapping: bool,
    /// The interval it now keeps between the starts of two syntheses.
    pub interval_ms: f64,
    /// The smoothed GPU time per partition; absent until a GPU worker finished
    /// one.
    pub ema_gpu_ms: Option<f64>,
    /// The smoothed synthesis time per partition; absent until one was
    /// synthesized.
    pub ema_synthesis_ms: Option<f64>,
    /// The controller's accumulated buffer error, to tell a controller that
    /// winds up from one that settles.
    pub integral: f64,
    /// The buffer it aims for, from the configuration.
    pub target_buffer: usize,
    /// Synthesized partitions waiting for a GPU at the last update.
    pub buffer: usize,
}

/// The controller the dispatcher asks before it starts synthesizing the next
/// partition: a PI loop that keeps the buffer of synthesized partitions near
/// its target (see the module's text).
pub struct Pacer {
    config: PacerConfig,
    /// The GPU workers that drain the buffer: the general lane only. The
    /// critical lane's workers take no bulk partition, so they neither
    /// divide the GPU time per partition nor feed `record_gpu` (the
    /// dispatcher keeps both to the general lane).
    workers: usize,
    /// The bulk synthesis slots (`synthesis_threads`): the bootstrap fills
    /// at least these.
    synthesis_slots: usize,
    busy_sum: Duration,
    busy_count: u64,
    sampled_sum: Duration,
    sampled_count: u64,
    ema_gpu: Option<f64>,
    ema_synthesis: Option<f64>,
    integral: f64,
    interval: Duration,
    next_release: Option<Instant>,
    bootstrapping: bool,
    buffer: usize,
}

impl Pacer {
    /// A pacer that bootstraps, for `workers` general GPU workers and
    /// `synthesis_slots` bulk synthesis slots.
    pub fn new(config: PacerConfig, workers: usize, synthesis_slots: usize) -> Self {
        Self {
            config,
            workers: workers.max(1),
            synthesis_slots,
            busy_sum: Duration::ZERO,
            busy_count: 0,
            sampled_sum: Duration::ZERO,
            sampled_count: 0,
            ema_gpu: None,
            ema_synthesis: None,
            integral: 0.0,
            interval: Duration::ZERO,
            next_release: None,
            bootstrapping: true,
            buffer: 0,
        }
    }

    /// Adds one GPU worker's busy time for one partition.
    pub fn record_gpu(&mut self, busy: Duration) {
        self.busy_sum += busy;
        self.busy_count += 1;
    }

    /// Adds one partition's synthesis time.
    pub fn record_synthesis(&mut self, took: Duration) {
        self.ema_synthesis = Some(self.ema(self.ema_synthesis, took.as_secs_f64()));
    }

    fn ema(&self, previous: Option<f64>, sample: f64) -> f64 {
        match previous {
            Some(ema) => self.config.alpha * sample + (1.0 - self.config.alpha) * ema,
            None => sample,
        }
    }

    /// Seconds between partitions as the GPUs consume them.
    fn consumption_interval(&self) -> Option<f64> {
        self.ema_gpu.map(|ema| ema / self.workers as f64)
    }

    /// Synthesized plus synthesizing partitions, less those the GPUs will
    /// take during one synthesis.
    fn projected_buffer(&self, buffer: usize, synthesizing: usize) -> f64 {
        let draining = match (self.ema_synthesis, self.consumption_interval()) {
            (Some(synthesis), Some(interval)) if interval > 0.0 => synthesis / interval,
            _ => 0.0,
        };
        (buffer + synthesizing) as f64 - draining
    }

    /// Recomputes the interval after GPU completions, given the buffer and
    /// the partitions reserving or being synthesized.
    pub fn update(&mut self, buffer: usize, synthesizing: usize) {
        self.buffer = buffer;
        let count = self.busy_count - self.sampled_count;
        if count == 0 {
            return;
        }
        let per_partition = (self.busy_sum - self.sampled_sum).as_secs_f64() / count as f64;
        self.sampled_sum = self.busy_sum;
        self.sampled_count = self.busy_count;
        self.ema_gpu = Some(self.ema(self.ema_gpu, per_partition));
        self.bootstrapping = false;
        let error = self.projected_buffer(buffer, synthesizing) - self.config.target_buffer as f64;
        let limit = self.config.integral_limit;
        self.integral = (self.integral + error).clamp(-limit, limit);
        let feed_forward = self.consumption_interval().unwrap_or(0.0);
        let factor = (1.0 + self.config.kp * error + self.config.ki * self.integral).max(0.0);
        let seconds = (feed_forward * factor)
            .clamp(self.config.min_interval_ms as f64 / 1e3, self.config.max_interval_ms as f64 / 1e3);
        self.interval = Duration::from_secs_f64(seconds);
        self.emit();
    }

    /// Whether the next partition may start, given the buffer, the
    /// partitions reserving or being synthesized, and those at workers.
    pub fn admit(&self, now: Instant, buffer: usize, synthesizing: usize, at_workers: usize) -> Admission {
        if !self.config.enabled {
            return Admission::Now;
        }
        let ceiling = self.config.target_buffer + self.workers;
        if self.bootstrapping {
            let in_pipeline = buffer + synthesizing + at_workers;
            let fill = ceiling.max(self.synthesis_slots);
            return if in_pipeline < fill { Admission::Now } else { Admission::Hold };
        }
        if self.projected_buffer(buffer, synthesizing) >= ceiling as f64 {
            return Admission::Hold;
        }
        match self.next_release {
            Some(at) if at > now => Admission::At(at),
            _ => Admission::Now,
        }
    }

    /// The dispatcher started a partition at `now`: the next may start one
    /// interval later.
    pub fn released(&mut self, now: Instant) {
        self.next_release = Some(now + self.interval);
    }

    /// Called when nothing is queued, synthesizing, buffered or proving: the
    /// next work bootstraps again (the EMA is kept: it measures the GPUs,
    /// not the load).
    pub fn pipeline_empty(&mut self) {
        if !self.bootstrapping {
            self.bootstrapping = true;
            self.integral = 0.0;
            self.next_release = None;
            self.emit();
        }
    }

    /// The pacer's state, for the dispatcher's queue status.
    pub fn status(&self) -> PacerStatus {
        PacerStatus {
            ema_synthesis_ms: self.ema_synthesis.map(|s| s * 1e3),
            enabled: self.config.enabled,
            bootstrapping: self.bootstrapping,
            interval_ms: self.interval.as_secs_f64() * 1e3,
            ema_gpu_ms: self.ema_gpu.map(|s| s * 1e3),
            integral: self.integral,
            target_buffer: self.config.target_buffer,
            buffer: self.buffer,
        }
    }

    /// Publishes the pacer's state: on every change, and once at start so
    /// that its gauges exist before the first change.
    pub fn emit(&self) {
        telemetry::PacerUpdated {
            interval: self.interval,
            ema_gpu: self.ema_gpu.unwrap_or(0.0),
            integral: self.integral,
            target: self.config.target_buffer,
            bootstrapping: self.bootstrapping,
        }
        .emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer() -> Pacer {
        Pacer::new(PacerConfig::default(), 4, 8)
    }

    /// A pacer that has seen 400 ms of GPU time per partition (100 ms per
    /// partition over 4 workers) and 1 s syntheses: 10 partitions drain
    /// during one synthesis.
    fn measured() -> Pacer {
        let mut p = pacer();
        p.record_synthesis(Duration::from_secs(1));
        p.record_gpu(Duration::from_millis(400));
        p
    }

    #[test]
    fn bootstrap_fills_the_pipeline_up_to_target_plus_workers_then_holds() {
        let p = pacer();
        let now = Instant::now();
        assert_eq!(p.admit(now, 0, 5, 2), Admission::Now);
        assert_eq!(p.admit(now, 2, 4, 2), Admission::Hold);
    }

    #[test]
    fn bootstrap_fills_every_synthesis_slot_when_they_outnumber_target_plus_workers() {
        // SnapDeals' case: 8 slots, target 4 and 2 general workers.
        let p = Pacer::new(PacerConfig::default(), 2, 8);
        let now = Instant::now();
        assert_eq!(p.admit(now, 0, 6, 0), Admission::Now);
        assert_eq!(p.admit(now, 0, 7, 0), Admission::Now);
        assert_eq!(p.admit(now, 0, 8, 0), Admission::Hold);
        // Fewer slots than target plus workers: the old ceiling holds.
        let q = Pacer::new(PacerConfig::default(), 2, 4);
        assert_eq!(q.admit(now, 0, 5, 0), Admission::Now);
        assert_eq!(q.admit(now, 0, 6, 0), Admission::Hold);
    }

    #[test]
    fn feed_forward_is_gpu_time_per_worker_and_ignores_idle_time() {
        let mut p = measured();
        // On target: 4 buffered, 10 in synthesis cover the 10 that drain.
        p.update(4, 10);
        assert!((p.status().interval_ms - 100.0).abs() < 1e-6, "{:?}", p.status());
        // A long idle stretch adds no busy time and no partitions: nothing moves.
        std::thread::sleep(Duration::from_millis(5));
        p.update(4, 10);
        assert!((p.status().interval_ms - 100.0).abs() < 1e-6);
    }

    #[test]
    fn partitions_in_synthesis_count_before_they_reach_the_buffer() {
        let (mut ahead, mut behind) = (measured(), measured());
        // The same empty buffer: one pipeline has syntheses under way, the
        // other none. Only the second must hurry.
        ahead.update(0, 16);
        behind.update(0, 0);
        assert!(ahead.status().interval_ms > 100.0, "{:?}", ahead.status());
        assert!(behind.status().interval_ms < 100.0, "{:?}", behind.status());
        let now = Instant::now();
        assert_eq!(ahead.admit(now, 0, 18, 4), Admission::Hold);
        behind.released(now);
        assert!(matches!(behind.admit(now, 0, 0, 4), Admission::At(_) | Admission::Now));
    }

    #[test]
    fn integral_is_clamped_and_interval_never_negative() {
        let mut p = pacer();
        for _ in 0..1000 {
            p.record_gpu(Duration::from_millis(10));
            p.update(0, 0);
        }
        let s = p.status();
        assert_eq!(s.integral, -PacerConfig::default().integral_limit);
        assert!(s.interval_ms >= 0.0);
    }

    #[test]
    fn an_empty_pipeline_bootstraps_again() {
        let mut p = pacer();
        p.record_gpu(Duration::from_millis(10));
        p.update(4, 0);
        assert!(!p.status().bootstrapping);
        p.pipeline_empty();
        assert!(p.status().bootstrapping);
        assert_eq!(p.status().ema_gpu_ms, Some(10.0));
    }
}
