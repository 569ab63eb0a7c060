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

/// The parse budget's accounting: a body's estimate is reserved whole,
/// refused when the bytes or the requests would pass their limits, and
/// returned when its permit drops.
#[test]
fn the_parse_budget_admits_refuses_and_releases() {
    use cuzk::config::Limits;
    use cuzk::jobs::{parse_estimate, ParseBudget, ParseBudgetFull};

    let mut limits = Limits { max_body_bytes: 1 << 20, max_parsing_requests: 3, ..Limits::default() };
    let one = parse_estimate(1 << 20);
    assert_eq!(one, 8 * (1 << 20) + (8 << 20), "body x factor + slack");
    limits.parse_budget_bytes = Some(2 * one + parse_estimate(0));
    let budget = ParseBudget::new(&limits).unwrap();
    let first = budget.reserve(1 << 20).unwrap();
    let second = budget.reserve(1 << 20).unwrap();
    assert_eq!(budget.in_use(), (2 * one, 2));
    match budget.reserve(1 << 20) {
        Err(ParseBudgetFull::Bytes { needed, in_use, limit, .. }) => {
            assert_eq!((needed, in_use, limit), (one, 2 * one, 2 * one + parse_estimate(0)))
        }
        other => panic!("a third full-size body fits: {other:?}"),
    }
    // A small body still fits the bytes left, and then the count is full.
    let small = budget.reserve(0).unwrap();
    assert!(matches!(budget.reserve(0), Err(ParseBudgetFull::Requests { limit: 3 })));
    drop(first);
    assert_eq!(budget.in_use(), (one + parse_estimate(0), 2));
    let third = budget.reserve(1 << 20).expect("the first body's share came back");
    drop((second, small, third));
    assert_eq!(budget.in_use(), (0, 0));

    // A budget that a full-size body could never fit is refused at start.
    limits.parse_budget_bytes = Some(one - 1);
    assert!(ParseBudget::new(&limits).is_err());
    limits.parse_budget_bytes = None;
    limits.max_body_bytes = 1 << 30;
    let large = ParseBudget::new(&limits).expect("unset: grows to one full-size body");
    assert!(large.reserve(1 << 30).is_ok());
}

/// Over the HTTP API: a body that stops short holds its share, and the
/// next submission is answered 503 parsing_full with Retry-After at once.
#[test]
fn a_full_parse_budget_answers_503_with_retry_after() {
    use std::io::Write;

    let d = start_with(|c| {
        c.backend = BackendKind::Sim;
        c.sim.time_scale = 0.001;
        c.limits.max_body_bytes = 1 << 20;
        c.limits.max_parsing_requests = 1;
        c.limits.queue_full_retry_after_s = 3;
    });
    let address = d.url.trim_start_matches("http://");
    let mut stalled = std::net::TcpStream::connect(address).unwrap();
    write!(
        stalled,
        "POST /v1/jobs HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
    )
    .unwrap();
    // Nothing else is submitted until the stalled body holds the one place.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let refused = match agent().post(&format!("{}/v1/jobs", d.url)).send_json(job(1)) {
        Err(ureq::Error::Status(503, response)) => response,
        other => panic!("expected 503 while a body stalls, got {other:?}"),
    };
    assert_eq!(refused.header("Retry-After"), Some("3"));
    let body: Value = refused.into_json().unwrap();
    assert_eq!(body["reason"], "parsing_full", "{body}");
    assert!(body["error"].as_str().unwrap().contains("max_parsing_requests"), "{body}");
    drop(stalled);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while d.post("/v1/jobs", &job(2)).0 != 202 {
        assert!(std::time::Instant::now() < deadline, "the closed connection's share did not come back");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
