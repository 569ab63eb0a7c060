//! Proving keys shared by a fleet through PostgreSQL (issue 14, item 4), in
//! `cuzk_keys` and `cuzk_key_chunks` (migrations/0004_keys.sql). A job's
//! partitions may be proved on different nodes, so the key of a built-in
//! family's shape, which a random setup makes, must be made once and copied
//! to every node. The key store (`keys.rs`) takes the shape's lock, finds
//! the key here or publishes its own, and lets the lock go.
//!
//! Each lock is a connection of its own holding a session-level advisory
//! lock: shapes prepared at once on one node do not wait for each other,
//! and a node that dies or loses the database while holding one releases it
//! with its session, so no crash leaves a shape locked (a host that
//! vanished without closing it is noticed by the server's keepalive, set
//! short on these connections).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use postgres::Client;
use sha2::{Digest, Sha256};

use crate::postgres::{client_config, migrate, Connector, PgError, Place, StoreUrl};

/// Bytes of the proving key per row of `cuzk_key_chunks`: a 670 MB key
/// (2^20 constraints) is 40 round trips, and each side holds one chunk at
/// a time.
const CHUNK_BYTES: usize = 16 << 20;

/// Why the fleet's key store could not be used: the database, a file of
/// this node's, or a published key that does not read back as published.
#[derive(Debug, thiserror::Error)]
pub enum SharedKeyError {
    /// The database failed to answer or to commit.
    #[error(transparent)]
    Database(#[from] PgError),
    /// A key file of this node's could not be read or written.
    #[error("cannot {doing} {}: {error}", path.display())]
    File {
        /// What was being done to the file ("read", "write", ...), for the message.
        doing: &'static str,
        /// The file.
        path: PathBuf,
        /// What the filesystem answered.
        error: io::Error,
    },
    /// A published key lacks one of the chunks its row counts: the rows were
    /// changed behind the store's back.
    #[error("{on}: chunk {n} of {circuit_id} is missing")]
    MissingChunk {
        /// The database and who used it, as the message names it.
        on: Place,
        /// The shape whose key is incomplete.
        circuit_id: String,
        /// The number of the chunk that is missing.
        n: i32,
    },
    /// A published key's stored SHA-256 is not a digest, so its copy cannot be checked.
    #[error("{on}: the digest of {circuit_id} is not 32 bytes")]
    BadDigest {
        /// The database and who used it, as the message names it.
        on: Place,
        /// The shape whose digest is malformed.
        circuit_id: String,
    },
    /// A copied key's length or SHA-256 differs from the published one; the
    /// copy is deleted, not used.
    #[error(
        "{on}: the proving key of {circuit_id} read back as {written} bytes whose length or SHA-256 differs from the published ones ({published} bytes)"
    )]
    Mismatch {
        /// The database and who used it, as the message names it.
        on: Place,
        /// The shape whose key did not copy intact.
        circuit_id: String,
        /// Bytes this node received.
        written: u64,
        /// Bytes the published row says the key has.
        published: u64,
    },
    /// A key too large to count its chunks in the table's `i32`.
    #[error("{} is too large to publish ({bytes} bytes)", path.display())]
    TooLarge {
        /// The key file that was to be published.
        path: PathBuf,
        /// Its length.
        bytes: u64,
    },
}

/// A file of this node's could not be read or written.
fn file_error(doing: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SharedKeyError {
    let path = path.to_path_buf();
    move |error| SharedKeyError::File { doing, path, error }
}

/// Where the fleet's keys are.
pub struct SharedKeys {
    /// The store's connection settings (its timeouts included): each lock
    /// and each look-up opens a connection of its own.
    config: Connector,
    /// The database (its password hidden), as errors name it.
    place: Place,
}

/// A published key, without its proving key's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedKey {
    /// The verifying key, compressed: what every node serves.
    pub vk: Vec<u8>,
    /// The proving key file's length: checked after a download.
    pub pk_bytes: u64,
    /// The proving key file's SHA-256: a node whose own file has it holds
    /// this key already and downloads nothing.
    pub pk_sha256: [u8; 32],
    /// Rows of `cuzk_key_chunks` to read.
    chunks: i32,
}

