//! Opening the job store's file, and what is done when it is not as it was
//! left. A file the database cannot open (truncated, overwritten) is moved
//! aside and every intact row found in its bytes is written into a new one;
//! a store that existed (its marker file says so) but is now missing or
//! empty is reported, never silently replaced by an empty one. A file that
//! leaves its path while the daemon runs (its directory removed, another
//! file renamed over it) is written back from the open database
//! (`write_back`). Each finding is an incident: logged, counted and shown in
//! `/v1/status`.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use redb::{Database, DatabaseError, ReadableTable, TableDefinition, TableHandle};

use super::rows::{self, Row, ROWS};
use crate::telemetry::{StoreDamage, StoreDamageKind};

/// Why the store's file could not be opened or repaired: nothing a rebuild
/// mends (another process, the disk).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Another process (another daemon on the same data directory) holds the file's lock.
    #[error("the job store {} is open in another process", .0.display())]
    Held(PathBuf),
    /// A file operation on the store or its staging copy failed.
    #[error("cannot {doing} {}: {error}", path.display())]
    Io {
        /// What was being done ("remove", "look at"), for the message.
        doing: &'static str,
        /// The file.
        path: PathBuf,
        /// What the filesystem answered.
        error: io::Error,
    },
    /// redb failed in a way a rebuild does not mend (an I/O error, a full disk).
    #[error("job store {}: {error}", path.display())]
    Redb {
        /// The store's file (or the staging copy being written).
        path: PathBuf,
        /// What redb answered.
        error: RedbError,
    },
    /// A store just created from salvaged rows is itself unusable.
    #[error("cannot create {}: {damage}", path.display())]
    Create {
        /// The store file just created.
        path: PathBuf,
        /// What is wrong with it.
        damage: Damage,
    },
}

/// Why a file is taken for damaged (and rebuilt from its intact rows).
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    #[error("{0}")]
    Open(Box<DatabaseError>),
    #[error("a page failed its checksum")]
    Checksum,
    #[error("its integrity check failed: {0}")]
    Integrity(Box<DatabaseError>),
    /// Reading it failed (a damaged page met while loading).
    #[error("{0}")]
    Read(RedbError),
    #[error(transparent)]
    Panicked(#[from] Panicked),
}

/// Any of redb's errors, boxed (they are large, and travel up through
/// several results).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RedbError(Box<redb::Error>);

impl<E: Into<redb::Error>> From<E> for RedbError {
    fn from(error: E) -> Self {
        RedbError(Box::new(error.into()))
    }
}

/// redb panicked (on a damaged page): the panic's message.
#[derive(Debug, thiserror::Error)]
#[error("the database library panicked: {0}")]
pub struct Panicked(String);

/// An I/O failure on `path`, said as what was being done.
fn io_error(doing: &'static str, path: &Path) -> impl FnOnce(io::Error) -> FileError {
    let path = path.to_path_buf();
    move |error| FileError::Io { doing, path, error }
}

/// An open store and what was found wrong on the way.
pub struct Opened {
    pub db: Database,
    pub incidents: Vec<String>,
}

/// Opens (or creates) the store at `path`. Fails only when the file is
/// held by another process or cannot be replaced.
pub fn open(path: &Path) -> Result<Opened, FileError> {
    let marker = marker_path(path);
    let existed = marker.exists();
    let mut incidents = Vec::new();
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && existed => {
            incidents.push(report(
                StoreDamageKind::Missing,
                format!(
                    "the job store {} is gone although one was created here ({}): every job it held is lost; starting empty",
                    path.display(),
                    marker.display()
                ),
            ));
        }
        Ok(meta) if meta.len() == 0 && existed => {
            let aside = move_aside(path, "damaged")?;
            incidents.push(report(
                StoreDamageKind::Missing,
                format!(
                    "the job store {} was empty although one was created here: every job it held is lost; the empty file is at {}, starting empty",
                    path.display(),
                    aside.display()
                ),
            ));
        }
        _ => {}
    }
    let db = match try_open(path) {
        Ok(db) => db,
        Err(Opening::Held) => return Err(FileError::Held(path.to_path_buf())),
        Err(Opening::Failed(e)) => return Err(e),
        Err(Opening::Damaged(cause)) => {
            let (db, incident) = rebuild(path, &cause)?;
            incidents.push(incident);
            db
        }
    };
    if !existed {
        write_marker(path)?;
    }
    Ok(Opened { db, incidents })
}

