//! Property tests of the actor system over random job mixes, priorities,
//! cancellations and stage failures, with a scripted backend (no proving
//! math): the budget is never exceeded and returns to zero, every partition
//! ends exactly once, dispatch follows priority, nothing deadlocks.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_actors::messages::{CancelJob, GetJob, JobStatus, SubmitJob};
use cuzk_actors::pacer::PacerConfig;
use cuzk_actors::{
    Backend, Finished, JobId, JobSpec, NewJob, Payload, Priority, ProvingSystem, Reservation, StageError,
    Started, Synthesized, SystemConfig,
};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum FailAt {
    Synthesis,
    ProveStart,
    ProveFinish,
    /// prove_start panics.
    Panic,
}

#[derive(Clone, Debug)]
struct JobPlan {
    priority: Priority,
    partitions: u32,
    failure: Option<(u32, FailAt)>,
    cancel_after_ms: Option<u64>,
}

/// What the scripted backend was asked to do.
#[derive(Default)]
struct Record {
    synthesized: Vec<(String, u32)>,
    finished: HashMap<(String, u32), usize>,
}

struct ScriptedBackend {
    record: Mutex<Record>,
    /// Synthesis of the job named "gate" waits here.
    gate: common::Gate,
}

fn fail_here(job: &JobSpec, partition: u32, stage: FailAt) -> Result<(), StageError> {
    let plan = job.work.downcast_ref::<Option<(u32, FailAt)>>().expect("test jobs carry their failure plan");
    match plan {
        Some((p, FailAt::Panic)) if *p == partition && stage == FailAt::ProveStart => {
            panic!("scripted panic")
        }
        Some((p, at)) if *p == partition && *at == stage => {
            Err(StageError::retryable(format!("scripted {stage:?} failure")))
        }
        _ => Ok(()),
    }
}

impl Backend for ScriptedBackend {
    fn name(&self) -> &str {
        "scripted"
    }
    fn devices(&self) -> Vec<String> {
        vec!["d0".into(), "d1".into()]
    }
    fn synthesize(&self, job: &JobSpec, partition: u32) -> Result<Synthesized, StageError> {
        if job.id.0 == "gate" {
            self.gate.pass();
        } else {
            self.record.lock().unwrap().synthesized.push((job.id.0.clone(), partition));
        }
        std::thread::sleep(Duration::from_micros(300));
        fail_here(job, partition, FailAt::Synthesis)?;
        Ok(Synthesized { payload: Payload::new(partition), phases: vec![] })
    }
    fn prove_start(
        &self,
        _: usize,
        job: &JobSpec,
        partition: u32,
        input: Payload,
    ) -> Result<Started, StageError> {
        assert_eq!(input.take::<u32>()?, partition, "payloads stay with their partition");
        std::thread::sleep(Duration::from_micros(500));
        fail_here(job, partition, FailAt::ProveStart)?;
        Ok(Started {
            payload: Payload::new(partition),
            freed_bytes: job.reservation.abc_bytes,
            phases: vec![],
            device_active: None,
        })
    }
    fn prove_finish(&self, job: &JobSpec, partition: u32, _: Payload) -> Result<Finished, StageError> {
        fail_here(job, partition, FailAt::ProveFinish)?;
        *self.record.lock().unwrap().finished.entry((job.id.0.clone(), partition)).or_default() += 1;
        Ok(Finished { proof: vec![partition as u8], public_inputs: vec![], phases: vec![] })
    }
}

fn job_plan() -> impl Strategy<Value = JobPlan> {
    let priority = prop_oneof![
        Just(Priority::Low),
        Just(Priority::Normal),
        Just(Priority::High),
        Just(Priority::Critical)
    ];
    let stage = prop_oneof![
        Just(FailAt::Synthesis),
        Just(FailAt::ProveStart),
        Just(FailAt::ProveFinish),
        Just(FailAt::Panic)
    ];
    let failure = prop_oneof![4 => Just(None), 1 => (0u32..4, stage).prop_map(Some)];
    let cancel = prop_oneof![4 => Just(None), 1 => (0u64..20).prop_map(Some)];
    (priority, 1u32..5, failure, cancel).prop_map(|(priority, partitions, failure, cancel_after_ms)| {
        JobPlan { priority, partitions, failure, cancel_after_ms }
    })
}

const PARTITION_BYTES: u64 = 100;

fn new_job(id: &str, priority: Priority, partitions: u32, failure: Option<(u32, FailAt)>) -> NewJob {
    NewJob {
        id: JobId(id.into()),
        priority,
        partitions,
        circuit: "scripted".into(),
        circuit_id: "scripted".into(),
        reservation: Reservation { abc_bytes: 60, retained_bytes: PARTITION_BYTES - 60 },
        idempotency_key: None,
        tenant: cuzk_actors::Tenant::default(),
        tenant_max_unfinished: None,
        deadline: None,
        work: Arc::new(failure),
        request: None,
    }
}

struct Outcome {
    statuses: Vec<JobStatus>,
    record: Record,
    peak: u64,
    limit: u64,
}

