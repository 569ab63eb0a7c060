//! What a fleet node answers from the database, for any job of the fleet:
//! submissions (the job and its partitions' lease rows in one transaction,
//! then a wake-up for the claimers), a job's view, its proofs, a cancel, and
//! the fleet's counts. Each answer has the type the tracker gives on a
//! single daemon, so the handlers treat both alike.

use std::collections::BTreeMap;
use std::time::SystemTime;

use cuzk_actors::messages::{
    CircuitLoad, JobStatus, JobView, ProofsError, ProofsView, QueueFull, SubmitOutcome,
};
use cuzk_actors::model::ProofRecord;
use cuzk_actors::store::{JobOutcome, JobRecord, StoreError};
use cuzk_actors::telemetry::JobSubmitted;
use cuzk_actors::time::unix_ms;
use cuzk_actors::{JobId, NewJob, Stage, TenantScope};
use postgres::error::SqlState;
use postgres::types::Json;
use postgres::Transaction;
use serde::Serialize;

use super::leases::queue_partitions;
use super::stored::{read_end, read_job};
use super::Fleet;
use crate::store::{end_job, END_JOB};

/// `GET /v1/status?scope=fleet`: what the database knows of every node.
#[derive(Debug, Serialize)]
pub struct FleetStatus {
    /// Jobs by status (queued and running together as `unfinished`).
    pub jobs: BTreeMap<String, i64>,
    /// Partitions no node holds (never claimed, or their lease ran out).
    pub partitions_waiting: i64,
    /// Partitions each node holds under a live lease, by node name.
    pub partitions_held: BTreeMap<String, i64>,
}

impl Fleet {
    /// Records a job for the fleet, or answers with the job its tenant's
    /// idempotency key already names, or refuses it when the fleet holds
    /// `max_unfinished` unfinished jobs (or its tenant its own limit).
    pub fn submit(&self, job: &NewJob, max_unfinished: Option<usize>) -> Result<SubmitOutcome, StoreError> {
        let request = job.request.as_ref().expect("the submit handler records every request");
        let record = JobRecord {
            id: job.id.clone(),
            seq: 0,
            priority: job.priority,
            partitions: job.partitions,
            circuit: job.circuit.clone(),
            circuit_id: job.circuit_id.clone(),
            idempotency_key: job.idempotency_key.clone(),
            tenant: job.tenant.clone(),
            submitted_unix_ms: unix_ms(SystemTime::now()),
            deadline_ms: job.deadline.map(|d| d.as_millis() as u64),
            request: request.text.clone(),
            request_digest: Some(request.digest),
        };
        let answer = |status, created| SubmitOutcome {
            id: job.id.clone(),
            created,
            status,
            durable: None,
            queue_full: None,
            key_conflict: false,
        };
        self.pool.with("submit", |client| {
            // Two nodes given one key at once: the second insert violates
            // the key's unique index; its second try finds the first's job.
            for _ in 0..2 {
                let mut txn = client.transaction()?;
                if let Some(key) = &job.idempotency_key {
                    if let Some((id, digest, status)) = keyed(&mut txn, job.tenant.as_str(), key)? {
                        let key_conflict = digest != request.digest;
                        return Ok(SubmitOutcome { id, key_conflict, ..answer(status, false) });
                    }
                }
                if let Some(full) = queue_full(&mut txn, job, max_unfinished)? {
                    return Ok(SubmitOutcome { queue_full: Some(full), ..answer(JobStatus::Queued, false) });
                }
                match insert(&mut txn, &record).and_then(|()| txn.commit()) {
                    Ok(()) => {
                        JobSubmitted {
                            job: &record.id.0,
                            tenant: record.tenant.as_str(),
                            circuit_id: &record.circuit_id,
                            partitions: record.partitions,
                            priority: record.priority,
                        }
                        .emit();
                        return Ok(answer(JobStatus::Queued, true));
                    }
                    Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => continue,
                    Err(e) => return Err(e),
                }
            }
            unreachable!("a key's job found on the second try, or a new one inserted")
        })
    }

