//! The job store: the daemon's implementations of `cuzk_actors::store::JobStore`
//! and the writer thread they share. Two engines sit under it: one redb file
//! in the data directory (`store/redb_file.rs`, the default: embedded, no
//! server; its rows in `store/rows.rs`, opening and repairing it in
//! `store/open.rs`) and a PostgreSQL database (`store/pg.rs`, `store.url`:
//! a server that outlives any one machine; a fleet node records its
//! partitions' results there under their leases). The job store only: the
//! fleet's leases are in `fleet/`, its shared keys in `keys/`, and what
//! every PostgreSQL user shares in `postgres`.
//!
//! One writer thread owns the engine. Writes queue on a channel; the writer
//! drains everything queued into one transaction and commits it before
//! acknowledging any of them (group commit), so a burst of submissions costs
//! a few commits, not one each, and no actor ever waits for the storage.
//!
//! A commit that fails (disk full, I/O error, the database gone) fails the
//! new jobs in it (their submitters answer 503) and keeps the other writes,
//! which belong to jobs already acknowledged; the engine reopens (or
//! reconnects) and the writer retries them every second until a commit
//! succeeds. Meanwhile `health()` reports the failure. The redb file is
//! also checked to still be at its path (every commit, and every second
//! without writes): one whose directory was removed or that was replaced is
//! written back from the open database (`store/redb_file.rs`), and new jobs
//! are refused for as long as that fails.

mod open;
mod pg;
mod redb_file;
mod rows;

use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cuzk_actors::store::{
    CommitSignal, Committed, JobRecord, JobStore, StoreError, StoreHealth, StoreWrite, StoredJob,
};

use crate::telemetry::{StoreWritable, StoreWriteFailed};

pub use open::FileError;
pub use pg::{end_job, END_JOB};

use crate::postgres::{PgError, StoreUrl};

/// The job store in one redb file.
pub type RedbJobStore = ThreadedStore<redb_file::RedbFile>;
/// The job store on PostgreSQL.
pub type PgJobStore = ThreadedStore<pg::Pg>;

