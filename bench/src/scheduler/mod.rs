//! `cuzk-bench scheduler`: how busy the scheduler keeps every GPU. It starts
//! a real daemon on the simulated backend, keeps its queue saturated over
//! HTTP, records every GPU worker span through the worker monitor, and
//! reports per device the busy fraction and the idle gaps between `device`
//! phases, the throughput against the pipeline's bound, the budget peak,
//! and the buffer and pacer traces (optionally drawn as an SVG chart).
//! docs/scheduler-bench.md says how it measures.
//!
//! `plan` resolves the settings, `observe` runs and samples the daemon with
//! the `load` generator and the span `collector` beside it, `report` turns
//! what was recorded into figures, `chart` draws them.

mod chart;
mod collector;
mod load;
mod observe;
pub(crate) mod plan;
mod report;

use std::path::PathBuf;

use cuzk::server;
use cuzk_kernels::circuits::CircuitRegistry;

pub use report::{BufferFigures, DeviceFigures, SchedulerReport, Settings, Spread};

/// Arguments of `cuzk-bench scheduler`.
#[derive(clap::Args, Clone, Debug)]
pub struct SchedulerBenchArgs {
    /// Simulated backend profile (porep-32g, winning-post).
    #[arg(long, default_value = "porep-32g")]
    pub profile: String,
    /// Simulated GPU devices.
    #[arg(long, default_value_t = 2)]
    pub devices: usize,
    /// General GPU workers per simulated device.
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

/// Runs the benchmark and prints the report (JSON or a table).
pub fn run(args: &SchedulerBenchArgs) -> Result<(), String> {
    let report = measure(args)?;
    if args.json {
        println!("{}", serde_json::to_string(&report).expect("the report serializes"));
    } else {
        print!("{report}");
    }
    Ok(())
}

/// Runs the benchmark, draws the chart when asked, and returns the figures.
pub fn measure(args: &SchedulerBenchArgs) -> Result<SchedulerReport, String> {
    let plan = plan::Plan::new(args)?;
    let data_dir = tempfile::Builder::new()
        .prefix("cuzk-bench-scheduler-")
        .tempdir()
        .map_err(|e| format!("cannot create the daemon's data directory: {e}"))?;
    let daemon =
        server::spawn(plan.config(data_dir.path()), CircuitRegistry::builtin()).map_err(|e| e.to_string())?;
    let observed = actix::System::new().block_on(observe::observe(&daemon, &plan));
    let finished = observed.and_then(|run| {
        let synthesis = load::mean_synthesis_seconds(&daemon.url(), &run.job_ids);
        load::cancel_jobs(&daemon.url(), &run.job_ids);
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
