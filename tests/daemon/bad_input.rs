//! Every kind of bad input gets a 4xx with a JSON reason and changes nothing.

use crate::common;

use common::start_with;
use serde_json::{json, Value};

fn job_counts(d: &common::TestDaemon) -> Value {
    d.get("/v1/status").1["jobs"].clone()
}

#[test]
fn bad_submissions_are_rejected_with_reasons() {
    let d = start_with(|c| c.limits.max_body_bytes = 64 * 1024);
    let before = job_counts(&d);
    let base =
        json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "partitions": 1, "seed": 1});
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().remove(key);
        body
    };
    let cases: Vec<(Value, u16, &str)> = vec![
        (with("circuit", json!("nope")), 422, "unknown circuit"),
        (with("params", json!({"log2_constraints": 99})), 422, "log2_constraints"),
        (with("params", json!({"log2_constraints": "ten"})), 422, "log2_constraints"),
        (with("params", json!({"depth": 4})), 422, "invalid params"),
        (with("partitions", json!(0)), 422, "partitions must be between 1 and 64"),
        (with("partitions", json!(65)), 422, "partitions must be between 1 and 64"),
        (with("partitions", json!("two")), 422, "invalid job"),
        (with("priority", json!("urgent")), 422, "invalid job"),
        (with("seed", json!(-1)), 422, "invalid job"),
        (with("surprise", json!(1)), 422, "unknown field"),
        (without("circuit"), 422, "missing field `circuit`"),
        (without("seed"), 422, "one of seed or inputs is required"),
        (with("inputs", json!({"x": "1"})), 422, "either seed or inputs"),
        (json!([1, 2]), 422, "JSON object"),
    ];
    for (body, status, reason) in cases {
        let (got, answer) = d.post("/v1/jobs", &body);
        assert_eq!(got, status, "{body} -> {answer}");
        let error = answer["error"].as_str().unwrap_or_else(|| panic!("no error text for {body}: {answer}"));
        assert!(error.contains(reason), "{body}: {error:?} should mention {reason:?}");
    }

    let bad_inputs = json!({
        "circuit": "poseidon-merkle", "params": {"depth": 2, "challenges": 1}, "partitions": 1,
        "inputs": {"leaves": ["1", "2", "3"], "indices": [0]}
    });
    let (status, answer) = d.post("/v1/jobs", &bad_inputs);
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("inputs: inputs.leaves must have 4 elements, got 3"),
        "{answer}"
    );

    // A Filecoin kind takes its work from input: a family's field named at
    // all is refused, `{}` and null included (issue 40).
    for (field, value) in
        [("params", json!({})), ("params", Value::Null), ("seed", Value::Null), ("partitions", Value::Null)]
    {
        let mut body = json!({"circuit": "porep-c2", "input": {"prover_id": "00", "sector_id": 1}});
        body[field] = value.clone();
        let (status, answer) = d.post("/v1/jobs", &body);
        assert_eq!(status, 422, "{body} -> {answer}");
        let expected = format!("porep-c2 takes its work from input; {field} is not allowed");
        assert!(answer["error"].as_str().unwrap().contains(&expected), "{body} -> {answer}");
    }

    let (status, answer) = d.post_raw("/v1/jobs", "application/json", b"{\"circuit\": ");
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("invalid JSON"), "{answer}");

    let huge = vec![b' '; 128 * 1024];
    let (status, answer) = d.post_raw("/v1/jobs", "application/json", &huge);
    assert_eq!(status, 413, "{answer}");
    assert!(answer["error"].is_string());

    let (status, answer) = d.get("/v1/jobs/does-not-exist");
    assert_eq!(status, 404);
    assert!(answer["error"].as_str().unwrap().contains("does-not-exist"));
    let (status, _) = d.get("/v1/jobs/does-not-exist/proofs");
    assert_eq!(status, 404);
    let (status, answer) = d.get("/v1/circuits/mimc-chain-k30/vk");
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = d.get("/v2/anything");
    assert_eq!(status, 404);
    assert!(answer["error"].is_string());
    let (status, answer) = common::response(common::agent().delete(&format!("{}/v1/jobs", d.url)).call());
    assert!(status == 404 || status == 405, "{status} {answer}");
    assert!(answer["error"].is_string());

    assert_eq!(job_counts(&d), before, "bad input must not create jobs");
    let (status, health) = d.get("/healthz");
    assert_eq!((status, health), (200, json!({"status": "ok"})));
}
