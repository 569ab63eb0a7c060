//! A GpuWorker: one actor on its own OS thread, bound to one device. It runs
//! prove_start and reports by fire-and-forget messages only: it never waits
//! for the tracker, the budget or the finalizer.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::{run_stage, Backend, Payload};
use crate::budget::{BudgetManager, Release};
use crate::dispatcher::{Dispatcher, WorkerDone};
use crate::finalizer::{Finalize, Finalizer};
use crate::model::{JobSpec, WorkerId};
use crate::telemetry;
use crate::tracker::{PartitionFailed, SpanFinished, SpanStarted, Tracker};

/// The running partition plus lookahead; the dispatcher never sends more.
pub const MAILBOX_CAPACITY: usize = 16;

pub struct GpuWorker {
    pub id: WorkerId,
    /// This worker's index in the dispatcher's worker list.
    pub slot: usize,
    pub backend: Arc<dyn Backend>,
    pub tracker: Addr<Tracker>,
    pub dispatcher: Addr<Dispatcher>,
    pub budget: Addr<BudgetManager>,
    pub finalizer: Addr<Finalizer>,
}

impl Actor for GpuWorker {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct ProvePartition {
    pub job: Arc<JobSpec>,
    pub index: u32,
    pub input: Payload,
}

impl Handler<ProvePartition> for GpuWorker {
    type Result = ();

    fn handle(&mut self, msg: ProvePartition, _: &mut Context<Self>) {
        let key = msg.job.key(msg.index);
        if msg.job.is_abandoned() {
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
        self.tracker.do_send(SpanStarted {
            worker: self.id,
            key: key.clone(),
            at: start,
        });
        let result = run_stage("prove_start", || {
            self.backend
                .prove_start(self.id.device, &msg.job, msg.index, msg.input)
        });
        let end = Instant::now();
        let busy = result.is_ok().then(|| end - start);
        self.dispatcher.do_send(WorkerDone {
            slot: self.slot,
            busy,
        });
        match result {
            Ok(started) => {
                self.budget.do_send(Release {
                    key: key.clone(),
                    bytes: Some(started.freed_bytes),
                });
                telemetry::GpuSpanFinished {
                    worker: self.id,
                    partition: &partition,
                    busy: end - start,
                    phases: &started.phases,
                }
                .emit();
                self.tracker.do_send(SpanFinished {
                    worker: self.id,
                    key,
                    start,
                    end,
                    phases: started.phases,
                    ok: true,
                });
                self.finalizer.do_send(Finalize {
                    job: msg.job,
                    index: msg.index,
                    input: started.payload,
                });
            }
            Err(error) => {
                telemetry::GpuSpanFinished {
                    worker: self.id,
                    partition: &partition,
                    busy: end - start,
                    phases: &[],
                }
                .emit();
                self.tracker.do_send(SpanFinished {
                    worker: self.id,
                    key: key.clone(),
                    start,
                    end,
                    phases: Vec::new(),
                    ok: false,
                });
                self.budget.do_send(Release {
                    key: key.clone(),
                    bytes: None,
                });
                self.tracker.do_send(PartitionFailed { key, error });
            }
        }
    }
}
