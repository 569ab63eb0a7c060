//! `cuzk bench scheduler`: how busy the scheduler keeps every GPU. It starts
//! a real daemon on the simulated backend, keeps its queue saturated over
//! HTTP, records every GPU worker span through the tracker, and reports per
//! device the busy fraction and the idle gaps between `device` phases, the
//! throughput against the pipeline's bound, the budget peak, and the buffer
//! and pacer traces (optionally drawn as an SVG chart).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use actix::prelude::*;
use cuzk_actors::budget::GetBudgetStatus;
use cuzk_actors::dispatcher::GetQueueStatus;
use cuzk_actors::pacer::PacerConfig;
use cuzk_actors::worker_monitor::{GetWorkers, SpanFinished, SubscribeSpans, WorkerReport};
use cuzk_kernels::circuits::CircuitRegistry;
use serde::Serialize;
use serde_json::{json, Value};

use crate::config::{BackendKind, Budget, Config, SchedulerConfig, SimConfig};
use crate::server::{self, RunningDaemon};
use crate::sim::SimProfile;

/// Arguments of `cuzk bench scheduler`.
#[derive(clap::Args, Clone, Debug)]
pub struct SchedulerBenchArgs {
    /// Simulated backend profile (porep-32g, winning-post).
    #[arg(long, default_value = "porep-32g")]
    pub profile: String,
    /// Simulated GPU devices.
    #[arg(long, default_value_t = 2)]
    pub devices: usize,
    #[arg(long, default_value_t = 2)]
    pub workers_per_device: usize,
    /// Real seconds measured, after the warm-up.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Multiplies every simulated duration (0.01: a hundred times faster).
    #[arg(long, default_value_t = 0.01)]
    pub time_scale: f64,
    /// Each simulated duration varies uniformly by up to this fraction.
    #[arg(long, default_value_t = 0.1)]
    pub jitter: f64,
    /// Budget in bytes [default: room for every partition a paced pipeline
    /// holds: one per synthesis and finalizer thread, and twice the GPU
    /// workers' running and lookahead partitions].
    #[arg(long)]
    pub budget: Option<u64>,
    /// [default: enough for a synthesis capacity of at least 1.2 times the
    /// GPU demand, from the profile].
    #[arg(long)]
    pub synthesis_threads: Option<usize>,
    /// [default: enough to finalize at least 1.2 times as fast as the GPUs
    /// prove, stall included].
    #[arg(long)]
    pub finalizer_threads: Option<usize>,
    /// GET /v1/status requests per second during the run (0: none).
    #[arg(long, default_value_t = 0.0)]
    pub status_load: f64,
    /// Extra milliseconds every finalization takes (real time, not scaled).
    #[arg(long, default_value_t = 0)]
    pub finalizer_stall_ms: u64,
    /// Seconds of pipeline fill left out of the figures [default: ten
    /// scaled synthesis-plus-GPU times, at least one second].
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Disable the pacer, for comparison: synthesis then starts whenever a
    /// thread and the budget allow.
    #[arg(long)]
    pub no_pacer: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Draw worker and device lanes, the pacer and the buffer to this SVG.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// Required by the targets: synthesis at least 1.2 times GPU demand. The
/// profile's GPU time is all of prove_start, whose device phase is a few
/// percent shorter (host staging), so the margin is larger.
const CAPACITY_MARGIN: f64 = 1.3;
const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// Runs the benchmark and prints the report (JSON or a table).
pub fn run(args: &SchedulerBenchArgs) -> Result<(), String> {
    let report = measure(args)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("the report serializes")
        );
    } else {
        print!("{report}");
    }
    Ok(())
}

/// Runs the benchmark, draws the chart when asked, and returns the figures.
pub fn measure(args: &SchedulerBenchArgs) -> Result<SchedulerReport, String> {
    let plan = Plan::new(args)?;
    let data_dir = ScratchDir::create()?;
    let daemon = server::spawn(plan.config(&data_dir.0), CircuitRegistry::builtin())
        .map_err(|e| e.to_string())?;
    let observed = actix::System::new().block_on(observe(&daemon, &plan));
    let finished = observed.and_then(|run| {
        let synthesis = mean_synthesis_seconds(&daemon.url(), &run.job_ids);
        cancel_jobs(&daemon.url(), &run.job_ids);
        Ok((run, synthesis?))
    });
    daemon.stop();
    let (run, mean_synthesis) = finished?;
    let report = SchedulerReport::new(&plan, &run, mean_synthesis);
    if let Some(path) = &args.svg {
        chart::draw(path, &plan, &run, &report)?;
    }
    Ok(report)
}

