//! One run's settings, defaults resolved from the profile: threads, budget,
//! warm-up, and the daemon configuration they make.

use std::path::Path;
use std::time::Duration;

use cuzk::config::{BackendKind, Budget, Config, SchedulerConfig, SimConfig};
use cuzk::sim::SimProfile;
use cuzk_actors::pacer::PacerConfig;
use serde_json::{json, Value};

use super::SchedulerBenchArgs;

/// Required by the targets: synthesis at least 1.2 times GPU demand. The
/// profile's GPU time is all of prove_start, whose device phase is a few
/// percent shorter (host staging), so the margin is larger.
const CAPACITY_MARGIN: f64 = 1.3;
pub(super) const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// The settings of one run, defaults resolved.
pub(crate) struct Plan {
    /// The command line as given.
    pub(super) args: SchedulerBenchArgs,
    /// The simulated backend's durations and reservation.
    pub(super) profile: SimProfile,
    /// `--synthesis-threads`, or enough to outrun the GPUs.
    pub(crate) synthesis_threads: usize,
    /// `--finalizer-threads`, or enough to keep up with the GPUs.
    pub(super) finalizer_threads: usize,
    /// `--budget`, or room for every partition the pipeline holds.
    pub(super) budget_bytes: u64,
    /// The feeder submits jobs while fewer partitions wait for synthesis.
    pub(super) queued_low_water: usize,
    /// Pipeline fill left out of the figures.
    pub(crate) warmup: Duration,
    /// The measured window's length.
    pub(crate) duration: Duration,
}

impl Plan {
    pub(crate) fn new(args: &SchedulerBenchArgs) -> Result<Self, String> {
        let profile = SimProfile::by_name(&args.profile).map_err(|e| e.to_string())?;
        if args.devices == 0 || args.workers_per_device == 0 {
            return Err("--devices and --workers-per-device must be at least 1".into());
        }
        if !(args.duration > 0.0 && args.duration.is_finite()) {
            return Err(format!("--duration must be positive, got {}", args.duration));
        }
        if !(args.status_load >= 0.0 && args.status_load.is_finite()) {
            return Err(format!("--status-load must be 0 or more, got {}", args.status_load));
        }
        let scaled = |d: Duration| d.as_secs_f64() * args.time_scale;
        let (gpu_low, gpu_high) = profile.gpu;
        let gpu_demand_per_s = args.devices as f64 / scaled((gpu_low + gpu_high) / 2);
        let synthesis_threads = args.synthesis_threads.unwrap_or_else(|| {
            (CAPACITY_MARGIN * gpu_demand_per_s * scaled(profile.synthesis)).ceil() as usize
        });
        let finalize_s = scaled(profile.finalize) + args.finalizer_stall_ms as f64 / 1e3;
        let finalizer_threads = args
            .finalizer_threads
            .unwrap_or_else(|| ((CAPACITY_MARGIN * gpu_demand_per_s * finalize_s).ceil() as usize).max(2));
        let workers = args.devices * args.workers_per_device;
        let lookahead = Config::default().scheduler.gpu_lookahead;
        // Every partition that can hold bytes at once: one per synthesis
        // thread, twice what the workers hold (running and lookahead) for
        // the buffer and the workers, and one per finalizer thread.
        let holders = synthesis_threads + 2 * workers * (1 + lookahead) + finalizer_threads;
        let budget_bytes = args.budget.unwrap_or(profile.reservation.total() * holders as u64);
        // Enough that neither every synthesis thread starting at once nor
        // two sample intervals of GPU demand can empty the queue.
        let queued_low_water = [
            2 * synthesis_threads,
            2 * profile.partitions as usize,
            (2.0 * gpu_demand_per_s * SAMPLE_INTERVAL.as_secs_f64()).ceil() as usize,
        ]
        .into_iter()
        .max()
        .expect("three candidates");
        let warmup = match args.warmup {
            Some(seconds) if seconds >= 0.0 && seconds.is_finite() => Duration::from_secs_f64(seconds),
            Some(seconds) => return Err(format!("--warmup must be 0 or more, got {seconds}")),
            None => Duration::from_secs_f64((10.0 * scaled(profile.synthesis + gpu_high)).max(1.0)),
        };
        Ok(Self {
            args: args.clone(),
            profile,
            synthesis_threads,
            finalizer_threads,
            budget_bytes,
            queued_low_water,
            warmup,
            duration: Duration::from_secs_f64(args.duration),
        })
    }

    pub(crate) fn config(&self, data_dir: &Path) -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            data_dir: data_dir.to_path_buf(),
            backend: BackendKind::Sim,
            sim: SimConfig {
                profile: self.profile.name.into(),
                time_scale: self.args.time_scale,
                jitter: self.args.jitter,
                devices: self.args.devices,
                finalizer_stall_ms: self.args.finalizer_stall_ms,
                ..SimConfig::default()
            },
            scheduler: SchedulerConfig {
                synthesis_threads: self.synthesis_threads,
                finalizer_threads: self.finalizer_threads,
                workers_per_device: self.args.workers_per_device,
                // The workers are the plan's (`--workers-per-device`): no
                // critical lane, so the figures (a critical profile's too)
                // stay comparable with runs from before it existed.
                critical_workers_per_device: 0,
                budget: Budget::Bytes(self.budget_bytes),
                pacer: PacerConfig { enabled: !self.args.no_pacer, ..PacerConfig::default() },
                ..SchedulerConfig::default()
            },
            ..Config::default()
        }
    }

    pub(super) fn workers(&self) -> usize {
        self.args.devices * self.args.workers_per_device
    }

    /// The measured window, in seconds since the run started.
    pub(super) fn window(&self) -> (f64, f64) {
        let start = self.warmup.as_secs_f64();
        (start, start + self.duration.as_secs_f64())
    }

    /// Time after the window for spans running at its end to report: a
    /// worker may wait for its device's other worker before its own turn.
    pub(super) fn grace(&self) -> Duration {
        self.profile.gpu.1.mul_f64(2.0 * self.args.time_scale * (1.0 + self.args.jitter))
            + 2 * SAMPLE_INTERVAL
    }

    /// A job of the profile's shape; the feeder gives each its own seed.
    pub(crate) fn job_body(&self) -> Value {
        json!({
            "circuit": "mimc-chain",
            "params": { "log2_constraints": 4 },
            "partitions": self.profile.partitions,
            "priority": self.profile.priority.as_str(),
        })
    }
}
