//! What several actor tests share: a backend that sleeps for fixed stage
//! times, a job of the test circuit, and waiting for a job to finish.

// Each test file uses only a part of this module.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_actors::messages::{GetJob, JobStatus, SubmitJob};
use cuzk_actors::{
    Backend, Finished, JobId, JobSpec, NewJob, Payload, Priority, ProvingSystem, Reservation, StageError,
    Started, Synthesized,
};

/// Sleeps for fixed stage times: a stand-in whose timing the test controls.
pub struct Timed {
    pub synthesis: Duration,
    /// GPU time of a partition that is not critical.
    pub prove: Duration,
    /// GPU time of a critical partition (WinningPoSt is short).
    pub critical_prove: Duration,
}

impl Timed {
    /// Every partition takes `synthesis` then `prove`, whatever its priority.
    pub fn new(synthesis: Duration, prove: Duration) -> Self {
        Self { synthesis, prove, critical_prove: prove }
    }
}

impl Backend for Timed {
    fn name(&self) -> &str {
        "timed"
    }
    fn devices(&self) -> Vec<String> {
        vec!["d0".into()]
    }
    fn synthesize(&self, _: &JobSpec, _: u32) -> Result<Synthesized, StageError> {
        std::thread::sleep(self.synthesis);
        Ok(Synthesized { payload: Payload::new(()), phases: vec![] })
    }
    fn prove_start(&self, _: usize, job: &JobSpec, _: u32, _: Payload) -> Result<Started, StageError> {
        let prove = if job.priority == Priority::Critical { self.critical_prove } else { self.prove };
        std::thread::sleep(prove);
        Ok(Started {
            payload: Payload::new(()),
            freed_bytes: 0,
            phases: vec![("device", prove)],
            device_active: Some(prove),
        })
    }
    fn prove_finish(&self, _: &JobSpec, _: u32, _: Payload) -> Result<Finished, StageError> {
        Ok(Finished { proof: vec![1], public_inputs: vec![], phases: vec![] })
    }
}

/// A job of the test circuit, of the default tenant, without a deadline.
pub fn job(id: &str, priority: Priority, partitions: u32, reservation: Reservation) -> NewJob {
    NewJob {
        id: JobId(id.into()),
        priority,
        partitions,
        circuit: "test".into(),
        circuit_id: "test".into(),
        reservation,
        idempotency_key: None,
        tenant: cuzk_actors::Tenant::default(),
        tenant_max_unfinished: None,
        deadline: None,
        request: None,
        work: Arc::new(()),
    }
}

/// Submits `job`, which must be queued.
pub async fn submit(system: &ProvingSystem, job: NewJob) {
    let id = job.id.clone();
    let outcome = system.tracker.send(SubmitJob(job)).await.unwrap();
    assert!(outcome.created && outcome.queue_full.is_none(), "job {id} not queued");
}

/// Waits up to a minute for job `id` to be done.
pub async fn wait_done(system: &ProvingSystem, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = system.tracker.send(GetJob(JobId(id.into()), cuzk_actors::TenantScope::All)).await.unwrap().unwrap();
        if view.status == JobStatus::Done {
            return;
        }
        assert!(Instant::now() < deadline, "job {id} did not finish: {:?}", view.status);
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}
