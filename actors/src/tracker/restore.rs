//! The tracker's restore procedure: jobs read back from the store on start
//! become tracker jobs again. Proved partitions keep their proofs; an
//! unfinished job gets only its missing partitions queued; a job killed
//! between its last record and its end is settled at once.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::{JobState, PartitionState, Tracker};
use crate::messages::{Enqueue, RestoreJobs, RestoredJob};
use crate::model::{Reservation, Stage};
use crate::store::StoredJob;
use crate::time::{from_unix_ms, instant_at};

impl Tracker {
    fn restore(&mut self, restored: RestoredJob) {
        let (stored, work, reservation) = match restored {
            // Never dispatched again, so it needs no work.
            RestoredJob::Finished(stored) => {
                (stored, Arc::new(()) as Arc<dyn Any + Send + Sync>, Reservation::default())
            }
            RestoredJob::Unfinished { stored, work, reservation } => (stored, work, reservation),
        };
        let StoredJob { record, mut proofs, failures, outcome } = stored;
        let digest = record.request_digest();
        let spec = Arc::new(record.spec(reservation, work));
        self.next_seq = self.next_seq.max(record.seq + 1);
        let finished = outcome.as_ref().map(|o| (o.stage, instant_at(from_unix_ms(o.finished_unix_ms))));
        let now = Instant::now();
        let partitions = (0..record.partitions)
            .map(|index| {
                let mut partition = PartitionState::queued(spec.submitted.at);
                partition.proof = proofs.remove(&index);
                partition.error = failures.get(&index).cloned();
                partition.stage = match (&partition.proof, &partition.error, &finished) {
                    (Some(_), _, _) => Stage::Done,
                    (None, Some(_), _) => Stage::Failed,
                    (None, None, Some((stage, _))) => *stage,
                    (None, None, None) => Stage::Queued,
                };
                if partition.stage != Stage::Queued {
                    partition.entered[partition.stage as usize] = Some(finished.map_or(now, |(_, at)| at));
                }
                partition
            })
            .collect::<Vec<_>>();
        let missing: Vec<u32> = partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.stage == Stage::Queued)
            .map(|(index, _)| index as u32)
            .collect();
        self.insert_job(
            JobState {
                spec: spec.clone(),
                tenant: record.tenant.clone(),
                partitions,
                error: outcome.and_then(|o| o.error),
                finished,
                end_pending: false,
            },
            record.idempotency_key.map(|key| (key, digest)),
        );
        if finished.is_some() {
            return;
        }
        // Killed between recording a partition's failure and the job's end.
        if let Some((index, error)) = failures.into_iter().next() {
            let error = format!("partition {index}: {error}");
            self.settle(&record.id, Some((Stage::Failed, error)));
        } else if missing.is_empty() {
            self.settle(&record.id, None);
        } else {
            self.backend.accepted(&spec);
            self.enqueue.do_send(Enqueue { job: spec, partitions: missing });
        }
    }
}

impl Handler<RestoreJobs> for Tracker {
    type Result = ();

    fn handle(&mut self, RestoreJobs(jobs): RestoreJobs, _: &mut Context<Self>) {
        for job in jobs {
            self.restore(job);
        }
    }
}