    /// A job's view: partitions from their results and leases, a finished
    /// one with the detail its node recorded, one this node holds with the
    /// tracker's (`local`).
    pub fn view(
        &self,
        id: &JobId,
        scope: &TenantScope,
        local: Option<JobView>,
    ) -> Result<Option<JobView>, StoreError> {
        let stored = self.pool.with("read", |client| read_job(client, id))?;
        Ok(stored
            .filter(|stored| scope.sees(&stored.record.tenant))
            .map(|stored| stored.view(&self.node, local)))
    }

    /// A done job's proofs, in partition order.
    pub fn proofs(
        &self,
        id: &JobId,
        scope: &TenantScope,
    ) -> Result<Result<ProofsView, ProofsError>, StoreError> {
        self.pool.with("read", |client| {
            let Some(stored) = read_job(client, id)?.filter(|s| scope.sees(&s.record.tenant)) else {
                return Ok(Err(ProofsError::NotFound));
            };
            let status = stored.status();
            if status != JobStatus::Done {
                return Ok(Err(ProofsError::NotReady(status)));
            }
            let proofs = client
                .query(
                    "SELECT partition_index, proof, public_inputs FROM cuzk_partitions
                     WHERE job = $1 AND proof IS NOT NULL ORDER BY partition_index",
                    &[&id.0],
                )?
                .iter()
                .map(|row| {
                    let record = ProofRecord { proof: row.try_get(1)?, public_inputs: row.try_get(2)? };
                    Ok((row.try_get::<_, i64>(0)? as u32, record))
                })
                .collect::<Result<_, postgres::Error>>()?;
            Ok(Ok(ProofsView {
                circuit: stored.record.circuit,
                circuit_id: stored.record.circuit_id,
                proofs,
            }))
        })
    }

    /// Cancels a job for the whole fleet: its leases go, so the nodes
    /// holding its partitions stop them at their next renewal. Answers the
    /// job's status after the call; None for a job the scope does not see.
    pub fn cancel(&self, id: &JobId, scope: &TenantScope) -> Result<Option<JobStatus>, StoreError> {
        self.pool.with("cancel", |client| {
            let mut txn = client.transaction()?;
            let Some((tenant, ended)) = read_end(&mut txn, id, true)? else { return Ok(None) };
            if !scope.sees(&tenant) {
                return Ok(None);
            }
            if let Some(status) = ended {
                return Ok(Some(status));
            }
            let cancelled = JobOutcome {
                stage: Stage::Cancelled,
                error: Some("cancelled by request".into()),
                finished_unix_ms: unix_ms(SystemTime::now()),
            };
            end_job(&mut txn, END_JOB, id, &cancelled)?;
            txn.commit()?;
            Ok(Some(JobStatus::Cancelled))
        })
    }

    /// The fleet's jobs by status and partitions by holder.
    pub fn status(&self) -> Result<FleetStatus, StoreError> {
        self.pool.with("status", |client| {
            let jobs = client
                .query(
                    "SELECT coalesce(outcome->>'stage', 'unfinished'), count(*) FROM cuzk_jobs GROUP BY 1",
                    &[],
                )?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<_, postgres::Error>>()?;
            let mut partitions_held = BTreeMap::new();
            let mut partitions_waiting = 0;
            for row in client.query(
                "SELECT CASE WHEN lease_until >= now() THEN owner END, count(*) FROM cuzk_leases GROUP BY 1",
                &[],
            )? {
                match row.try_get::<_, Option<String>>(0)? {
                    Some(node) => {
                        partitions_held.insert(node, row.try_get(1)?);
                    }
                    None => partitions_waiting = row.try_get(1)?,
                }
            }
            Ok(FleetStatus { jobs, partitions_waiting, partitions_held })
        })
    }

