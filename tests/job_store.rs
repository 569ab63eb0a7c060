//! The redb job store on its own: what it keeps across a reopen, what
//! removal takes, group commit, writes after close, and what it does with a
//! file found damaged, truncated, emptied or missing.

use std::time::Instant;

use cuzk::store::RedbJobStore;
use cuzk_actors::model::ProofRecord;
use cuzk_actors::store::{JobOutcome, JobRecord, JobStore, StoreWrite, StoredJob};
use cuzk_actors::{JobId, Priority, Stage};

fn record(id: &str, seq: u64) -> JobRecord {
    JobRecord {
        id: JobId(id.into()),
        seq,
        priority: Priority::High,
        partitions: 3,
        circuit: "mimc-chain".into(),
        circuit_id: "mimc-chain-k4".into(),
        idempotency_key: Some(format!("key-{id}")),
        tenant: cuzk_actors::Tenant(format!("tenant-{id}")),
        submitted_unix_ms: 1_700_000_000_000 + seq,
        deadline_ms: Some(5000),
        request: format!(r#"{{"circuit":"mimc-chain","seed":{seq}}}"#),
        request_digest: None,
    }
}

fn proof(byte: u8) -> ProofRecord {
    ProofRecord {
        proof: vec![byte; 192],
        public_inputs: vec![vec![byte, 1], vec![byte, 2]],
    }
}

fn write_all(store: &RedbJobStore, writes: Vec<StoreWrite>) {
    let pending: Vec<_> = writes.into_iter().map(|w| store.write(w)).collect();
    for committed in pending {
        committed.wait_blocking().expect("committed");
    }
}

fn by_id<'a>(jobs: &'a [StoredJob], id: &str) -> Option<&'a StoredJob> {
    jobs.iter().find(|job| job.record.id.0 == id)
}

#[test]
fn jobs_survive_a_reopen_and_removal_takes_all_of_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.redb");
    let store = RedbJobStore::open(&path).unwrap();
    let done = JobOutcome {
        stage: Stage::Done,
        error: None,
        finished_unix_ms: 1_700_000_100_000,
    };
    write_all(
        &store,
        vec![
            // Out of submission order on purpose: load sorts by seq.
            StoreWrite::Accepted(record("b", 2)),
            StoreWrite::Accepted(record("a", 1)),
            // An id that is a prefix of another must not share its rows.
            StoreWrite::Accepted(record("ab", 3)),
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 2, proof: proof(9) },
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 1, proof: proof(5) },
            // Recorded twice: one proof per partition, the last one.
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 0, proof: proof(1) },
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 0, proof: proof(2) },
            StoreWrite::PartitionProved { job: JobId("ab".into()), index: 0, proof: proof(7) },
            StoreWrite::PartitionFailed { job: JobId("b".into()), index: 1, error: "boom".into() },
            StoreWrite::Finished { job: JobId("a".into()), outcome: done.clone() },
        ],
    );
    store.close().unwrap();

    let store = RedbJobStore::open(&path).unwrap();
    let jobs = store.load().unwrap();
    let order: Vec<&str> = jobs.iter().map(|j| j.record.id.0.as_str()).collect();
    assert_eq!(order, ["a", "b", "ab"]);
    let a = by_id(&jobs, "a").unwrap();
    // A finished job keeps its request's digest, not the request.
    let submitted = record("a", 1);
    assert_eq!(a.record.request, "");
    assert_eq!(a.record.request_digest(), submitted.request_digest());
    assert_eq!(a.record.seq, submitted.seq);
    assert_eq!(by_id(&jobs, "b").unwrap().record, record("b", 2));
    assert_eq!(a.proofs.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(a.proofs[&0], proof(2));
    assert_eq!(a.outcome.as_ref(), Some(&done));
    let b = by_id(&jobs, "b").unwrap();
    assert!(b.proofs.is_empty() && b.outcome.is_none());
    assert_eq!(b.failures.get(&1).map(String::as_str), Some("boom"));

    write_all(&store, vec![StoreWrite::Removed(JobId("a".into()))]);
    let jobs = store.load().unwrap();
    assert!(by_id(&jobs, "a").is_none());
    assert_eq!(by_id(&jobs, "ab").unwrap().proofs[&0], proof(7));
    store.close().unwrap();

    let store = RedbJobStore::open(&path).unwrap();
    assert!(by_id(&store.load().unwrap(), "a").is_none());
    store.close().unwrap();
}