/// Runs a mix to the end and checks that the budget came back whole.
fn run_mix(plans: &[JobPlan], budget_partitions: u64, synthesis_threads: usize) -> Outcome {
    let backend = Arc::new(ScriptedBackend { record: Mutex::default(), gate: common::Gate::new(false) });
    let limit = budget_partitions * PARTITION_BYTES;
    actix_rt::System::new().block_on(async {
        let system = ProvingSystem::start(
            SystemConfig {
                synthesis_threads,
                finalizer_threads: 2,
                workers_per_device: 2,
                // Critical jobs in the mix go through the lane: the invariants
                // hold with it.
                critical_workers_per_device: 1,
                gpu_lookahead: 1,
                budget_bytes: limit,
                pacer: PacerConfig { enabled: false, ..PacerConfig::default() },
                // Each planned failure fails its job: retries are tested apart.
                max_attempts: 1,
            },
            backend.clone(),
        );
        // Hold synthesis until every job is queued, so that the order it
        // then follows is the queues' order alone.
        system.tracker.send(SubmitJob(new_job("gate", Priority::Critical, 1, None))).await.unwrap();
        for (i, plan) in plans.iter().enumerate() {
            let job = new_job(&format!("j{i}"), plan.priority, plan.partitions, plan.failure);
            system.tracker.send(SubmitJob(job)).await.unwrap();
        }
        let start = Instant::now();
        backend.gate.open();
        let mut cancels: Vec<(u64, usize)> =
            plans.iter().enumerate().filter_map(|(i, p)| p.cancel_after_ms.map(|ms| (ms, i))).collect();
        cancels.sort();
        for (ms, i) in cancels {
            let at = start + Duration::from_millis(ms);
            actix_rt::time::sleep(at.saturating_duration_since(Instant::now())).await;
            system
                .tracker
                .send(CancelJob(JobId(format!("j{i}")), cuzk_actors::TenantScope::All))
                .await
                .unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let statuses = loop {
            let mut statuses = Vec::new();
            for i in 0..plans.len() {
                statuses.push(
                    system
                        .tracker
                        .send(GetJob(JobId(format!("j{i}")), cuzk_actors::TenantScope::All))
                        .await
                        .unwrap()
                        .unwrap()
                        .status,
                );
            }
            if statuses.iter().all(|s| !matches!(s, JobStatus::Queued | JobStatus::Running)) {
                break statuses;
            }
            assert!(Instant::now() < deadline, "deadlock: jobs still {statuses:?}");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        };
        // Stage threads may still be handing back budget of abandoned work.
        let budget = loop {
            let budget = system.status().await.unwrap().budget;
            if budget.used_bytes == 0 || Instant::now() > deadline {
                break budget;
            }
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(
            (budget.used_bytes, budget.holders, budget.waiting),
            (0, 0, 0),
            "budget leaked: {budget:?}"
        );
        let record = std::mem::take(&mut *backend.record.lock().unwrap());
        Outcome { statuses, record, peak: budget.peak_bytes, limit }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn budget_holds_and_every_partition_ends_once(
        plans in prop::collection::vec(job_plan(), 1..7),
        budget_partitions in 1u64..6,
    ) {
        let outcome = run_mix(&plans, budget_partitions, 3);
        prop_assert!(outcome.peak <= outcome.limit, "peak {} over limit {}", outcome.peak, outcome.limit);
        for (i, (plan, status)) in plans.iter().zip(&outcome.statuses).enumerate() {
            let id = format!("j{i}");
            let finished: Vec<usize> = (0..plan.partitions)
                .map(|p| outcome.record.finished.get(&(id.clone(), p)).copied().unwrap_or(0))
                .collect();
            prop_assert!(finished.iter().all(|&n| n <= 1), "{}: a partition finished twice: {:?}", id, finished);
            let fails = plan.failure.is_some_and(|(p, _)| p < plan.partitions);
            match status {
                JobStatus::Done => {
                    prop_assert!(finished.iter().all(|&n| n == 1), "{} done without every proof", id);
                    prop_assert!(!fails, "{} done despite a scripted failure", id);
                }
                JobStatus::Failed => prop_assert!(fails, "{} failed without a scripted failure", id),
                JobStatus::Cancelled => prop_assert!(plan.cancel_after_ms.is_some(), "{} cancelled unasked", id),
                other => prop_assert!(false, "{} ended {:?}", id, other),
            }
        }
    }

    #[test]
    fn synthesis_follows_priority_then_age_then_partition(plans in prop::collection::vec(job_plan(), 1..7)) {
        let plans: Vec<JobPlan> =
            plans.into_iter().map(|p| JobPlan { failure: None, cancel_after_ms: None, ..p }).collect();
        let outcome = run_mix(&plans, 1000, 1);
        let order: Vec<_> = outcome
            .record
            .synthesized
            .iter()
            .map(|(job, partition)| {
                let i: usize = job[1..].parse().unwrap();
                (std::cmp::Reverse(plans[i].priority), i, *partition)
            })
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        prop_assert_eq!(order, sorted);
    }
}
