//! The redb job store on its own: what it keeps across a reopen, what
//! removal takes, group commit, and writes after close.

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
    assert_eq!(a.record, record("a", 1));
    assert_eq!(a.proofs.keys().copied().collect::<Vec<_>>(), [0, 2]);
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
