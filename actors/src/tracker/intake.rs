//! The tracker's intake: accepting a job (its spec, its partitions queued,
//! its record written to the store), answering a repeated idempotency key
//! of the same tenant with the original job, and refusing jobs while too
//! many are unfinished, in the daemon or of the job's tenant.

use std::sync::Arc;
use std::time::SystemTime;

use actix::prelude::*;

use super::{JobState, PartitionState, Tracker};
use crate::messages::{Enqueue, JobStatus, QueueFull, SetMaxUnfinished, SubmitJob, SubmitOutcome};
use crate::model::{JobSpec, Submitted};
use crate::store::{JobRecord, StoreWrite};
use crate::telemetry;

impl Handler<SubmitJob> for Tracker {
    type Result = MessageResult<SubmitJob>;

    fn handle(&mut self, SubmitJob(job): SubmitJob, _: &mut Context<Self>) -> Self::Result {
        let keyed = job
            .idempotency_key
            .clone()
            .map(|key| (key, job.request.as_ref().map(|r| r.digest).unwrap_or_default()));
        let repeat =
            keyed.as_ref().and_then(|(k, _)| self.by_idempotency_key.get(&(job.tenant.clone(), k.clone())));
        if let Some((existing, body)) = repeat {
            let conflict = keyed.as_ref().is_some_and(|(_, digest)| digest != body);
            let status = self.jobs[existing].status();
            // The original may still be on its way to disk: a repeat is
            // answered only once it is there too.
            let durable =
                (!conflict).then(|| self.store().map(|store| store.write(StoreWrite::Barrier))).flatten();
            return MessageResult(SubmitOutcome {
                id: existing.clone(),
                created: false,
                status,
                durable,
                queue_full: None,
                key_conflict: conflict,
            });
        }
        let tenant_unfinished = self.unfinished_by_tenant.get(&job.tenant).copied().unwrap_or(0);
        let full = [
            (self.max_unfinished, self.unfinished, None),
            (job.tenant_max_unfinished, tenant_unfinished, Some(&job.tenant)),
        ]
        .into_iter()
        .find_map(|(limit, unfinished, tenant)| {
            let limit = limit.filter(|limit| unfinished >= *limit)?;
            Some(QueueFull { unfinished, limit, tenant: tenant.cloned() })
        });
        if let Some(full) = full {
            return MessageResult(SubmitOutcome {
                id: job.id,
                created: false,
                status: JobStatus::Queued,
                durable: None,
                queue_full: Some(full),
                key_conflict: false,
            });
        }
        let spec = Arc::new(JobSpec {
            id: job.id.clone(),
            seq: self.next_seq,
            priority: job.priority,
            partitions: job.partitions,
            circuit: job.circuit,
            circuit_id: job.circuit_id,
            reservation: job.reservation,
            work: job.work,
            submitted: Submitted::new(SystemTime::now(), job.deadline),
            abandoned: Default::default(),
        });
        self.next_seq += 1;
        let partitions = (0..spec.partitions).map(|_| PartitionState::queued(spec.submitted.at)).collect();
        telemetry::JobSubmitted {
            job: &job.id.0,
            tenant: job.tenant.as_str(),
            circuit_id: &spec.circuit_id,
            partitions: spec.partitions,
            priority: spec.priority,
        }
        .emit();
        let durable = match (self.store(), job.request) {
            (Some(store), Some(request)) => Some(store.write(StoreWrite::Accepted(JobRecord::accepted(
                &spec,
                job.tenant.clone(),
                job.idempotency_key.clone(),
                request,
            )))),
            _ => None,
        };
        self.insert_job(
            JobState {
                spec: spec.clone(),
                tenant: job.tenant,
                partitions,
                error: None,
                finished: None,
                end_pending: false,
            },
            keyed,
        );
        self.backend.accepted(&spec);
        self.enqueue.do_send(Enqueue::all(spec));
        MessageResult(SubmitOutcome {
            id: job.id,
            created: true,
            status: JobStatus::Queued,
            durable,
            queue_full: None,
            key_conflict: false,
        })
    }
}

impl Handler<SetMaxUnfinished> for Tracker {
    type Result = ();

    fn handle(&mut self, SetMaxUnfinished(limit): SetMaxUnfinished, _: &mut Context<Self>) {
        self.max_unfinished = limit;
    }
}
