//! What several actor tests share: a backend that sleeps for fixed stage
//! times, a gate a backend's stage waits at until the test opens it, the
//! smallest system's configuration, a job of the test circuit, waiting for
//! a job to finish, and the workers' accounts checked against wall time.

// Each test file uses only a part of this module.
#![allow(dead_code)]

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cuzk_actors::messages::{
    GetJob, GetTimeline, GetWorkers, JobStatus, SubmitJob, TimelineEntry, WorkerReport,
};
use cuzk_actors::pacer::PacerConfig;
use cuzk_actors::{
    Backend, Finished, JobId, JobSpec, NewJob, Payload, Priority, ProvingSystem, Reservation, StageError,
    Started, Synthesized, SystemConfig,
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

/// A stage the test holds for as long as it needs: a test that waits for an
/// event and holds the stage until it has seen it depends on no stage time.
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    pub fn new(open: bool) -> Self {
        Self { open: Mutex::new(open), opened: Condvar::new() }
    }

    /// Returns once the gate is open (at once if it is).
    pub fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// The smallest system: one synthesis thread, finalizer and general
/// worker, no critical lane, no look-ahead, a 1 GiB budget.
pub fn one_of_each(max_attempts: u32) -> SystemConfig {
    SystemConfig {
        synthesis_threads: 1,
        finalizer_threads: 1,
        workers_per_device: 1,
        critical_workers_per_device: 0,
        gpu_lookahead: 0,
        budget_bytes: 1 << 30,
        pacer: PacerConfig::default(),
        max_attempts,
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
        let view = system
            .tracker
            .send(GetJob(JobId(id.into()), cuzk_actors::TenantScope::All))
            .await
            .unwrap()
            .unwrap();
        if view.status == JobStatus::Done {
            return;
        }
        assert!(Instant::now() < deadline, "job {id} did not finish: {:?}", view.status);
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every worker's timeline, oldest first, from the monitor's start.
pub async fn timeline(system: &ProvingSystem) -> Vec<TimelineEntry> {
    system.monitor.send(GetTimeline { since_unix_ms: 0.0, until_unix_ms: None }).await.unwrap()
}

/// The bounds of the wall time a worker's account can cover when asked:
/// from its start, somewhere between the readings around
/// `ProvingSystem::start`, to the question, at the latest to the answer.
pub struct Wall {
    pub min: f64,
    pub max: f64,
}

/// Every worker's report (its last 1000 spans) once every worker is idle,
/// and the wall time they cover, given the clock read before and after
/// `ProvingSystem::start`. A job is done once its last partition is
/// finalized, and the worker reports the end of that stage just after
/// handing it on: until then that stage is neither busy nor failed.
pub async fn accounts_when_idle(
    system: &ProvingSystem,
    (before_start, after_start): (Instant, Instant),
) -> (Vec<WorkerReport>, Wall) {
    while system.monitor.send(GetWorkers { spans: 0 }).await.unwrap().iter().any(|w| w.state != "idle") {
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
    let asked = Instant::now();
    let workers = system.monitor.send(GetWorkers { spans: 1000 }).await.unwrap();
    let answered = Instant::now();
    let wall =
        Wall { min: (asked - after_start).as_secs_f64(), max: (answered - before_start).as_secs_f64() };
    (workers, wall)
}

/// Busy plus failed plus idle of an idle worker is its wall time (to 1%);
/// returns that sum.
pub fn assert_accounted_is_wall_time(report: &WorkerReport, wall: &Wall) -> f64 {
    let idle: f64 = report.idle_seconds.values().sum();
    let accounted = report.busy_seconds + report.failed_seconds + idle;
    assert!(
        accounted <= wall.max * 1.01 && accounted >= wall.min * 0.99,
        "{}: busy + failed + idle = {accounted} s, wall between {} and {} s: {report:?}",
        report.id,
        wall.min,
        wall.max
    );
    accounted
}
