//! The job store's rows as bytes. Every value is sealed: a magic, the time it
//! was written, its length and a checksum over all of it, then the row as
//! JSON naming its own job and partition. A flipped byte fails the checksum,
//! so a damaged row is reported and skipped instead of served; and because a
//! sealed row describes itself, rows can be found again by scanning the raw
//! bytes of a file the database itself can no longer open (`salvage`).

use std::collections::BTreeMap;

use cuzk_actors::model::ProofRecord;
use cuzk_actors::store::{JobOutcome, JobRecord};
use cuzk_actors::JobId;
use redb::TableDefinition;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// (job id, row kind, partition) → a sealed row. One table, so that a
/// job's rows are one key range: loaded, and removed, together.
pub const ROWS: TableDefinition<(&str, u8, u32), &[u8]> = TableDefinition::new("rows");

/// Starts every sealed value ("cuzk row, version 1").
const MAGIC: [u8; 4] = *b"CZR1";
/// Magic, written-at (u64), payload length (u32), checksum (8 bytes).
const HEADER: usize = 4 + 8 + 4 + 8;
/// Larger payloads are not rows (a salvage scan skips such a "length").
const MAX_PAYLOAD: usize = 1 << 30;

/// What a row holds; its place in the table's key is (job, kind, index).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "row", rename_all = "snake_case")]
pub enum Row {
    Job(JobRecord),
    Outcome { job: JobId, outcome: JobOutcome },
    Proof { job: JobId, index: u32, proof: String, public_inputs: Vec<String> },
    Failure { job: JobId, index: u32, error: String },
}

/// The kind byte of a row's key. Rows of one job sort record first.
pub const JOB: u8 = 0;
pub const OUTCOME: u8 = 1;
pub const PROOF: u8 = 2;
pub const FAILURE: u8 = 3;

/// A kind byte in words, for reports.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        JOB => "job",
        OUTCOME => "outcome",
        PROOF => "proof",
        FAILURE => "failure",
        _ => "unknown",
    }
}

impl Row {
    pub fn proof(job: &JobId, index: u32, proof: &ProofRecord) -> Self {
        Row::Proof {
            job: job.clone(),
            index,
            proof: hex::encode(&proof.proof),
            public_inputs: proof.public_inputs.iter().map(hex::encode).collect(),
        }
    }

    /// The row's key: job id, kind, partition (0 for job-wide rows).
    pub fn key(&self) -> (&str, u8, u32) {
        match self {
            Row::Job(record) => (&record.id.0, JOB, 0),
            Row::Outcome { job, .. } => (&job.0, OUTCOME, 0),
            Row::Proof { job, index, .. } => (&job.0, PROOF, *index),
            Row::Failure { job, index, .. } => (&job.0, FAILURE, *index),
        }
    }
}

/// A proof row's bytes, or why they are not a proof.
pub fn proof_record(proof: &str, public_inputs: &[String]) -> Result<ProofRecord, hex::FromHexError> {
    Ok(ProofRecord {
        proof: hex::decode(proof)?,
        public_inputs: public_inputs.iter().map(hex::decode).collect::<Result<_, _>>()?,
    })
}

fn checksum(written_us: u64, payload: &[u8]) -> [u8; 8] {
    let mut hash = Sha256::new();
    hash.update(MAGIC);
    hash.update(written_us.to_le_bytes());
    hash.update((payload.len() as u32).to_le_bytes());
    hash.update(payload);
    hash.finalize()[..8].try_into().expect("8 of 32 bytes")
}

/// The sealed bytes of a row written now.
pub fn seal(row: &Row) -> Vec<u8> {
    let payload = serde_json::to_vec(row).expect("rows serialize");
    let written_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let mut sealed = Vec::with_capacity(HEADER + payload.len());
    sealed.extend_from_slice(&MAGIC);
    sealed.extend_from_slice(&written_us.to_le_bytes());
    sealed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    sealed.extend_from_slice(&checksum(written_us, &payload));
    sealed.extend_from_slice(&payload);
    sealed
}

