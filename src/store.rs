//! The job store in one redb file, `<data_dir>/jobs.redb`: embedded, ACID,
//! crash-safe (copy-on-write pages with a checksummed commit), no server.
//!
//! One writer thread owns the database. Writes queue on a channel; the
//! writer drains everything queued into one transaction and commits it with a
//! single fsync before acknowledging any of them (group commit), so a burst
//! of submissions costs a few fsyncs, not one each, and no actor ever waits
//! for the disk.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

use cuzk_actors::messages::RestoredJob;
use cuzk_actors::model::ProofRecord;
use cuzk_actors::time::unix_ms;
use cuzk_actors::store::{
    CommitSignal, Committed, JobOutcome, JobRecord, JobStore, StoreError, StoreWrite, StoredJob,
};
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::job_input::JobParser;

/// Job id → JobRecord (JSON).
const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
/// (job id, partition) → ProofRow (JSON).
const PROOFS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("proofs");
/// (job id, partition) → error text.
const FAILURES: TableDefinition<(&str, u32), &str> = TableDefinition::new("failures");
/// Job id → JobOutcome (JSON).
const OUTCOMES: TableDefinition<&str, &[u8]> = TableDefinition::new("outcomes");

/// A transaction this large is committed and a new one started, so that one
/// huge burst does not hold every acknowledgement until its end.
const MAX_WRITES_PER_COMMIT: usize = 4096;

enum Command {
    Write(StoreWrite, CommitSignal),
    Load(mpsc::Sender<Result<Vec<StoredJob>, StoreError>>),
    Close(CommitSignal),
}

pub struct RedbJobStore {
    commands: mpsc::Sender<Command>,
    writer: Mutex<Option<JoinHandle<()>>>,
    counts: Arc<CommitCounts>,
}

/// How well group commit works: writes per transaction.
#[derive(Default)]
struct CommitCounts {
    writes: AtomicU64,
    transactions: AtomicU64,
}

#[derive(Serialize, Deserialize)]
struct ProofRow {
    proof: String,
    public_inputs: Vec<String>,
}

impl RedbJobStore {
    /// Opens (or creates) the file and starts its writer thread.
    pub fn open(path: &Path) -> Result<Self, String> {
        let db = Database::create(path)
            .map_err(|e| format!("cannot open the job store {}: {e}", path.display()))?;
        create_tables(&db).map_err(|e| format!("job store {}: {e}", path.display()))?;
        let (commands, queue) = mpsc::channel();
        let counts = Arc::new(CommitCounts::default());
        let writer_counts = counts.clone();
        let writer = std::thread::Builder::new()
            .name("cuzk-store-writer".into())
            .spawn(move || run_writer(db, queue, &writer_counts))
            .map_err(|e| format!("cannot start the store writer: {e}"))?;
        Ok(Self {
            commands,
            writer: Mutex::new(Some(writer)),
            counts,
        })
    }

    /// Transactions committed so far, each one fsync.
    pub fn transactions(&self) -> u64 {
        self.counts.transactions.load(Ordering::Relaxed)
    }
}

impl JobStore for RedbJobStore {
    fn write(&self, write: StoreWrite) -> Committed {
        let (signal, committed) = Committed::channel();
        // A closed store drops the command, and with it the signal, so the
        // waiter learns the write was not made.
        let _ = self.commands.send(Command::Write(write, signal));
        committed
    }

    fn load(&self) -> Result<Vec<StoredJob>, StoreError> {
        let (reply, answer) = mpsc::channel();
        // Either way the writer thread is gone.
        self.commands
            .send(Command::Load(reply))
            .map_err(|_| StoreError::Closed)?;
        answer.recv().map_err(|_| StoreError::Closed)?
    }

    fn close(&self) -> Result<(), StoreError> {
        let Some(writer) = self.writer.lock().expect("not poisoned").take() else {
            return Ok(());
        };
        let (signal, committed) = Committed::channel();
        let _ = self.commands.send(Command::Close(signal));
        let result = committed.wait_blocking();
        let _ = writer.join();
        log::info!(
            "job store closed: {} writes in {} transactions",
            self.counts.writes.load(Ordering::Relaxed),
            self.transactions()
        );
        result
    }
}

