//! The job store in one redb file, `<data_dir>/jobs.redb`: embedded, ACID,
//! crash-safe (copy-on-write pages with a checksummed commit), no server.
//! Each transaction of the shared writer (`store.rs`) is one fsync; after a
//! failed commit the database is reopened (redb refuses every later
//! transaction of a handle that saw an I/O error), on the file it was
//! writing, held by a descriptor of its own, not on the path, which may no
//! longer name that file (below). `store/rows.rs` seals
//! every row with a checksum; `store/open.rs` handles a file found damaged
//! or missing.
//!
//! The open database writes its file, not its path: with the directory
//! removed, or another file renamed over the path, commits still succeed
//! into a file no restart will read. So the path's identity (device, inode)
//! is compared with the open file's before every commit and, through
//! `Engine::check`, every second without writes (a `stat`: nothing next to
//! a commit's fsync). A difference is an incident, and a copy of the open
//! database is written back to the path at once; until that succeeds every
//! commit fails, so new jobs are refused (503 `store_failing`) and what
//! acknowledged jobs do is kept by the writer, as on a full disk.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cuzk_actors::store::{JobOutcome, StoreError, StoreWrite, StoredJob};
use cuzk_actors::time::unix_ms;
use cuzk_actors::{JobId, Stage};
use redb::{Database, ReadableTable, TableDefinition};

use super::open::{Damage, FileError, FileIdentity, HeldFile, Panicked, RedbError};
use super::rows::{self, Row, RowDamage, ROWS};
use super::{open, without_request, Engine, OpenError, RedbJobStore, PROBE_BYTES};
use crate::telemetry::StoreDamageKind;

/// Why a store found damaged while running refuses every commit until a
/// restart rebuilds it.
#[derive(Debug, thiserror::Error)]
#[error("the job store file was found damaged while writing ({0}); restart the daemon to rebuild it")]
struct DamagedWhileRunning(Panicked);

/// How the open file left its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Departure {
    /// Nothing is at the path (the file or its directory was removed).
    Removed,
    /// Another file is (one renamed over it, or created after a removal).
    Replaced,
}

impl std::fmt::Display for Departure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Departure::Removed => "removed (or its directory)",
            Departure::Replaced => "replaced by another file",
        })
    }
}

/// Why every commit fails while the open file cannot be written back to
/// its path: `/readyz`'s and the refused submitters' reason.
#[derive(Debug, thiserror::Error)]
#[error(
    "the job store {} was {departure} while the daemon ran, and the open file cannot be written back ({cause}); \
     new jobs are refused, and acknowledged jobs are kept only in the open file until it can be: \
     make the directory writable again and do not restart the daemon before then",
    path.display()
)]
struct NotWrittenBack {
    path: PathBuf,
    departure: Departure,
    cause: FileError,
}

impl RedbJobStore {
    /// Opens (or creates) the file, repairing what `store/open.rs` can, and
    /// starts its writer thread.
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let path = path.to_path_buf();
        super::start(move || {
            let opened = open::open(&path)?;
            let held = HeldFile::open(&path)?;
            let file = RedbFile {
                db: Some(opened.db),
                path,
                damaged: None,
                held,
                departed: None,
                incidents: Vec::new(),
            };
            Ok((file, opened.incidents))
        })
    }
}

/// The redb engine, owned by the writer thread.
pub struct RedbFile {
    /// None after a failed commit: redb must be reopened after an I/O error.
    db: Option<Database>,
    /// Where to reopen it, and to copy it aside before a repair.
    path: PathBuf,
    /// Why the file was abandoned while running (redb panicked on one of
    /// its pages): it is not reopened, and every commit fails with this,
    /// until a restart checks and rebuilds it (`store/open.rs`).
    damaged: Option<StoreError>,
    /// The open database's file (opened, written back, or rebuilt), held
    /// by a descriptor of its own: the path must still name it, and after
    /// a failed commit redb is reopened on it, not on the path, which may
    /// name another file by then, or none.
    held: HeldFile,
    /// How the open file left its path, from when that was noticed (and
    /// reported, once) until a copy is written back.
    departed: Option<Departure>,
    /// Incidents found while running, until the writer takes them.
    incidents: Vec<String>,
}

