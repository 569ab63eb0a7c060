//! The job store on PostgreSQL (`store.url`): the same writes, loads and
//! failure handling as the redb file (`store.rs` drives both), on a database
//! that outlives any one machine. The schema is in `migrations/`
//! (`postgres/migrate.rs` applies it when the store opens).
//!
//! The writer thread owns one connection and runs each group of writes as
//! one transaction. A lost connection (the database restarted, the network
//! failed) fails the transaction; the writer's retry reconnects. Two cases
//! need more than that:
//! - a connection that died while idle is found dead only when the next
//!   transaction begins: nothing was sent yet, so one fresh connection is
//!   tried at once instead of failing new jobs for an outage that is over;
//! - a connection lost while COMMIT was in flight leaves the transaction's
//!   fate unknown: its new jobs were refused (their submitters answered
//!   503), but the database may have committed them. The transaction's id is
//!   kept, and the next transaction asks the database (`txid_status`) and
//!   removes those jobs if it did, so that a refused job never comes back.

use std::collections::HashMap;

use cuzk_actors::model::ProofRecord;
use cuzk_actors::store::{JobOutcome, JobRecord, StoreError, StoreWrite, StoredJob};
use cuzk_actors::telemetry;
use cuzk_actors::time::unix_ms;
use cuzk_actors::Stage;
use postgres::types::Json;
use postgres::{Client, IsolationLevel, Statement};

use super::{without_request, Engine, OpenError, PgJobStore, PROBE_BYTES};
use crate::postgres::{client_config, describe, migrate, Connector, Place, StoreUrl};

impl PgJobStore {
    /// Connects, brings the schema up to date and starts the writer thread.
    /// Fails with a message (the password hidden) when the URL is malformed,
    /// its TLS options cannot be used, or the database cannot be reached or migrated.
    ///
    /// `node` is set on a fleet node: a partition's result is then recorded
    /// only while the node holds its lease, and a job ends with the
    /// transaction that records its last partition (`apply_leased`).
    pub fn connect(url: &StoreUrl, node: Option<&str>) -> Result<Self, OpenError> {
        let config = client_config(url)?;
        let node = node.map(str::to_string);
        let (place, url) = (Place::new("job store", url), url.clone());
        super::start(move || {
            let mut client = config.connect().map_err(|e| place.failed("cannot connect", e))?;
            migrate(&mut client, &place)?;
            let connection =
                Connection::prepare(client).map_err(|e| place.failed("cannot prepare its statements", e))?;
            log::info!("{place}: connected");
            // StoreError's own text says "job store".
            let place = Place::url(&url);
            let engine = Pg { config, place, connection: Some(connection), in_doubt: Vec::new(), node };
            Ok((engine, Vec::new()))
        })
    }
}

/// The PostgreSQL engine, owned by the writer thread.
pub struct Pg {
    /// How to connect again after the connection is lost.
    config: Connector,
    /// The database (its password hidden), as errors name it.
    place: Place,
    /// None after a failure: connected again by the next transaction.
    connection: Option<Connection>,
    /// Transactions whose COMMIT got no answer and whose fate the database
    /// has not told yet.
    in_doubt: Vec<InDoubt>,
    /// A fleet node's name: results are recorded under its leases.
    node: Option<String>,
}

/// A transaction of unknown fate: if it committed, its refused jobs must go.
struct InDoubt {
    /// `txid_current()` inside it.
    xid: i64,
    /// The jobs it recorded, which the writer refused.
    refused: Vec<String>,
}

/// A connection and its prepared statements (a statement belongs to the
/// connection that prepared it).
struct Connection {
    client: Client,
    accept: Statement,
    prove: Statement,
    fail: Statement,
    record: Statement,
    finish: Statement,
    remove: Statement,
    probe: Statement,
    /// A fleet node's statements (`apply_leased`).
    leased: Leased,
}

