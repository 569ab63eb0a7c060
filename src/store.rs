//! The job store in one redb file, `<data_dir>/jobs.redb`: embedded, ACID,
//! crash-safe (copy-on-write pages with a checksummed commit), no server.
//!
//! One writer thread owns the database. Writes queue on a channel; the
//! writer drains everything queued into one transaction and commits it with a
//! single fsync before acknowledging any of them (group commit), so a burst
//! of submissions costs a few fsyncs, not one each, and no actor ever waits
//! for the disk.
//!
//! A commit that fails (disk full, I/O error) fails the new jobs in it (their
//! submitters answer 503) and keeps the other writes, which belong to jobs
//! already acknowledged; the writer reopens the database and retries them
//! every second until a commit succeeds. `store/rows.rs` seals every row
//! with a checksum; `store/open.rs` handles a file found damaged or missing.

mod open;
mod rows;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use cuzk_actors::store::{
    CommitSignal, Committed, JobOutcome, JobStore, StoreError, StoreHealth, StoreWrite, StoredJob,
};
use cuzk_actors::telemetry::{StoreDamageKind, StoreWritable, StoreWriteFailed};
use cuzk_actors::time::unix_ms;
use cuzk_actors::{JobId, Stage};
use redb::{Database, ReadableTable, TableDefinition};

use rows::Row;

/// (job id, row kind, partition) → a sealed row (`rows.rs`). One table, so
/// that a job's rows are one key range: loaded, and removed, together.
const ROWS: TableDefinition<(&str, u8, u32), &[u8]> = TableDefinition::new("rows");

/// A transaction this large is committed and a new one started, so that one
/// huge burst does not hold every acknowledgement until its end.
const MAX_WRITES_PER_COMMIT: usize = 4096;

/// How often a failing store retries its kept writes.
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Written in every transaction of a failing store: a commit that changes
/// little or nothing (the writes it retries may all be skipped) can succeed
/// on a full disk, one that must place new bytes cannot, so only that tells
/// that a new job would be written.
const PROBE: TableDefinition<(), &[u8]> = TableDefinition::new("probe");
const PROBE_BYTES: usize = 64 << 10;

enum Command {
    Write(StoreWrite, CommitSignal),
    Load(mpsc::Sender<Result<Vec<StoredJob>, StoreError>>),
    Close(CommitSignal),
}

pub struct RedbJobStore {
    commands: mpsc::Sender<Command>,
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
}

/// What the writer thread reports to the handles.
#[derive(Default)]
struct Shared {
    /// Writes per transaction: how well group commit works.
    writes: AtomicU64,
    transactions: AtomicU64,
    health: Mutex<StoreHealth>,
}

impl Shared {
    fn health(&self) -> std::sync::MutexGuard<'_, StoreHealth> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RedbJobStore {
    /// Opens (or creates) the file, repairing what `store/open.rs` can, and
    /// starts its writer thread.
    pub fn open(path: &Path) -> Result<Self, String> {
        let opened = open::open(path)?;
        let (commands, queue) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        shared.health().incidents = opened.incidents;
        let writer = Writer {
            db: Some(opened.db),
            path: path.to_path_buf(),
            shared: shared.clone(),
            kept: Vec::new(),
            failures: 0,
        };
        StoreWritable { after_failures: 0 }.emit();
        let writer = std::thread::Builder::new()
            .name("cuzk-store-writer".into())
            .spawn(move || writer.run(queue))
            .map_err(|e| format!("cannot start the store writer: {e}"))?;
        Ok(Self {
            commands,
            writer: Mutex::new(Some(writer)),
            shared,
        })
    }

