//! Every `[limits]` setting, configured away from its default, on the
//! simulated backend.

mod common;

use common::{agent, start_with};
use cuzk::config::{BackendKind, Budget};
use serde_json::{json, Value};

fn job(seed: u64) -> Value {
    json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "seed": seed})
}

#[test]
fn a_full_queue_answers_429_with_retry_after_and_queues_nothing() {
    let d = start_with(|c| {
        // Full-length simulated jobs stay unfinished for the whole test.
        c.backend = BackendKind::Sim;
        c.sim.time_scale = 1.0;
        c.scheduler.budget = Budget::Bytes(1 << 40);
        c.limits.max_queued_jobs = 2;
        c.limits.queue_full_retry_after_s = 7;
    });
    let (status, first) = d.post(
        "/v1/jobs",
        &json!({"circuit": "mimc-chain",
        "params": {"log2_constraints": 4}, "seed": 1, "request_id": "first"}),
    );
    assert_eq!(status, 202, "{first}");
    assert_eq!(d.post("/v1/jobs", &job(2)).0, 202);

    let refused = agent()
        .post(&format!("{}/v1/jobs", d.url))
        .send_json(job(3));
    let Err(ureq::Error::Status(429, response)) = refused else {
        panic!("expected 429, got {refused:?}");
    };
    assert_eq!(response.header("Retry-After"), Some("7"));
    let body: Value = response.into_json().unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("queue full") && error.contains("max_queued_jobs = 2"),
        "{error}"
    );
    let jobs = d.get("/v1/status").1["jobs"].clone();
    assert_eq!(
        jobs["queued"].as_u64().unwrap() + jobs["running"].as_u64().unwrap(),
        2,
        "{jobs}"
    );

    // A repeated idempotency key still finds its job.
    let (status, again) = d.post(
        "/v1/jobs",
        &json!({"circuit": "mimc-chain",
        "params": {"log2_constraints": 4}, "seed": 1, "request_id": "first"}),
    );
    assert_eq!((status, &again["id"]), (200, &first["id"]));

    // A finished (here: cancelled) job frees its place.
    let id = first["id"].as_str().unwrap();
    assert_eq!(d.post(&format!("/v1/jobs/{id}/cancel"), &json!({})).0, 200);
    assert_eq!(d.post("/v1/jobs", &job(4)).0, 202);
    assert_eq!(d.post("/v1/jobs", &job(5)).0, 429);
}

#[test]
fn partitions_body_size_and_no_queue_limit() {
    let d = start_with(|c| {
        c.backend = BackendKind::Sim;
        c.sim.time_scale = 0.001;
        c.limits.max_partitions = 3;
        c.limits.max_body_bytes = 1024;
        c.limits.max_queued_jobs = 0;
    });
    let mut body = job(1);
    body["partitions"] = json!(4);
    let (status, answer) = d.post("/v1/jobs", &body);
    assert_eq!(status, 422);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("between 1 and 3"),
        "{answer}"
    );
    body["partitions"] = json!(3);
    assert_eq!(d.post("/v1/jobs", &body).0, 202);

    let mut big = job(2);
    big["request_id"] = json!("x".repeat(2000));
    let (status, answer) = d.post("/v1/jobs", &big);
    assert_eq!(status, 413, "{answer}");

    // With max_queued_jobs = 0 there is no queue limit.
    for seed in 10..20 {
        assert_eq!(d.post("/v1/jobs", &job(seed)).0, 202);
    }
}
