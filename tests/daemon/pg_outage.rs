//! The PostgreSQL job store while its database goes away and comes back
//! (pg_ctl stop, start, restart on the cluster of scripts/pg-test-cluster.sh):
//! new jobs are refused with `Unavailable` meanwhile and health says why
//! (an idle store too), writes of acknowledged jobs wait and are committed
//! after, and the store reconnects by itself. Its tests run one at a time and in a
//! run of their own (scripts/test.sh): they take the database away from
//! everything else using it.

use crate::common;

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{pg_ctl, proof, record, PgSchema};
use cuzk::store::PgJobStore;
use cuzk_actors::store::{Committed, JobOutcome, JobStore, StoreError, StoreWrite};
use cuzk_actors::{JobId, Stage};

/// One test at a time owns the database.
static DATABASE: Mutex<()> = Mutex::new(());

/// The write's result, or a failure of the test after `timeout`.
fn outcome(committed: Committed, timeout: Duration) -> Result<(), StoreError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(committed.wait_blocking()));
    rx.recv_timeout(timeout).expect("the write is answered in time")
}

#[test]
fn postgres_down_refuses_new_jobs_keeps_the_rest_and_the_store_reconnects_by_itself() {
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_down_refuses_new_jobs") else { return };
    let store = PgJobStore::connect(&schema.url, None).unwrap();
    let a = JobId("a".into());
    outcome(store.write(StoreWrite::Accepted(record("a", 1))), Duration::from_secs(10)).unwrap();

    pg_ctl("stop -m fast");
    let refused = outcome(store.write(StoreWrite::Accepted(record("b", 2))), Duration::from_secs(30));
    assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{refused:?}");
    let failing = store.health().failing.expect("health reports the outage");
    assert!(failing.contains("127.0.0.1"), "{failing}");
    // The acknowledged job's progress waits for the database.
    let proved =
        store.write(StoreWrite::PartitionProved { job: a.clone(), index: 0, proof: proof(7), detail: None });
    let done = JobOutcome { stage: Stage::Done, error: None, finished_unix_ms: 1_700_000_100_000 };
    let finished = store.write(StoreWrite::Finished { job: a.clone(), outcome: done.clone() });
    std::thread::sleep(Duration::from_millis(1500));
    let still = outcome(store.write(StoreWrite::Accepted(record("c", 3))), Duration::from_secs(30));
    assert!(matches!(still, Err(StoreError::Unavailable(_))), "{still:?}");

    pg_ctl("start");
    let started = Instant::now();
    outcome(proved, Duration::from_secs(30)).expect("kept writes are committed after the outage");
    outcome(finished, Duration::from_secs(30)).unwrap();
    eprintln!("kept writes committed {:?} after the database came back", started.elapsed());
    assert_eq!(store.health().failing, None);
    outcome(store.write(StoreWrite::Accepted(record("d", 4))), Duration::from_secs(10)).unwrap();

    let jobs = store.load().unwrap();
    let ids: Vec<&str> = jobs.iter().map(|j| j.record.id.0.as_str()).collect();
    assert_eq!(ids, ["a", "d"], "refused jobs are not stored");
    assert_eq!(jobs[0].proofs[&0], proof(7));
    assert_eq!(jobs[0].outcome, Some(done));
    assert_eq!(jobs[0].record.request, "", "finished: the request is dropped");
    store.close().unwrap();
}

/// What `health()` says once `until` returns Some, polled for up to `timeout`.
fn health_within<T>(
    store: &PgJobStore,
    timeout: Duration,
    until: impl Fn(Option<String>) -> Option<T>,
) -> Option<T> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        if let Some(found) = until(store.health().failing) {
            return Some(found);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// A store with nothing to write still notices the database gone (its
/// idle check, every 5 s): `health()`, and with it /readyz, reports the
/// outage before any job is refused for it, and clears by itself once the
/// database is back, the retry that cleared it having written the probe.
#[test]
fn an_idle_store_reports_postgres_gone_and_back() {
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("an_idle_store_reports_postgres_gone_and_back") else { return };
    let store = PgJobStore::connect(&schema.url, None).unwrap();
    assert_eq!(store.health().failing, None);

    pg_ctl("stop -m fast");
    let failing = health_within(&store, Duration::from_secs(15), |failing| failing)
        .expect("health reports the outage without any write");
    assert!(failing.contains("127.0.0.1"), "{failing}");

    pg_ctl("start");
    health_within(&store, Duration::from_secs(15), |failing| failing.is_none().then_some(()))
        .expect("health clears without any write once the database is back");
    let probe: i32 =
        schema.client().query_one("SELECT octet_length(bytes) FROM cuzk_probe", &[]).unwrap().get(0);
    assert_eq!(probe, 64 << 10, "the retry that found the database back wrote the probe");
    store.close().unwrap();
}

#[test]
fn postgres_restarted_under_load_loses_no_acknowledged_write() {
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_restarted_under_load") else { return };
    let store = PgJobStore::connect(&schema.url, None).unwrap();
    let started = Instant::now();
    let mut accepted = Vec::new();
    let mut proved = Vec::new();
    let mut restart = None;
    // Writes keep coming, a few at a time as a daemon's would, through the
    // restart (on a thread of its own) and for a while after it.
    for seq in 0u64.. {
        let id = format!("job-{seq}");
        accepted.push((id.clone(), store.write(StoreWrite::Accepted(record(&id, seq)))));
        if seq >= 1 {
            let job = JobId(format!("job-{}", seq - 1));
            proved.push((
                job.clone(),
                store.write(StoreWrite::PartitionProved {
                    job,
                    index: 0,
                    proof: proof(seq as u8),
                    detail: None,
                }),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
        if restart.is_none() && started.elapsed() > Duration::from_millis(500) {
            restart = Some(std::thread::spawn(|| pg_ctl("restart -m fast")));
        }
        if restart.as_ref().is_some_and(|r| r.is_finished()) && started.elapsed() > Duration::from_secs(4) {
            break;
        }
    }
    restart.unwrap().join().unwrap();
    let written = accepted.len();
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for (id, committed) in accepted {
        match outcome(committed, Duration::from_secs(60)) {
            Ok(()) => acknowledged.push(id),
            Err(StoreError::Unavailable(_)) => refused += 1,
            Err(e) => panic!("{id}: {e}"),
        }
    }
    // A proof of a refused job is dropped, not kept forever: every proof
    // write is answered.
    for (job, committed) in proved {
        outcome(committed, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{job}: {e}"));
    }
    eprintln!("{} jobs acknowledged, {refused} refused during the restart", acknowledged.len());
    assert_eq!(store.health().failing, None, "reconnected");

    // A store opened afresh (a restarted daemon) finds exactly the
    // acknowledged jobs, in order, each proof of theirs with them.
    store.close().unwrap();
    let reopened = PgJobStore::connect(&schema.url, None).unwrap();
    let jobs = reopened.load().unwrap();
    let ids: Vec<String> = jobs.iter().map(|j| j.record.id.0.clone()).collect();
    assert_eq!(ids, acknowledged);
    for job in &jobs {
        let seq: usize = job.record.id.0["job-".len()..].parse().unwrap();
        // Every job but the last written had a proof written after it.
        if seq + 1 < written {
            assert!(job.proofs.contains_key(&0), "{}: its acknowledged proof is missing", job.record.id);
        }
    }
    reopened.close().unwrap();
}