/// How a fleet node records a partition's end: the job's row locked first,
/// so that two nodes finishing its last two partitions at once see each
/// other's lease gone and exactly one of them ends the job.
struct Leased {
    lock_job: Statement,
    take_lease: Statement,
    prove: Statement,
    fail: Statement,
    end_if_done: Statement,
    end_failed: Statement,
}

impl Connection {
    fn prepare(mut client: Client) -> Result<Self, postgres::Error> {
        // Every write of a job not recorded is skipped (`Engine::commit`):
        // the partition inserts select nothing, the updates match nothing.
        Ok(Self {
            accept: client.prepare(
                "INSERT INTO cuzk_jobs (id, seq, record) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, record = excluded.record",
            )?,
            prove: client.prepare(
                "INSERT INTO cuzk_partitions (job, partition_index, proof, public_inputs)
                 SELECT $1::text, $2::bigint, $3::bytea, $4::bytea[] WHERE EXISTS (SELECT 1 FROM cuzk_jobs WHERE id = $1)
                 ON CONFLICT (job, partition_index)
                 DO UPDATE SET proof = excluded.proof, public_inputs = excluded.public_inputs",
            )?,
            fail: client.prepare(
                "INSERT INTO cuzk_partitions (job, partition_index, failure)
                 SELECT $1::text, $2::bigint, $3::text WHERE EXISTS (SELECT 1 FROM cuzk_jobs WHERE id = $1)
                 ON CONFLICT (job, partition_index) DO UPDATE SET failure = excluded.failure",
            )?,
            record: client.prepare("SELECT record FROM cuzk_jobs WHERE id = $1")?,
            finish: client.prepare("UPDATE cuzk_jobs SET record = $2, outcome = $3 WHERE id = $1")?,
            remove: client.prepare("DELETE FROM cuzk_jobs WHERE id = $1")?,
            probe: client.prepare(
                "INSERT INTO cuzk_probe (id, bytes) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET bytes = excluded.bytes",
            )?,
            leased: Leased {
                lock_job: client.prepare("SELECT 1 FROM cuzk_jobs WHERE id = $1 AND outcome IS NULL FOR UPDATE")?,
                take_lease: client.prepare(
                    "DELETE FROM cuzk_leases WHERE job = $1 AND partition_index = $2 AND owner = $3",
                )?,
                prove: client.prepare(
                    "INSERT INTO cuzk_partitions (job, partition_index, proof, public_inputs, node, detail)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job, partition_index) DO NOTHING",
                )?,
                fail: client.prepare(
                    "INSERT INTO cuzk_partitions (job, partition_index, failure, node) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (job, partition_index) DO UPDATE SET failure = excluded.failure, node = excluded.node",
                )?,
                // The request goes with the job's end (`without_request`).
                end_if_done: client.prepare(
                    "UPDATE cuzk_jobs SET outcome = $2, record = (record::jsonb || '{\"request\": \"\"}')::json
                     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM cuzk_leases WHERE job = $1)
                       AND NOT EXISTS (SELECT 1 FROM cuzk_partitions WHERE job = $1 AND proof IS NULL)
                     RETURNING record",
                )?,
                end_failed: client.prepare(END_JOB)?,
            },
            client,
        })
    }
}

/// Where a transaction failed: only a failure at COMMIT leaves its fate
/// unknown, and only one before anything was sent is safe to try again.
enum Failed {
    /// Connecting, or BEGIN: nothing of the transaction reached the database.
    Before(postgres::Error),
    /// A statement: the transaction did not commit.
    During(postgres::Error),
    /// COMMIT sent, no answer: the transaction `xid` may have committed.
    AtCommit(i64, postgres::Error),
}