    /// Transactions committed so far, each one fsync.
    pub fn transactions(&self) -> u64 {
        self.shared.transactions.load(Ordering::Relaxed)
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
        let Some(writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        let (signal, committed) = Committed::channel();
        let _ = self.commands.send(Command::Close(signal));
        let result = committed.wait_blocking();
        let _ = writer.join();
        log::info!(
            "job store closed: {} writes in {} transactions",
            self.shared.writes.load(Ordering::Relaxed),
            self.transactions()
        );
        result
    }

    fn health(&self) -> StoreHealth {
        self.shared.health().clone()
    }
}

/// Free bytes for an unprivileged writer on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a statvfs the call fills.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    (rc == 0).then(|| stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// The writer thread's state.
struct Writer {
    /// None after a failed commit: redb must be reopened after an I/O error.
    db: Option<Database>,
    path: PathBuf,
    shared: Arc<Shared>,
    /// Writes of acknowledged jobs whose commit failed, retried in order
    /// before anything newer. Bounded by what the pipeline finishes while
    /// the disk is failing (proofs, outcomes): a few hundred bytes each.
    kept: Vec<(StoreWrite, CommitSignal)>,
    /// Failed commits since the last success.
    failures: u64,
}

impl Writer {
    fn run(mut self, queue: mpsc::Receiver<Command>) {
        let mut pending: Vec<(StoreWrite, CommitSignal)> = Vec::new();
        loop {
            let first = if self.failures == 0 {
                queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                queue.recv_timeout(RETRY_INTERVAL)
            };
            let first = match first {
                Ok(command) => command,
                Err(RecvTimeoutError::Timeout) => {
                    self.commit(&mut pending);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            for command in std::iter::once(first).chain(queue.try_iter()) {
                match command {
                    Command::Write(write, signal) => {
                        pending.push((write, signal));
                        if pending.len() == MAX_WRITES_PER_COMMIT {
                            self.commit(&mut pending);
                        }
                    }
                    // Everything queued before a load or close is committed first.
                    Command::Load(reply) => {
                        self.commit(&mut pending);
                        let _ = reply.send(self.load());
                    }
                    Command::Close(signal) => {
                        self.commit(&mut pending);
                        let unsaved = self.kept.len();
                        signal.send(if unsaved == 0 {
                            Ok(())
                        } else {
                            Err(StoreError::unavailable(format!(
                                "{unsaved} writes could not be committed before closing"
                            )))
                        });
                        return;
                    }
                }
            }
            self.commit(&mut pending);
        }
    }

    /// One transaction, one fsync, for the kept writes and the new ones;
    /// then every waiter hears the result.
    fn commit(&mut self, pending: &mut Vec<(StoreWrite, CommitSignal)>) {
        if pending.is_empty() && self.failures == 0 {
            return;
        }
        let mut writes = std::mem::take(&mut self.kept);
        writes.append(pending);
        let probe = self.failures > 0;
        let result = match self.database() {
            Ok(db) => apply(db, writes.iter().map(|(write, _)| write), probe),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                self.shared.transactions.fetch_add(1, Ordering::Relaxed);
                self.shared.writes.fetch_add(writes.len() as u64, Ordering::Relaxed);
                if self.failures > 0 {
                    StoreWritable { after_failures: self.failures }.emit();
                    self.failures = 0;
                    self.shared.health().failing = None;
                }
                for (_, signal) in writes {
                    signal.send(Ok(()));
                }
            }
            Err(error) => {
                self.failures += 1;
                self.db = None;
                StoreWriteFailed { writes: writes.len(), error: &error.to_string() }.emit();
                self.shared.health().failing = Some(error.to_string());
                for (write, signal) in writes {
                    // A new job is refused (its submitter answers 503); what
                    // acknowledged jobs did is kept until it can be written.
                    match write {
                        StoreWrite::Accepted(_) | StoreWrite::Barrier => signal.send(Err(error.clone())),
                        other => self.kept.push((other, signal)),
                    }
                }
            }
        }
    }

    /// The open database, reopened after a failure (redb refuses every
    /// later transaction of a handle that saw an I/O error).
    fn database(&mut self) -> Result<&Database, StoreError> {
        if self.db.is_none() {
            self.db = Some(Database::create(&self.path).map_err(StoreError::unavailable)?);
        }
        Ok(self.db.as_ref().expect("just opened"))
    }

    /// Every job, with damaged rows reported and dropped; a database that
    /// cannot be read at all is rebuilt from what its bytes still hold.
    fn load(&mut self) -> Result<Vec<StoredJob>, StoreError> {
        let db = self.database()?;
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load(db)));
        let loaded = match read {
            Ok(Ok(loaded)) => loaded,
            failed => {
                let cause = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "the database library panicked while reading".into(),
                };
                self.db = None;
                let (db, incident) = open::rebuild(&self.path, &cause).map_err(StoreError::unavailable)?;
                self.shared.health().incidents.push(incident);
                load(self.db.insert(db)).map_err(StoreError::unavailable)?
            }
        };
        if !loaded.damaged.is_empty() || !loaded.settled.is_empty() {
            self.repair(&loaded)?;
        }
        Ok(loaded.jobs)
    }

    /// Copies the file aside when rows are damaged, removes them, and
    /// records what damage meant: a proof that failed its check or was lost
    /// fails its partition (and a done job with it), so it is never served.
    fn repair(&mut self, loaded: &Loaded) -> Result<(), StoreError> {
        let aside = match loaded.damaged.is_empty() {
            true => PathBuf::new(),
            false => open::copy_aside(&self.path).map_err(StoreError::unavailable)?,
        };
        for (job, kind, index, why) in &loaded.damaged {
            self.shared.health().incidents.push(open::report(
                StoreDamageKind::Record,
                format!(
                    "job {job}: its {} record{} failed its check ({why}) and was dropped; the file before is at {}",
                    rows::kind_name(*kind),
                    if *kind >= rows::PROOF { format!(" for partition {index}") } else { String::new() },
                    aside.display()
                ),
            ));
        }
        let db = self.database()?;
        let txn = db.begin_write().map_err(StoreError::unavailable)?;
        {
            let mut table = txn.open_table(ROWS).map_err(StoreError::unavailable)?;
            for (job, kind, index, _) in &loaded.damaged {
                table.remove((job.as_str(), *kind, *index)).map_err(StoreError::unavailable)?;
            }
            for job in loaded.settled.iter().map(|&i| &loaded.jobs[i]) {
                for (index, error) in &job.failures {
                    let row = Row::Failure { job: job.record.id.clone(), index: *index, error: error.clone() };
                    table.insert(row.key(), rows::seal(&row).as_slice()).map_err(StoreError::unavailable)?;
                }
                if let Some(outcome) = &job.outcome {
                    let row = Row::Outcome { job: job.record.id.clone(), outcome: outcome.clone() };
                    table.insert(row.key(), rows::seal(&row).as_slice()).map_err(StoreError::unavailable)?;
                }
            }
        }
        txn.commit().map_err(StoreError::unavailable)
    }
}

