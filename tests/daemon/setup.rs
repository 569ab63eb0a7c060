//! A built-in family's first job of a shape sets its key up. The setup is
//! estimated before it starts (a shape whose setup cannot fit the budget is
//! refused with the figures), runs on a thread of its own while its estimate
//! counts against the budget, and does not hold the synthesis thread: other
//! shapes' partitions are proved meanwhile.

use crate::common;

use std::time::{Duration, Instant};

use common::start_with;
use serde_json::{json, Value};

fn mimc(log2_constraints: u32, seed: u64) -> Value {
    json!({"circuit": "mimc-chain", "params": {"log2_constraints": log2_constraints}, "seed": seed,
           "priority": "critical"})
}

#[test]
fn a_setup_that_cannot_fit_the_budget_is_refused_with_its_estimate() {
    let d = start_with(|_| {});
    // 2^20 constraints at about 2.9 KB each: 2.8 GiB, over the 1 GiB budget.
    let (status, answer) = d.post("/v1/jobs", &mimc(20, 1));
    assert_eq!(status, 422, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("mimc-chain-k20 has no key yet")
            && error.contains("over this daemon's budget of 1.0 GiB"),
        "{error}"
    );
    assert_eq!(d.post("/v1/jobs", &mimc(10, 1)).0, 202);
}

#[test]
fn other_shapes_are_proved_while_a_setup_runs_on_its_own_thread() {
    let d = start_with(|c| {
        c.scheduler.synthesis_threads = 1;
        c.scheduler.budget = cuzk::config::Budget::Bytes(4 << 30);
    });
    let small = d.post("/v1/jobs", &mimc(4, 1)).1["id"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&small, Duration::from_secs(60))["status"], "done");

    // A shape whose setup takes minutes (2^18 constraints, four times a
    // 2^16 setup's 13 s on two cores), then work of another shape on the
    // one synthesis thread, which the setup would hold if it ran there.
    // What is asserted is read once that work is done, not timed: the setup
    // still runs then (its estimate is still counted and its job has not
    // got past synthesis). A 2^15 setup (a few seconds) left too little
    // margin: a fast or idle machine could finish it before the small jobs.
    let large = d.post("/v1/jobs", &mimc(18, 2)).1["id"].as_str().unwrap().to_string();
    // 2^18 constraints at 2,900 B: the setup's estimate.
    let estimate = (1 << 18) * 2_900;
    let setup_counted = || d.get("/v1/status").1["budget"]["resident_bytes"].as_u64().unwrap() >= estimate;
    let started = Instant::now();
    // The bound only ends a test whose setup never counts.
    while !setup_counted() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the setup's estimate never counted against the budget"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let behind: Vec<String> = (10..13)
        .map(|seed| d.post("/v1/jobs", &mimc(4, seed)).1["id"].as_str().unwrap().to_string())
        .collect();
    for id in &behind {
        assert_eq!(d.wait(id, Duration::from_secs(60))["status"], "done");
    }
    let (_, large_now) = d.get(&format!("/v1/jobs/{large}"));
    let stage = large_now["partitions"][0]["stage"].as_str().unwrap().to_string();
    assert!(
        setup_counted() && ["queued", "waiting_budget", "synthesizing"].contains(&stage.as_str()),
        "the other shape's jobs waited for the setup (its job is already {stage})"
    );
    // Nobody waits for the key any more: the setup stops (limits.rs follows
    // a stopped setup, and a waiter proved with its first attempt).
    assert_eq!(d.post(&format!("/v1/jobs/{large}/cancel"), &json!({})).0, 200);
}

#[test]
fn a_key_directory_removed_while_running_is_created_again_with_its_permissions() {
    use std::os::unix::fs::PermissionsExt;

    // The operator's narrower mode, which the daemon finds at start.
    let mut keys = std::path::PathBuf::new();
    let d = start_with(|c| {
        keys = c.data_dir.join("keys");
        std::fs::create_dir(&keys).unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o710)).unwrap();
    });
    let first = d.post("/v1/jobs", &mimc(4, 1)).1["id"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&first, Duration::from_secs(60))["status"], "done");
    assert!(keys.join("mimc-chain-k4.pk").exists());

    std::fs::remove_dir_all(&keys).unwrap();
    // A shape not set up yet: its key is written to the missing directory.
    let (status, answer) = d.post("/v1/jobs", &mimc(5, 2));
    assert_eq!(status, 202, "{answer}");
    let done = d.wait(answer["id"].as_str().unwrap(), Duration::from_secs(60));
    assert_eq!(done["status"], "done", "{done}");
    assert!(keys.join("mimc-chain-k5.pk").exists() && keys.join("mimc-chain-k5.vk").exists());
    let mode = std::fs::metadata(&keys).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o710, "recreated as {mode:o}");
    // The shape set up before the removal is still proved (its key is in
    // memory), and its verifying key still served.
    let again = d.post("/v1/jobs", &mimc(4, 3)).1["id"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&again, Duration::from_secs(60))["status"], "done");
    assert_eq!(d.get("/v1/circuits/mimc-chain-k4/vk").0, 200);
}