fn create_tables(db: &Database) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    txn.open_table(JOBS)?;
    txn.open_table(PROOFS)?;
    txn.open_table(FAILURES)?;
    txn.open_table(OUTCOMES)?;
    txn.commit()?;
    Ok(())
}

fn run_writer(db: Database, queue: mpsc::Receiver<Command>, counts: &CommitCounts) {
    let mut pending: Vec<(StoreWrite, CommitSignal)> = Vec::new();
    while let Ok(first) = queue.recv() {
        for command in std::iter::once(first).chain(queue.try_iter()) {
            match command {
                Command::Write(write, signal) => {
                    pending.push((write, signal));
                    if pending.len() == MAX_WRITES_PER_COMMIT {
                        commit(&db, &mut pending, counts);
                    }
                }
                // Everything queued before a load or close is committed first.
                Command::Load(reply) => {
                    commit(&db, &mut pending, counts);
                    let _ = reply.send(load(&db));
                }
                Command::Close(signal) => {
                    commit(&db, &mut pending, counts);
                    signal.send(Ok(()));
                    return;
                }
            }
        }
        commit(&db, &mut pending, counts);
    }
}

/// One transaction, one fsync, then every waiter hears the result.
fn commit(db: &Database, pending: &mut Vec<(StoreWrite, CommitSignal)>, counts: &CommitCounts) {
    if pending.is_empty() {
        return;
    }
    let result = apply(db, pending.iter().map(|(write, _)| write));
    if result.is_ok() {
        counts.transactions.fetch_add(1, Ordering::Relaxed);
        counts
            .writes
            .fetch_add(pending.len() as u64, Ordering::Relaxed);
    }
    if let Err(error) = &result {
        log::error!("job store: {} writes not committed: {error}", pending.len());
    }
    for (_, signal) in pending.drain(..) {
        signal.send(result.clone());
    }
}

fn apply<'a>(
    db: &Database,
    writes: impl Iterator<Item = &'a StoreWrite>,
) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(StoreError::unavailable)?;
    {
        let mut jobs = txn.open_table(JOBS).map_err(StoreError::unavailable)?;
        let mut proofs = txn.open_table(PROOFS).map_err(StoreError::unavailable)?;
        let mut failures = txn.open_table(FAILURES).map_err(StoreError::unavailable)?;
        let mut outcomes = txn.open_table(OUTCOMES).map_err(StoreError::unavailable)?;
        for write in writes {
            match write {
                StoreWrite::Accepted(record) => {
                    let row = serde_json::to_vec(record).map_err(StoreError::unavailable)?;
                    jobs.insert(record.id.0.as_str(), row.as_slice())
                        .map_err(StoreError::unavailable)?;
                }
                StoreWrite::PartitionProved { job, index, proof } => {
                    let row = serde_json::to_vec(&ProofRow {
                        proof: hex::encode(&proof.proof),
                        public_inputs: proof.public_inputs.iter().map(hex::encode).collect(),
                    })
                    .map_err(StoreError::unavailable)?;
                    proofs
                        .insert((job.0.as_str(), *index), row.as_slice())
                        .map_err(StoreError::unavailable)?;
                }
                StoreWrite::PartitionFailed { job, index, error } => {
                    failures
                        .insert((job.0.as_str(), *index), error.as_str())
                        .map_err(StoreError::unavailable)?;
                }
                StoreWrite::Finished { job, outcome } => {
                    let row = serde_json::to_vec(outcome).map_err(StoreError::unavailable)?;
                    outcomes
                        .insert(job.0.as_str(), row.as_slice())
                        .map_err(StoreError::unavailable)?;
                }
                StoreWrite::Barrier => {}
                StoreWrite::Removed(job) => {
                    let id = job.0.as_str();
                    jobs.remove(id).map_err(StoreError::unavailable)?;
                    outcomes.remove(id).map_err(StoreError::unavailable)?;
                    proofs
                        .retain_in((id, 0)..=(id, u32::MAX), |_, _| false)
                        .map_err(StoreError::unavailable)?;
                    failures
                        .retain_in((id, 0)..=(id, u32::MAX), |_, _| false)
                        .map_err(StoreError::unavailable)?;
                }
            }
        }
    }
    txn.commit().map_err(StoreError::unavailable)
}

