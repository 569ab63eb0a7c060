//! The job stores on their own, one test suite for both: what a store keeps
//! across a reopen, what removal takes, group commit, writes after close.
//! Each of those runs on the redb file (`on_redb::`) always, and on
//! PostgreSQL (`on_postgres::`, each test in a fresh schema) when
//! CUZK_TEST_PG_URL names a database (scripts/pg-test-cluster.sh). Then
//! what only one engine has: a redb file found damaged, truncated, emptied
//! or missing; a PostgreSQL URL that is wrong, schemas migrated at once or
//! by a newer cuzk. A database restarted under the store: tests/daemon/pg_outage.rs.

use crate::common;

use std::time::Instant;

use common::{proof, record, PgSchema};
use cuzk::postgres::{PgError, PgFailure, StoreUrl};
use cuzk::store::{OpenError, PgJobStore, RedbJobStore, ThreadedStore};
use cuzk_actors::store::{JobOutcome, JobStore, StoreError, StoreWrite, StoredJob};
use cuzk_actors::{JobId, Stage};

/// Each test of the shared suite, once per store.
macro_rules! for_each_store {
    ($($test:ident),* $(,)?) => {
        mod on_redb {
            $( #[test] fn $test() { super::$test(&super::Place::redb()); } )*
        }
        mod on_postgres {
            $( #[test] fn $test() {
                if let Some(place) = super::Place::postgres(stringify!($test)) {
                    super::$test(&place);
                }
            } )*
        }
    };
}

for_each_store!(
    jobs_survive_a_reopen_and_removal_takes_all_of_a_job,
    a_burst_of_writes_shares_few_commits,
    a_closed_store_refuses_writes_and_keeps_what_it_committed,
    rows_of_a_job_never_recorded_are_not_written,
);

/// Where a store under test keeps its jobs, so that it can be opened again.
enum Place {
    Redb(tempfile::TempDir),
    Postgres(PgSchema),
}

/// A store under test: the trait, and how many transactions it committed.
trait Store: JobStore {
    fn transactions(&self) -> u64;
}

impl<E> Store for ThreadedStore<E> {
    fn transactions(&self) -> u64 {
        ThreadedStore::transactions(self)
    }
}

impl Place {
    fn redb() -> Self {
        Place::Redb(tempfile::tempdir().unwrap())
    }

    fn postgres(test: &str) -> Option<Self> {
        PgSchema::create(test).map(Place::Postgres)
    }

    fn open(&self) -> Box<dyn Store> {
        match self {
            Place::Redb(dir) => Box::new(RedbJobStore::open(&dir.path().join("jobs.redb")).unwrap()),
            Place::Postgres(schema) => Box::new(PgJobStore::connect(&schema.url, None).unwrap()),
        }
    }
}

fn write_all(store: &(impl JobStore + ?Sized), writes: Vec<StoreWrite>) {
    let pending: Vec<_> = writes.into_iter().map(|w| store.write(w)).collect();
    for committed in pending {
        committed.wait_blocking().expect("committed");
    }
}

fn by_id<'a>(jobs: &'a [StoredJob], id: &str) -> Option<&'a StoredJob> {
    jobs.iter().find(|job| job.record.id.0 == id)
}

fn jobs_survive_a_reopen_and_removal_takes_all_of_a_job(place: &Place) {
    let store = place.open();
    let done = JobOutcome { stage: Stage::Done, error: None, finished_unix_ms: 1_700_000_100_000 };
    write_all(
        &*store,
        vec![
            // Out of submission order on purpose: load sorts by seq.
            StoreWrite::Accepted(record("b", 2)),
            StoreWrite::Accepted(record("a", 1)),
            // An id that is a prefix of another must not share its rows.
            StoreWrite::Accepted(record("ab", 3)),
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 2, proof: proof(9), detail: None },
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 1, proof: proof(5), detail: None },
            // Recorded twice: one proof per partition, the last one.
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 0, proof: proof(1), detail: None },
            StoreWrite::PartitionProved { job: JobId("a".into()), index: 0, proof: proof(2), detail: None },
            StoreWrite::PartitionProved { job: JobId("ab".into()), index: 0, proof: proof(7), detail: None },
            StoreWrite::PartitionFailed { job: JobId("b".into()), index: 1, error: "boom".into() },
            StoreWrite::Finished { job: JobId("a".into()), outcome: done.clone() },
        ],
    );
    store.close().unwrap();

    let store = place.open();
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

    write_all(&*store, vec![StoreWrite::Removed(JobId("a".into()))]);
    let jobs = store.load().unwrap();
    assert!(by_id(&jobs, "a").is_none());
    assert_eq!(by_id(&jobs, "ab").unwrap().proofs[&0], proof(7));
    store.close().unwrap();

    let store = place.open();
    assert!(by_id(&store.load().unwrap(), "a").is_none());
    store.close().unwrap();
}

