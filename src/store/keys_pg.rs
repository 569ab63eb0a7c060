//! Proving keys shared by a fleet through PostgreSQL (issue 14, item 4), in
//! `cuzk_keys` and `cuzk_key_chunks` (migrations/0004_keys.sql). A job's
//! partitions may be proved on different nodes, so the key of a built-in
//! family's shape, which a random setup makes, must be made once and copied
//! to every node. The key store (src/keys.rs) takes the shape's lock, finds
//! the key here or publishes its own, and lets the lock go.
//!
//! Each lock is a connection of its own holding a session-level advisory
//! lock: shapes prepared at once on one node do not wait for each other,
//! and a node that dies or loses the database while holding one releases it
//! with its session, so no crash leaves a shape locked (a host that
//! vanished without closing it is noticed by the server's keepalive, set
//! short on these connections).

use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use postgres::{Client, NoTls};
use sha2::{Digest, Sha256};

use super::pg::{client_config, describe};
use super::{migrate, StoreUrl};

/// Bytes of the proving key per row of `cuzk_key_chunks`: a 670 MB key
/// (2^20 constraints) is 40 round trips, and each side holds one chunk at
/// a time.
const CHUNK_BYTES: usize = 16 << 20;

/// Where the fleet's keys are.
pub struct SharedKeys {
    /// The store's connection settings (its timeouts included): each lock
    /// and each look-up opens a connection of its own.
    config: postgres::Config,
    /// The URL with its password hidden, for messages.
    shown: String,
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
    /// The URL with its password hidden, for messages.
    shown: String,
}

impl SharedKeys {
    /// Connects once to check the database and bring its schema up to date
    /// (as the job store does).
    pub fn connect(url: &StoreUrl) -> Result<Self, String> {
        let config = client_config(url)?;
        let shared = Self { config, shown: url.to_string() };
        let mut client = shared.connect_once()?;
        migrate::migrate(&mut client).map_err(|e| format!("keys on {}: {e}", shared.shown))?;
        Ok(shared)
    }

    /// Takes the lock of `circuit_id`, waiting while another node holds it
    /// (its setup may take minutes).
    pub fn lock(&self, circuit_id: &str) -> Result<KeyLock, String> {
        let mut client = self.connect_once()?;
        // A holder whose host vanished without closing the connection would
        // keep the lock until the server's keepalive noticed (the kernel's
        // default: over two hours): this session's is noticed in about 25
        // s. A live holder's kernel answers the probes however long its
        // setup runs.
        client
            .batch_execute("SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3")
            .map_err(|e| format!("keys on {}: cannot set up the lock's connection: {}", self.shown, describe(&e)))?;
        // The two-key form, keyed by the schema too: fleets in other schemas
        // of the database do not wait for this one, and no key meets the
        // migrations' one-key lock.
        client
            .execute(
                "SELECT pg_advisory_lock(hashtext(coalesce(current_schema(), '')), hashtext($1))",
                &[&circuit_id],
            )
            .map_err(|e| format!("keys on {}: cannot lock {circuit_id}: {}", self.shown, describe(&e)))?;
        Ok(KeyLock { client, circuit_id: circuit_id.into(), shown: self.shown.clone() })
    }

    /// The published verifying key of `circuit_id`, without the lock: a
    /// published key never changes. One connection per call: the daemon
    /// asks once per shape a client wants to verify.
    pub fn verifying_key(&self, circuit_id: &str) -> Result<Option<Vec<u8>>, String> {
        self.connect_once()?
            .query_opt("SELECT vk FROM cuzk_keys WHERE circuit_id = $1", &[&circuit_id])
            .map(|row| row.map(|row| row.get(0)))
            .map_err(|e| format!("keys on {}: cannot read the key of {circuit_id}: {}", self.shown, describe(&e)))
    }

    fn connect_once(&self) -> Result<Client, String> {
        self.config
            .connect(NoTls)
            .map_err(|e| format!("keys on {}: cannot connect: {}", self.shown, describe(&e)))
    }
}