/// The settings of one run, defaults resolved.
struct Plan {
    args: SchedulerBenchArgs,
    profile: SimProfile,
    synthesis_threads: usize,
    finalizer_threads: usize,
    budget_bytes: u64,
    /// The feeder submits jobs while fewer partitions wait for synthesis.
    queued_low_water: usize,
    warmup: Duration,
    duration: Duration,
}

impl Plan {
    fn new(args: &SchedulerBenchArgs) -> Result<Self, String> {
        let profile = SimProfile::by_name(&args.profile).ok_or_else(|| {
            format!(
                "unknown profile {:?}; known: {}",
                args.profile,
                SimProfile::NAMES.join(", ")
            )
        })?;
        if args.devices == 0 || args.workers_per_device == 0 {
            return Err("--devices and --workers-per-device must be at least 1".into());
        }
        if !(args.duration > 0.0 && args.duration.is_finite()) {
            return Err(format!(
                "--duration must be positive, got {}",
                args.duration
            ));
        }
        if !(args.status_load >= 0.0 && args.status_load.is_finite()) {
            return Err(format!(
                "--status-load must be 0 or more, got {}",
                args.status_load
            ));
        }
        let scaled = |d: Duration| d.as_secs_f64() * args.time_scale;
        let (gpu_low, gpu_high) = profile.gpu;
        let gpu_demand_per_s = args.devices as f64 / scaled((gpu_low + gpu_high) / 2);
        let synthesis_threads = args.synthesis_threads.unwrap_or_else(|| {
            (CAPACITY_MARGIN * gpu_demand_per_s * scaled(profile.synthesis)).ceil() as usize
        });
        let finalize_s = scaled(profile.finalize) + args.finalizer_stall_ms as f64 / 1e3;
        let finalizer_threads = args.finalizer_threads.unwrap_or_else(|| {
            ((CAPACITY_MARGIN * gpu_demand_per_s * finalize_s).ceil() as usize).max(2)
        });
        let workers = args.devices * args.workers_per_device;
        let lookahead = Config::default().scheduler.gpu_lookahead;
        // Every partition that can hold bytes at once: one per synthesis
        // thread, twice what the workers hold (running and lookahead) for
        // the buffer and the workers, and one per finalizer thread.
        let holders = synthesis_threads + 2 * workers * (1 + lookahead) + finalizer_threads;
        let budget_bytes = args
            .budget
            .unwrap_or(profile.reservation.total() * holders as u64);
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
            Some(seconds) if seconds >= 0.0 && seconds.is_finite() => {
                Duration::from_secs_f64(seconds)
            }
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

    fn config(&self, data_dir: &Path) -> Config {
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
                budget: Budget::Bytes(self.budget_bytes),
                pacer: PacerConfig {
                    enabled: !self.args.no_pacer,
                    ..PacerConfig::default()
                },
                ..SchedulerConfig::default()
            },
            ..Config::default()
        }
    }

    fn workers(&self) -> usize {
        self.args.devices * self.args.workers_per_device
    }

    /// The measured window, in seconds since the run started.
    fn window(&self) -> (f64, f64) {
        let start = self.warmup.as_secs_f64();
        (start, start + self.duration.as_secs_f64())
    }

    /// Time after the window for spans running at its end to report: a
    /// worker may wait for its device's other worker before its own turn.
    fn grace(&self) -> Duration {
        self.profile
            .gpu
            .1
            .mul_f64(2.0 * self.args.time_scale * (1.0 + self.args.jitter))
            + 2 * SAMPLE_INTERVAL
    }

    /// A job of the profile's shape; the feeder gives each its own seed.
    fn job_body(&self) -> Value {
        json!({
            "circuit": "mimc-chain",
            "params": { "log2_constraints": 4 },
            "partitions": self.profile.partitions,
            "priority": self.profile.priority.as_str(),
        })
    }
}

/// A data directory for the daemon, removed when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn create() -> Result<Self, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "cuzk-bench-scheduler-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---- the run ----------------------------------------------------------------

/// Receives a copy of every finished GPU worker span from the tracker.
#[derive(Default)]
struct SpanCollector {
    spans: Vec<SpanFinished>,
}