/// Says that a store was created at `path`: a later start that finds the
/// marker without the store reports the store lost instead of starting
/// empty without a word.
fn write_marker(path: &Path) -> Result<(), FileError> {
    let marker = marker_path(path);
    fs::write(&marker, b"created by cuzk: jobs.redb must exist while this file does\n")
        .map_err(io_error("write", &marker))
}

/// Which file a path names: its device and inode. The open database keeps
/// writing its file whatever happens to the path, so a path that names
/// another file (or none) means that what the daemon writes is no longer
/// what a restart would read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileIdentity {
    /// The filesystem: an inode number is unique only within one.
    dev: u64,
    /// The file within it.
    ino: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now.
    pub fn of(path: &Path) -> io::Result<Self> {
        Ok(Self::from(&fs::metadata(path)?))
    }
}

impl From<&fs::Metadata> for FileIdentity {
    fn from(meta: &fs::Metadata) -> Self {
        Self { dev: meta.dev(), ino: meta.ino() }
    }
}

/// The open store's file, held by a descriptor of the daemon's own beside
/// redb's. After a failed commit redb must be reopened (it refuses every
/// later transaction of the handle that saw an I/O error), and dropping
/// that handle closes its descriptor: with the path removed meanwhile, or
/// replaced, reopening the path would lose (or never find) the file that
/// holds every acknowledged job. Reopening this file instead keeps it, to
/// be written back to the path like any file that left it.
pub struct HeldFile {
    /// The descriptor: redb's closes with its handle, this one only when
    /// another file is held instead.
    file: fs::File,
    /// Which file it is, to compare the path with.
    pub identity: FileIdentity,
}

impl HeldFile {
    /// Holds the file at `path`, just opened or written by redb.
    pub fn open(path: &Path) -> Result<Self, FileError> {
        let file =
            fs::OpenOptions::new().read(true).write(true).open(path).map_err(io_error("open", path))?;
        let meta = file.metadata().map_err(io_error("look at", path))?;
        Ok(Self { identity: FileIdentity::from(&meta), file })
    }

    /// A new redb handle on the held file, wherever its path points now.
    /// Only once the previous handle is dropped: redb locks the file while
    /// a handle is open.
    pub fn reopen(&self) -> Result<Database, RedbError> {
        Ok(Database::builder().create_file(self.file.try_clone()?)?)
    }
}

/// A store written back to its path (`write_back`).
pub struct WrittenBack {
    /// The copy, now at the path: the database to write from here on.
    pub db: Database,
    /// The copy's file, held (its identity compared with the path) from
    /// here on.
    pub held: HeldFile,
    /// What was done, for `/v1/status`.
    pub incident: String,
}

/// Writes a consistent copy of `db` (every row, read in one transaction)
/// to `path`, which no longer names `db`'s file: its directory is created
/// again where it is gone, and a file found in its place is moved aside,
/// never overwritten. The copy is written beside the path, committed and
/// renamed over it, so a crash midway leaves no half-written store there.
pub fn write_back(db: &Database, path: &Path) -> Result<WrittenBack, FileError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_error("create the directory of", path))?;
    let found = match fs::symlink_metadata(path) {
        Ok(_) => Some(move_aside(path, "found")?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(FileError::Io { doing: "look at", path: path.to_path_buf(), error }),
    };
    let staging = with_suffix(path, ".writing-back");
    match fs::remove_file(&staging) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(FileError::Io { doing: "remove", path: staging, error }),
    }
    let redb_error = |error: RedbError| FileError::Redb { path: staging.clone(), error };
    let copy = Database::create(&staging).map_err(|e| redb_error(e.into()))?;
    let count = copy_rows(db, &copy).map_err(redb_error)?;
    // Held before the rename, so that it is the copy whatever happens to
    // the path after.
    let held = HeldFile::open(&staging)?;
    fs::rename(&staging, path).map_err(io_error("rename the copy to", path))?;
    fs::File::open(dir).and_then(|dir| dir.sync_all()).map_err(io_error("sync the directory of", path))?;
    write_marker(path)?;
    let incident = format!(
        "a copy of the open job store ({count} records, every job acknowledged until now) was written back to {}{}; new jobs are taken again",
        path.display(),
        found.map(|aside| format!("; the file found there was moved to {}", aside.display())).unwrap_or_default()
    );
    Ok(WrittenBack { db: copy, held, incident })
}

