//! A GpuWorker: one actor on its own OS thread, bound to one device. It runs
//! prove_start and reports by fire-and-forget messages only: it never waits
//! for the tracker, the monitor, the budget or the finalizer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use crate::backend::{run_stage, Backend};
use crate::messages::{
    Finalize, HandOverDropped, PartitionFailed, Progress, ProvePartition, Release, SpanFinished, SpanReport,
    SpanStarted, TrackerPort, WorkerDone,
};
use crate::model::{Stage, WorkerId};
use crate::telemetry;

/// The running partition plus lookahead; the dispatcher never sends more.
pub const MAILBOX_CAPACITY: usize = 16;

/// One GPU worker: it runs prove_start for the partitions the dispatcher hands
/// it, one at a time, and passes each on to the finalizers.
pub struct GpuWorker {
    /// Which device it proves on (passed to prove_start) and how it is named in
    /// spans, metrics and `/v1/workers`.
    pub id: WorkerId,
    /// This worker's index in the dispatcher's worker list.
    pub slot: usize,
    /// The backend whose prove_start this worker runs.
    pub backend: Arc<dyn Backend>,
    /// The tracker: WaitingFinalizer and failed attempts.
    pub tracker: TrackerPort,
    /// Who hears of every span, started and finished: the monitor (time
    /// accounting) and the tracker (the partition's stage and phases).
    pub spans: Vec<Recipient<SpanReport>>,
    /// The monitor: a handed-over partition dropped unstarted.
    pub dropped: Recipient<HandOverDropped>,
    /// The dispatcher: this worker can take another partition.
    pub done: Recipient<WorkerDone>,
    /// The budget: a, b and c after prove_start, everything on failure.
    pub release: Recipient<Release>,
    /// The finalizers: a proved partition's next stage.
    pub finalizer: Recipient<Finalize>,
    /// When the last partition ended (or the worker started).
    pub free_since: Instant,
}

impl GpuWorker {
    /// One report, to every subscriber, in the order they were wired.
    fn publish(&self, report: SpanReport) {
        for subscriber in &self.spans {
            subscriber.do_send(report.clone());
        }
    }
}

impl Actor for GpuWorker {
    type Context = Context<Self>;
}

/// Run under an actix Supervisor: stopping after a panic restarts the
/// worker on the same mailbox, so partitions handed to it are kept.
impl Supervised for GpuWorker {
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.free_since = Instant::now();
    }
}

impl Handler<ProvePartition> for GpuWorker {
    type Result = ();

    fn handle(&mut self, msg: ProvePartition, ctx: &mut Context<Self>) {
        let key = msg.job.key(msg.index);
        if msg.job.is_abandoned() {
            self.dropped.do_send(HandOverDropped { worker: self.id, at: Instant::now() });
            self.done.do_send(WorkerDone { slot: self.slot, busy: None });
            self.release.do_send(Release { key, bytes: None });
            return;
        }
        let partition = key.to_string();
        telemetry::GpuSpanStarted { worker: self.id, partition: &partition }.emit();
        let start = Instant::now();
        let waited = start.saturating_duration_since(msg.handed_at.max(self.free_since));
        self.publish(SpanReport::Started(SpanStarted { worker: self.id, key: key.clone(), at: start }));
        let queued_before = runqueue_wait();
        let result = run_stage("prove_start", || {
            self.backend.prove_start(self.id.device, &msg.job, msg.index, msg.input)
        });
        let proved = Instant::now();
        let cpu_wait = queued_before.zip(runqueue_wait()).map(|(before, after)| after.saturating_sub(before));
        // Hand the results on before the span ends: the hand-off is part of
        // the worker's busy time.
        let (ok, mut phases, device_active) = match result {
            Ok(started) => {
                self.release.do_send(Release { key: key.clone(), bytes: Some(started.freed_bytes) });
                // Before the finalizer can report Finalizing.
                self.tracker.progress.do_send(Progress {
                    key: key.clone(),
                    stage: Stage::WaitingFinalizer,
                    at: proved,
                });
                self.finalizer.do_send(Finalize { job: msg.job, index: msg.index, input: started.payload });
                (true, started.phases, started.device_active)
            }
            Err(error) => {
                self.release.do_send(Release { key: key.clone(), bytes: None });
                if error.panicked() {
                    telemetry::ActorRestarted { actor: "gpu_worker", error: &error.to_string() }.emit();
                    ctx.stop();
                }
                self.tracker.failed.do_send(PartitionFailed { key: key.clone(), error });
                (false, Vec::new(), None)
            }
        };
        // Not a step of its own: how much of the stage so far this thread
        // was ready to run with no CPU to run on (a host busy with
        // synthesis delays the GPU's feeding, the phases above by as much).
        phases.extend(cpu_wait.map(|wait| ("cpu_wait", wait)));
        let end = Instant::now();
        phases.push(("handoff", end - proved));
        self.free_since = end;
        self.done.do_send(WorkerDone { slot: self.slot, busy: ok.then(|| end - start) });
        telemetry::GpuSpanFinished {
            worker: self.id,
            partition: &partition,
            busy: end - start,
            waited,
            phases: &phases,
            device_active,
        }
        .emit();
        self.publish(SpanReport::Finished(SpanFinished {
            worker: self.id,
            key,
            start,
            end,
            waited,
            phases,
            ok,
        }));
    }
}

/// How long this thread has waited, runnable, for a CPU since it started:
/// the second field of Linux's /proc/thread-self/schedstat. None where the
/// kernel does not keep it (other systems, schedstats off).
fn runqueue_wait() -> Option<Duration> {
    parse_runqueue_wait(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

/// The run-queue wait of a schedstat line: "cpu_ns wait_ns timeslices".
fn parse_runqueue_wait(schedstat: &str) -> Option<Duration> {
    let mut fields = schedstat.split_whitespace();
    let (_on_cpu, waited) = (fields.next()?, fields.next()?);
    waited.parse().ok().map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_run_queue_wait_of_a_schedstat_line() {
        assert_eq!(parse_runqueue_wait("84010232 2500000001 67\n"), Some(Duration::new(2, 500_000_001)));
        assert_eq!(parse_runqueue_wait("84010232\n"), None);
        assert_eq!(parse_runqueue_wait("84010232 -5 1"), None);
    }

    #[test]
    fn this_thread_waits_no_less_over_time() {
        // On Linux with schedstats the wait is there and never decreases.
        if let Some(before) = runqueue_wait() {
            std::thread::yield_now();
            assert!(runqueue_wait().expect("read again") >= before);
        }
    }
}