impl Engine for Pg {
    fn commit<'a>(
        &mut self,
        writes: impl Iterator<Item = &'a StoreWrite>,
        probe: bool,
    ) -> Result<(), StoreError> {
        let writes: Vec<&StoreWrite> = writes.collect();
        let reused = self.connection.is_some();
        let mut result = self.transact(&writes, probe);
        if let (Err(Failed::Before(e)), true) = (&result, reused) {
            log::info!("{}: the connection was lost while idle ({}); reconnecting", self.place, describe(e));
            self.connection = None;
            result = self.transact(&writes, probe);
        }
        let error = match result {
            Ok(()) => return Ok(()),
            Err(Failed::Before(e) | Failed::During(e)) => e,
            Err(Failed::AtCommit(xid, e)) => {
                let refused = writes
                    .iter()
                    .filter_map(|write| match write {
                        StoreWrite::Accepted(record) => Some(record.id.0.clone()),
                        _ => None,
                    })
                    .collect();
                self.in_doubt.push(InDoubt { xid, refused });
                e
            }
        };
        self.connection = None;
        Err(StoreError::unavailable(self.place.failed("cannot write", error)))
    }

    /// One round trip on the connection, reconnecting if it was lost.
    fn check(&mut self) -> Result<(), StoreError> {
        let result = connected(&mut self.connection, &self.config)
            .and_then(|conn| conn.client.batch_execute("SELECT 1"));
        result.map_err(|e| {
            self.connection = None;
            StoreError::unavailable(self.place.failed("cannot reach the database", e))
        })
    }

    /// Every job in submission order, read in one snapshot. A record that
    /// does not parse is reported and skipped, and left in the database.
    fn load(&mut self, incidents: &mut Vec<String>) -> Result<Vec<StoredJob>, StoreError> {
        let result = self.read(incidents);
        if result.is_err() {
            self.connection = None;
        }
        result.map_err(|e| StoreError::unavailable(self.place.failed("cannot read the jobs", e)))
    }
}

/// The open connection, or a new one after a failure.
fn connected<'a>(
    connection: &'a mut Option<Connection>,
    config: &Connector,
) -> Result<&'a mut Connection, postgres::Error> {
    if connection.is_none() {
        *connection = Some(Connection::prepare(config.connect()?)?);
    }
    Ok(connection.as_mut().expect("just connected"))
}

impl Pg {
    /// One transaction: settles earlier transactions of unknown fate, writes
    /// the probe if asked, then applies `writes` in order.
    fn transact(&mut self, writes: &[&StoreWrite], probe: bool) -> Result<(), Failed> {
        let conn = connected(&mut self.connection, &self.config).map_err(Failed::Before)?;
        conn.client.batch_execute("BEGIN").map_err(Failed::Before)?;
        let xid: i64 = conn
            .client
            .query_one("SELECT txid_current()", &[])
            .and_then(|row| row.try_get(0))
            .map_err(Failed::During)?;
        let settled = settle(conn, &self.in_doubt).map_err(Failed::During)?;
        if probe {
            conn.client.execute(&conn.probe, &[&[0u8; PROBE_BYTES].as_slice()]).map_err(Failed::During)?;
        }
        for write in writes {
            match &self.node {
                Some(node) => apply_leased(conn, node, write),
                None => apply(conn, write),
            }
            .map_err(Failed::During)?;
        }
        conn.client.batch_execute("COMMIT").map_err(|e| Failed::AtCommit(xid, e))?;
        self.in_doubt.retain(|doubt| !settled.contains(&doubt.xid));
        Ok(())
    }