/// A shape's lock: while one node holds it no other looks up, sets up or
/// publishes the shape's key. Dropping it closes its connection, which
/// releases the lock.
pub struct KeyLock {
    client: Client,
    /// The shape locked: the one key this lock reads and writes.
    circuit_id: String,
    /// The database (its password hidden), as errors name it.
    place: Place,
}

impl SharedKeys {
    /// Connects once to check the database and bring its schema up to date
    /// (as the job store does).
    pub fn connect(url: &StoreUrl) -> Result<Self, PgError> {
        let config = client_config(url)?;
        let shared = Self { config, place: Place::new("keys on", url) };
        let mut client = shared.connect_once()?;
        migrate(&mut client, &shared.place)?;
        Ok(shared)
    }

    /// Takes the lock of `circuit_id`, waiting while another node holds it
    /// (its setup may take minutes).
    pub fn lock(&self, circuit_id: &str) -> Result<KeyLock, PgError> {
        let mut client = self.connect_once()?;
        // A holder whose host vanished without closing the connection would
        // keep the lock until the server's keepalive noticed (the kernel's
        // default: over two hours): this session's is noticed in about 25
        // s. A live holder's kernel answers the probes however long its
        // setup runs.
        client
            .batch_execute(
                "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3",
            )
            .map_err(|e| self.place.failed("cannot set up the lock's connection", e))?;
        // The two-key form, keyed by the schema too: fleets in other schemas
        // of the database do not wait for this one, and no key meets the
        // migrations' one-key lock.
        client
            .execute(
                "SELECT pg_advisory_lock(hashtext(coalesce(current_schema(), '')), hashtext($1))",
                &[&circuit_id],
            )
            .map_err(|e| self.place.failed(format!("cannot lock {circuit_id}"), e))?;
        Ok(KeyLock { client, circuit_id: circuit_id.into(), place: self.place.clone() })
    }

    /// The published verifying key of `circuit_id`, without the lock: a
    /// published key never changes. One connection per call: the daemon
    /// asks once per shape a client wants to verify.
    pub fn verifying_key(&self, circuit_id: &str) -> Result<Option<Vec<u8>>, PgError> {
        self.connect_once()?
            .query_opt("SELECT vk FROM cuzk_keys WHERE circuit_id = $1", &[&circuit_id])
            .map(|row| row.map(|row| row.get(0)))
            .map_err(|e| self.place.failed(format!("cannot read the key of {circuit_id}"), e))
    }

    fn connect_once(&self) -> Result<Client, PgError> {
        self.config.connect().map_err(|e| self.place.failed("cannot connect", e))
    }
}

impl KeyLock {
    /// The shape's published key, if any.
    pub fn key(&mut self) -> Result<Option<SharedKey>, SharedKeyError> {
        let row = self
            .client
            .query_opt(
                "SELECT vk, pk_bytes, pk_sha256, chunks FROM cuzk_keys WHERE circuit_id = $1",
                &[&self.circuit_id],
            )
            .map_err(|e| self.failed("cannot read the key of", e))?;
        let Some(row) = row else { return Ok(None) };
        let digest: &[u8] = row.get(2);
        Ok(Some(SharedKey {
            vk: row.get(0),
            pk_bytes: row.get::<_, i64>(1) as u64,
            pk_sha256: digest.try_into().map_err(|_| SharedKeyError::BadDigest {
                on: self.place.clone(),
                circuit_id: self.circuit_id.clone(),
            })?,
            chunks: row.get(3),
        }))
    }

