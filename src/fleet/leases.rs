//! Partitions as leased work on the PostgreSQL store (issue 14, item 2):
//! the queue a fleet of daemons shares, in `cuzk_leases`
//! (migrations/0002_leases.sql). A partition waits there until a node
//! claims it; the claim holds it for a lease that its owner renews while
//! the partition moves through its stages; a lease that runs out puts the
//! partition back in the queue for any node, the lapsed attempt counted.
//! A fleet node's claimer and renewer (`claimer.rs`, `renewer.rs`) drive
//! it; a partition's lease ends with its result, in the job store's
//! transaction (`store/pg.rs`, `apply_leased`).
//!
//! One `Leases` is one connection, used from one thread (the `postgres`
//! client blocks). A node claims on one and renews on another, its
//! renewer's, so that a slow claim never holds a renewal past its lease.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cuzk_actors::store::{JobRecord, StoreError};
use cuzk_actors::{JobId, PartitionKey, Stage};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Json;
use postgres::{Client, GenericClient};

use crate::postgres::{client_config, migrate, PgError, Place, StoreUrl};
use crate::telemetry::FleetDb;

/// Why a node's lease connection could not be made: its settings, or the
/// database.
#[derive(Debug, thiserror::Error)]
pub enum LeasesError {
    /// The node's name is empty: leases held under it could not be told apart.
    #[error("a node needs a name to hold leases under")]
    Nameless,
    /// The lease is under a millisecond (or too long to count in one), so no lease could be held.
    #[error("a lease of {0:?} is not a positive number of milliseconds")]
    BadLease(Duration),
    /// The database could not be reached or prepared.
    #[error(transparent)]
    Database(#[from] PgError),
}

/// Queues partitions 0..`partitions` of a stored job (its row must exist,
/// in the same transaction or before): the submission's half of the queue.
/// Partitions already queued are left as they are.
pub fn queue_partitions(client: &mut impl GenericClient, record: &JobRecord) -> Result<(), postgres::Error> {
    // The enum's order: low 0 .. critical 3.
    let rank = record.priority as i16;
    client
        .execute(
            "INSERT INTO cuzk_leases (job, partition_index, priority, seq, circuit_id)
             SELECT $1, i, $2, $3, $4 FROM generate_series(0::bigint, $5::bigint - 1) AS i
             ON CONFLICT (job, partition_index) DO NOTHING",
            &[&record.id.0, &rank, &(record.seq as i64), &record.circuit_id, &i64::from(record.partitions)],
        )
        .map(drop)
}

/// A partition a node now holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The job the partition belongs to.
    pub job: JobId,
    /// The partition's number within the job.
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
    /// The database (its password hidden), as errors name it.
    place: Place,
}

impl Leases {
    /// Connects as `node`, bringing the schema up to date like the store.
    pub fn connect(url: &StoreUrl, node: &str, lease: Duration) -> Result<Self, LeasesError> {
        if node.is_empty() {
            return Err(LeasesError::Nameless);
        }
        let lease_ms =
            i64::try_from(lease.as_millis()).ok().filter(|&ms| ms > 0).ok_or(LeasesError::BadLease(lease))?;
        let place = Place::new("leases on", url);
        let mut client = client_config(url)?.connect().map_err(|e| place.failed("cannot connect", e))?;
        migrate(&mut client, &place)?;
        Ok(Self { client, node: node.into(), lease_ms, place })
    }

