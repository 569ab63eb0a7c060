//! The pacer: how often the dispatcher may start synthesizing the next
//! partition, so that the buffer of synthesized partitions waiting for a GPU
//! stays near its target instead of draining (idle GPUs) or piling up
//! (memory held for nothing).
//!
//! A PI controller. Feed-forward: an EMA of the GPU time per partition
//! divided by the number of GPU workers, where the time per partition is
//! Δ(sum of worker busy time) / Δ(partitions) between updates: idle time and
//! pipeline fill never enter it. Feedback: the buffer depth against the
//! target. Before the first GPU completion (and again whenever the pipeline
//! runs truly empty) it bootstraps: partitions start freely until the
//! pipeline holds `target + workers`, which no later synthesis can overshoot.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::telemetry;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PacerConfig {
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
    pub min_interval_ms: u64,
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
    Now,
    /// Not before this instant.
    At(Instant),
    /// Not until a GPU completion changes the picture (bootstrap is full).
    Hold,
}

#[derive(Clone, Debug, Serialize)]
pub struct PacerStatus {
    pub enabled: bool,
    pub bootstrapping: bool,
    pub interval_ms: f64,
    pub ema_gpu_ms: Option<f64>,
    pub integral: f64,
    pub target_buffer: usize,
    pub buffer: usize,
}

pub struct Pacer {
    config: PacerConfig,
    workers: usize,
    busy_sum: Duration,
    busy_count: u64,
    sampled_sum: Duration,
    sampled_count: u64,
    ema_gpu: Option<f64>,
    integral: f64,
    interval: Duration,
    next_release: Option<Instant>,
    bootstrapping: bool,
    buffer: usize,
}

impl Pacer {
    pub fn new(config: PacerConfig, workers: usize) -> Self {
        Self {
            config,
            workers: workers.max(1),
            busy_sum: Duration::ZERO,
            busy_count: 0,
            sampled_sum: Duration::ZERO,
            sampled_count: 0,
            ema_gpu: None,
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

    /// Recomputes the interval after GPU completions, given the buffer depth.
    pub fn update(&mut self, buffer: usize) {
        self.buffer = buffer;
        let count = self.busy_count - self.sampled_count;
        if count == 0 {
            return;
        }
        let per_partition = (self.busy_sum - self.sampled_sum).as_secs_f64() / count as f64;
        self.sampled_sum = self.busy_sum;
        self.sampled_count = self.busy_count;
        let alpha = self.config.alpha;
        let ema = match self.ema_gpu {
            Some(ema) => alpha * per_partition + (1.0 - alpha) * ema,
            None => per_partition,
        };
        self.ema_gpu = Some(ema);
        self.bootstrapping = false;
        let error = buffer as f64 - self.config.target_buffer as f64;
        let limit = self.config.integral_limit;
        self.integral = (self.integral + error).clamp(-limit, limit);
        let feed_forward = ema / self.workers as f64;
        let factor = (1.0 + self.config.kp * error + self.config.ki * self.integral).max(0.0);
        let seconds = (feed_forward * factor).clamp(
            self.config.min_interval_ms as f64 / 1e3,
            self.config.max_interval_ms as f64 / 1e3,
        );
        self.interval = Duration::from_secs_f64(seconds);
        self.emit();
    }

    /// Whether the next partition may start; `in_pipeline` counts partitions
    /// reserving, synthesizing, synthesized or at a worker.
    pub fn admit(&self, now: Instant, in_pipeline: usize) -> Admission {
        if !self.config.enabled {
            return Admission::Now;
        }
        if self.bootstrapping {
            return if in_pipeline < self.config.target_buffer + self.workers {
                Admission::Now
            } else {
                Admission::Hold
            };
        }
        match self.next_release {
            Some(at) if at > now => Admission::At(at),
            _ => Admission::Now,
        }
    }

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

    pub fn status(&self) -> PacerStatus {
        PacerStatus {
            enabled: self.config.enabled,
            bootstrapping: self.bootstrapping,
            interval_ms: self.interval.as_secs_f64() * 1e3,
            ema_gpu_ms: self.ema_gpu.map(|s| s * 1e3),
            integral: self.integral,
            target_buffer: self.config.target_buffer,
            buffer: self.buffer,
        }
    }

    fn emit(&self) {
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
        Pacer::new(PacerConfig::default(), 4)
    }

    #[test]
    fn bootstrap_fills_the_pipeline_up_to_target_plus_workers_then_holds() {
        let p = pacer();
        let now = Instant::now();
        assert_eq!(p.admit(now, 7), Admission::Now);
        assert_eq!(p.admit(now, 8), Admission::Hold);
    }

    #[test]
    fn feed_forward_is_gpu_time_per_worker_and_ignores_idle_time() {
        let mut p = pacer();
        for _ in 0..4 {
            p.record_gpu(Duration::from_millis(400));
        }
        p.update(4); // buffer on target: no feedback
        assert!(
            (p.status().interval_ms - 100.0).abs() < 1e-6,
            "{:?}",
            p.status()
        );
        // A long idle stretch adds no busy time and no partitions: nothing moves.
        std::thread::sleep(Duration::from_millis(5));
        p.update(4);
        assert!((p.status().interval_ms - 100.0).abs() < 1e-6);
    }

    #[test]
    fn a_full_buffer_slows_releases_and_an_empty_one_speeds_them_up() {
        let mut full = pacer();
        let mut empty = pacer();
        for p in [&mut full, &mut empty] {
            p.record_gpu(Duration::from_millis(400));
        }
        full.update(8);
        empty.update(1);
        assert!(full.status().interval_ms > 100.0);
        assert!(empty.status().interval_ms < 100.0);
        let now = Instant::now();
        full.released(now);
        assert!(matches!(full.admit(now, 100), Admission::At(at) if at > now));
    }

    #[test]
    fn integral_is_clamped_and_interval_never_negative() {
        let mut p = pacer();
        for _ in 0..1000 {
            p.record_gpu(Duration::from_millis(10));
            p.update(0);
        }
        let s = p.status();
        assert_eq!(s.integral, -PacerConfig::default().integral_limit);
        assert!(s.interval_ms >= 0.0);
    }

    #[test]
    fn an_empty_pipeline_bootstraps_again() {
        let mut p = pacer();
        p.record_gpu(Duration::from_millis(10));
        p.update(4);
        assert!(!p.status().bootstrapping);
        p.pipeline_empty();
        assert!(p.status().bootstrapping);
        assert_eq!(p.status().ema_gpu_ms, Some(10.0));
    }
}
