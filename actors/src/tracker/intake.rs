//! The tracker's intake: accepting a job (its spec, its partitions queued,
//! its record written to the store), answering a repeated idempotency key
//! with the original job, and refusing jobs while too many are unfinished.

use std::sync::Arc;
use std::time::SystemTime;

use actix::prelude::*;

use super::{JobState, PartitionState, Tracker};
use crate::messages::{Enqueue, JobStatus, QueueFull, SetMaxUnfinished, SubmitJob, SubmitOutcome};
use crate::model::JobSpec;
use crate::store::{JobRecord, StoreWrite};
use crate::telemetry;
use crate::time::unix_ms;

impl Handler<SubmitJob> for Tracker {
    type Result = MessageResult<SubmitJob>;

    fn handle(&mut self, SubmitJob(job): SubmitJob, _: &mut Context<Self>) -> Self::Result {
        let keyed = job
            .idempotency_key
            .clone()
            .map(|key| (key, job.request.as_ref().map(|r| r.digest).unwrap_or_default()));
        if let Some((existing, body)) = keyed.as_ref().and_then(|(k, _)| self.by_idempotency_key.get(k)) {
            let conflict = keyed.as_ref().is_some_and(|(_, digest)| digest != body);
            let status = self.jobs[existing].status();
            // The original may still be on its way to disk: a repeat is
            // answered only once it is there too.
            let durable = (!conflict)
                .then(|| self.store().map(|store| store.write(StoreWrite::Barrier)))
                .flatten();
            return MessageResult(SubmitOutcome {
                id: existing.clone(),
                created: false,
                status,
                durable,
                queue_full: None,
                key_conflict: conflict,
            });
        }
        if let Some(limit) = self.max_unfinished {
            let unfinished = self.unfinished;
            if unfinished >= limit {
                return MessageResult(SubmitOutcome {
                    id: job.id,
                    created: false,
                    status: JobStatus::Queued,
                    durable: None,
                    queue_full: Some(QueueFull { unfinished, limit }),
                    key_conflict: false,
                });
            }
        }
        let spec = Arc::new(JobSpec::new(
            job.id.clone(),
            self.next_seq,
            job.priority,
            job.partitions,
            job.circuit,
            job.circuit_id,
            job.reservation,
            job.work,
            SystemTime::now(),
            job.deadline,
        ));
        self.next_seq += 1;
        let partitions = (0..spec.partitions)
            .map(|_| PartitionState::queued(spec.submitted))
            .collect();
        telemetry::JobSubmitted {
            job: &job.id.0,
            circuit_id: &spec.circuit_id,
            partitions: spec.partitions,
            priority: spec.priority,
        }
        .emit();
        let durable = match (self.store(), job.request) {
            (Some(store), Some(request)) => Some(store.write(StoreWrite::Accepted(JobRecord {
                id: job.id.clone(),
                seq: spec.seq,
                priority: spec.priority,
                partitions: spec.partitions,
                circuit: spec.circuit.clone(),
                circuit_id: spec.circuit_id.clone(),
                idempotency_key: job.idempotency_key.clone(),
                submitted_unix_ms: unix_ms(spec.submitted_wall),
                deadline_ms: job.deadline.map(|d| d.as_millis() as u64),
                request_digest: Some(request.digest),
                request: request.text,
            }))),
            _ => None,
        };
        self.insert_job(
            JobState {
                spec: spec.clone(),
                partitions,
                error: None,
                finished: None,
            },
            keyed,
        );
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