impl KeyLock {
    /// The shape's published key, if any.
    pub fn key(&mut self) -> Result<Option<SharedKey>, String> {
        let row = self
            .client
            .query_opt(
                "SELECT vk, pk_bytes, pk_sha256, chunks FROM cuzk_keys WHERE circuit_id = $1",
                &[&self.circuit_id],
            )
            .map_err(|e| self.failed("cannot read the key of", &e))?;
        let Some(row) = row else { return Ok(None) };
        let digest: &[u8] = row.get(2);
        Ok(Some(SharedKey {
            vk: row.get(0),
            pk_bytes: row.get::<_, i64>(1) as u64,
            pk_sha256: digest.try_into().map_err(|_| format!("keys on {}: the digest of {} is not 32 bytes", self.shown, self.circuit_id))?,
            chunks: row.get(3),
        }))
    }

    /// Writes the proving key of `key` to `path` atomically: chunk by chunk
    /// to a temporary file, checked against the key's length and SHA-256,
    /// then renamed over `path`.
    pub fn download(&mut self, key: &SharedKey, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("tmp");
        let local = |e: std::io::Error| format!("cannot write {}: {e}", tmp.display());
        let mut file = fs::File::create(&tmp).map_err(local)?;
        let mut digest = Sha256::new();
        let mut written = 0u64;
        for n in 0..key.chunks {
            let row = self
                .client
                .query_opt(
                    "SELECT bytes FROM cuzk_key_chunks WHERE circuit_id = $1 AND n = $2",
                    &[&self.circuit_id, &n],
                )
                .map_err(|e| self.failed("cannot read the key of", &e))?
                .ok_or_else(|| format!("keys on {}: chunk {n} of {} is missing", self.shown, self.circuit_id))?;
            let bytes: &[u8] = row.get(0);
            digest.update(bytes);
            file.write_all(bytes).map_err(local)?;
            written += bytes.len() as u64;
        }
        if written != key.pk_bytes || digest.finalize()[..] != key.pk_sha256 {
            let _ = fs::remove_file(&tmp);
            return Err(format!(
                "keys on {}: the proving key of {} read back as {written} bytes whose length or SHA-256 differs from the published ones ({} bytes)",
                self.shown, self.circuit_id, key.pk_bytes
            ));
        }
        file.sync_all().map_err(local)?;
        fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Publishes the proving key in the file at `pk_path` (read one chunk
    /// at a time) and its verifying key `vk`, in one transaction. None: it
    /// is the fleet's key now. Some: another node's was there first and
    /// stands (published without this lock: a node whose lock's connection
    /// died during its setup publishes on a later try), and this one is
    /// not stored.
    pub fn publish(&mut self, pk_path: &Path, vk: &[u8]) -> Result<Option<SharedKey>, String> {
        match self.insert(pk_path, vk)? {
            true => Ok(None),
            false => self.key(),
        }
    }

    /// `publish`'s transaction: whether the key was stored (false: the
    /// shape had one already).
    fn insert(&mut self, pk_path: &Path, vk: &[u8]) -> Result<bool, String> {
        let local = |e: std::io::Error| format!("cannot read {}: {e}", pk_path.display());
        let mut file = fs::File::open(pk_path).map_err(local)?;
        let pk_bytes = file.metadata().map_err(local)?.len();
        let chunks = i32::try_from(pk_bytes.div_ceil(CHUNK_BYTES as u64))
            .map_err(|_| format!("{} is too large to publish ({pk_bytes} bytes)", pk_path.display()))?;
        let Self { client, circuit_id, shown } = self;
        let failed = |e: postgres::Error| format!("keys on {shown}: cannot publish the key of {circuit_id}: {}", describe(&e));
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
            file.read_exact(chunk).map_err(local)?;
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

    fn failed(&self, what: &str, error: &postgres::Error) -> String {
        format!("keys on {}: {what} {}: {}", self.shown, self.circuit_id, describe(error))
    }
}
