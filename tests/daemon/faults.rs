//! Fault injection through the sim backend's knobs: stage errors, panics and
//! stalls at every stage, and a budget exhausted by resident memory. Every
//! job ends done or failed with a reason, panicking actors are restarted,
//! failed attempts are retried, and the budget returns to zero.

use crate::common;

use std::time::{Duration, Instant};

use common::{metric_value, TestDaemon};
use cuzk::config::{BackendKind, Budget, StageFaults};
use serde_json::{json, Value};

const BUDGET: u64 = 64 << 30;

fn sim_daemon(edit: impl FnOnce(&mut cuzk::config::Config)) -> TestDaemon {
    common::start_with(|c| {
        c.backend = BackendKind::Sim;
        c.sim.profile = "winning-post".into();
        c.sim.time_scale = 0.02;
        c.sim.devices = 2;
        c.scheduler.synthesis_threads = 4;
        c.scheduler.budget = Budget::Bytes(BUDGET);
        edit(c);
    })
}

fn submit(d: &TestDaemon, partitions: u32, seed: u64) -> String {
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"circuit": "mimc-chain", "params": {"log2_constraints": 5}, "partitions": partitions, "seed": seed}),
    );
    assert_eq!(status, 202, "{body}");
    body["id"].as_str().unwrap().to_string()
}

/// Waits until no partition holds or waits for budget.
fn budget_drained(d: &TestDaemon) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, status) = d.get("/v1/status");
        let budget = &status["budget"];
        if budget["used_bytes"] == 0 && budget["holders"] == 0 && budget["waiting"] == 0 {
            return status;
        }
        assert!(Instant::now() < deadline, "the budget never drained: {budget}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn errors_panics_and_stalls_everywhere_end_every_job_and_leak_nothing() {
    let faulty = StageFaults { error_rate: 0.1, panic_rate: 0.1, stall_rate: 0.1, stall_ms: 30 };
    let d = sim_daemon(|c| {
        c.scheduler.max_attempts = 3;
        c.sim.faults.seed = 7;
        c.sim.faults.synthesis = faulty.clone();
        c.sim.faults.prove = faulty.clone();
        c.sim.faults.finalize = faulty;
    });
    let jobs: Vec<String> = (0..30).map(|seed| submit(&d, 3, seed)).collect();
    let (mut done, mut failed, mut retried_and_done) = (0, 0, 0);
    for id in &jobs {
        let job = d.wait(id, Duration::from_secs(120));
        match job["status"].as_str().unwrap() {
            "done" => {
                done += 1;
                let partitions = job["partitions"].as_array().unwrap();
                retried_and_done += partitions.iter().filter(|p| p["attempts"].as_u64() > Some(1)).count();
            }
            "failed" => {
                failed += 1;
                let error = job["error"].as_str().unwrap_or_default();
                assert!(error.contains("injected"), "a failed job names its cause: {job}");
                assert!(error.contains("attempt 3 of 3"), "it failed only after every attempt: {job}");
            }
            other => panic!("job {id} ended {other}: {job}"),
        }
    }
    assert_eq!(done + failed, jobs.len());
    assert!(done > failed, "{done} done, {failed} failed");
    assert!(retried_and_done > 0, "some partitions succeeded on a later attempt");

    let status = budget_drained(&d);
    assert_eq!(status["jobs"]["done"], done);
    assert_eq!(status["jobs"]["failed"], failed);
    // Counted as they changed, through every retry and failure: no job is
    // left running and no partition in any stage.
    assert_eq!((&status["jobs"]["queued"], &status["jobs"]["running"]), (&json!(0), &json!(0)), "{status}");
    assert!(status["partitions"].as_object().unwrap().values().all(|n| *n == 0), "{status}");
    let text = d.metrics();
    for actor in ["synthesis", "gpu_worker", "finalizer"] {
        let restarts = metric_value(&text, &format!("cuzk_actor_restarts_total{{actor=\"{actor}\"}}"));
        assert!(restarts > 0.0, "{actor} was never restarted after a panic");
    }
    for stage in ["synthesizing", "proving", "finalizing"] {
        let retries = metric_value(&text, &format!("cuzk_partition_retries_total{{stage=\"{stage}\"}}"));
        assert!(retries > 0.0, "no retry after a failure while {stage}");
    }

    // The restarted actors still work.
    let after = submit(&d, 2, 1000);
    assert!(matches!(d.wait(&after, Duration::from_secs(60))["status"].as_str(), Some("done" | "failed")));
}

/// Partitions past the GPU are counted too: with a stalling finalizer,
/// `/v1/status` shows them waiting for or in the finalizer while the job runs.
#[test]
fn status_counts_partitions_at_the_finalizer() {
    let d = sim_daemon(|c| c.sim.finalizer_stall_ms = 400);
    let id = submit(&d, 4, 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, status) = d.get("/v1/status");
        let p = &status["partitions"];
        let at_finalizer = p["waiting_finalizer"].as_u64().unwrap() + p["finalizing"].as_u64().unwrap();
        if at_finalizer > 0 {
            assert_eq!(status["jobs"]["running"], 1, "{status}");
            let counted: u64 = p.as_object().unwrap().values().filter_map(Value::as_u64).sum();
            assert!((1..=4).contains(&counted), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "no partition was ever seen at the finalizer: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(d.wait(&id, Duration::from_secs(60))["status"], "done");
}

#[test]
fn an_exhausted_budget_fails_jobs_with_a_reason_and_holds_nothing() {
    // The backend claims the whole budget as resident: no partition fits.
    let d = sim_daemon(|c| c.sim.faults.resident_bytes = BUDGET);
    let id = submit(&d, 2, 1);
    let job = d.wait(&id, Duration::from_secs(60));
    assert_eq!(job["status"], "failed", "{job}");
    assert!(job["error"].as_str().unwrap().contains("resident"), "the reason names the budget: {job}");
    let partitions = job["partitions"].as_array().unwrap();
    assert!(partitions.iter().all(|p| p["attempts"] == 1), "a request that cannot fit is not retried: {job}");
    budget_drained(&d);
}
