//! The synthesis pool: CPU threads, one `SynthesisWorker` sync actor each,
//! that run the synthesize stage. The dispatcher never sends more
//! partitions than there are threads.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::{run_stage, Backend, Synthesized};
use crate::error::StageError;
use crate::messages::{Progress, SetResident, SynthesisDone, Synthesize};
use crate::model::Stage;
use crate::telemetry;

/// One thread of the pool.
pub struct SynthesisWorker {
    /// Runs the stage.
    pub backend: Arc<dyn Backend>,
    /// The tracker: the stages a partition enters here.
    pub progress: Recipient<Progress>,
    /// The dispatcher: the result, which frees this thread's slot.
    pub done: Recipient<SynthesisDone>,
    /// The budget: what the backend keeps resident after loading a shape.
    pub resident: Recipient<SetResident>,
}

impl Actor for SynthesisWorker {
    type Context = SyncContext<Self>;
}

impl Handler<Synthesize> for SynthesisWorker {
    type Result = ();

    fn handle(&mut self, msg: Synthesize, ctx: &mut SyncContext<Self>) {
        let key = msg.job.key(msg.index);
        let result: Result<Synthesized, StageError> = if msg.job.is_abandoned() {
            Err(StageError::permanent("job abandoned"))
        } else {
            self.progress.do_send(Progress {
                key: key.clone(),
                stage: Stage::Synthesizing,
                at: Instant::now(),
            });
            let result = run_stage("synthesis", || self.backend.synthesize(&msg.job, msg.index));
            match &result {
                Ok(_) => {
                    self.progress.do_send(Progress { key, stage: Stage::WaitingGpu, at: Instant::now() })
                }
                Err(failure) if failure.panicked() => {
                    // The SyncArbiter builds a fresh worker for the next message.
                    telemetry::ActorRestarted { actor: "synthesis", error: &failure.to_string() }.emit();
                    ctx.stop();
                }
                Err(_) => {}
            }
            result
        };
        // Synthesis is where shapes get loaded or set up.
        self.resident.do_send(SetResident::of(self.backend.as_ref()));
        self.done.do_send(SynthesisDone { job: msg.job, index: msg.index, result });
    }
}