    /// The fleet's unfinished jobs per circuit: queued while none of their
    /// partitions has a result or a holder (a job's status as `read_job`
    /// reads it), running after.
    pub fn circuit_load(&self) -> Result<BTreeMap<String, CircuitLoad>, StoreError> {
        self.pool.with("circuit load", |client| {
            let mut loads = BTreeMap::<String, CircuitLoad>::new();
            for row in client.query(
                "SELECT j.record->>'circuit', \
                        EXISTS (SELECT 1 FROM cuzk_partitions p WHERE p.job = j.id) \
                        OR EXISTS (SELECT 1 FROM cuzk_leases l WHERE l.job = j.id AND l.owner IS NOT NULL), \
                        count(*) \
                 FROM cuzk_jobs j WHERE j.outcome IS NULL GROUP BY 1, 2",
                &[],
            )? {
                let circuit: Option<String> = row.try_get(0)?;
                let count = usize::try_from(row.try_get::<_, i64>(2)?).unwrap_or(0);
                let load = loads.entry(circuit.unwrap_or_default()).or_default();
                match row.try_get::<_, bool>(1)? {
                    true => load.running += count,
                    false => load.queued += count,
                }
            }
            Ok(loads)
        })
    }
}

/// The job `key` names for `tenant`: its id, request digest and status.
fn keyed(
    txn: &mut Transaction<'_>,
    tenant: &str,
    key: &str,
) -> Result<Option<(JobId, [u8; 32], JobStatus)>, postgres::Error> {
    let Some(row) = txn.query_opt(
        "SELECT id, record FROM cuzk_jobs WHERE tenant = $1 AND idempotency_key = $2",
        &[&tenant, &key],
    )?
    else {
        return Ok(None);
    };
    let id = JobId(row.try_get(0)?);
    let record = row.try_get::<_, Json<JobRecord>>(1)?.0;
    let status = read_job(txn, &id)?.map_or(JobStatus::Queued, |s| s.status());
    Ok(Some((id, record.request_digest(), status)))
}

/// The fleet-wide limit, then the tenant's, counted over unfinished jobs.
fn queue_full(
    txn: &mut Transaction<'_>,
    job: &NewJob,
    max_unfinished: Option<usize>,
) -> Result<Option<QueueFull>, postgres::Error> {
    if max_unfinished.is_none() && job.tenant_max_unfinished.is_none() {
        return Ok(None);
    }
    let row = txn.query_one(
        "SELECT count(*), count(*) FILTER (WHERE tenant = $1) FROM cuzk_jobs WHERE outcome IS NULL",
        &[&job.tenant.as_str()],
    )?;
    let (all, tenant) = (row.try_get::<_, i64>(0)? as usize, row.try_get::<_, i64>(1)? as usize);
    Ok([(max_unfinished, all, None), (job.tenant_max_unfinished, tenant, Some(job.tenant.clone()))]
        .into_iter()
        .find_map(|(limit, unfinished, tenant)| {
            let limit = limit.filter(|limit| unfinished >= *limit)?;
            Some(QueueFull { unfinished, limit, tenant })
        }))
}

/// The job's row (its `seq` from the fleet's sequence) and one lease row per
/// partition, then the claimers' wake-up, sent when this commits.
fn insert(txn: &mut Transaction<'_>, record: &JobRecord) -> Result<(), postgres::Error> {
    let seq: i64 = txn.query_one("SELECT nextval('cuzk_job_seq')", &[])?.try_get(0)?;
    let record = JobRecord { seq: seq as u64, ..record.clone() };
    txn.execute(
        "INSERT INTO cuzk_jobs (id, seq, record, tenant, idempotency_key) VALUES ($1, $2, $3, $4, $5)",
        &[&record.id.0, &seq, &Json(&record), &record.tenant.as_str(), &record.idempotency_key],
    )?;
    queue_partitions(txn, &record)?;
    txn.batch_execute("NOTIFY cuzk_work")
}
