//! A job as the fleet's database has it: its row, its partitions' recorded
//! ends and its leases, read in three queries, and the view built from them
//! (the tracker's `JobView`) for any node to answer with.

use std::collections::BTreeMap;
use std::time::SystemTime;

use cuzk_actors::messages::{JobStatus, JobView, PartitionView};
use cuzk_actors::store::{JobOutcome, JobRecord, PartitionDetail};
use cuzk_actors::time::unix_ms;
use cuzk_actors::{JobId, Stage, Tenant};
use postgres::types::Json;
use postgres::GenericClient;
use serde_json::Value;

/// A job as the database has it.
pub(super) struct StoredJob {
    pub(super) record: JobRecord,
    pub(super) outcome: Option<JobOutcome>,
    /// Partitions with a result.
    pub(super) results: BTreeMap<u32, Recorded>,
    pub(super) leases: BTreeMap<u32, Lease>,
}

/// A partition's recorded end.
pub(super) struct Recorded {
    pub(super) proved: bool,
    pub(super) failure: Option<String>,
    /// The node that recorded it.
    pub(super) node: Option<String>,
    /// What that node saw of it.
    pub(super) detail: Option<PartitionDetail>,
}

pub(super) struct Lease {
    /// Who holds it, while the lease runs.
    pub(super) owner: Option<String>,
    pub(super) stage: Option<String>,
    pub(super) attempts: u32,
}

pub(super) fn read_job(
    client: &mut impl GenericClient,
    id: &JobId,
) -> Result<Option<StoredJob>, postgres::Error> {
    let Some(row) = client.query_opt("SELECT record, outcome FROM cuzk_jobs WHERE id = $1", &[&id.0])? else {
        return Ok(None);
    };
    let record = row.try_get::<_, Json<JobRecord>>(0)?.0;
    let outcome = row.try_get::<_, Option<Json<JobOutcome>>>(1)?.map(|o| o.0);
    let mut results = BTreeMap::new();
    for row in client.query(
        "SELECT partition_index, proof IS NOT NULL, failure, node, detail FROM cuzk_partitions WHERE job = $1",
        &[&id.0],
    )? {
        let result = Recorded {
            proved: row.try_get(1)?,
            failure: row.try_get(2)?,
            node: row.try_get(3)?,
            // One that does not read (edited by hand) is left out of the
            // view rather than failing it.
            detail: row.try_get::<_, Option<Json<Value>>>(4)?.and_then(|detail| serde_json::from_value(detail.0).ok()),
        };
        results.insert(row.try_get::<_, i64>(0)? as u32, result);
    }
    let mut leases = BTreeMap::new();
    for row in client.query(
        "SELECT partition_index, CASE WHEN lease_until >= now() THEN owner END, stage, attempts
         FROM cuzk_leases WHERE job = $1",
        &[&id.0],
    )? {
        let lease = Lease {
            owner: row.try_get(1)?,
            stage: row.try_get(2)?,
            attempts: row.try_get::<_, i32>(3)? as u32,
        };
        leases.insert(row.try_get::<_, i64>(0)? as u32, lease);
    }
    Ok(Some(StoredJob { record, outcome, results, leases }))
}

/// A job's tenant and, once it ended, how; None for a job not stored.
/// `lock`: the row is locked for the rest of the transaction.
pub(super) fn read_end(
    client: &mut impl GenericClient,
    id: &JobId,
    lock: bool,
) -> Result<Option<(Tenant, Option<JobStatus>)>, postgres::Error> {
    let sql = match lock {
        true => "SELECT tenant, outcome FROM cuzk_jobs WHERE id = $1 FOR UPDATE",
        false => "SELECT tenant, outcome FROM cuzk_jobs WHERE id = $1",
    };
    let Some(row) = client.query_opt(sql, &[&id.0])? else {
        return Ok(None);
    };
    let tenant: Option<String> = row.try_get(0)?;
    let outcome: Option<Json<JobOutcome>> = row.try_get(1)?;
    Ok(Some((Tenant(tenant.unwrap_or_default()), outcome.map(|o| status_of(o.0.stage)))))
}

pub(super) fn status_of(stage: Stage) -> JobStatus {
    match stage {
        Stage::Done => JobStatus::Done,
        Stage::Cancelled => JobStatus::Cancelled,
        _ => JobStatus::Failed,
    }
}

impl StoredJob {
    pub(super) fn status(&self) -> JobStatus {
        match &self.outcome {
            Some(outcome) => status_of(outcome.stage),
            None if self.results.is_empty() && self.leases.values().all(|l| l.owner.is_none()) => {
                JobStatus::Queued
            }
            None => JobStatus::Running,
        }
    }

    /// The job's view on node `node`: each partition from its recorded
    /// end (with the detail its node recorded) or its lease, except those
    /// this node holds, which are the tracker's (`local`, the tracker's
    /// view of the job, which has detail of those alone); the job's stage
    /// times summed from its partitions'.
    pub(super) fn view(&self, node: &str, local: Option<JobView>) -> JobView {
        let ended = self.outcome.as_ref().map(|o| o.stage);
        let mut partitions: Vec<PartitionView> = (0..self.record.partitions)
            .map(|index| {
                let result = self.results.get(&index);
                let lease = self.leases.get(&index);
                let stage = match (result, lease) {
                    (Some(Recorded { proved: true, .. }), _) => Stage::Done,
                    (Some(Recorded { failure: Some(_), .. }), _) => Stage::Failed,
                    (_, Some(Lease { owner: Some(_), stage: Some(stage), .. })) => {
                        serde_json::from_value(Value::String(stage.clone())).unwrap_or(Stage::Queued)
                    }
                    _ => ended.unwrap_or(Stage::Queued),
                };
                let detail = result.and_then(|r| r.detail.clone()).unwrap_or_else(|| PartitionDetail {
                    attempts: lease.map_or(1, |l| l.attempts.max(1)),
                    ..PartitionDetail::default()
                });
                PartitionView {
                    index,
                    stage,
                    node: result.and_then(|r| r.node.clone()).or_else(|| lease.and_then(|l| l.owner.clone())),
                    error: result.and_then(|r| r.failure.clone()),
                    detail,
                }
            })
            .collect();
        for p in local.into_iter().flat_map(|local| local.partitions) {
            let held_here = self.leases.get(&p.index).is_some_and(|l| l.owner.as_deref() == Some(node));
            if let Some(slot) = partitions.get_mut(p.index as usize).filter(|_| held_here) {
                *slot = PartitionView { node: Some(node.to_string()), ..p };
            }
        }
        let end = self.outcome.as_ref().map_or_else(|| unix_ms(SystemTime::now()), |o| o.finished_unix_ms);
        let total_ms = end.saturating_sub(self.record.submitted_unix_ms) as f64;
        JobView {
            id: self.record.id.clone(),
            tenant: self.record.tenant.clone(),
            status: self.status(),
            circuit: self.record.circuit.clone(),
            circuit_id: self.record.circuit_id.clone(),
            priority: self.record.priority,
            submitted_at_ms: self.record.submitted_unix_ms,
            deadline_missed: self.record.deadline_ms.map(|d| end > self.record.submitted_unix_ms + d),
            timings_ms: JobView::timings(total_ms, &partitions),
            partitions,
            error: self.outcome.as_ref().and_then(|o| o.error.clone()),
        }
    }
}