    fn read(&mut self, incidents: &mut Vec<String>) -> Result<Vec<StoredJob>, postgres::Error> {
        let conn = connected(&mut self.connection, &self.config)?;
        let mut txn = conn
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        let mut jobs = Vec::new();
        let mut by_id = HashMap::new();
        for row in txn.query("SELECT id, record, outcome FROM cuzk_jobs ORDER BY seq, id", &[])? {
            let id: String = row.try_get(0)?;
            let parsed = row
                .try_get::<_, Json<JobRecord>>(1)
                .and_then(|record| Ok((record.0, row.try_get::<_, Option<Json<JobOutcome>>>(2)?)));
            match parsed {
                Ok((record, outcome)) => {
                    by_id.insert(id, jobs.len());
                    jobs.push(StoredJob {
                        record,
                        proofs: Default::default(),
                        failures: Default::default(),
                        outcome: outcome.map(|outcome| outcome.0),
                    });
                }
                Err(e) => {
                    let incident = format!(
                        "job {id}: its stored record cannot be read ({}); skipped, and left in the database",
                        describe(&e)
                    );
                    log::error!("job store: {incident}");
                    incidents.push(incident);
                }
            }
        }
        let partitions = txn
            .query("SELECT job, partition_index, proof, public_inputs, failure FROM cuzk_partitions", &[])?;
        for row in partitions {
            let Some(&at) = by_id.get(row.try_get::<_, &str>(0)?) else {
                continue;
            };
            let job = &mut jobs[at];
            // Written from a u32 (the column is wider only because SQL has
            // no unsigned integers).
            let index = row.try_get::<_, i64>(1)? as u32;
            let proof: Option<Vec<u8>> = row.try_get(2)?;
            let public_inputs: Option<Vec<Vec<u8>>> = row.try_get(3)?;
            if let (Some(proof), Some(public_inputs)) = (proof, public_inputs) {
                job.proofs.insert(index, ProofRecord { proof, public_inputs });
            }
            if let Some(failure) = row.try_get::<_, Option<String>>(4)? {
                job.failures.insert(index, failure);
            }
        }
        txn.commit()?;
        Ok(jobs)
    }
}

/// Asks the database how each transaction of unknown fate ended, and
/// removes the refused jobs of those that committed (inside the current
/// transaction). Returns the ids of the transactions settled; one still in
/// progress is asked about again next time.
fn settle(conn: &mut Connection, in_doubt: &[InDoubt]) -> Result<Vec<i64>, postgres::Error> {
    let mut settled = Vec::new();
    for doubt in in_doubt {
        let status: Option<String> =
            conn.client.query_one("SELECT txid_status($1)", &[&doubt.xid])?.try_get(0)?;
        match status.as_deref() {
            Some("in progress") => continue,
            Some("committed") => {
                for id in &doubt.refused {
                    conn.client.execute(&conn.remove, &[id])?;
                }
                log::warn!(
                    "job store: a commit whose answer was lost had succeeded; the {} jobs it recorded, refused to their submitters, are removed",
                    doubt.refused.len()
                );
            }
            // Aborted, or too old for the database to remember: nothing of
            // it stands.
            _ => {}
        }
        settled.push(doubt.xid);
    }
    Ok(settled)
}

/// A fleet node's write: a partition's proof or failure counts only while
/// this node holds its lease (one that ran out and was claimed by another
/// node is that node's to record), and the job ends here when this was its
/// last partition, or when the partition failed for good. Other writes are
/// recorded as on a single daemon.
fn apply_leased(conn: &mut Connection, node: &str, write: &StoreWrite) -> Result<(), postgres::Error> {
    let (job, index) = match write {
        StoreWrite::PartitionProved { job, index, .. } | StoreWrite::PartitionFailed { job, index, .. } => {
            (job, i64::from(*index))
        }
        _ => return apply(conn, write),
    };
    let (client, sql) = (&mut conn.client, &conn.leased);
    if client.query_opt(&sql.lock_job, &[&job.0])?.is_none()
        || client.execute(&sql.take_lease, &[&job.0, &index, &node])? == 0
    {
        crate::telemetry::FleetLeaseLost {
            partition: &format!("{job}/{index}"),
            when: "recording its result",
        }
        .emit();
        return Ok(());
    }
    let now = unix_ms(std::time::SystemTime::now());
    match write {
        StoreWrite::PartitionProved { proof, detail, .. } => {
            let detail = detail.as_ref().map(Json);
            client
                .execute(&sql.prove, &[&job.0, &index, &proof.proof, &proof.public_inputs, &node, &detail])?;
            let done = JobOutcome { stage: Stage::Done, error: None, finished_unix_ms: now };
            end_job(client, &sql.end_if_done, job, &done)?;
        }
        StoreWrite::PartitionFailed { error, .. } => {
            let error = error.replace('\0', "\u{fffd}");
            client.execute(&sql.fail, &[&job.0, &index, &error, &node])?;
            let error = format!("partition {index}: {error}");
            let failed = JobOutcome { stage: Stage::Failed, error: Some(error), finished_unix_ms: now };
            end_job(client, &sql.end_failed, job, &failed)?;
        }
        _ => unreachable!("matched above"),
    }
    Ok(())
}

