//! Partitions as leased work on the PostgreSQL store (issue 14, item 2):
//! the queue a fleet of daemons shares, in `cuzk_leases`
//! (migrations/0002_leases.sql). A partition waits there until a node
//! claims it; the claim holds it for a lease that its owner renews while
//! the partition moves through its stages; a lease that runs out puts the
//! partition back in the queue for any node, the lapsed attempt counted.
//! This is the database's half: the daemon's pipeline does not use it yet
//! (docs/architecture.md, "Leases").
//!
//! One `Leases` is one connection, used from one thread (the `postgres`
//! client blocks). A node claims on one and renews on another, its
//! renewer's, so that a slow claim never holds a renewal past its lease.

use std::collections::HashSet;
use std::time::Duration;

use cuzk_actors::store::StoreError;
use cuzk_actors::{JobId, Priority};
use postgres::{Client, NoTls};

use super::pg::{client_config, describe};
use super::{migrate, StoreUrl};

/// A partition a node now holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub job: JobId,
    pub index: u32,
    /// 1 for the first claim; each claim after a lease ran out is one more.
    /// The claimer compares it with its `max_attempts`, as for any retry.
    pub attempt: u32,
}

/// One node's connection to the shared queue.
pub struct Leases {
    client: Client,
    /// The node's name, stored as the owner of what it claims: unique in
    /// the fleet, and the same after a restart (a hostname).
    node: String,
    /// How long a claim or a renewal holds a partition, in milliseconds.
    lease_ms: i64,
    /// The URL with its password hidden, for messages.
    shown: String,
}

impl Leases {
    /// Connects as `node`, bringing the schema up to date like the store.
    pub fn connect(url: &StoreUrl, node: &str, lease: Duration) -> Result<Self, String> {
        if node.is_empty() {
            return Err("a node needs a name to hold leases under".into());
        }
        let lease_ms = i64::try_from(lease.as_millis()).ok().filter(|&ms| ms > 0).ok_or_else(|| {
            format!("a lease of {lease:?} is not a positive number of milliseconds")
        })?;
        let mut client = client_config(url)?
            .connect(NoTls)
            .map_err(|e| format!("leases on {url}: cannot connect: {}", describe(&e)))?;
        migrate::migrate(&mut client).map_err(|e| format!("leases on {url}: {e}"))?;
        Ok(Self { client, node: node.into(), lease_ms, shown: url.to_string() })
    }

    /// Queues partitions 0..`partitions` of a stored job (the job's row
    /// must exist); partitions already queued are left as they are.
    pub fn enqueue(&mut self, job: &JobId, priority: Priority, seq: u64, partitions: u32) -> Result<(), StoreError> {
        // The enum's order: low 0 .. critical 3.
        let rank = priority as i16;
        self.client
            .execute(
                "INSERT INTO cuzk_leases (job, partition_index, priority, seq)
                 SELECT $1, i, $2, $3 FROM generate_series(0::bigint, $4::bigint - 1) AS i
                 ON CONFLICT (job, partition_index) DO NOTHING",
                &[&job.0, &rank, &(seq as i64), &i64::from(partitions)],
            )
            .map(drop)
            .map_err(|e| self.unavailable(&e))
    }

    /// Takes up to `max` waiting partitions (never held, or their lease run
    /// out), highest priority first, then oldest job, then lowest index.
    /// Rows another node is claiming at the same moment are skipped, not
    /// waited for, so claimers never block each other or take a row twice.
    pub fn claim(&mut self, max: usize) -> Result<Vec<Claim>, StoreError> {
        let rows = self
            .client
            .query(
                "UPDATE cuzk_leases l
                 SET owner = $1, lease_until = now() + $2::bigint * interval '1 millisecond', attempts = l.attempts + 1
                 FROM (SELECT job, partition_index FROM cuzk_leases
                       WHERE owner IS NULL OR lease_until < now()
                       ORDER BY priority DESC, seq, partition_index
                       LIMIT $3 FOR UPDATE SKIP LOCKED) next
                 WHERE l.job = next.job AND l.partition_index = next.partition_index
                 RETURNING l.job, l.partition_index, l.attempts, l.priority, l.seq",
                &[&self.node, &self.lease_ms, &(max as i64)],
            )
            .map_err(|e| self.unavailable(&e))?;
        // RETURNING keeps no order: the claim's own is restored.
        let mut claimed: Vec<((i16, i64), Claim)> = rows
            .iter()
            .map(|row| {
                let claim = Claim {
                    job: JobId(row.get(0)),
                    index: row.get::<_, i64>(1) as u32,
                    attempt: row.get::<_, i32>(2) as u32,
                };
                ((-row.get::<_, i16>(3), row.get(4)), claim)
            })
            .collect();
        claimed.sort_by(|(a, x), (b, y)| (a, x.index).cmp(&(b, y.index)));
        Ok(claimed.into_iter().map(|(_, claim)| claim).collect())
    }

    /// Extends the lease of each partition in `held` that this node still
    /// holds, and returns those it does not: another node claimed them
    /// after their lease ran out, or they were finished or removed. Work on
    /// those must stop; its result is not this node's to record.
    pub fn renew(&mut self, held: &[(JobId, u32)]) -> Result<Vec<(JobId, u32)>, StoreError> {
        let jobs: Vec<&str> = held.iter().map(|(job, _)| job.0.as_str()).collect();
        let indices: Vec<i64> = held.iter().map(|(_, index)| i64::from(*index)).collect();
        let renewed: HashSet<(String, i64)> = self
            .client
            .query(
                "UPDATE cuzk_leases SET lease_until = now() + $2::bigint * interval '1 millisecond'
                 WHERE owner = $1
                   AND (job, partition_index) IN (SELECT * FROM unnest($3::text[], $4::bigint[]))
                 RETURNING job, partition_index",
                &[&self.node, &self.lease_ms, &jobs, &indices],
            )
            .map_err(|e| self.unavailable(&e))?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        Ok(held
            .iter()
            .filter(|(job, index)| !renewed.contains(&(job.0.clone(), i64::from(*index))))
            .cloned()
            .collect())
    }

    /// Takes a finished partition out of the queue. False when this node
    /// no longer holds it: another node took it over, and its result is
    /// that node's.
    pub fn finish(&mut self, job: &JobId, index: u32) -> Result<bool, StoreError> {
        self.client
            .execute(
                "DELETE FROM cuzk_leases WHERE job = $1 AND partition_index = $2 AND owner = $3",
                &[&job.0, &i64::from(index), &self.node],
            )
            .map(|removed| removed == 1)
            .map_err(|e| self.unavailable(&e))
    }

    fn unavailable(&self, error: &postgres::Error) -> StoreError {
        StoreError::unavailable(format!("leases on {}: {}", self.shown, describe(error)))
    }
}