fn load(db: &Database) -> Result<Vec<StoredJob>, StoreError> {
    let txn = db.begin_read().map_err(StoreError::unavailable)?;
    let jobs = txn.open_table(JOBS).map_err(StoreError::unavailable)?;
    let proofs = txn.open_table(PROOFS).map_err(StoreError::unavailable)?;
    let failures = txn.open_table(FAILURES).map_err(StoreError::unavailable)?;
    let outcomes = txn.open_table(OUTCOMES).map_err(StoreError::unavailable)?;
    let mut loaded = Vec::new();
    for entry in jobs.iter().map_err(StoreError::unavailable)? {
        let (id, row) = entry.map_err(StoreError::unavailable)?;
        let id = id.value();
        let record: JobRecord = serde_json::from_slice(row.value())
            .map_err(|e| StoreError::bad_record(id, "record", e))?;
        let mut stored = StoredJob {
            record,
            proofs: Default::default(),
            failures: Default::default(),
            outcome: None,
        };
        for entry in proofs.range((id, 0)..=(id, u32::MAX)).map_err(StoreError::unavailable)? {
            let (key, row) = entry.map_err(StoreError::unavailable)?;
            let row: ProofRow = serde_json::from_slice(row.value())
                .map_err(|e| StoreError::bad_record(id, "proof", e))?;
            let decode = |hex_text: &str| {
                hex::decode(hex_text).map_err(|e| StoreError::bad_record(id, "proof", e))
            };
            let proof = ProofRecord {
                proof: decode(&row.proof)?,
                public_inputs: row
                    .public_inputs
                    .iter()
                    .map(|input| decode(input))
                    .collect::<Result<_, _>>()?,
            };
            stored.proofs.insert(key.value().1, proof);
        }
        for entry in failures.range((id, 0)..=(id, u32::MAX)).map_err(StoreError::unavailable)? {
            let (key, error) = entry.map_err(StoreError::unavailable)?;
            stored
                .failures
                .insert(key.value().1, error.value().to_string());
        }
        if let Some(row) = outcomes.get(id).map_err(StoreError::unavailable)? {
            let outcome: JobOutcome = serde_json::from_slice(row.value())
                .map_err(|e| StoreError::bad_record(id, "outcome", e))?;
            stored.outcome = Some(outcome);
        }
        loaded.push(stored);
    }
    loaded.sort_by_key(|job| job.record.seq);
    Ok(loaded)
}

/// Turns stored jobs back into tracker jobs. An unfinished job's work is
/// rebuilt from its recorded request by the submit handler's own parser; one
/// that no longer parses (a circuit gone, a limit lowered) fails, recorded.
pub fn rebuild(parser: &JobParser, store: &dyn JobStore, stored: Vec<StoredJob>) -> Vec<RestoredJob> {
    stored
        .into_iter()
        .map(|mut job| {
            if job.outcome.is_some() {
                return RestoredJob::Finished(job);
            }
            match parser.parse(job.record.request.as_bytes()) {
                Ok(parsed) => RestoredJob::Unfinished {
                    reservation: parsed.reservation,
                    work: Arc::new(parsed.work),
                    stored: job,
                },
                Err(error) => {
                    let outcome = JobOutcome {
                        stage: cuzk_actors::Stage::Failed,
                        error: Some(format!("cannot resume after restart: {error}")),
                        finished_unix_ms: unix_ms(SystemTime::now()),
                    };
                    log::warn!(
                        "job {}: {}",
                        job.record.id,
                        outcome.error.as_deref().unwrap_or("")
                    );
                    drop(store.write(StoreWrite::Finished {
                        job: job.record.id.clone(),
                        outcome: outcome.clone(),
                    }));
                    job.outcome = Some(outcome);
                    RestoredJob::Finished(job)
                }
            }
        })
        .collect()
}