impl Actor for SpanCollector {
    type Context = Context<Self>;
}

impl Handler<SpanFinished> for SpanCollector {
    type Result = ();

    fn handle(&mut self, span: SpanFinished, _: &mut Context<Self>) {
        self.spans.push(span);
    }
}

#[derive(Message)]
#[rtype(result = "Vec<SpanFinished>")]
struct TakeSpans;

impl Handler<TakeSpans> for SpanCollector {
    type Result = MessageResult<TakeSpans>;

    fn handle(&mut self, _: TakeSpans, _: &mut Context<Self>) -> Self::Result {
        MessageResult(std::mem::take(&mut self.spans))
    }
}

/// One look at the dispatcher's queues.
struct QueueSample {
    /// Seconds since the run started.
    at: f64,
    waiting_synthesis: usize,
    waiting_gpu: usize,
    /// `queues.pacer` as the daemon serializes it, whatever its fields.
    pacer: Option<Value>,
}

/// The latest count of partitions waiting for synthesis, published by the
/// sampler to the thread that submits jobs.
#[derive(Default)]
struct QueueGauge {
    waiting_synthesis: AtomicU64,
    samples: AtomicU64,
}

/// What a run recorded.
struct Run {
    started: Instant,
    spans: Vec<SpanFinished>,
    samples: Vec<QueueSample>,
    job_ids: Vec<String>,
    budget_peak_bytes: u64,
    budget_limit_bytes: u64,
    /// Status requests answered per second, when there was a status load.
    status_served_per_s: Option<f64>,
    /// The worker monitor's accounts at the start and end of the window.
    accounts: Vec<Vec<WorkerReport>>,
}

impl Run {
    fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }
}

async fn observe(daemon: &RunningDaemon, plan: &Plan) -> Result<Run, String> {
    let collector = SpanCollector::default().start();
    daemon
        .system
        .monitor
        .do_send(SubscribeSpans(collector.clone().recipient()));
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let gauge = Arc::new(QueueGauge::default());
    let feeder = {
        let (url, stop, gauge) = (daemon.url(), stop.clone(), gauge.clone());
        let (partitions, low_water) = (plan.profile.partitions as usize, plan.queued_low_water);
        let body = plan.job_body();
        spawn_named("bench-feeder", move || {
            keep_queue_full(&url, body, partitions, low_water, &gauge, &stop)
        })?
    };
    let status_load = match plan.args.status_load {
        rps if rps > 0.0 => {
            let (url, stop) = (daemon.url(), stop.clone());
            Some(spawn_named("bench-status-load", move || {
                Ok(query_status(&url, rps, &stop))
            })?)
        }
        _ => None,
    };

    let collect_until = started + plan.warmup + plan.duration + plan.grace();
    let (window_start, window_end) = plan.window();
    let snapshot_at = [window_start, window_end];
    let mut accounts = Vec::new();
    let mut samples = Vec::new();
    let mut ticks = actix_rt::time::interval(SAMPLE_INTERVAL);
    let sampled = loop {
        ticks.tick().await;
        if Instant::now() >= collect_until {
            break Ok(());
        }
        let due = snapshot_at.get(accounts.len());
        if due.is_some_and(|at| started.elapsed().as_secs_f64() >= *at) {
            match daemon.system.monitor.send(GetWorkers { spans: 0 }).await {
                Ok(reports) => accounts.push(reports),
                Err(e) => break Err(format!("the worker monitor did not answer: {e}")),
            }
        }
        match daemon.system.dispatcher.send(GetQueueStatus).await {
            Ok(queues) => {
                let queues = serde_json::to_value(&queues).expect("queue status serializes");
                let sample = QueueSample {
                    at: started.elapsed().as_secs_f64(),
                    waiting_synthesis: count(&queues["waiting_synthesis"]),
                    waiting_gpu: count(&queues["waiting_gpu"]),
                    pacer: queues.get("pacer").cloned(),
                };
                gauge
                    .waiting_synthesis
                    .store(sample.waiting_synthesis as u64, Ordering::Release);
                gauge.samples.fetch_add(1, Ordering::AcqRel);
                samples.push(sample);
            }
            Err(e) => break Err(format!("the dispatcher did not answer: {e}")),
        }
    };
    stop.store(true, Ordering::Release);
    let job_ids = join(feeder);
    let status_served_per_s = status_load.map(join).transpose()?;
    sampled?;
    let spans = collector
        .send(TakeSpans)
        .await
        .map_err(|e| format!("span collector: {e}"))?;
    let budget = daemon
        .system
        .budget
        .send(GetBudgetStatus)
        .await
        .map_err(|e| format!("budget: {e}"))?;
    Ok(Run {
        started,
        spans,
        samples,
        job_ids: job_ids?,
        budget_peak_bytes: budget.peak_bytes,
        budget_limit_bytes: budget.limit_bytes,
        status_served_per_s,
        accounts,
    })
}

