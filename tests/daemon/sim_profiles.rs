//! The 32 GiB PoRep layout through the simulated backend: ten partitions of
//! the real circuit's shape, each reserving what a real 32 GiB partition
//! would, on a budget that holds two of them, all finish and the budget
//! never holds more than it has.

use crate::common;

use std::time::Duration;

use cuzk::config::{BackendKind, Budget};
use cuzk::sim::SimProfile;
use serde_json::json;

#[test]
fn ten_porep_32g_partitions_share_a_budget_of_two() {
    let profile = SimProfile::by_name("porep-32g").unwrap();
    let per_partition = profile.reservation.total();
    let d = common::start_with(|c| {
        c.backend = BackendKind::Sim;
        c.sim.profile = "porep-32g".into();
        // 58 s of synthesis in 58 ms.
        c.sim.time_scale = 0.001;
        c.sim.devices = 2;
        c.scheduler.synthesis_threads = 4;
        c.scheduler.budget = Budget::Bytes(2 * per_partition + (1 << 30));
    });
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"circuit": "mimc-chain", "params": {"log2_constraints": 5}, "partitions": profile.partitions, "seed": 3}),
    );
    assert_eq!(status, 202, "{body}");
    let job = d.wait(body["id"].as_str().unwrap(), Duration::from_secs(60));
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(job["partitions"].as_array().unwrap().len(), 10);

    let (_, status) = d.get("/v1/status");
    let budget = &status["budget"];
    let peak = budget["peak_bytes"].as_u64().unwrap();
    assert!(peak <= budget["limit_bytes"].as_u64().unwrap(), "{budget}");
    // Two partitions held it at once at some point; a third never could.
    assert!(peak >= per_partition + profile.reservation.retained_bytes, "{budget}");
    assert!(peak <= 2 * per_partition, "{budget}");
    assert_eq!(budget["used_bytes"], 0, "{budget}");
}