impl Engine for RedbFile {
    /// A panic inside redb (a page damaged since the store was opened)
    /// fails the commit like an I/O error, so the writer keeps its writes
    /// and the store reports itself failing instead of its thread dying.
    fn commit<'a>(
        &mut self,
        writes: impl Iterator<Item = &'a StoreWrite>,
        probe: bool,
    ) -> Result<(), StoreError> {
        let db = self.database()?;
        match open::unpanicked(|| apply(db, writes, probe)) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.db = None;
                Err(e)
            }
            Err(panic) => Err(self.abandon(panic)),
        }
    }

    /// A `stat` of the path, which the commits also do.
    const CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    fn check(&mut self) -> Result<(), StoreError> {
        self.database().map(drop)
    }

    fn take_incidents(&mut self) -> Vec<String> {
        std::mem::take(&mut self.incidents)
    }

    /// Every job, with damaged rows reported and dropped; a database that
    /// cannot be read or repaired is rebuilt from what its bytes still hold.
    fn load(&mut self, incidents: &mut Vec<String>) -> Result<Vec<StoredJob>, StoreError> {
        match self.read_and_repair(incidents) {
            Ok(result) => result,
            Err(cause) => {
                if let Some(db) = self.db.take() {
                    open::abandon(db);
                }
                let (db, incident) = open::rebuild(&self.path, &cause).map_err(StoreError::unavailable)?;
                incidents.push(incident);
                self.db = Some(db);
                self.held = HeldFile::open(&self.path).map_err(StoreError::unavailable)?;
                // A file just written from intact rows.
                self.read_and_repair(incidents).map_err(StoreError::unavailable)?
            }
        }
    }
}

impl RedbFile {
    /// Gives up the database after redb panicked on one of its pages: it is
    /// not reopened, and every commit fails with the returned error, until
    /// a restart checks and rebuilds the file.
    fn abandon(&mut self, panic: Panicked) -> StoreError {
        let why = StoreError::unavailable(DamagedWhileRunning(panic));
        self.damaged = Some(why.clone());
        if let Some(db) = self.db.take() {
            open::abandon(db);
        }
        why
    }

    /// The open database, reopened after a failure, or written back to its
    /// path first when its file is no longer there.
    fn database(&mut self) -> Result<&Database, StoreError> {
        if let Some(why) = &self.damaged {
            return Err(why.clone());
        }
        if self.db.is_none() {
            let db = open::unpanicked(|| self.held.reopen()).map_err(StoreError::unavailable)?;
            self.db = Some(db.map_err(StoreError::unavailable)?);
        }
        self.keep_at_path()?;
        Ok(self.db.as_ref().expect("open"))
    }

    /// Compares the path with the open file; when it names another file,
    /// or none, reports it (once) and writes the open database back there.
    /// Err while that cannot be done.
    fn keep_at_path(&mut self) -> Result<(), StoreError> {
        let departure = match FileIdentity::of(&self.path) {
            Ok(found) if found == self.held.identity => return Ok(()),
            Ok(_) => Departure::Replaced,
            Err(_) => Departure::Removed,
        };
        if self.departed.is_none() {
            self.incidents.push(open::report(
                StoreDamageKind::Detached,
                format!(
                    "the job store {} was {departure} while the daemon ran; every acknowledged job is still in the open file, which is written back",
                    self.path.display()
                ),
            ));
        }
        // Said as first noticed: a failed write-back may have moved the
        // file found at the path aside already.
        let departure = *self.departed.get_or_insert(departure);
        let db = self.db.as_ref().expect("called with the database open");
        let written = match open::unpanicked(|| open::write_back(db, &self.path)) {
            Ok(written) => written,
            Err(panic) => return Err(self.abandon(panic)),
        };
        let written = written.map_err(|cause| {
            StoreError::unavailable(NotWrittenBack { path: self.path.clone(), departure, cause })
        })?;
        log::warn!("job store: {}", written.incident);
        self.incidents.push(written.incident);
        self.held = written.held;
        self.departed = None;
        // The old file is no longer at any path the daemon reads: closing
        // it writes only to it.
        self.db = Some(written.db);
        Ok(())
    }