/// Why the job store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The redb file: held by another process, or not writable.
    #[error(transparent)]
    File(#[from] FileError),
    /// The database: a URL to fix, a schema too new, or not reachable.
    #[error(transparent)]
    Database(#[from] PgError),
    /// The store's writer thread could not be spawned.
    #[error("cannot start the store writer: {0}")]
    Writer(std::io::Error),
    /// The store's writer thread ended before it reported the store open.
    #[error("the store writer died while opening the store")]
    WriterDied,
}

/// The store the configuration asks for: PostgreSQL at `url` (`store.url`)
/// when set, shared by the fleet as the node named with it, else
/// `<data_dir>/jobs.redb`.
pub fn open(fleet: Option<(&StoreUrl, &str)>, data_dir: &Path) -> Result<Arc<dyn JobStore>, OpenError> {
    Ok(match fleet {
        Some((url, node)) => Arc::new(PgJobStore::connect(url, Some(node))?),
        None => Arc::new(RedbJobStore::open(&data_dir.join("jobs.redb"))?),
    })
}

/// A transaction this large is committed and a new one started, so that one
/// huge burst does not hold every acknowledgement until its end.
const MAX_WRITES_PER_COMMIT: usize = 4096;

/// How often a failing store retries its kept writes.
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// The size of a failing store's probe write (`Engine::commit`).
const PROBE_BYTES: usize = 64 << 10;

/// What differs between storage engines under the shared writer thread.
trait Engine: Send + 'static {
    /// Applies `writes`, in order, in one transaction; durable once this
    /// returns Ok. After an error the engine reopens (or reconnects) on its
    /// next call. Rows of a job whose record is not stored are not written
    /// (its commit failed, then it was cancelled): nothing would remove them.
    ///
    /// `probe` is set while the store is failing: the transaction then also
    /// writes `PROBE_BYTES` of new data. A commit that changes little or
    /// nothing (the writes it retries may all be skipped) can succeed on a
    /// full disk, one that must place new bytes cannot, so only that tells
    /// that a new job would be written.
    fn commit<'a>(
        &mut self,
        writes: impl Iterator<Item = &'a StoreWrite>,
        probe: bool,
    ) -> Result<(), StoreError>;

    /// How long the writer waits without writes before asking `check`:
    /// what one check costs decides it (a round trip to a database server;
    /// a `stat` of a file).
    const CHECK_INTERVAL: Duration = Duration::from_secs(5);

    /// Whether the storage is still there, asked after `CHECK_INTERVAL`
    /// without writes: a database server can go away, or a file's directory
    /// be removed, while nothing is written, and `health()` (`/readyz`)
    /// should say so before a new job is refused for it. A failure starts
    /// the retries, whose first success clears it.
    fn check(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// What the engine found wrong while running since it was last asked
    /// (a file that left its path), a sentence each, for `health()`.
    fn take_incidents(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Every job, in submission order; what was found wrong with the stored
    /// data goes to `incidents`, a sentence each.
    fn load(&mut self, incidents: &mut Vec<String>) -> Result<Vec<StoredJob>, StoreError>;
}

/// A finished job's record keeps its request's digest (for idempotency)
/// but not the request: nothing rebuilds a finished job's work, and a
/// restart should not read megabytes of inputs it will never use.
fn without_request(mut record: JobRecord) -> JobRecord {
    record.request_digest = Some(record.request_digest());
    record.request = String::new();
    record
}

/// Writes that failed to commit before a close, and were not made since.
#[derive(Debug, thiserror::Error)]
#[error("{0} writes could not be committed before closing")]
struct Unsaved(usize);

enum Command {
    /// Boxed: a job's record is far larger than the other commands.
    Write(Box<StoreWrite>, CommitSignal),
    Load(mpsc::Sender<Result<Vec<StoredJob>, StoreError>>),
    Close(CommitSignal),
}

/// A job store whose engine `E` is driven by one writer thread.
pub struct ThreadedStore<E> {
    /// To the writer thread: every write, load and close goes through it,
    /// in order.
    commands: mpsc::Sender<Command>,
    /// Joined by `close`; None once closed.
    writer: Mutex<Option<JoinHandle<()>>>,
    shared: Arc<Shared>,
    /// Which engine the writer drives: names the type (`RedbJobStore`,
    /// `PgJobStore`) without holding the engine, which lives on the thread.
    engine: PhantomData<fn() -> E>,
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

/// Starts the writer thread, which opens the engine (`open`) and says
/// whether that worked before taking writes. Opening happens on the thread
/// because an engine may block in ways a caller must not: the daemon starts
/// its store inside an async runtime, and the PostgreSQL client runs one of
/// its own, which cannot be started from within another.
fn start<E: Engine>(
    open: impl FnOnce() -> Result<(E, Vec<String>), OpenError> + Send + 'static,
) -> Result<ThreadedStore<E>, OpenError> {
    let (commands, queue) = mpsc::channel();
    let shared = Arc::new(Shared::default());
    let (opened, was_opened) = mpsc::channel();
    let writer_shared = shared.clone();
    let writer = std::thread::Builder::new()
        .name("cuzk-store-writer".into())
        .spawn(move || {
            let engine = match open() {
                Ok((engine, incidents)) => {
                    writer_shared.health().incidents = incidents;
                    let _ = opened.send(Ok(()));
                    engine
                }
                Err(e) => return drop(opened.send(Err(e))),
            };
            let writer = Writer { engine, shared: writer_shared, kept: Vec::new(), failures: 0 };
            writer.run(queue)
        })
        .map_err(OpenError::Writer)?;
    was_opened.recv().unwrap_or(Err(OpenError::WriterDied))?;
    StoreWritable { after_failures: 0 }.emit();
    Ok(ThreadedStore { commands, writer: Mutex::new(Some(writer)), shared, engine: PhantomData })
}

impl<E> ThreadedStore<E> {
    /// Transactions committed so far.
    pub fn transactions(&self) -> u64 {
        self.shared.transactions.load(Ordering::Relaxed)
    }
}

impl<E> JobStore for ThreadedStore<E> {
    fn write(&self, write: StoreWrite) -> Committed {
        let (signal, committed) = Committed::channel();
        // A closed store drops the command, and with it the signal, so the
        // waiter learns the write was not made.
        let _ = self.commands.send(Command::Write(Box::new(write), signal));
        committed
    }

    fn load(&self) -> Result<Vec<StoredJob>, StoreError> {
        let (reply, answer) = mpsc::channel();
        // Either way the writer thread is gone.
        self.commands.send(Command::Load(reply)).map_err(|_| StoreError::Closed)?;
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

/// Whether `bytes` more can be written on the filesystem holding `path`
/// and still leave `floor` free (false when its free space cannot be read):
/// the rule for what the daemon keeps only while there is room (a compiled
/// shape, written by the daemon or by `cuzk params generate --data-dir`).
pub fn room_for(path: &Path, bytes: u64, floor: u64) -> bool {
    free_bytes(path).is_some_and(|free| free >= bytes.saturating_add(floor))
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
struct Writer<E> {
    engine: E,
    shared: Arc<Shared>,
    /// Writes of acknowledged jobs whose commit failed, retried in order
    /// before anything newer. Bounded by what the pipeline finishes while
    /// the storage is failing (proofs, outcomes): a few hundred bytes each.
    kept: Vec<(StoreWrite, CommitSignal)>,
    /// Failed commits since the last success.
    failures: u64,
}

impl<E: Engine> Writer<E> {
    fn run(mut self, queue: mpsc::Receiver<Command>) {
        let mut pending: Vec<(StoreWrite, CommitSignal)> = Vec::new();
        loop {
            let failing = self.failures > 0;
            let first = match queue.recv_timeout(if failing { RETRY_INTERVAL } else { E::CHECK_INTERVAL }) {
                Ok(command) => command,
                Err(RecvTimeoutError::Timeout) if failing => {
                    self.commit(&mut pending);
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => {
                    let checked = self.engine.check();
                    self.note_incidents();
                    if let Err(error) = checked {
                        self.failed(0, &error);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            for command in std::iter::once(first).chain(queue.try_iter()) {
                match command {
                    Command::Write(write, signal) => {
                        pending.push((*write, signal));
                        if pending.len() == MAX_WRITES_PER_COMMIT {
                            self.commit(&mut pending);
                        }
                    }
                    // Everything queued before a load or close is committed first.
                    Command::Load(reply) => {
                        self.commit(&mut pending);
                        let mut incidents = Vec::new();
                        let loaded = self.engine.load(&mut incidents);
                        self.shared.health().incidents.append(&mut incidents);
                        self.note_incidents();
                        let _ = reply.send(loaded);
                    }
                    Command::Close(signal) => {
                        self.commit(&mut pending);
                        let unsaved = self.kept.len();
                        signal.send(if unsaved == 0 {
                            Ok(())
                        } else {
                            Err(StoreError::unavailable(Unsaved(unsaved)))
                        });
                        return;
                    }
                }
            }
            self.commit(&mut pending);
        }
    }

    /// One transaction for the kept writes and the new ones; then every
    /// waiter hears the result.
    fn commit(&mut self, pending: &mut Vec<(StoreWrite, CommitSignal)>) {
        if pending.is_empty() && self.failures == 0 {
            return;
        }
        let mut writes = std::mem::take(&mut self.kept);
        writes.append(pending);
        let committed = self.engine.commit(writes.iter().map(|(write, _)| write), self.failures > 0);
        self.note_incidents();
        match committed {
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
                self.failed(writes.len(), &error);
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

    /// Adds what the engine found while running to `health()`'s incidents,
    /// before anyone is answered: a submitter refused for it, or a probe of
    /// `/readyz`, then finds the incident in `/v1/status` too.
    fn note_incidents(&mut self) {
        let mut found = self.engine.take_incidents();
        if !found.is_empty() {
            self.shared.health().incidents.append(&mut found);
        }
    }

    /// Counts a failure and reports it, in `health()` too, until a commit
    /// succeeds.
    fn failed(&mut self, writes: usize, error: &StoreError) {
        self.failures += 1;
        StoreWriteFailed { writes, error: &error.to_string() }.emit();
        self.shared.health().failing = Some(error.to_string());
    }
}
