//! The SynthesisPool: CPU threads (one sync actor each) that run the
//! synthesize stage. The dispatcher never sends more partitions than there
//! are threads.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::{run_stage, Backend, Synthesized};
use crate::budget::{BudgetManager, SetResident};
use crate::dispatcher::{Dispatcher, SynthesisDone};
use crate::model::{JobSpec, Stage};
use crate::telemetry;
use crate::tracker::{Progress, Tracker};

pub struct SynthesisWorker {
    pub backend: Arc<dyn Backend>,
    pub tracker: Addr<Tracker>,
    pub dispatcher: Addr<Dispatcher>,
    pub budget: Addr<BudgetManager>,
}

impl Actor for SynthesisWorker {
    type Context = SyncContext<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Synthesize {
    pub job: Arc<JobSpec>,
    pub index: u32,
}

impl Handler<Synthesize> for SynthesisWorker {
    type Result = ();

    fn handle(&mut self, msg: Synthesize, ctx: &mut SyncContext<Self>) {
        let key = msg.job.key(msg.index);
        let result: Result<Synthesized, String> = if msg.job.is_abandoned() {
            Err("job abandoned".into())
        } else {
            self.tracker.do_send(Progress {
                key: key.clone(),
                stage: Stage::Synthesizing,
                at: Instant::now(),
            });
            match run_stage("synthesis", || self.backend.synthesize(&msg.job, msg.index)) {
                Ok(synthesized) => {
                    self.tracker.do_send(Progress {
                        key,
                        stage: Stage::WaitingGpu,
                        at: Instant::now(),
                    });
                    Ok(synthesized)
                }
                Err(failure) => {
                    if failure.panicked {
                        // The SyncArbiter builds a fresh worker for the next message.
                        telemetry::ActorRestarted { actor: "synthesis", error: &failure.error }.emit();
                        ctx.stop();
                    }
                    Err(failure.error)
                }
            }
        };
        // Synthesis is where shapes get loaded or set up.
        self.budget.do_send(SetResident { bytes: self.backend.resident_bytes() });
        self.dispatcher.do_send(SynthesisDone {
            job: msg.job,
            index: msg.index,
            result,
        });
    }
}