fn count(value: &Value) -> usize {
    value.as_u64().unwrap_or(0) as usize
}

fn spawn_named<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<JoinHandle<Result<T, String>>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map_err(|e| format!("cannot start {name}: {e}"))
}

fn join<T>(handle: JoinHandle<Result<T, String>>) -> Result<T, String> {
    handle
        .join()
        .map_err(|_| "a benchmark thread panicked".to_string())?
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build()
}

/// Submits jobs whenever the last queue sample shows fewer than `low_water`
/// partitions waiting for synthesis, at most once per sample so that jobs
/// in the mail are not counted twice. Returns the ids of all jobs.
fn keep_queue_full(
    url: &str,
    mut body: Value,
    partitions_per_job: usize,
    low_water: usize,
    gauge: &QueueGauge,
    stop: &AtomicBool,
) -> Result<Vec<String>, String> {
    let agent = agent();
    let mut ids = Vec::new();
    let mut seen_sample = u64::MAX;
    while !stop.load(Ordering::Acquire) {
        let sample = gauge.samples.load(Ordering::Acquire);
        if sample != seen_sample {
            seen_sample = sample;
            let waiting = gauge.waiting_synthesis.load(Ordering::Acquire) as usize;
            for _ in 0..low_water
                .saturating_sub(waiting)
                .div_ceil(partitions_per_job)
            {
                body["seed"] = json!(ids.len());
                let job: Value = agent
                    .post(&format!("{url}/v1/jobs"))
                    .send_json(&body)
                    .map_err(|e| format!("submitting a job: {e}"))?
                    .into_json()
                    .map_err(|e| format!("submitting a job: {e}"))?;
                ids.push(
                    job["id"]
                        .as_str()
                        .ok_or("the daemon answered no job id")?
                        .to_string(),
                );
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(ids)
}

/// GET /v1/status at `rps`, paced on a fixed schedule (a late request does
/// not shift the ones after it). Returns the requests answered per second.
fn query_status(url: &str, rps: f64, stop: &AtomicBool) -> f64 {
    let agent = agent();
    let period = Duration::from_secs_f64(1.0 / rps);
    let started = Instant::now();
    let mut next = started;
    let mut answered = 0u64;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > 10 * period {
            // Too far behind to catch up without a burst: start afresh.
            next = now;
        }
        next += period;
        if let Ok(response) = agent.get(&format!("{url}/v1/status")).call() {
            if response.into_string().is_ok() {
                answered += 1;
            }
        }
    }
    answered as f64 / started.elapsed().as_secs_f64()
}

/// Mean seconds of the synthesis stage over every partition synthesized.
fn mean_synthesis_seconds(url: &str, job_ids: &[String]) -> Result<f64, String> {
    let agent = agent();
    let mut total_ms = 0.0;
    let mut partitions = 0usize;
    for id in job_ids {
        let job: Value = agent
            .get(&format!("{url}/v1/jobs/{id}"))
            .call()
            .map_err(|e| format!("fetching job {id}: {e}"))?
            .into_json()
            .map_err(|e| format!("reading job {id}: {e}"))?;
        for partition in job["partitions"].as_array().into_iter().flatten() {
            if let Some(ms) = partition["timings_ms"]["synthesis"].as_f64() {
                total_ms += ms;
                partitions += 1;
            }
        }
    }
    match partitions {
        0 => Err("no partition finished synthesis; is the run too short?".into()),
        n => Ok(total_ms / 1e3 / n as f64),
    }
}

/// Cancels what is still queued so that the daemon winds down quickly.
fn cancel_jobs(url: &str, job_ids: &[String]) {
    let agent = agent();
    for id in job_ids {
        // 409 (already finished) is expected for most of them.
        let _ = agent.post(&format!("{url}/v1/jobs/{id}/cancel")).call();
    }
}

// ---- analysis -----------------------------------------------------------------

/// A closed interval in seconds since the run started.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Interval {
    start: f64,
    end: f64,
}

/// When the span's device phase ran: it starts after the phases before it
/// (host staging, waiting for the device).
fn device_phase(span: &SpanFinished, run: &Run) -> Option<Interval> {
    let position = span.phases.iter().position(|(name, _)| *name == "device")?;
    let before: Duration = span.phases[..position].iter().map(|(_, d)| *d).sum();
    let start = run.seconds(span.start) + before.as_secs_f64();
    Some(Interval {
        start,
        end: start + span.phases[position].1.as_secs_f64(),
    })
}

/// Sorted, overlapping intervals merged: when a device was busy.
fn merge(mut intervals: Vec<Interval>) -> Vec<Interval> {
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
    pub devices: Vec<DeviceFigures>,
    /// Partitions proved per second over the bound min(GPU, synthesis).
    pub throughput_ratio_to_bound: f64,
    pub budget_peak_bytes: u64,
    pub budget_limit_bytes: u64,
    pub throughput_per_s: f64,
    /// Devices over the mean device phase.
    pub gpu_capacity_per_s: f64,
    /// Synthesis threads over the mean synthesis time.
    pub synthesis_capacity_per_s: f64,
    pub mean_device_ms: f64,
    pub mean_synthesis_ms: f64,
    pub buffer: BufferFigures,
    /// min, median and max of every numeric field of `queues.pacer` over the
    /// measured window (empty when the daemon exports no pacer).
    pub pacer: BTreeMap<String, Spread>,
    /// GET /v1/status answered per second (with --status-load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_served_per_s: Option<f64>,
    /// All workers' time in the window as the daemon's monitor accounted
    /// it: `busy` and each idle cause, as fractions summing to 1.
    pub worker_time: BTreeMap<String, f64>,
    pub settings: Settings,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceFigures {
    pub device: usize,
    /// Time in `device` phases over the measured window's length.
    pub busy_fraction: f64,
    pub idle_gap_p50_ms: f64,
    pub idle_gap_p99_ms: f64,
    pub idle_gap_max_ms: f64,
    pub idle_gaps: usize,
    /// Partitions whose span ended in the window.
    pub partitions: usize,
}

/// The queue of synthesized partitions waiting for a GPU worker, sampled
/// every 50 ms over the measured window.
#[derive(Clone, Debug, Serialize)]
pub struct BufferFigures {
    pub samples: usize,
    /// Samples taken while partitions were waiting for synthesis.
    pub samples_with_work_queued: usize,
    /// The most waiting in those samples.
    pub max_waiting_gpu: usize,
    /// Samples with an empty buffer while partitions waited for synthesis.
    pub drained_while_queued: usize,
    /// The pacer's buffer target, when it exports one.
    pub target: Option<f64>,
    /// Largest waiting_gpu - (target + GPU workers); at most 1 is the target.
    pub max_excess_over_target_plus_workers: Option<f64>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    pub min: f64,
    pub p50: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub profile: String,
    pub devices: usize,
    pub workers_per_device: usize,
    pub synthesis_threads: usize,
    pub finalizer_threads: usize,
    pub time_scale: f64,
    pub jitter: f64,
    pub warmup_s: f64,
    pub duration_s: f64,
    pub status_load_rps: f64,
    pub finalizer_stall_ms: u64,
    pub pacer_enabled: bool,
}

impl SchedulerReport {
    fn new(plan: &Plan, run: &Run, mean_synthesis_s: f64) -> Self {
        let window = plan.window();
        let seconds = window.1 - window.0;
        let in_window = |at: f64| at >= window.0 && at <= window.1;
        let finished: Vec<&SpanFinished> = run
            .spans
            .iter()
            .filter(|s| s.ok && in_window(run.seconds(s.end)))
            .collect();
        let devices: Vec<DeviceFigures> = (0..plan.args.devices)
            .map(|device| {
                let busy = merge(
                    run.spans
                        .iter()
                        .filter(|s| s.worker.device == device)
                        .filter_map(|s| device_phase(s, run))
                        .collect(),
                );
                let busy_seconds: f64 = busy
                    .iter()
                    .map(|i| (i.end.min(window.1) - i.start.max(window.0)).max(0.0))
                    .sum();
                let mut gaps = idle_gaps(&busy, window);
                gaps.sort_by(f64::total_cmp);
                DeviceFigures {
                    device,
                    busy_fraction: busy_seconds / seconds,
                    idle_gap_p50_ms: percentile(&gaps, 0.50) * 1e3,
                    idle_gap_p99_ms: percentile(&gaps, 0.99) * 1e3,
                    idle_gap_max_ms: gaps.last().copied().unwrap_or(0.0) * 1e3,
                    idle_gaps: gaps.len(),
                    partitions: finished
                        .iter()
                        .filter(|s| s.worker.device == device)
                        .count(),
                }
            })
            .collect();
        let device_seconds: Vec<f64> = finished
            .iter()
            .filter_map(|s| device_phase(s, run))
            .map(|i| i.end - i.start)
            .collect();
        let mean_device_s = mean(&device_seconds);
        let gpu_capacity_per_s = plan.args.devices as f64 / mean_device_s;
        let synthesis_capacity_per_s = plan.synthesis_threads as f64 / mean_synthesis_s;
        let throughput_per_s = finished.len() as f64 / seconds;
        let window_samples: Vec<&QueueSample> =
            run.samples.iter().filter(|s| in_window(s.at)).collect();
        Self {
            devices,
            throughput_ratio_to_bound: throughput_per_s
                / gpu_capacity_per_s.min(synthesis_capacity_per_s),
            budget_peak_bytes: run.budget_peak_bytes,
            budget_limit_bytes: run.budget_limit_bytes,
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

/// Shares of busy and idle-by-cause time between two account snapshots.
fn worker_time_shares(accounts: &[Vec<WorkerReport>]) -> BTreeMap<String, f64> {
    let [before, after] = accounts else {
        return BTreeMap::new();
    };
    let mut seconds = BTreeMap::<String, f64>::new();
    for (b, a) in before.iter().zip(after) {
        *seconds.entry("busy".into()).or_default() += a.busy_seconds - b.busy_seconds;
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

/// A numeric pacer field by name: `exact` if present, else the first whose
/// name contains `part` (the daemon's field names may change).
fn pacer_field(pacer: &Value, exact: &str, part: &str) -> Option<f64> {
    let fields = pacer.as_object()?;
    fields.get(exact).and_then(Value::as_f64).or_else(|| {
        fields
            .iter()
            .find(|(name, _)| name.contains(part))
            .and_then(|(_, v)| v.as_f64())
    })
}

fn buffer_target(sample: &QueueSample) -> Option<f64> {
    pacer_field(sample.pacer.as_ref()?, "target_buffer", "target")
}

fn pacer_interval_ms(sample: &QueueSample) -> Option<f64> {
    pacer_field(sample.pacer.as_ref()?, "interval_ms", "interval")
}

impl BufferFigures {
    fn new(samples: &[&QueueSample], workers: usize) -> Self {
        let queued: Vec<&&QueueSample> =
            samples.iter().filter(|s| s.waiting_synthesis > 0).collect();
        let excess = samples
            .iter()
            .filter_map(|s| Some(s.waiting_gpu as f64 - buffer_target(s)? - workers as f64))
            .reduce(f64::max);
        Self {
            samples: samples.len(),
            samples_with_work_queued: queued.len(),
            max_waiting_gpu: queued.iter().map(|s| s.waiting_gpu).max().unwrap_or(0),
            drained_while_queued: queued.iter().filter(|s| s.waiting_gpu == 0).count(),
            target: samples.iter().find_map(|s| buffer_target(s)),
            max_excess_over_target_plus_workers: excess,
        }
    }
}

fn pacer_spreads(samples: &[&QueueSample]) -> BTreeMap<String, Spread> {
    let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for pacer in samples.iter().filter_map(|s| s.pacer.as_ref()?.as_object()) {
        for (name, value) in pacer {
            if let Some(number) = value.as_f64() {
                series.entry(name.clone()).or_default().push(number);
            }
        }
    }
    series
        .into_iter()
        .map(|(name, mut values)| {
            values.sort_by(f64::total_cmp);
            let spread = Spread {
                min: values[0],
                p50: percentile(&values, 0.5),
                max: values[values.len() - 1],
            };
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
            s.profile, s.devices, s.workers_per_device, s.synthesis_threads, s.finalizer_threads, s.time_scale, s.jitter
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
            _ => "no pacer target exported".into(),
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
        let shares: Vec<String> = self
            .worker_time
            .iter()
            .map(|(name, share)| format!("{name} {:.2}%", 100.0 * share))
            .collect();
        writeln!(f, "worker time {}", shares.join(", "))?;
        Ok(())
    }
}

// ---- the chart ----------------------------------------------------------------

mod chart {
    use std::path::Path;

    use plotters::prelude::*;

    use super::{
        buffer_target, device_phase, merge, pacer_interval_ms, Interval, Plan, Run, SchedulerReport,
    };

    const WIDTH: u32 = 1400;
    const HEIGHT: u32 = 1200;
    const STAGING: RGBColor = RGBColor(158, 202, 225);
    const DEVICE_PHASE: RGBColor = RGBColor(33, 113, 181);
    const DEVICE_BUSY: RGBColor = RGBColor(49, 163, 84);
    const WARMUP: RGBColor = RGBColor(235, 235, 235);

    /// One row of the lane charts: a name and its busy intervals, each with
    /// its colour.
    struct Lane {
        name: String,
        bars: Vec<(Interval, RGBColor)>,
    }

    /// One line of a line chart: (seconds, value) points.
    struct Series<'a> {
        name: &'a str,
        points: &'a [(f64, f64)],
        colour: RGBColor,
    }

    type Failure = String;

    fn failed(e: impl std::fmt::Display) -> Failure {
        format!("drawing the chart: {e}")
    }

    /// Lanes of every worker (whole span light, device phase dark) and every
    /// device (merged device phases); two views of them (the whole run, and
    /// around the longest idle gap of the measured window); then the pacer
    /// interval and the buffer against its target over time.
    pub(super) fn draw(
        path: &Path,
        plan: &Plan,
        run: &Run,
        report: &SchedulerReport,
    ) -> Result<(), Failure> {
        let lanes = lanes(plan, run);
        let end = plan.window().1;
        let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let title = format!(
            "cuzk bench scheduler: {} on {} devices x {} workers; busy {}",
            plan.profile.name,
            plan.args.devices,
            plan.args.workers_per_device,
            report
                .devices
                .iter()
                .map(|d| format!("{:.2}%", 100.0 * d.busy_fraction))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let root = root.titled(&title, ("sans-serif", 22)).map_err(failed)?;
        let panels = root.split_evenly((4, 1));
        draw_lanes(
            &panels[0],
            "worker and device lanes, whole run (grey: warm-up)",
            &lanes,
            (0.0, end),
            plan,
        )?;
        let zoom = zoom_window(report, run, plan);
        draw_lanes(
            &panels[1],
            "zoom on the measured window's longest device idle gap",
            &lanes,
            zoom,
            plan,
        )?;
        let interval: Vec<(f64, f64)> = run
            .samples
            .iter()
            .filter_map(|s| Some((s.at, pacer_interval_ms(s)?)))
            .collect();
        draw_lines(
            &panels[2],
            "pacer interval (ms)",
            &[Series {
                name: "interval_ms",
                points: &interval,
                colour: RED,
            }],
            end,
            plan,
        )?;
        let waiting: Vec<(f64, f64)> = run
            .samples
            .iter()
            .map(|s| (s.at, s.waiting_gpu as f64))
            .collect();
        let target: Vec<(f64, f64)> = run
            .samples
            .iter()
            .filter_map(|s| Some((s.at, buffer_target(s)?)))
            .collect();
        draw_lines(
            &panels[3],
            "synthesized partitions waiting for a GPU worker",
            &[
                Series {
                    name: "waiting_gpu",
                    points: &waiting,
                    colour: BLUE,
                },
                Series {
                    name: "target",
                    points: &target,
                    colour: BLACK,
                },
            ],
            end,
            plan,
        )?;
        root.present().map_err(failed)
    }

    fn lanes(plan: &Plan, run: &Run) -> Vec<Lane> {
        let mut lanes = Vec::new();
        for device in 0..plan.args.devices {
            for worker in 0..plan.args.workers_per_device {
                let mut bars = Vec::new();
                for span in run
                    .spans
                    .iter()
                    .filter(|s| s.worker.device == device && s.worker.worker == worker)
                {
                    bars.push((
                        Interval {
                            start: run.seconds(span.start),
                            end: run.seconds(span.end),
                        },
                        STAGING,
                    ));
                    bars.extend(device_phase(span, run).map(|phase| (phase, DEVICE_PHASE)));
                }
                lanes.push(Lane {
                    name: format!("gpu{device}/w{worker}"),
                    bars,
                });
            }
            let phases = run
                .spans
                .iter()
                .filter(|s| s.worker.device == device)
                .filter_map(|s| device_phase(s, run));
            let bars = merge(phases.collect())
                .into_iter()
                .map(|i| (i, DEVICE_BUSY))
                .collect();
            lanes.push(Lane {
                name: format!("device {device}"),
                bars,
            });
        }
        lanes
    }

    /// Forty mean device phases around the longest idle gap in the window.
    fn zoom_window(report: &SchedulerReport, run: &Run, plan: &Plan) -> (f64, f64) {
        let (from, to) = plan.window();
        let longest = (0..plan.args.devices)
            .flat_map(|device| {
                let phases = run.spans.iter().filter(move |s| s.worker.device == device);
                let busy = merge(phases.filter_map(|s| device_phase(s, run)).collect());
                busy.windows(2)
                    .map(|pair| (pair[1].start - pair[0].end, pair[0].end))
                    .filter(|(_, at)| *at >= from && *at <= to)
                    .collect::<Vec<_>>()
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let half = 20.0 * report.mean_device_ms / 1e3;
        let centre = longest.map(|(_, at)| at).unwrap_or((from + to) / 2.0);
        ((centre - half).max(0.0), centre + half)
    }

    fn draw_lanes<DB: DrawingBackend>(
        area: &DrawingArea<DB, plotters::coord::Shift>,
        caption: &str,
        lanes: &[Lane],
        (from, to): (f64, f64),
        plan: &Plan,
    ) -> Result<(), Failure> {
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(80)
            .build_cartesian_2d(from..to, (0..lanes.len() as i32).into_segmented())
            .map_err(failed)?;
        let names: Vec<&str> = lanes.iter().map(|l| l.name.as_str()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("seconds since start")
            .y_labels(lanes.len())
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names
                    .get(*i as usize)
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(failed)?;
        let warmup_end = plan.window().0.min(to);
        if warmup_end > from {
            let whole = [
                (from, SegmentValue::Exact(0)),
                (warmup_end, SegmentValue::Exact(lanes.len() as i32)),
            ];
            chart
                .draw_series(std::iter::once(Rectangle::new(whole, WARMUP.filled())))
                .map_err(failed)?;
        }
        for (row, lane) in lanes.iter().enumerate() {
            let row = row as i32;
            let visible = lane
                .bars
                .iter()
                .filter(|(i, _)| i.end > from && i.start < to);
            chart
                .draw_series(visible.map(|(interval, colour)| {
                    let corners = [
                        (interval.start.max(from), SegmentValue::Exact(row)),
                        (interval.end.min(to), SegmentValue::Exact(row + 1)),
                    ];
                    let mut bar = Rectangle::new(corners, colour.filled());
                    bar.set_margin(3, 3, 0, 0);
                    bar
                }))
                .map_err(failed)?;
        }
        Ok(())
    }

    fn draw_lines<DB: DrawingBackend>(
        area: &DrawingArea<DB, plotters::coord::Shift>,
        caption: &str,
        series: &[Series],
        end: f64,
        plan: &Plan,
    ) -> Result<(), Failure> {
        let top = series
            .iter()
            .flat_map(|line| line.points.iter().map(|p| p.1))
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..end, 0.0..top)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .x_desc("seconds since start")
            .draw()
            .map_err(failed)?;
        let warmup = [(0.0, 0.0), (plan.window().0, top)];
        chart
            .draw_series(std::iter::once(Rectangle::new(warmup, WARMUP.filled())))
            .map_err(failed)?;
        for line in series {
            let colour = line.colour;
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(failed)?
                .label(line.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(failed)
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
        let merged = merge(vec![
            interval(3.0, 4.0),
            interval(0.0, 1.0),
            interval(0.5, 2.0),
        ]);
        assert_eq!(merged, vec![interval(0.0, 2.0), interval(3.0, 4.0)]);
    }

    #[test]
    fn idle_gaps_cover_the_window_outside_busy_time() {
        let busy = [
            interval(0.0, 1.0),
            interval(1.5, 2.0),
            interval(2.0, 3.5),
            interval(5.0, 6.0),
        ];
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
