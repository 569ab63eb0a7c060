//! The tracker retries by the kind of a stage failure: a retryable failure
//! sends the partition back to the queue while it has attempts left, a
//! permanent one fails the job at once, whatever attempts remain.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_actors::messages::{GetJob, JobStatus, JobView, SubmitJob};
use cuzk_actors::{
    Backend, ErrorKind, Finished, JobId, JobSpec, NewJob, Payload, Priority, ProvingSystem, Reservation,
    StageError, Started, Synthesized,
};

/// Fails the first prove_start of every job with the kind the job carries,
/// then proves.
#[derive(Default)]
struct FailsOnce {
    /// prove_start calls so far, over all jobs.
    calls: AtomicU32,
}

impl Backend for FailsOnce {
    fn name(&self) -> &str {
        "fails-once"
    }
    fn devices(&self) -> Vec<String> {
        vec!["d0".into()]
    }
    fn synthesize(&self, _: &JobSpec, _: u32) -> Result<Synthesized, StageError> {
        Ok(Synthesized { payload: Payload::new(()), phases: vec![] })
    }
    fn prove_start(&self, _: usize, job: &JobSpec, _: u32, _: Payload) -> Result<Started, StageError> {
        let kind = *job.work.downcast_ref::<ErrorKind>().expect("test jobs carry a kind");
        if self.calls.fetch_add(1, Ordering::Relaxed) == 0 {
            return Err(StageError::new(kind, format!("scripted {kind:?} device failure")));
        }
        Ok(Started { payload: Payload::new(()), freed_bytes: 0, phases: vec![], device_active: None })
    }
    fn prove_finish(&self, _: &JobSpec, _: u32, _: Payload) -> Result<Finished, StageError> {
        Ok(Finished { proof: vec![1], public_inputs: vec![], phases: vec![] })
    }
}

/// Runs one single-partition job whose first attempt fails with `kind`,
/// with three attempts allowed; returns the job once it has ended.
fn run(kind: ErrorKind) -> JobView {
    actix_rt::System::new().block_on(async move {
        let config = crate::common::one_of_each(3);
        let system = ProvingSystem::start(config, Arc::new(FailsOnce::default()));
        let job = NewJob {
            id: JobId("j".into()),
            priority: Priority::Normal,
            partitions: 1,
            circuit: "test".into(),
            circuit_id: "test".into(),
            reservation: Reservation { abc_bytes: 10, retained_bytes: 10 },
            idempotency_key: None,
            tenant: cuzk_actors::Tenant::default(),
            tenant_max_unfinished: None,
            deadline: None,
            request: None,
            work: Arc::new(kind),
        };
        system.tracker.send(SubmitJob(job)).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let view = system
                .tracker
                .send(GetJob(JobId("j".into()), cuzk_actors::TenantScope::All))
                .await
                .unwrap()
                .unwrap();
            if matches!(view.status, JobStatus::Done | JobStatus::Failed) {
                return view;
            }
            assert!(Instant::now() < deadline, "the job did not end: {view:?}");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

#[test]
fn a_retryable_failure_is_tried_again() {
    let view = run(ErrorKind::Retryable);
    assert_eq!(view.status, JobStatus::Done, "{view:?}");
    let partition = &view.partitions[0];
    assert_eq!(partition.detail.attempts, 2);
    assert_eq!(partition.detail.retried_after.as_deref(), Some("scripted Retryable device failure"));
}

#[test]
fn a_permanent_failure_fails_the_job_with_attempts_left() {
    let view = run(ErrorKind::Permanent);
    assert_eq!(view.status, JobStatus::Failed, "{view:?}");
    let partition = &view.partitions[0];
    assert_eq!(partition.detail.attempts, 1, "not retried");
    assert_eq!(partition.error.as_deref(), Some("scripted Permanent device failure"));
    assert_eq!(view.error.as_deref(), Some("partition 0: scripted Permanent device failure"));
}