/// Why a stored value is not a row that can be trusted.
#[derive(Debug, thiserror::Error)]
pub enum RowDamage {
    #[error("not a sealed row")]
    NotSealed,
    #[error("a {len}-byte row does not fit in {bytes} bytes")]
    TooLong { len: usize, bytes: usize },
    #[error("checksum mismatch")]
    Checksum,
    #[error("checksum matches but {0}")]
    Unreadable(serde_json::Error),
    #[error("{0} bytes after the row")]
    Trailing(usize),
    /// Sound, but under another row's key.
    #[error("stored under another job's key")]
    Misplaced,
    #[error("its proof is not hex: {0}")]
    NotHex(hex::FromHexError),
}

/// A sealed row found at the start of `bytes`: the row, when it was written,
/// and how many bytes it took.
struct Unsealed {
    row: Row,
    written_us: u64,
    len: usize,
}

fn unseal_prefix(bytes: &[u8]) -> Result<Unsealed, RowDamage> {
    if bytes.len() < HEADER || bytes[..4] != MAGIC {
        return Err(RowDamage::NotSealed);
    }
    let written_us = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    if len > MAX_PAYLOAD || bytes.len() < HEADER + len {
        return Err(RowDamage::TooLong { len, bytes: bytes.len() });
    }
    let payload = &bytes[HEADER..HEADER + len];
    if bytes[16..24] != checksum(written_us, payload) {
        return Err(RowDamage::Checksum);
    }
    let row = serde_json::from_slice(payload).map_err(RowDamage::Unreadable)?;
    Ok(Unsealed { row, written_us, len: HEADER + len })
}

/// The row a stored value holds, or why it cannot be trusted.
pub fn unseal(value: &[u8]) -> Result<Row, RowDamage> {
    let unsealed = unseal_prefix(value)?;
    if unsealed.len != value.len() {
        return Err(RowDamage::Trailing(value.len() - unsealed.len));
    }
    Ok(unsealed.row)
}

/// Every intact sealed row in `bytes` (a damaged database file), the newest
/// copy of each key: copy-on-write leaves older copies of rewritten rows in
/// free pages, so rows removed by retention can come back (they are finished
/// and are swept again) but a row never comes back older than its last
/// readable write.
pub fn salvage(bytes: &[u8]) -> Vec<Row> {
    let mut newest: BTreeMap<(String, u8, u32), (u64, Row)> = BTreeMap::new();
    let mut at = 0;
    while let Some(found) = find_magic(&bytes[at..]) {
        let start = at + found;
        match unseal_prefix(&bytes[start..]) {
            Ok(Unsealed { row, written_us, len }) => {
                let (job, kind, index) = row.key();
                let key = (job.to_string(), kind, index);
                if newest.get(&key).is_none_or(|(at, _)| *at <= written_us) {
                    newest.insert(key, (written_us, row));
                }
                at = start + len;
            }
            Err(_) => at = start + 1,
        }
    }
    newest.into_values().map(|(_, row)| row).collect()
}

fn find_magic(bytes: &[u8]) -> Option<usize> {
    bytes.windows(MAGIC.len()).position(|w| w == MAGIC)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(index: u32, error: &str) -> Row {
        Row::Failure { job: JobId("j".into()), index, error: error.into() }
    }

    #[test]
    fn a_sealed_row_round_trips_and_any_flipped_byte_is_caught() {
        let row = failure(3, "boom");
        let sealed = seal(&row);
        assert_eq!(unseal(&sealed).ok(), Some(row));
        for at in 0..sealed.len() {
            let mut damaged = sealed.clone();
            damaged[at] ^= 0x10;
            assert!(unseal(&damaged).is_err(), "a flip at byte {at} went unnoticed");
        }
        assert!(unseal(&sealed[..sealed.len() - 1]).is_err());
    }

    #[test]
    fn salvage_finds_intact_rows_among_garbage_and_keeps_the_newest_copy() {
        let old = seal(&failure(1, "old"));
        std::thread::sleep(std::time::Duration::from_millis(2));
        let new = seal(&failure(1, "new"));
        let other = seal(&failure(2, "other"));
        let mut damaged = seal(&failure(4, "damaged"));
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        let mut file = b"garbage CZR1 more garbage".to_vec();
        for part in [&new, &damaged, &old, &other] {
            file.extend_from_slice(part);
            file.extend_from_slice(&[0u8; 7]);
        }
        // A row cut off by truncation is not found.
        file.extend_from_slice(&seal(&failure(5, "cut"))[..30]);
        assert_eq!(salvage(&file), vec![failure(1, "new"), failure(2, "other")]);
    }
}
