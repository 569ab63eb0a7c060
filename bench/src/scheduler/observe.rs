//! The run: the load generator and the span collector started against a
//! daemon, its queues sampled every 50 ms, the worker monitor's accounts
//! taken at both ends of the measured window, and everything recorded
//! handed to the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use actix::prelude::*;
use cuzk::server::RunningDaemon;
use cuzk_actors::messages::{
    BudgetStatus, GetBudgetStatus, GetQueueStatus, GetWorkers, SpanFinished, SubscribeSpans, WorkerReport,
};
use cuzk_actors::pacer::PacerStatus;

use super::collector::{SpanCollector, TakeSpans};
use super::load::{keep_queue_full, query_status, QueueGauge};
use super::plan::{Plan, SAMPLE_INTERVAL};

/// One look at the dispatcher's queues.
pub(super) struct QueueSample {
    /// Seconds since the run started.
    pub(super) at: f64,
    /// Partitions not yet synthesized: what the feeder keeps up.
    pub(super) waiting_synthesis: usize,
    /// Synthesized partitions no GPU worker has taken: the buffer.
    pub(super) waiting_gpu: usize,
    /// The pacer's state at that moment.
    pub(super) pacer: PacerStatus,
}

/// What a run recorded.
pub(super) struct Run {
    /// When the load began; every time in the report counts from here.
    pub(super) started: Instant,
    /// Every finished GPU worker span, from the collector.
    pub(super) spans: Vec<SpanFinished>,
    /// The queue samples, every `SAMPLE_INTERVAL`.
    pub(super) samples: Vec<QueueSample>,
    /// Every job submitted, for the synthesis times and the cancellations.
    pub(super) job_ids: Vec<String>,
    /// The budget at the end: its peak over the run, and its limit.
    pub(super) budget: BudgetStatus,
    /// Status requests answered per second, when there was a status load.
    pub(super) status_served_per_s: Option<f64>,
    /// The worker monitor's accounts at the start and end of the window.
    pub(super) accounts: Vec<Vec<WorkerReport>>,
}

impl Run {
    pub(super) fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }
}

/// Loads and samples the daemon until the measured window and its grace
/// are over; returns what was recorded.
pub(super) async fn observe(daemon: &RunningDaemon, plan: &Plan) -> Result<Run, String> {
    let collector = SpanCollector::default().start();
    daemon.system.monitor.do_send(SubscribeSpans(collector.clone().recipient()));
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
            Some(spawn_named("bench-status-load", move || Ok(query_status(&url, rps, &stop)))?)
        }
        _ => None,
    };

    let collect_until = started + plan.warmup + plan.duration + plan.grace();
    let (window_start, window_end) = plan.window();
    let snapshot_at = [window_start, window_end];
    let mut accounts = Vec::new();
    let mut samples = Vec::new();
    let mut ticks = actix::clock::interval(SAMPLE_INTERVAL);
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
                let sample = QueueSample {
                    at: started.elapsed().as_secs_f64(),
                    waiting_synthesis: queues.waiting_synthesis,
                    waiting_gpu: queues.waiting_gpu,
                    pacer: queues.pacer,
                };
                gauge.waiting_synthesis.store(sample.waiting_synthesis as u64, Ordering::Release);
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
    let spans = collector.send(TakeSpans).await.map_err(|e| format!("span collector: {e}"))?;
    let budget = daemon.system.budget.send(GetBudgetStatus).await.map_err(|e| format!("budget: {e}"))?;
    Ok(Run { started, spans, samples, job_ids: job_ids?, budget, status_served_per_s, accounts })
}

fn spawn_named<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<JoinHandle<Result<T, String>>, String> {
    std::thread::Builder::new().name(name.into()).spawn(body).map_err(|e| format!("cannot start {name}: {e}"))
}

fn join<T>(handle: JoinHandle<Result<T, String>>) -> Result<T, String> {
    handle.join().map_err(|_| "a benchmark thread panicked".to_string())?
}