/// Ends a fleet job before all its partitions are proved (one failed for
/// good, or it was cancelled): its remaining leases go, so the nodes holding
/// them stop at their next renewal; its outcome is set and its request
/// dropped (as `without_request` does). $1 the job, $2 the outcome.
pub const END_JOB: &str = "WITH gone AS (DELETE FROM cuzk_leases WHERE job = $1)
     UPDATE cuzk_jobs SET outcome = $2, record = (record::jsonb || '{\"request\": \"\"}')::json
     WHERE id = $1 RETURNING record";

/// Runs a statement that ends a fleet job (`END_JOB`, or the writer's
/// end-if-done; $1 the job, $2 the outcome, returning the record), prepared
/// or not, and reports the end when it did.
pub fn end_job<S: ?Sized + postgres::ToStatement>(
    client: &mut impl postgres::GenericClient,
    statement: &S,
    job: &cuzk_actors::JobId,
    outcome: &JobOutcome,
) -> Result<(), postgres::Error> {
    if let Some(row) = client.query_opt(statement, &[&job.0, &Json(outcome)])? {
        report_end(&row.try_get::<_, Json<JobRecord>>(0)?.0, outcome);
    }
    Ok(())
}

/// Reports a fleet job's end, which its tracker does not see (it happens in
/// the database): the job's outcome and duration, a missed deadline. Each
/// node reports the ends it recorded, so the nodes' counts sum to the
/// fleet's.
fn report_end(record: &JobRecord, outcome: &JobOutcome) {
    let elapsed =
        std::time::Duration::from_millis(outcome.finished_unix_ms.saturating_sub(record.submitted_unix_ms));
    if record.deadline_ms.is_some_and(|deadline| elapsed.as_millis() > u128::from(deadline)) {
        telemetry::DeadlineMissed { job: &record.id.0, priority: record.priority, outcome: outcome.stage }
            .emit();
    }
    telemetry::JobFinished {
        job: &record.id.0,
        outcome: outcome.stage,
        elapsed,
        error: outcome.error.as_deref(),
    }
    .emit();
}

fn apply(conn: &mut Connection, write: &StoreWrite) -> Result<(), postgres::Error> {
    let client = &mut conn.client;
    match write {
        StoreWrite::Accepted(record) => {
            client.execute(&conn.accept, &[&record.id.0, &(record.seq as i64), &Json(record)])?;
        }
        StoreWrite::PartitionProved { job, index, proof, .. } => {
            let params: [&(dyn postgres::types::ToSql + Sync); 4] =
                [&job.0, &i64::from(*index), &proof.proof, &proof.public_inputs];
            client.execute(&conn.prove, &params)?;
        }
        StoreWrite::PartitionFailed { job, index, error } => {
            // A text column takes no NUL, and an error message may quote
            // a client's input.
            let error = error.replace('\0', "\u{fffd}");
            client.execute(&conn.fail, &[&job.0, &i64::from(*index), &error])?;
        }
        StoreWrite::Finished { job, outcome } => {
            if let Some(row) = client.query_opt(&conn.record, &[&job.0])? {
                let record = row.try_get::<_, Json<JobRecord>>(0)?.0;
                client.execute(&conn.finish, &[&job.0, &Json(without_request(record)), &Json(outcome)])?;
            }
        }
        StoreWrite::Removed(job) => {
            client.execute(&conn.remove, &[&job.0])?;
        }
        StoreWrite::Barrier => {}
    }
    Ok(())
}