type Rows<'txn> = redb::Table<'txn, (&'static str, u8, u32), &'static [u8]>;

fn put(table: &mut Rows<'_>, row: &Row) -> Result<(), StoreError> {
    table
        .insert(row.key(), rows::seal(row).as_slice())
        .map(drop)
        .map_err(StoreError::unavailable)
}

/// Whether the job's record is there: rows of a job that was never
/// recorded (its commit failed, then it was cancelled) are not written,
/// since nothing would ever remove them.
fn recorded(table: &Rows<'_>, job: &JobId) -> Result<bool, StoreError> {
    Ok(table
        .get((job.0.as_str(), rows::JOB, 0))
        .map_err(StoreError::unavailable)?
        .is_some())
}

fn apply<'a>(
    db: &Database,
    writes: impl Iterator<Item = &'a StoreWrite>,
    probe: bool,
) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(StoreError::unavailable)?;
    if probe {
        txn.open_table(PROBE)
            .map_err(StoreError::unavailable)?
            .insert((), [0u8; PROBE_BYTES].as_slice())
            .map_err(StoreError::unavailable)?;
    }
    {
        let mut table = txn.open_table(ROWS).map_err(StoreError::unavailable)?;
        for write in writes {
            match write {
                StoreWrite::Accepted(record) => put(&mut table, &Row::Job(record.clone()))?,
                StoreWrite::PartitionProved { job, index, proof } if recorded(&table, job)? => {
                    put(&mut table, &Row::proof(job, *index, proof))?
                }
                StoreWrite::PartitionFailed { job, index, error } if recorded(&table, job)? => {
                    put(&mut table, &Row::Failure { job: job.clone(), index: *index, error: error.clone() })?
                }
                StoreWrite::Finished { job, outcome } if recorded(&table, job)? => {
                    put(&mut table, &Row::Outcome { job: job.clone(), outcome: outcome.clone() })?;
                    finish_record(&mut table, job)?;
                }
                StoreWrite::Removed(job) => {
                    let id = job.0.as_str();
                    table
                        .retain_in((id, 0, 0)..=(id, u8::MAX, u32::MAX), |_, _| false)
                        .map_err(StoreError::unavailable)?;
                }
                _ => {}
            }
        }
    }
    txn.commit().map_err(StoreError::unavailable)
}