    /// Takes up to `max` waiting partitions (never held, or their lease run
    /// out), highest priority first, then oldest job, then lowest index,
    /// passing by those of the circuits in `unprovable` (this node lacks
    /// their parameter files). Rows another node is claiming at the same
    /// moment are skipped, not waited for, so claimers never block each
    /// other or take a row twice.
    pub fn claim(&mut self, max: usize, unprovable: &[String]) -> Result<Vec<Claim>, StoreError> {
        let started = Instant::now();
        let rows = self
            .client
            .query(
                "UPDATE cuzk_leases l
                 SET owner = $1, lease_until = now() + $2::bigint * interval '1 millisecond',
                     attempts = l.attempts + 1, stage = 'queued'
                 FROM (SELECT job, partition_index FROM cuzk_leases
                       WHERE (owner IS NULL OR lease_until < now()) AND NOT (circuit_id = ANY($4))
                       ORDER BY priority DESC, seq, partition_index
                       LIMIT $3 FOR UPDATE SKIP LOCKED) next
                 WHERE l.job = next.job AND l.partition_index = next.partition_index
                 RETURNING l.job, l.partition_index, l.attempts, l.priority, l.seq",
                &[&self.node, &self.lease_ms, &(max as i64), &unprovable],
            )
            .map_err(|e| self.unavailable("cannot claim", e))?;
        FleetDb { op: "claim", elapsed: started.elapsed() }.emit();
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
    /// holds, recording the stage each is in (what another node shows of
    /// it), and returns those it does not hold: another node claimed them
    /// after their lease ran out, or they were finished or removed. Work on
    /// those must stop; its result is not this node's to record.
    pub fn renew(&mut self, held: &[(PartitionKey, Stage)]) -> Result<Vec<PartitionKey>, StoreError> {
        let started = Instant::now();
        let jobs: Vec<&str> = held.iter().map(|(key, _)| key.job.0.as_str()).collect();
        let indices: Vec<i64> = held.iter().map(|(key, _)| i64::from(key.index)).collect();
        let stages: Vec<&str> = held.iter().map(|(_, stage)| stage.as_str()).collect();
        let renewed: HashSet<(String, i64)> = self
            .client
            .query(
                "UPDATE cuzk_leases l SET lease_until = now() + $2::bigint * interval '1 millisecond', stage = h.stage
                 FROM unnest($3::text[], $4::bigint[], $5::text[]) AS h(job, partition_index, stage)
                 WHERE l.owner = $1 AND l.job = h.job AND l.partition_index = h.partition_index
                 RETURNING l.job, l.partition_index",
                &[&self.node, &self.lease_ms, &jobs, &indices, &stages],
            )
            .map_err(|e| self.unavailable("cannot renew", e))?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        FleetDb { op: "renew", elapsed: started.elapsed() }.emit();
        Ok(held
            .iter()
            .filter(|(key, _)| !renewed.contains(&(key.job.0.clone(), i64::from(key.index))))
            .map(|(key, _)| key.clone())
            .collect())
    }

    /// Puts back everything this node holds, as if never claimed (its
    /// attempts not counted): on start, for what a node that stopped
    /// still held, and on a graceful stop, for what it did not start.
    pub fn release_all(&mut self) -> Result<u64, StoreError> {
        self.client
            .execute(
                "UPDATE cuzk_leases SET owner = NULL, lease_until = NULL, stage = NULL,
                        attempts = greatest(attempts - 1, 0)
                 WHERE owner = $1",
                &[&self.node],
            )
            .map_err(|e| self.unavailable("cannot put back what it held", e))
    }

    /// Puts back partitions this node claimed and cannot prove (a
    /// parameter file it lacks), their attempts not counted, and wakes the
    /// other nodes for them.
    pub fn release(&mut self, partitions: &[(JobId, u32)]) -> Result<(), StoreError> {
        let jobs: Vec<&str> = partitions.iter().map(|(job, _)| job.0.as_str()).collect();
        let indices: Vec<i64> = partitions.iter().map(|(_, index)| i64::from(*index)).collect();
        self.client
            .batch_execute("BEGIN")
            .and_then(|_| {
                self.client.execute(
                    "UPDATE cuzk_leases l SET owner = NULL, lease_until = NULL, stage = NULL,
                            attempts = greatest(l.attempts - 1, 0)
                     FROM unnest($2::text[], $3::bigint[]) AS r(job, partition_index)
                     WHERE l.owner = $1 AND l.job = r.job AND l.partition_index = r.partition_index",
                    &[&self.node, &jobs, &indices],
                )
            })
            .and_then(|_| self.client.batch_execute("NOTIFY cuzk_work; COMMIT"))
            .map_err(|e| self.unavailable("cannot put back partitions", e))
    }

    /// The records of `jobs` (those still stored), for a claim's new jobs.
    pub fn records(&mut self, jobs: &[&JobId]) -> Result<Vec<JobRecord>, StoreError> {
        let ids: Vec<&str> = jobs.iter().map(|job| job.0.as_str()).collect();
        let rows = self
            .client
            .query("SELECT record FROM cuzk_jobs WHERE id = ANY($1) AND outcome IS NULL", &[&ids])
            .map_err(|e| self.unavailable("cannot read claimed jobs", e))?;
        rows.iter()
            .map(|row| row.try_get::<_, Json<JobRecord>>(0).map(|record| record.0))
            .collect::<Result<_, _>>()
            .map_err(|e| self.unavailable("cannot read claimed jobs", e))
    }

    /// Subscribes this connection to the wake-ups sent when work is added.
    pub fn listen(&mut self) -> Result<(), StoreError> {
        self.client
            .batch_execute("LISTEN cuzk_work")
            .map_err(|e| self.unavailable("cannot listen for work", e))
    }

    /// Waits up to `timeout` for a wake-up; true if one (or several) came.
    /// Wake-ups that arrived meanwhile are all taken.
    pub fn wait_for_work(&mut self, timeout: Duration) -> Result<bool, StoreError> {
        let waited = (|| {
            let mut notifications = self.client.notifications();
            let mut woken = notifications.timeout_iter(timeout).next()?.is_some();
            // Others already here are the same news.
            while notifications.iter().next()?.is_some() {
                woken = true;
            }
            Ok(woken)
        })();
        waited.map_err(|e: postgres::Error| self.unavailable("cannot wait for work", e))
    }

    /// Finished jobs older than `retention` go, with their partitions and
    /// proofs: any node may do it, and doing it twice costs nothing.
    pub fn sweep(&mut self, retention: Duration) -> Result<u64, StoreError> {
        self.client
            .execute(
                "DELETE FROM cuzk_jobs WHERE outcome IS NOT NULL
                 AND (outcome->>'finished_unix_ms')::bigint < (extract(epoch from now()) * 1000)::bigint - $1",
                &[&(retention.as_millis() as i64)],
            )
            .map_err(|e| self.unavailable("cannot remove finished jobs", e))
    }

    /// The database failed while doing `doing`: the store's kind of
    /// failure, which the claimer and the renewer retry.
    fn unavailable(&self, doing: &str, error: postgres::Error) -> StoreError {
        StoreError::unavailable(self.place.failed(doing, error))
    }
}