    /// The jobs, with damaged rows removed. Err(why) when the file must be
    /// rebuilt: redb answered an error while reading, or panicked while
    /// reading or removing (a damaged page it does not check); an error
    /// while repairing (the disk) is the store's error, inside.
    fn read_and_repair(
        &mut self,
        incidents: &mut Vec<String>,
    ) -> Result<Result<Vec<StoredJob>, StoreError>, Damage> {
        let path = self.path.clone();
        let db = match self.database() {
            Ok(db) => db,
            Err(e) => return Ok(Err(e)),
        };
        let loaded = open::unpanicked(|| load(db))?.map_err(Damage::Read)?;
        if !loaded.damaged.is_empty() || !loaded.settled.is_empty() {
            if let Err(e) = open::unpanicked(|| repair(db, &path, &loaded, incidents))? {
                return Ok(Err(e));
            }
        }
        Ok(Ok(loaded.jobs))
    }
}

/// Copies the file aside when rows are damaged, removes them, and records
/// what damage meant: a proof that failed its check or was lost fails its
/// partition (and a done job with it), so it is never served.
fn repair(
    db: &Database,
    path: &Path,
    loaded: &Loaded,
    incidents: &mut Vec<String>,
) -> Result<(), StoreError> {
    let aside = match loaded.damaged.is_empty() {
        true => PathBuf::new(),
        false => open::copy_aside(path).map_err(StoreError::unavailable)?,
    };
    for (job, kind, index, why) in &loaded.damaged {
        incidents.push(open::report(
            StoreDamageKind::Record,
            format!(
                "job {job}: its {} record{} failed its check ({why}) and was dropped; the file before is at {}",
                rows::kind_name(*kind),
                if *kind >= rows::PROOF { format!(" for partition {index}") } else { String::new() },
                aside.display()
            ),
        ));
    }
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

type Rows<'txn> = redb::Table<'txn, (&'static str, u8, u32), &'static [u8]>;

fn put(table: &mut Rows<'_>, row: &Row) -> Result<(), StoreError> {
    table.insert(row.key(), rows::seal(row).as_slice()).map(drop).map_err(StoreError::unavailable)
}

/// Whether the job's record is there: rows of a job that was never
/// recorded (its commit failed, then it was cancelled) are not written,
/// since nothing would ever remove them.
fn recorded(table: &Rows<'_>, job: &JobId) -> Result<bool, StoreError> {
    Ok(table.get((job.0.as_str(), rows::JOB, 0)).map_err(StoreError::unavailable)?.is_some())
}

/// Where a failing store's transactions write their probe (`Engine::commit`):
/// one row, overwritten each time.
const PROBE: TableDefinition<(), &[u8]> = TableDefinition::new("probe");

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
                StoreWrite::PartitionProved { job, index, proof, .. } if recorded(&table, job)? => {
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

/// Rewrites a finished job's record without its request.
fn finish_record(table: &mut Rows<'_>, job: &JobId) -> Result<(), StoreError> {
    let key = (job.0.as_str(), rows::JOB, 0);
    let sealed = table.get(key).map_err(StoreError::unavailable)?.map(|v| v.value().to_vec());
    if let Some(Ok(Row::Job(record))) = sealed.map(|bytes| rows::unseal(&bytes)) {
        put(table, &Row::Job(without_request(record)))?;
    }
    Ok(())
}

/// What a load read: the jobs, and the rows that failed their check.
struct Loaded {
    jobs: Vec<StoredJob>,
    /// (job, kind, partition, why) of each damaged row.
    damaged: Vec<(String, u8, u32, RowDamage)>,
    /// Jobs (indices into `jobs`) failed because a proof was damaged or lost.
    settled: Vec<usize>,
}

/// Reads every row in key order: a job's record comes first, then its
/// outcome, proofs and failures. A damaged record drops its job; a damaged
/// proof fails its partition, and a job that was done becomes failed.
fn load(db: &Database) -> Result<Loaded, RedbError> {
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
                Err(RowDamage::Misplaced)
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
                        loaded.damaged.push((id.to_string(), kind, index, RowDamage::NotHex(e)));
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