#[test]
fn a_burst_of_writes_shares_few_commits() {
    const JOBS: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let store = RedbJobStore::open(&dir.path().join("jobs.redb")).unwrap();
    let started = Instant::now();
    let pending: Vec<_> = (0..JOBS)
        .map(|seq| store.write(StoreWrite::Accepted(record(&format!("job-{seq}"), seq))))
        .collect();
    for committed in pending {
        committed.wait_blocking().expect("committed");
    }
    let transactions = store.transactions();
    eprintln!("{JOBS} jobs in {transactions} transactions, {:?}", started.elapsed());
    // One fsync each would be 10,000 transactions.
    assert!(transactions <= 50, "{transactions} transactions for {JOBS} jobs");
    assert_eq!(store.load().unwrap().len() as u64, JOBS);
    store.close().unwrap();
}

#[test]
fn a_closed_store_refuses_writes_and_a_second_open_fails_while_one_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.redb");
    let store = RedbJobStore::open(&path).unwrap();
    assert!(RedbJobStore::open(&path).is_err(), "the file is locked");
    store.close().unwrap();
    let refused = store.write(StoreWrite::Accepted(record("late", 1)));
    assert!(refused.wait_blocking().is_err());
    let reopened = RedbJobStore::open(&path).unwrap();
    assert!(reopened.load().unwrap().is_empty());
    reopened.close().unwrap();
}

/// A store with two finished jobs ("good", "hit"), each with its three
/// proofs, closed; returns its path.
fn two_done_jobs(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("jobs.redb");
    let store = RedbJobStore::open(&path).unwrap();
    let done = JobOutcome { stage: Stage::Done, error: None, finished_unix_ms: 1_700_000_100_000 };
    let mut writes = Vec::new();
    for (seq, id) in ["good", "hit"].iter().enumerate() {
        writes.push(StoreWrite::Accepted(record(id, seq as u64)));
        for index in 0..3 {
            let job = JobId((*id).into());
            writes.push(StoreWrite::PartitionProved { job, index, proof: proof(0x40 + index as u8) });
        }
        writes.push(StoreWrite::Finished { job: JobId((*id).into()), outcome: done.clone() });
    }
    write_all(&store, writes);
    store.close().unwrap();
    path
}

/// Flips one byte inside the first stored copy of `needle`.
fn flip_inside(path: &std::path::Path, needle: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("the row is in the file");
    bytes[at + needle.len() / 2] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

fn damaged_copies(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".damaged-"))
        .count()
}