/// Copies every row, sealed as it is, from one database to another in one
/// read and one write transaction. How many.
fn copy_rows(from: &Database, to: &Database) -> Result<usize, RedbError> {
    let read = from.begin_read()?;
    let rows = read.open_table(ROWS)?;
    let write = to.begin_write()?;
    let mut count = 0;
    {
        let mut table = write.open_table(ROWS)?;
        for entry in rows.iter()? {
            let (key, value) = entry?;
            table.insert(key.value(), value.value())?;
            count += 1;
        }
    }
    write.commit()?;
    Ok(count)
}

/// Moves a database that cannot be read aside and writes the rows salvaged
/// from its bytes into a new one at `path`. Also used when a store that
/// opened turns out unreadable later (a damaged page met while loading).
pub fn rebuild(path: &Path, cause: &Damage) -> Result<(Database, String), FileError> {
    let bytes = fs::read(path).unwrap_or_default();
    let aside = move_aside(path, "damaged")?;
    let salvaged = rows::salvage(&bytes);
    let db = match try_open(path) {
        Ok(db) => db,
        Err(Opening::Held) => return Err(FileError::Held(path.to_path_buf())),
        Err(Opening::Failed(e)) => return Err(e),
        Err(Opening::Damaged(damage)) => return Err(FileError::Create { path: path.to_path_buf(), damage }),
    };
    let count = salvaged.len();
    write_rows(&db, salvaged).map_err(|error| FileError::Redb { path: path.to_path_buf(), error })?;
    let incident = report(
        StoreDamageKind::Unreadable,
        format!(
            "the job store {} could not be read ({cause}); moved to {}, {count} intact records salvaged into a new store",
            path.display(),
            aside.display()
        ),
    );
    Ok((db, incident))
}

/// Logs and counts a finding; returns its text for `/v1/status`.
pub fn report(kind: StoreDamageKind, detail: String) -> String {
    StoreDamage { kind, detail: &detail }.emit();
    detail
}

/// Copies a readable store aside before damaged rows are dropped from it,
/// so that nothing is lost for good without a copy.
pub fn copy_aside(path: &Path) -> Result<PathBuf, FileError> {
    let aside = aside_path(path, "damaged");
    fs::copy(path, &aside).map_err(io_error("copy aside", path))?;
    Ok(aside)
}

enum Opening {
    /// Another process has it open.
    Held,
    /// The file opened but its table could not be made ready: an error
    /// from the disk, which a rebuild would not mend.
    Failed(FileError),
    /// Anything else: the file is not a database redb can use.
    Damaged(Damage),
}

/// Opens the file, checks every page, and makes its table ready
/// (`prepare`). redb checksums its pages but checks them only when it
/// recovers from a crash; a page damaged since is read unchecked, and some
/// damage makes it panic, or abort the process (a length read from a
/// damaged page, then allocated). Its integrity check reads each page only
/// after its parent's checksum vouched for the pointer to it, so a file
/// that passes can be read; one that fails (even one redb could mend by
/// rolling back its last commit) is rebuilt from its intact rows instead.
fn try_open(path: &Path) -> Result<Database, Opening> {
    let mut db = match unpanicked(|| Database::create(path)) {
        Ok(Ok(db)) => db,
        Ok(Err(DatabaseError::DatabaseAlreadyOpen)) => return Err(Opening::Held),
        Ok(Err(e)) => return Err(Opening::Damaged(Damage::Open(Box::new(e)))),
        Err(panic) => return Err(Opening::Damaged(panic.into())),
    };
    let damage = match unpanicked(|| db.check_integrity()) {
        Ok(Ok(true)) => None,
        Ok(Ok(false)) => Some(Damage::Checksum),
        Ok(Err(e)) => Some(Damage::Integrity(Box::new(e))),
        Err(panic) => Some(panic.into()),
    };
    if let Some(damage) = damage {
        abandon(db);
        return Err(Opening::Damaged(damage));
    }
    match unpanicked(|| prepare(&db)) {
        Ok(Ok(())) => Ok(db),
        Ok(Err(error)) => Err(Opening::Failed(FileError::Redb { path: path.to_path_buf(), error })),
        Err(panic) => {
            abandon(db);
            Err(Opening::Damaged(panic.into()))
        }
    }
}

