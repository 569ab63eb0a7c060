//! A GpuWorker: one actor on its own OS thread, bound to one device. It runs
//! prove_start and reports by fire-and-forget messages only: it never waits
//! for the tracker, the monitor, the budget or the finalizer.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::{run_stage, Backend, Payload};
use crate::budget::{BudgetManager, Release};
use crate::dispatcher::{Dispatcher, WorkerDone};
use crate::finalizer::{Finalize, Finalizer};
use crate::model::{JobSpec, Stage, WorkerId};
use crate::telemetry;
use crate::tracker::{PartitionFailed, Progress, Tracker};
use crate::worker_monitor::{HandOverDropped, SpanFinished, SpanStarted, WorkerMonitor};

/// The running partition plus lookahead; the dispatcher never sends more.
pub const MAILBOX_CAPACITY: usize = 16;

pub struct GpuWorker {
    pub id: WorkerId,
    /// This worker's index in the dispatcher's worker list.
    pub slot: usize,
    pub backend: Arc<dyn Backend>,
    pub tracker: Addr<Tracker>,
    pub monitor: Addr<WorkerMonitor>,
    pub dispatcher: Addr<Dispatcher>,
    pub budget: Addr<BudgetManager>,
    pub finalizer: Addr<Finalizer>,
    /// When the last partition ended (or the worker started).
    pub free_since: Instant,
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

#[derive(Message)]
#[rtype(result = "()")]
pub struct ProvePartition {
    pub job: Arc<JobSpec>,
    pub index: u32,
    pub input: Payload,
    /// When the dispatcher put it in this worker's mailbox.
    pub handed_at: Instant,
}

impl Handler<ProvePartition> for GpuWorker {
    type Result = ();

    fn handle(&mut self, msg: ProvePartition, ctx: &mut Context<Self>) {
        let key = msg.job.key(msg.index);
        if msg.job.is_abandoned() {
            self.monitor.do_send(HandOverDropped {
                worker: self.id,
                at: Instant::now(),
            });
            self.dispatcher.do_send(WorkerDone {
                slot: self.slot,
                busy: None,
            });
            self.budget.do_send(Release { key, bytes: None });
            return;
        }
        let partition = key.to_string();
        telemetry::GpuSpanStarted { worker: self.id, partition: &partition }.emit();
        let start = Instant::now();
        let waited = start.saturating_duration_since(msg.handed_at.max(self.free_since));
        let started = SpanStarted {
            worker: self.id,
            key: key.clone(),
            at: start,
        };
        self.monitor.do_send(started.clone());
        self.tracker.do_send(started);
        let result = run_stage("prove_start", || {
            self.backend
                .prove_start(self.id.device, &msg.job, msg.index, msg.input)
        });
        let proved = Instant::now();
        // Hand the results on before the span ends: the hand-off is part of
        // the worker's busy time.
        let (ok, mut phases) = match result {
            Ok(started) => {
                self.budget.do_send(Release {
                    key: key.clone(),
                    bytes: Some(started.freed_bytes),
                });
                // Before the finalizer can report Finalizing.
                self.tracker.do_send(Progress {
                    key: key.clone(),
                    stage: Stage::WaitingFinalizer,
                    at: proved,
                });
                self.finalizer.do_send(Finalize {
                    job: msg.job,
                    index: msg.index,
                    input: started.payload,
                });
                (true, started.phases)
            }
            Err(failure) => {
                self.budget.do_send(Release {
                    key: key.clone(),
                    bytes: None,
                });
                if failure.panicked {
                    telemetry::ActorRestarted { actor: "gpu_worker", error: &failure.error }.emit();
                    ctx.stop();
                }
                self.tracker.do_send(PartitionFailed {
                    key: key.clone(),
                    error: failure.error,
                    retry: true,
                });
                (false, Vec::new())
            }
        };
        let end = Instant::now();
        phases.push(("handoff", end - proved));
        self.free_since = end;
        self.dispatcher.do_send(WorkerDone {
            slot: self.slot,
            busy: ok.then(|| end - start),
        });
        telemetry::GpuSpanFinished {
            worker: self.id,
            partition: &partition,
            busy: end - start,
            waited,
            phases: &phases,
        }
        .emit();
        let finished = SpanFinished {
            worker: self.id,
            key,
            start,
            end,
            waited,
            phases,
            ok,
        };
        self.tracker.do_send(finished.clone());
        self.monitor.do_send(finished);
    }
}