fn a_burst_of_writes_shares_few_commits(place: &Place) {
    const JOBS: u64 = 10_000;
    let store = place.open();
    let started = Instant::now();
    let pending: Vec<_> =
        (0..JOBS).map(|seq| store.write(StoreWrite::Accepted(record(&format!("job-{seq}"), seq)))).collect();
    for committed in pending {
        committed.wait_blocking().expect("committed");
    }
    let transactions = store.transactions();
    eprintln!("{JOBS} jobs in {transactions} transactions, {:?}", started.elapsed());
    // One commit each would be 10,000 transactions.
    assert!(transactions <= 50, "{transactions} transactions for {JOBS} jobs");
    assert_eq!(store.load().unwrap().len() as u64, JOBS);
    store.close().unwrap();
}

fn a_closed_store_refuses_writes_and_keeps_what_it_committed(place: &Place) {
    let store = place.open();
    write_all(&*store, vec![StoreWrite::Accepted(record("early", 1))]);
    store.close().unwrap();
    let refused = store.write(StoreWrite::Accepted(record("late", 2)));
    assert!(matches!(refused.wait_blocking(), Err(StoreError::Closed)));
    let reopened = place.open();
    let jobs = reopened.load().unwrap();
    assert_eq!(jobs.iter().map(|j| j.record.id.0.as_str()).collect::<Vec<_>>(), ["early"]);
    reopened.close().unwrap();
}

/// A job whose record was never committed (refused, then cancelled) leaves
/// no rows: nothing would ever remove them.
fn rows_of_a_job_never_recorded_are_not_written(place: &Place) {
    let store = place.open();
    let ghost = JobId("ghost".into());
    let outcome = JobOutcome { stage: Stage::Cancelled, error: None, finished_unix_ms: 1 };
    write_all(
        &*store,
        vec![
            StoreWrite::PartitionProved { job: ghost.clone(), index: 0, proof: proof(1), detail: None },
            StoreWrite::PartitionFailed { job: ghost.clone(), index: 1, error: "boom".into() },
            StoreWrite::Finished { job: ghost.clone(), outcome },
            StoreWrite::Accepted(record("real", 1)),
        ],
    );
    let jobs = store.load().unwrap();
    assert_eq!(jobs.len(), 1);
    let real = &jobs[0];
    assert!(real.proofs.is_empty() && real.failures.is_empty() && real.outcome.is_none());
    store.close().unwrap();
    // Written later, a record brings no stale rows with it.
    let store = place.open();
    write_all(&*store, vec![StoreWrite::Accepted(record("ghost", 2))]);
    let ghost = store.load().unwrap().into_iter().find(|j| j.record.id.0 == "ghost").unwrap();
    assert!(ghost.proofs.is_empty() && ghost.failures.is_empty() && ghost.outcome.is_none());
    store.close().unwrap();
}

/// What only the redb file has: one process at a time on the file, and
/// damage. Its rows are sealed with checksums (`store/rows.rs`) and a file
/// that cannot be read is moved aside and salvaged (`store/open.rs`); a
/// PostgreSQL server checksums and recovers its own pages, so none of this
/// applies to it (docs/architecture.md, "The job store").
mod redb_only {
    use super::*;

