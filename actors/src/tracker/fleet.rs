//! The tracker on a fleet node. Jobs live in the shared database; this node
//! knows a job only while it holds partitions of it. A claim brings a job in
//! (its other partitions marked `elsewhere`) or adds partitions to one it
//! knows; a lost lease takes a partition back out; once nothing it holds of
//! a job is running, the job is forgotten (`settle`).

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::{JobState, PartitionState, Tracker};
use crate::messages::{Claimed, Enqueue, GetHeld, LeasesLost};
use crate::model::{JobId, PartitionKey, Stage};

impl Tracker {
    /// Drops a job from memory, wherever it stands, without recording
    /// anything: on a fleet node the database has what matters.
    pub(super) fn forget(&mut self, id: &JobId) {
        let Some(job) = self.jobs.remove(id) else {
            return;
        };
        self.tally.remove(&job);
        if job.finished.is_none() {
            self.unfinished -= 1;
            if let Some(count) = self.unfinished_by_tenant.get_mut(&job.tenant) {
                *count -= 1;
                if *count == 0 {
                    self.unfinished_by_tenant.remove(&job.tenant);
                }
            }
        }
    }
}

impl Handler<Claimed> for Tracker {
    type Result = ();

    fn handle(&mut self, claimed: Claimed, _: &mut Context<Self>) {
        let Claimed { record, work, reservation, partitions } = claimed;
        let id = record.id.clone();
        if !self.jobs.contains_key(&id) {
            let spec = Arc::new(record.spec(reservation, work));
            self.backend.accepted(&spec);
            let others = (0..spec.partitions)
                .map(|_| PartitionState { elsewhere: true, ..PartitionState::queued(spec.submitted.at) })
                .collect();
            let job = JobState {
                spec,
                tenant: record.tenant,
                partitions: others,
                error: None,
                finished: None,
                end_pending: false,
            };
            self.insert_job(job, None);
        }
        let job = self.jobs.get_mut(&id).expect("inserted above");
        self.tally.remove(job);
        let now = Instant::now();
        let mut queued = Vec::with_capacity(partitions.len());
        for (index, attempt) in partitions {
            // Still running here: its lease ran out (the database was away
            // longer than a lease) and this node claimed it again before its
            // renewer noticed. The attempt under way goes on, its result now
            // this node's to record again.
            let Some(p) =
                job.partitions.get_mut(index as usize).filter(|p| p.elsewhere || p.stage.is_terminal())
            else {
                continue;
            };
            *p = PartitionState { attempts: attempt.max(1), ..PartitionState::queued(now) };
            queued.push(index);
        }
        self.tally.add(job);
        if !queued.is_empty() {
            self.enqueue.do_send(Enqueue { job: job.spec.clone(), partitions: queued });
        }
    }
}

impl Handler<LeasesLost> for Tracker {
    type Result = ();

    fn handle(&mut self, LeasesLost(lost): LeasesLost, _: &mut Context<Self>) {
        for key in lost {
            let Some(job) = self.jobs.get_mut(&key.job) else {
                continue;
            };
            self.tally.remove(job);
            if let Some(p) = job.partitions.get_mut(key.index as usize) {
                p.elsewhere = true;
            }
            let running = job.local().any(|p| !p.stage.is_terminal());
            self.tally.add(job);
            if !running {
                // Nothing left here: stop the work the pipeline still has.
                job.spec.abandon();
                self.drop_job.do_send(crate::messages::DropJob { job: key.job.clone() });
                self.forget(&key.job);
            }
        }
    }
}

impl Handler<GetHeld> for Tracker {
    type Result = ();

    fn handle(&mut self, GetHeld(answer): GetHeld, _: &mut Context<Self>) {
        let held: Vec<(PartitionKey, Stage)> = self
            .jobs
            .iter()
            .flat_map(|(id, job)| {
                job.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !p.elsewhere && !p.stage.is_terminal())
                    .map(move |(index, p)| (PartitionKey { job: id.clone(), index: index as u32 }, p.stage))
            })
            .collect();
        // The renewer may have given up waiting; nothing to do then.
        let _ = answer.send(held);
    }
}
