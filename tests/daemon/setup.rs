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

    // A shape whose setup takes seconds, then more work of the set-up shape.
    let large = d.post("/v1/jobs", &mimc(15, 2)).1["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    let mut resident_during_setup = 0;
    // The bound only ends a test whose setup never counts.
    while started.elapsed() < Duration::from_secs(60) && resident_during_setup == 0 {
        let budget = d.get("/v1/status").1["budget"].clone();
        let resident = budget["resident_bytes"].as_u64().unwrap();
        // 2^15 constraints at 2,900 B: the setup's estimate is held.
        if resident >= (1 << 15) * 2_900 {
            resident_during_setup = resident;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(resident_during_setup > 0, "the setup's estimate never counted against the budget");
    let behind: Vec<String> = (10..13)
        .map(|seed| d.post("/v1/jobs", &mimc(4, seed)).1["id"].as_str().unwrap().to_string())
        .collect();
    for id in &behind {
        assert_eq!(d.wait(id, Duration::from_secs(60))["status"], "done");
    }
    // They were proved while the setup ran: its partition has not got past
    // synthesis yet (it goes back to the queue until the key is ready).
    let (_, large_now) = d.get(&format!("/v1/jobs/{large}"));
    let stage = large_now["partitions"][0]["stage"].as_str().unwrap().to_string();
    assert!(
        ["queued", "waiting_budget", "synthesizing"].contains(&stage.as_str()),
        "the set-up shape's jobs waited for the other shape's setup (it is already {stage})"
    );
    let large_done = d.wait(&large, Duration::from_secs(300));
    assert_eq!(large_done["status"], "done", "{large_done}");
    // Waiting for the key used no attempt.
    assert_eq!(large_done["partitions"][0]["attempts"], 1, "{large_done}");
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