/// A finished job's record keeps its request's digest (for idempotency)
/// but not the request: nothing rebuilds a finished job's work, and a
/// restart should not read megabytes of inputs it will never use.
fn finish_record(table: &mut Rows<'_>, job: &JobId) -> Result<(), StoreError> {
    let key = (job.0.as_str(), rows::JOB, 0);
    let sealed = table.get(key).map_err(StoreError::unavailable)?.map(|v| v.value().to_vec());
    if let Some(Ok(Row::Job(mut record))) = sealed.map(|bytes| rows::unseal(&bytes)) {
        record.request_digest = Some(record.request_digest());
        record.request = String::new();
        put(table, &Row::Job(record))?;
    }
    Ok(())
}

/// What a load read: the jobs, and the rows that failed their check.
struct Loaded {
    jobs: Vec<StoredJob>,
    /// (job, kind, partition, why) of each damaged row.
    damaged: Vec<(String, u8, u32, String)>,
    /// Jobs (indices into `jobs`) failed because a proof was damaged or lost.
    settled: Vec<usize>,
}

/// Reads every row in key order: a job's record comes first, then its
/// outcome, proofs and failures. A damaged record drops its job; a damaged
/// proof fails its partition, and a job that was done becomes failed.
fn load(db: &Database) -> Result<Loaded, redb::Error> {
    let txn = db.begin_read()?;
    let table = txn.open_table(ROWS)?;
    let mut loaded = Loaded { jobs: Vec::new(), damaged: Vec::new(), settled: Vec::new() };
    let mut current: Option<StoredJob> = None;
    for entry in table.iter()? {
        let (key, value) = entry?;
        let (id, kind, index) = key.value();
        if current.as_ref().is_some_and(|job| job.record.id.0 != id) {
            loaded.jobs.extend(current.take());
        }
        let row = rows::unseal(value.value()).and_then(|row| {
            if row.key() == (id, kind, index) {
                Ok(row)
            } else {
                Err("stored under another job's key".into())
            }
        });
        let row = match row {
            Ok(Row::Job(record)) => {
                current = Some(StoredJob {
                    record,
                    proofs: Default::default(),
                    failures: Default::default(),
                    outcome: None,
                });
                continue;
            }
            Ok(row) => row,
            Err(why) => {
                if kind == rows::JOB {
                    current = None;
                }
                if let (rows::PROOF, Some(job)) = (kind, current.as_mut()) {
                    job.failures.insert(index, DAMAGED_PROOF.into());
                }
                loaded.damaged.push((id.to_string(), kind, index, why));
                continue;
            }
        };
        // Rows of a job whose record was damaged have nothing to join.
        let Some(job) = current.as_mut() else { continue };
        match row {
            Row::Outcome { outcome, .. } => job.outcome = Some(outcome),
            Row::Failure { index, error, .. } => {
                job.failures.insert(index, error);
            }
            Row::Proof { index, proof, public_inputs, .. } => {
                match rows::proof_record(&proof, &public_inputs) {
                    Ok(proof) => {
                        job.proofs.insert(index, proof);
                    }
                    Err(e) => {
                        job.failures.insert(index, DAMAGED_PROOF.into());
                        loaded.damaged.push((id.to_string(), kind, index, format!("its proof is not hex: {e}")));
                    }
                }
            }
            Row::Job(_) => {}
        }
    }
    loaded.jobs.extend(current);
    loaded.jobs.sort_by_key(|job| job.record.seq);
    loaded.settled = (0..loaded.jobs.len()).filter(|&i| settle_damage(&mut loaded.jobs[i])).collect();
    Ok(loaded)
}

/// Why a partition whose stored proof failed its check has none.
const DAMAGED_PROOF: &str = "its stored proof failed its checksum and is not served; submit the job again";
/// Why a done job's partition has no proof after its store was salvaged.
const LOST_PROOF: &str = "its proof was lost with the damaged job store; submit the job again";

/// A done job missing a proof (damaged, or not salvaged) is failed, so that
/// its proofs are never answered incomplete. Whether it changed.
fn settle_damage(job: &mut StoredJob) -> bool {
    if job.outcome.as_ref().is_none_or(|o| o.stage != Stage::Done) {
        return false;
    }
    let Some(index) = (0..job.record.partitions).find(|i| !job.proofs.contains_key(i)) else {
        return false;
    };
    let why = job.failures.entry(index).or_insert_with(|| LOST_PROOF.into()).clone();
    job.outcome = Some(JobOutcome {
        stage: Stage::Failed,
        error: Some(format!("partition {index}: {why}")),
        finished_unix_ms: unix_ms(SystemTime::now()),
    });
    true
}