#[test]
fn a_proof_that_fails_its_checksum_is_never_served_and_fails_only_its_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_done_jobs(dir.path());
    // Proof bytes 0x41 of job "hit", partition 1, as stored (hex text).
    let hit_proof = format!(r#""job":"hit","index":1,"proof":"{}"#, "41".repeat(4));
    flip_inside(&path, hit_proof.as_bytes());

    let store = RedbJobStore::open(&path).unwrap();
    let jobs = store.load().unwrap();
    let hit = by_id(&jobs, "hit").unwrap();
    assert!(!hit.proofs.contains_key(&1), "a damaged proof must not be loaded");
    assert_eq!(hit.proofs[&0], proof(0x40));
    assert!(hit.failures[&1].contains("checksum"), "{:?}", hit.failures);
    let outcome = hit.outcome.as_ref().unwrap();
    assert_eq!(outcome.stage, Stage::Failed, "a done job that lost a proof is failed");
    let good = by_id(&jobs, "good").unwrap();
    assert_eq!(good.outcome.as_ref().unwrap().stage, Stage::Done);
    assert_eq!(good.proofs.len(), 3);
    let health = store.health();
    assert_eq!(health.incidents.len(), 1, "{health:?}");
    assert!(health.incidents[0].contains("job hit: its proof record for partition 1"), "{health:?}");
    assert_eq!(damaged_copies(dir.path()), 1, "the file before the repair is kept");
    store.close().unwrap();

    // The repair is durable: the next start finds nothing wrong and the
    // job stays failed.
    let store = RedbJobStore::open(&path).unwrap();
    let jobs = store.load().unwrap();
    assert_eq!(by_id(&jobs, "hit").unwrap().outcome.as_ref().unwrap().stage, Stage::Failed);
    assert!(store.health().incidents.is_empty());
    store.close().unwrap();
}

#[test]
fn a_truncated_store_is_moved_aside_and_its_intact_records_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_done_jobs(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    // Cut the file after the last stored row: redb's own pages are gone.
    let last_row = bytes.windows(4).rposition(|w| w == b"CZR1").unwrap();
    std::fs::write(&path, &bytes[..last_row + 400.min(bytes.len() - last_row)]).unwrap();

    let store = RedbJobStore::open(&path).expect("a damaged store still opens");
    let jobs = store.load().unwrap();
    let health = store.health();
    assert_eq!(health.incidents.len(), 1, "{health:?}");
    assert!(health.incidents[0].contains("intact records salvaged"), "{health:?}");
    assert_eq!(damaged_copies(dir.path()), 1);
    assert!(!jobs.is_empty(), "rows before the cut are salvaged");
    // Whatever came back done is whole; a job that lost a proof is failed.
    let done = |job: &&StoredJob| job.outcome.as_ref().is_some_and(|o| o.stage == Stage::Done);
    assert!(jobs.iter().any(|job| done(&job)), "an intact job stays done");
    for job in &jobs {
        if done(&job) {
            assert_eq!(job.proofs.len(), 3, "{}", job.record.id);
            assert_eq!(job.proofs[&1], proof(0x41));
        } else {
            assert!(job.failures.values().any(|e| e.contains("lost with the damaged job store")));
        }
    }
    store.close().unwrap();
}

#[test]
fn garbage_in_place_of_the_store_is_moved_aside_and_a_new_one_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_done_jobs(dir.path());
    let len = std::fs::metadata(&path).unwrap().len() as usize;
    std::fs::write(&path, vec![0x5a; len]).unwrap();
    let store = RedbJobStore::open(&path).expect("starts");
    assert!(store.load().unwrap().is_empty());
    assert!(store.health().incidents[0].contains("could not be read"), "{:?}", store.health());
    assert_eq!(damaged_copies(dir.path()), 1);
    store.close().unwrap();
}

#[test]
fn an_emptied_or_missing_store_is_reported_not_silently_replaced() {
    for damage in ["emptied", "removed"] {
        let dir = tempfile::tempdir().unwrap();
        let path = two_done_jobs(dir.path());
        match damage {
            "emptied" => std::fs::write(&path, b"").unwrap(),
            _ => std::fs::remove_file(&path).unwrap(),
        }
        let store = RedbJobStore::open(&path).expect("starts");
        assert!(store.load().unwrap().is_empty());
        let health = store.health();
        assert_eq!(health.incidents.len(), 1, "{damage}: {health:?}");
        assert!(health.incidents[0].contains("every job it held is lost"), "{damage}: {health:?}");
        store.close().unwrap();
        // Reported once: the new store is the store from now on.
        let store = RedbJobStore::open(&path).unwrap();
        assert!(store.health().incidents.is_empty(), "{damage}");
        store.close().unwrap();
    }
}