    #[test]
    fn a_second_redb_open_fails_while_one_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.redb");
        let store = RedbJobStore::open(&path).unwrap();
        assert!(RedbJobStore::open(&path).is_err(), "the file is locked");
        store.close().unwrap();
        RedbJobStore::open(&path).unwrap().close().unwrap();
    }

    /// A store with two finished jobs ("good", "hit"); returns its path.
    fn two_done_jobs(dir: &std::path::Path) -> std::path::PathBuf {
        done_jobs(dir, &["good", "hit"])
    }

    /// A store with finished jobs, each with its three proofs (partition i's
    /// is `proof(0x40 + i)`), closed; returns its path.
    fn done_jobs(dir: &std::path::Path, ids: &[&str]) -> std::path::PathBuf {
        let path = dir.join("jobs.redb");
        let store = RedbJobStore::open(&path).unwrap();
        let done = JobOutcome { stage: Stage::Done, error: None, finished_unix_ms: 1_700_000_100_000 };
        let mut writes = Vec::new();
        for (seq, id) in ids.iter().enumerate() {
            writes.push(StoreWrite::Accepted(record(id, seq as u64)));
            for index in 0..3 {
                let job = JobId((*id).into());
                writes.push(StoreWrite::PartitionProved {
                    job,
                    index,
                    proof: proof(0x40 + index as u8),
                    detail: None,
                });
            }
            writes.push(StoreWrite::Finished { job: JobId((*id).into()), outcome: done.clone() });
        }
        write_all(&store, writes);
        store.close().unwrap();
        path
    }

    /// Flips one byte in the middle of a stored row through redb itself:
    /// its page checksums hold, so only the row's own seal sees the damage
    /// (a row written wrong, or changed in memory before its page was
    /// checksummed). Damage on disk: `random_flips_anywhere_...`.
    fn damage_row(path: &std::path::Path, key: (&str, u8, u32)) {
        let rows: redb::TableDefinition<(&str, u8, u32), &[u8]> = redb::TableDefinition::new("rows");
        let db = redb::Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(rows).unwrap();
            let mut value =
                redb::ReadableTable::get(&table, key).unwrap().expect("the row is stored").value().to_vec();
            let middle = value.len() / 2;
            value[middle] ^= 0x01;
            table.insert(key, value.as_slice()).unwrap();
        }
        txn.commit().unwrap();
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
        // Job "hit", partition 1's proof row (kind 2).
        damage_row(&path, ("hit", 2, 1));

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

    /// Damage anywhere: bytes flipped at random over the whole file, in
    /// rows, in redb's own pages or in free ones. Whatever they hit, the
    /// store opens and loads, never returns a proof other than the one
    /// written, and what it kept (repaired or rebuilt) opens again the same.
    #[test]
    fn random_flips_anywhere_never_keep_the_store_from_starting() {
        const SEEDS: u64 = 200;
        let names: Vec<String> = (0..24).map(|seq| format!("job-{seq:02}")).collect();
        let ids: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut damage_found = 0;
        for seed in 1..=SEEDS {
            let dir = tempfile::tempdir().unwrap();
            let path = done_jobs(dir.path(), &ids);

            let mut bytes = std::fs::read(&path).unwrap();
            let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            for _ in 0..200 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let at = (state % bytes.len() as u64) as usize;
                bytes[at] ^= 0xff;
            }
            std::fs::write(&path, bytes).unwrap();

            let store = RedbJobStore::open(&path).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let loaded = store.load().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            for job in &loaded {
                for (index, stored) in &job.proofs {
                    assert_eq!(*stored, proof(0x40 + *index as u8), "seed {seed}: {}", job.record.id);
                }
                if job.outcome.as_ref().is_some_and(|o| o.stage == Stage::Done) {
                    assert_eq!(job.proofs.len(), 3, "seed {seed}: a done job is whole");
                }
            }
            damage_found += usize::from(!store.health().incidents.is_empty());
            let kept: Vec<_> = loaded.iter().map(|job| job.record.id.0.clone()).collect();
            store.close().unwrap();
            let store = RedbJobStore::open(&path).unwrap_or_else(|e| panic!("seed {seed}, reopened: {e}"));
            let again: Vec<_> = store.load().unwrap().iter().map(|job| job.record.id.0.clone()).collect();
            assert_eq!(again, kept, "seed {seed}: the repair is durable");
            assert!(store.health().incidents.is_empty(), "seed {seed}: {:?}", store.health());
            store.close().unwrap();
        }
        // Flips in free pages only are harmless and unreported; most seeds
        // hit a live page.
        assert!(damage_found > SEEDS as usize / 2, "damage found with {damage_found} of {SEEDS} seeds");
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

    /// A store open in `<tmp>/data`, holding one acknowledged job ("acked").
    fn open_in_data_dir(top: &std::path::Path) -> (RedbJobStore, std::path::PathBuf) {
        let dir = top.join("data");
        std::fs::create_dir(&dir).unwrap();
        let store = RedbJobStore::open(&dir.join("jobs.redb")).unwrap();
        write_all(&store, vec![StoreWrite::Accepted(record("acked", 1))]);
        (store, dir)
    }

    /// The open file keeps taking commits whatever happens to its path: the
    /// store compares the two before each commit, and writes a copy of the
    /// open database back to a path that lost it, so that a restart reads
    /// every acknowledged job.
    #[test]
    fn a_store_file_that_leaves_its_path_is_written_back_from_the_open_file() {
        for how in ["removed", "replaced"] {
            let top = tempfile::tempdir().unwrap();
            let (store, dir) = open_in_data_dir(top.path());
            let path = dir.join("jobs.redb");
            match how {
                "removed" => std::fs::remove_dir_all(&dir).unwrap(),
                _ => {
                    let other = top.path().join("other");
                    std::fs::write(&other, b"not a store").unwrap();
                    std::fs::rename(&other, &path).unwrap();
                }
            }
            write_all(&store, vec![StoreWrite::Accepted(record("after", 2))]);
            let health = store.health();
            assert_eq!(health.failing, None, "{how}: written back before the commit");
            assert_eq!(health.incidents.len(), 2, "{how}: {health:?}");
            assert!(health.incidents[0].contains(&format!("was {how}")), "{how}: {health:?}");
            assert!(health.incidents[1].contains("(1 records"), "{how}: {health:?}");
            if how == "replaced" {
                let found = std::fs::read_dir(&dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .find(|p| p.to_string_lossy().contains(".found-"))
                    .expect("the file found in the store's place is kept aside");
                assert_eq!(std::fs::read(&found).unwrap(), b"not a store");
                assert!(health.incidents[1].contains(&found.display().to_string()), "{health:?}");
            }
            store.close().unwrap();

            let store = RedbJobStore::open(&path).unwrap();
            let ids: Vec<_> = store.load().unwrap().into_iter().map(|job| job.record.id.0).collect();
            assert_eq!(ids, ["acked", "after"], "{how}");
            assert!(store.health().incidents.is_empty(), "{how}: {:?}", store.health());
            store.close().unwrap();
        }
    }

    /// A path that cannot take the copy back (a file where the directory
    /// was): noticed without a write, new jobs refused and writes of the
    /// acknowledged job kept, until the path is free again.
    #[test]
    fn a_store_that_cannot_be_written_back_refuses_new_jobs_until_it_can() {
        let top = tempfile::tempdir().unwrap();
        let (store, dir) = open_in_data_dir(top.path());
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, b"in the way").unwrap();
        let started = Instant::now();
        let why = loop {
            if let Some(why) = store.health().failing {
                break why;
            }
            // The check runs every 5 s; the bound only ends a test where
            // the removal is never noticed.
            assert!(started.elapsed().as_secs() < 60, "the removal was not noticed without a write");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(why.contains("cannot be written back") && why.contains("do not restart"), "{why}");
        assert!(store.health().incidents[0].contains("was removed"), "{:?}", store.health());

        let refused = store.write(StoreWrite::Accepted(record("refused", 2))).wait_blocking();
        assert!(refused.is_err(), "a new job is refused while its record cannot be kept");
        let job = JobId("acked".into());
        let proved =
            store.write(StoreWrite::PartitionProved { job, index: 0, proof: proof(0x40), detail: None });
        std::fs::remove_file(&dir).unwrap();
        proved.wait_blocking().expect("written once the store is back at its path");
        let health = store.health();
        assert_eq!(health.failing, None);
        assert_eq!(health.incidents.len(), 2, "{health:?}");
        assert!(health.incidents[1].contains("written back"), "{health:?}");
        store.close().unwrap();

        let store = RedbJobStore::open(&dir.join("jobs.redb")).unwrap();
        let jobs = store.load().unwrap();
        assert_eq!(jobs.len(), 1, "the refused job was not kept");
        assert_eq!(jobs[0].proofs[&0], proof(0x40));
        store.close().unwrap();
    }

    /// A tmpfs of a few MiB at a temporary directory, unmounted when
    /// dropped: a disk that fills up. None where mounting is not allowed.
    struct SmallFs(tempfile::TempDir);

    impl SmallFs {
        fn mount(mib: u32) -> Option<Self> {
            let dir = tempfile::tempdir().unwrap();
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
                .arg(dir.path())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            mounted.then_some(Self(dir))
        }

        /// Writes a file until the filesystem is full; returns its path.
        fn fill(&self) -> std::path::PathBuf {
            use std::io::Write;
            let path = self.0.path().join("filler");
            let mut file = std::fs::File::create(&path).unwrap();
            while file.write_all(&[0xaa; 64 << 10]).and_then(|_| file.sync_all()).is_ok() {}
            path
        }
    }

    impl Drop for SmallFs {
        fn drop(&mut self) {
            // Lazily: a store a failed assertion left open does not keep it.
            let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
        }
    }

    /// A commit that fails (a full disk) drops redb's handle, which must be
    /// reopened; the data directory removed before that: the file that
    /// holds the acknowledged jobs is reopened through the store's own
    /// descriptor and written back, not lost with the last handle on it
    /// (an empty store was created at the path once it could be).
    #[test]
    fn a_failed_commit_then_the_directory_removed_loses_no_acknowledged_job() {
        let Some(fs) = SmallFs::mount(16) else {
            eprintln!("skipped: cannot mount a tmpfs here");
            return;
        };
        let (store, dir) = open_in_data_dir(fs.0.path());
        let filler = fs.fill();
        let mut large = record("large", 2);
        large.request = "x".repeat(1 << 20);
        let refused = store.write(StoreWrite::Accepted(large)).wait_blocking();
        assert!(refused.is_err(), "a new job whose record does not fit is refused");
        assert!(store.health().failing.is_some());

        std::fs::remove_dir_all(&dir).unwrap();
        let job = JobId("acked".into());
        let proved =
            store.write(StoreWrite::PartitionProved { job, index: 0, proof: proof(0x41), detail: None });
        std::fs::remove_file(&filler).unwrap();
        let started = Instant::now();
        while store.health().failing.is_some() {
            assert!(started.elapsed().as_secs() < 60, "never written back: {:?}", store.health());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        proved.wait_blocking().expect("written once the store is back at its path");
        let incidents = store.health().incidents;
        assert!(incidents.iter().any(|i| i.contains("was removed")), "{incidents:?}");
        assert!(incidents.iter().any(|i| i.contains("(1 records")), "{incidents:?}");
        store.close().unwrap();

        let store = RedbJobStore::open(&dir.join("jobs.redb")).unwrap();
        let jobs = store.load().unwrap();
        assert_eq!(jobs.iter().map(|j| j.record.id.0.as_str()).collect::<Vec<_>>(), ["acked"]);
        assert_eq!(jobs[0].proofs[&0], proof(0x41));
        store.close().unwrap();
    }
}

/// What only the PostgreSQL store has. The URL tests need no database.
mod postgres_only {
    use super::*;

    const SECRET: &str = "hunter2-not-logged";

    /// The database's refusal, and its text (checked free of the password).
    fn refused(url: &str) -> (PgFailure, String) {
        match PgJobStore::connect(&StoreUrl::new(url), None) {
            Ok(_) => panic!("{url} was accepted"),
            Err(error) => {
                let message = error.to_string();
                assert!(!message.contains(SECRET), "the password shows in {message:?}");
                match error {
                    OpenError::Database(PgError { failure, .. }) => (failure, message),
                    other => panic!("not the database's refusal: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_bad_url_or_an_unreachable_database_is_a_clear_error_without_the_password() {
        let (failure, malformed) = refused(&format!("postgres://cuzk:{SECRET}@db:notaport/jobs"));
        assert!(matches!(failure, PgFailure::NotAUrl(_)), "{malformed}");
        assert!(malformed.contains("not a PostgreSQL connection string"), "{malformed}");
        assert!(malformed.contains("postgres://cuzk:***@db:notaport/jobs"), "{malformed}");
        let (failure, unreachable) = refused(&format!("postgres://cuzk:{SECRET}@127.0.0.1:1/jobs"));
        assert!(matches!(failure, PgFailure::Failed { .. }), "{unreachable}");
        assert!(unreachable.contains("cannot connect"), "{unreachable}");
        let (failure, tls) = refused(&format!("host=db password={SECRET} sslmode=verify-full"));
        assert!(matches!(failure, PgFailure::Tls(_)), "{tls}");
        assert!(tls.contains("sslrootcert"), "{tls}");
        assert_eq!(
            format!("{:?}", StoreUrl::new(format!("postgres://u:{SECRET}@h/d"))),
            "StoreUrl(postgres://u:***@h/d)"
        );
    }

    #[test]
    fn a_wrong_password_is_refused_without_showing_it() {
        let Some(schema) = PgSchema::create("a_wrong_password_is_refused_without_showing_it") else { return };
        let url = schema.url.secret();
        let Some(at) = url.find('@') else {
            return eprintln!("skipped: CUZK_TEST_PG_URL has no password to get wrong");
        };
        let colon = url[..at].rfind(':').expect("user:password@");
        let (_, message) = refused(&format!("{}:{SECRET}{}", &url[..colon], &url[at..]));
        assert!(message.contains("password authentication failed"), "{message}");
    }

    #[test]
    fn daemons_starting_at_once_migrate_the_schema_once() {
        let Some(schema) = PgSchema::create("daemons_starting_at_once_migrate_the_schema_once") else {
            return;
        };
        let stores: Vec<_> = std::thread::scope(|scope| {
            let opening: Vec<_> =
                (0..4).map(|_| scope.spawn(|| PgJobStore::connect(&schema.url, None))).collect();
            opening.into_iter().map(|t| t.join().unwrap().expect("every daemon starts")).collect()
        });
        // One shared database: what one store writes, another loads.
        write_all(&stores[0], vec![StoreWrite::Accepted(record("shared", 1))]);
        assert_eq!(stores[3].load().unwrap()[0].record, record("shared", 1));
        for store in &stores {
            store.close().unwrap();
        }
        let versions: i64 =
            schema.client().query_one("SELECT count(*) FROM cuzk_schema_migrations", &[]).unwrap().get(0);
        let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations")).unwrap().count();
        assert_eq!(versions as usize, files, "each migration recorded once");
    }

    #[test]
    fn a_schema_migrated_by_a_newer_cuzk_is_refused() {
        let Some(schema) = PgSchema::create("a_schema_migrated_by_a_newer_cuzk_is_refused") else { return };
        PgJobStore::connect(&schema.url, None).unwrap().close().unwrap();
        schema
            .client()
            .batch_execute("INSERT INTO cuzk_schema_migrations (version, name) VALUES (999, 'future')")
            .unwrap();
        let (failure, message) = refused(schema.url.secret());
        assert!(matches!(failure, PgFailure::NewerSchema { found: 999, .. }), "{message}");
        assert!(message.contains("schema version 999, newer than this cuzk knows"), "{message}");
    }

    #[test]
    fn any_text_the_daemon_records_round_trips() {
        let Some(schema) = PgSchema::create("any_text_the_daemon_records_round_trips") else { return };
        let store = PgJobStore::connect(&schema.url, None).unwrap();
        let mut odd = record("odd", 1);
        odd.idempotency_key = Some("nul \0 and ünïcödé and \"quotes\"".into());
        odd.request = r#"{"seed":"\u0000"}"#.into();
        write_all(
            &store,
            vec![
                StoreWrite::Accepted(odd.clone()),
                StoreWrite::PartitionFailed {
                    job: odd.id.clone(),
                    index: 0,
                    error: "bad input \0 here".into(),
                },
            ],
        );
        let jobs = store.load().unwrap();
        assert_eq!(jobs[0].record, odd);
        assert_eq!(jobs[0].failures[&0], "bad input \u{fffd} here");
        store.close().unwrap();
    }
}