    /// Writes the proving key of `key` to `path` atomically: chunk by chunk
    /// to a temporary file, checked against the key's length and SHA-256,
    /// then renamed over `path`.
    pub fn download(&mut self, key: &SharedKey, path: &Path) -> Result<(), SharedKeyError> {
        let tmp = path.with_extension("tmp");
        let mut file = fs::File::create(&tmp).map_err(file_error("write", &tmp))?;
        let mut digest = Sha256::new();
        let mut written = 0u64;
        for n in 0..key.chunks {
            let row = self
                .client
                .query_opt(
                    "SELECT bytes FROM cuzk_key_chunks WHERE circuit_id = $1 AND n = $2",
                    &[&self.circuit_id, &n],
                )
                .map_err(|e| self.failed("cannot read the key of", e))?
                .ok_or_else(|| SharedKeyError::MissingChunk {
                    on: self.place.clone(),
                    circuit_id: self.circuit_id.clone(),
                    n,
                })?;
            let bytes: &[u8] = row.get(0);
            digest.update(bytes);
            file.write_all(bytes).map_err(file_error("write", &tmp))?;
            written += bytes.len() as u64;
        }
        if written != key.pk_bytes || digest.finalize()[..] != key.pk_sha256 {
            let _ = fs::remove_file(&tmp);
            return Err(SharedKeyError::Mismatch {
                on: self.place.clone(),
                circuit_id: self.circuit_id.clone(),
                written,
                published: key.pk_bytes,
            });
        }
        file.sync_all().map_err(file_error("write", &tmp))?;
        fs::rename(&tmp, path).map_err(file_error("write", path))
    }

    /// Publishes the proving key in the file at `pk_path` (read one chunk
    /// at a time) and its verifying key `vk`, in one transaction. None: it
    /// is the fleet's key now. Some: another node's was there first and
    /// stands (published without this lock: a node whose lock's connection
    /// died during its setup publishes on a later try), and this one is
    /// not stored.
    pub fn publish(&mut self, pk_path: &Path, vk: &[u8]) -> Result<Option<SharedKey>, SharedKeyError> {
        match self.insert(pk_path, vk)? {
            true => Ok(None),
            false => self.key(),
        }
    }

    /// `publish`'s transaction: whether the key was stored (false: the
    /// shape had one already).
    fn insert(&mut self, pk_path: &Path, vk: &[u8]) -> Result<bool, SharedKeyError> {
        let mut file = fs::File::open(pk_path).map_err(file_error("read", pk_path))?;
        let pk_bytes = file.metadata().map_err(file_error("read", pk_path))?.len();
        let chunks = i32::try_from(pk_bytes.div_ceil(CHUNK_BYTES as u64))
            .map_err(|_| SharedKeyError::TooLarge { path: pk_path.to_path_buf(), bytes: pk_bytes })?;
        let Self { client, circuit_id, place } = self;
        let failed = |e| place.failed(format!("cannot publish the key of {circuit_id}"), e);
        let mut txn = client.transaction().map_err(failed)?;
        // The chunks refer to the row, so it comes first; its digest is
        // known after the last chunk and set then.
        let inserted = txn
            .execute(
                "INSERT INTO cuzk_keys (circuit_id, vk, pk_bytes, pk_sha256, chunks) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (circuit_id) DO NOTHING",
                &[&*circuit_id, &vk, &(pk_bytes as i64), &&[0u8; 32][..], &chunks],
            )
            .map_err(failed)?;
        if inserted == 0 {
            return Ok(false);
        }
        let insert = txn
            .prepare("INSERT INTO cuzk_key_chunks (circuit_id, n, bytes) VALUES ($1, $2, $3)")
            .map_err(failed)?;
        let mut buffer = vec![0u8; CHUNK_BYTES];
        let mut digest = Sha256::new();
        let mut left = pk_bytes;
        for n in 0..chunks {
            let chunk = &mut buffer[..left.min(CHUNK_BYTES as u64) as usize];
            file.read_exact(chunk).map_err(file_error("read", pk_path))?;
            digest.update(&*chunk);
            txn.execute(&insert, &[&*circuit_id, &n, &&*chunk]).map_err(failed)?;
            left -= chunk.len() as u64;
        }
        txn.execute(
            "UPDATE cuzk_keys SET pk_sha256 = $2 WHERE circuit_id = $1",
            &[&*circuit_id, &&digest.finalize()[..]],
        )
        .map_err(failed)?;
        txn.commit().map_err(failed)?;
        Ok(true)
    }

    fn failed(&self, what: &str, error: postgres::Error) -> PgError {
        self.place.failed(format!("{what} {}", self.circuit_id), error)
    }
}
