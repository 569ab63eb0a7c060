//! The Finalizer: threads of its own (one sync actor each) that run
//! prove_finish (the G2 MSM when the GPU did not, assembly, optional
//! verification), return the partition's budget and hand the proof to the
//! tracker. Nothing here can delay a GPU worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::{run_stage, Backend};
use crate::messages::{Finalize, PartitionFailed, PartitionProved, Progress, Release, TrackerPort};
use crate::model::{ProofRecord, Stage};
use crate::telemetry;

/// A finalizer thread's actor: it runs prove_finish for partitions the GPU
/// workers hand it, returns their bytes and reports the proof.
pub struct Finalizer {
    /// The backend whose prove_finish this thread runs.
    pub backend: Arc<dyn Backend>,
    /// The tracker: Finalizing, then the proof or the failure.
    pub tracker: TrackerPort,
    /// The budget: the partition's remaining bytes, once it is done.
    pub release: Recipient<Release>,
    /// Finalizations running on all finalizer threads (for the gauge).
    pub active: Arc<AtomicUsize>,
}

impl Actor for Finalizer {
    type Context = SyncContext<Self>;
}

impl Handler<Finalize> for Finalizer {
    type Result = ();

    fn handle(&mut self, msg: Finalize, ctx: &mut SyncContext<Self>) {
        let key = msg.job.key(msg.index);
        if msg.job.is_abandoned() {
            self.release.do_send(Release { key, bytes: None });
            return;
        }
        let active = self.active.fetch_add(1, Ordering::Relaxed) + 1;
        telemetry::FinalizerLoad { active }.emit();
        self.tracker.progress.do_send(Progress {
            key: key.clone(),
            stage: Stage::Finalizing,
            at: Instant::now(),
        });
        let result = run_stage("prove_finish", || self.backend.prove_finish(&msg.job, msg.index, msg.input));
        // The budget hears first, so whoever sees the job done sees its
        // memory returned.
        self.release.do_send(Release { key: key.clone(), bytes: None });
        match result {
            Ok(done) => self.tracker.proved.do_send(PartitionProved {
                key,
                proof: ProofRecord { proof: done.proof, public_inputs: done.public_inputs },
                at: Instant::now(),
            }),
            Err(error) => {
                if error.panicked() {
                    // The SyncArbiter builds a fresh finalizer for the next message.
                    telemetry::ActorRestarted { actor: "finalizer", error: &error.to_string() }.emit();
                    ctx.stop();
                }
                self.tracker.failed.do_send(PartitionFailed { key, error })
            }
        }
        let active = self.active.fetch_sub(1, Ordering::Relaxed) - 1;
        telemetry::FinalizerLoad { active }.emit();
    }
}