/// Lets go of a database found damaged without closing it: closing writes
/// redb's allocator state, which reads the damaged pages again and may
/// abort the process. Its handle and cached pages stay held: once per
/// damaged file, since the file is then moved aside (or, found damaged
/// while running, not reopened until a restart rebuilds it).
pub fn abandon(db: Database) {
    std::mem::forget(db);
}

/// Runs `f`, a call into redb on a file that may be damaged: redb panics
/// on some damaged pages (a key's length past its page, a bitmap index out
/// of range) instead of answering an error. A panic becomes an error that
/// says so, and the caller treats the file as damaged.
pub fn unpanicked<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        Panicked(message.to_string())
    })
}

/// `path` with `suffix` added to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

fn marker_path(path: &Path) -> PathBuf {
    with_suffix(path, ".created")
}

/// Where a file is kept aside, named for `why` (`damaged`, `found`) and
/// the time.
fn aside_path(path: &Path, why: &str) -> PathBuf {
    with_suffix(path, &format!(".{why}-{}", cuzk_actors::time::unix_ms(std::time::SystemTime::now())))
}

fn move_aside(path: &Path, why: &str) -> Result<PathBuf, FileError> {
    let aside = aside_path(path, why);
    fs::rename(path, &aside).map_err(io_error("move aside", path))?;
    Ok(aside)
}

/// The tables of the first store format, one per kind of row, unsealed JSON.
const LEGACY_JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
const LEGACY_PROOFS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("proofs");
const LEGACY_FAILURES: TableDefinition<(&str, u32), &str> = TableDefinition::new("failures");
const LEGACY_OUTCOMES: TableDefinition<&str, &[u8]> = TableDefinition::new("outcomes");

/// Creates the table, and moves a first-format store's rows into it
/// (sealing them) in the same transaction.
fn prepare(db: &Database) -> Result<(), RedbError> {
    let txn = db.begin_write()?;
    txn.open_table(ROWS)?;
    let legacy = txn.list_tables()?.any(|t| t.name() == LEGACY_JOBS.name());
    if legacy {
        let mut moved = Vec::new();
        {
            let jobs = txn.open_table(LEGACY_JOBS)?;
            for entry in jobs.iter()? {
                let (_, row) = entry?;
                if let Ok(record) = serde_json::from_slice(row.value()) {
                    moved.push(Row::Job(record));
                }
            }
            let outcomes = txn.open_table(LEGACY_OUTCOMES)?;
            for entry in outcomes.iter()? {
                let (id, row) = entry?;
                if let Ok(outcome) = serde_json::from_slice(row.value()) {
                    moved.push(Row::Outcome { job: cuzk_actors::JobId(id.value().into()), outcome });
                }
            }
            let proofs = txn.open_table(LEGACY_PROOFS)?;
            for entry in proofs.iter()? {
                let (key, row) = entry?;
                let (id, index) = key.value();
                #[derive(serde::Deserialize)]
                struct LegacyProof {
                    proof: String,
                    public_inputs: Vec<String>,
                }
                if let Ok(p) = serde_json::from_slice::<LegacyProof>(row.value()) {
                    let job = cuzk_actors::JobId(id.into());
                    moved.push(Row::Proof { job, index, proof: p.proof, public_inputs: p.public_inputs });
                }
            }
            let failures = txn.open_table(LEGACY_FAILURES)?;
            for entry in failures.iter()? {
                let (key, error) = entry?;
                let (id, index) = key.value();
                let job = cuzk_actors::JobId(id.into());
                moved.push(Row::Failure { job, index, error: error.value().into() });
            }
        }
        let count = moved.len();
        {
            let mut table = txn.open_table(ROWS)?;
            for row in moved {
                table.insert(row.key(), rows::seal(&row).as_slice())?;
            }
        }
        txn.delete_table(LEGACY_JOBS)?;
        txn.delete_table(LEGACY_OUTCOMES)?;
        txn.delete_table(LEGACY_PROOFS)?;
        txn.delete_table(LEGACY_FAILURES)?;
        log::info!("job store: {count} rows moved to the sealed format");
    }
    txn.commit()?;
    Ok(())
}

fn write_rows(db: &Database, salvaged: Vec<Row>) -> Result<(), RedbError> {
    let txn = db.begin_write()?;
    {
        let mut table = txn.open_table(ROWS)?;
        for row in salvaged {
            table.insert(row.key(), rows::seal(&row).as_slice())?;
        }
    }
    txn.commit()?;
    Ok(())
}
