//! A done job is shown done only once the store has committed its end: a
//! client that saw "done" (and fetched the proofs) never sees the job go
//! back to running after a crash. tests/crash.sh caught the daemon showing
//! two jobs done whose end a kill -9 then undid; this holds the store's
//! commit of the end at a gate and looks at the job meanwhile.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_actors::messages::{GetJob, GetProofs, JobStatus, ProofsError};
use cuzk_actors::store::{CommitSignal, Committed, JobStore, Persistence, StoreError, StoreWrite, StoredJob};
use cuzk_actors::{JobId, Priority, ProvingSystem, Reservation, Stage, TenantScope};

use crate::common::{job, one_of_each, submit, Timed};

/// Commits every write at once but a job's end, whose commit it holds
/// until `release`.
#[derive(Default)]
struct GatedEnds {
    held: Mutex<Vec<CommitSignal>>,
}

impl GatedEnds {
    fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }
    fn release(&self) {
        for signal in self.held.lock().unwrap().drain(..) {
            signal.send(Ok(()));
        }
    }
}

impl JobStore for GatedEnds {
    fn write(&self, write: StoreWrite) -> Committed {
        let (signal, committed) = Committed::channel();
        match write {
            StoreWrite::Finished { .. } => self.held.lock().unwrap().push(signal),
            _ => signal.send(Ok(())),
        }
        committed
    }
    fn load(&self) -> Result<Vec<StoredJob>, StoreError> {
        Ok(vec![])
    }
    fn close(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[test]
fn a_job_shows_done_only_once_its_end_is_committed() {
    actix_rt::System::new().block_on(async move {
        let config = one_of_each(1);
        let store = Arc::new(GatedEnds::default());
        let persistence = Persistence {
            store: Some(store.clone()),
            fleet: None,
            retention: None,
            sweep_interval: Duration::from_secs(60),
        };
        let backend = Arc::new(Timed::new(Duration::ZERO, Duration::ZERO));
        let system = ProvingSystem::start_with(config, backend, persistence);
        let id = JobId("j".into());
        submit(&system, job("j", Priority::Normal, 2, Reservation { abc_bytes: 10, retained_bytes: 10 }))
            .await;
        let status =
            || async { system.tracker.send(GetJob(id.clone(), TenantScope::All)).await.unwrap().unwrap() };
        // Both partitions proved and the end recorded, its commit held.
        let deadline = Instant::now() + Duration::from_secs(30);
        while store.held() == 0 {
            assert!(Instant::now() < deadline, "the job's end was never recorded: {:?}", status().await);
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        let view = status().await;
        assert!(view.partitions.iter().all(|p| p.stage == Stage::Done), "{view:?}");
        assert_eq!(view.status, JobStatus::Running, "done before its end was committed: {view:?}");
        let proofs = system.tracker.send(GetProofs(id.clone(), TenantScope::All)).await.unwrap();
        assert!(
            matches!(proofs, Err(ProofsError::NotReady(JobStatus::Running))),
            "proofs served before the commit"
        );
        // Committed: done, with both proofs.
        store.release();
        let deadline = Instant::now() + Duration::from_secs(10);
        while status().await.status != JobStatus::Done {
            assert!(Instant::now() < deadline, "not done after the commit: {:?}", status().await);
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        let proofs = system.tracker.send(GetProofs(id, TenantScope::All)).await.unwrap().expect("done");
        assert_eq!(proofs.proofs.len(), 2);
    });
}
