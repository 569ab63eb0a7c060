//! Every `[limits]` setting, configured away from its default, on the
//! simulated backend; and what a cancelled job may still hold: a circuit
//! setup no job waits for any more (asking for its key, or queued) stops,
//! and its budget returns.

use crate::common;

use std::time::{Duration, Instant};

use common::{agent, metric_value, start_with, TestDaemon};
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

    let refused = agent().post(&format!("{}/v1/jobs", d.url)).send_json(job(3));
    let Err(ureq::Error::Status(429, response)) = refused else {
        panic!("expected 429, got {refused:?}");
    };
    assert_eq!(response.header("Retry-After"), Some("7"));
    let body: Value = response.into_json().unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("queue full") && error.contains("max_queued_jobs = 2"), "{error}");
    let jobs = d.get("/v1/status").1["jobs"].clone();
    assert_eq!(jobs["queued"].as_u64().unwrap() + jobs["running"].as_u64().unwrap(), 2, "{jobs}");

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
    assert!(answer["error"].as_str().unwrap().contains("between 1 and 3"), "{answer}");
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

fn mimc(log2_constraints: u32, seed: u64) -> Value {
    json!({"circuit": "mimc-chain", "params": {"log2_constraints": log2_constraints}, "seed": seed})
}

/// The budget's bytes in use: partitions' reservations and resident bytes
/// (keys, and setups and loads running).
fn budget_in_use(d: &TestDaemon) -> (u64, u64) {
    let budget = d.get("/v1/status").1["budget"].clone();
    (budget["used_bytes"].as_u64().unwrap(), budget["resident_bytes"].as_u64().unwrap())
}

/// Polls `done` every 10 ms for at most `limit`, a bound only for a daemon
/// that never gets there: what is asserted is that it gets there.
fn within(limit: Duration, what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long a test waits for an event it expects (a setup starting, its
/// budget returning after a cancel, a partition asking for its key): each
/// comes within a second or so on a busy two-core machine (a setup asks
/// whether to stop every chunk of its multiplications, 4,096 scalars, or
/// step); the bound only ends a test whose event never comes.
const EVENT_BOUND: Duration = Duration::from_secs(60);

/// The key file a `mimc-chain` setup of 2^`log2_constraints` writes under
/// the daemon's data directory once it finishes (and never when stopped).
fn mimc_key_file(data_dir: &std::path::Path, log2_constraints: u32) -> std::path::PathBuf {
    let family = cuzk_kernels::circuits::CircuitRegistry::builtin().get("mimc-chain").unwrap().clone();
    let shape = family.shape(&json!({"log2_constraints": log2_constraints})).unwrap();
    data_dir.join("keys").join(format!("{}.pk", shape.circuit_id))
}

/// The stop of a setup is read from the budget, not from the setup's
/// threads: a stopped setup's estimate leaves the resident bytes at the
/// moment the setup is told to stop (the key store forgets it in answering
/// the setup's "stop?"), while a finished one leaves its key loaded and
/// written. That the setup then computes no more is the kernels' unit test
/// `it_stops_at_the_first_question_answered_yes`.
#[test]
fn a_setup_whose_only_job_is_cancelled_stops_and_returns_its_budget() {
    let d = start_with(|c| c.scheduler.budget = Budget::Bytes(4 << 30));
    let baseline = budget_in_use(&d);
    assert_eq!(baseline, (0, 0));
    let big = d.post("/v1/jobs", &mimc(16, 1)).1["id"].as_str().unwrap().to_string();
    // The setup has started once its estimate (2,900 bytes a constraint)
    // counts as resident.
    within(EVENT_BOUND, "the setup starts", || budget_in_use(&d).1 > 0);
    let (status, cancelled) = d.post(&format!("/v1/jobs/{big}/cancel"), &json!({}));
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    // Back to nothing resident: stopped, since a finished setup's key
    // would stay loaded.
    within(EVENT_BOUND, "the budget returns", || budget_in_use(&d) == baseline);
    assert_eq!(d.wait(&big, Duration::from_secs(5))["status"], "cancelled");

    // The daemon goes on: the next job of the shape sets it up anew, and
    // another shape's job is proved meanwhile.
    let again = d.post("/v1/jobs", &mimc(16, 2)).1["id"].as_str().unwrap().to_string();
    let small = d.post("/v1/jobs", &mimc(4, 3)).1["id"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&small, Duration::from_secs(60))["status"], "done");
    assert_eq!(d.wait(&again, Duration::from_secs(300))["status"], "done");
    let (used, resident) = budget_in_use(&d);
    assert_eq!(used, 0);
    assert!(resident > 0, "the set-up key stays loaded");
}

/// Waits until `job`'s first partition has asked for its shape's key and
/// been sent back to the queue to wait for it: a partition told the key is
/// not ready is queued anew, so its time since it was queued
/// (`timings_ms.total`) starts again, and a reading falls below the one
/// before. Asked again every 500 ms, each ask restarts it.
fn asked_for_the_key(d: &TestDaemon, job: &str) {
    let total = || {
        d.get(&format!("/v1/jobs/{job}")).1["partitions"][0]["timings_ms"]["total"].as_f64().unwrap_or(0.0)
    };
    let mut before = total();
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let now = total();
        if now < before {
            return;
        }
        before = now;
        assert!(started.elapsed() < EVENT_BOUND, "{job} never asked for its key");
    }
}

#[test]
fn a_setup_another_job_waits_for_survives_a_cancel_and_finishes_for_it() {
    let mut key_file = std::path::PathBuf::new();
    let d = start_with(|c| {
        c.scheduler.budget = Budget::Bytes(4 << 30);
        key_file = mimc_key_file(&c.data_dir, 16);
    });
    let first = d.post("/v1/jobs", &mimc(16, 1)).1["id"].as_str().unwrap().to_string();
    let second = d.post("/v1/jobs", &mimc(16, 2)).1["id"].as_str().unwrap().to_string();
    within(EVENT_BOUND, "the setup starts", || budget_in_use(&d).1 > 0);
    // The second job is a waiter of the setup, not only expected by it.
    asked_for_the_key(&d, &second);
    assert!(!key_file.exists(), "the setup finished before the cancel: nothing left to test");
    let (status, cancelled) = d.post(&format!("/v1/jobs/{first}/cancel"), &json!({}));
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    // Had the setup stopped, its estimate would leave the resident bytes
    // until the second job's next ask (500 ms later) started another.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let (_, job) = d.get(&format!("/v1/jobs/{second}"));
        if job["status"] != "queued" && job["status"] != "running" {
            assert_eq!(job["status"], "done", "{job}");
            break;
        }
        assert!(budget_in_use(&d).1 > 0, "the shared setup stopped");
        assert!(Instant::now() < deadline, "{job}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(key_file.exists(), "the setup's key was not written");
    assert_eq!(d.wait(&first, Duration::from_secs(5))["status"], "cancelled");
    assert_eq!(budget_in_use(&d).0, 0);
}

/// A job accepted and still queued, its partition never having asked for
/// the key (partitions of higher priority queued ahead of it), counts as
/// waiting for its shape's setup: cancelling the job that started the setup
/// leaves it running, and the queued job is proved with that one setup.
/// Once every job of the shape is cancelled, queued ones included, the
/// setup stops and its budget returns.
#[test]
fn a_queued_job_of_the_shape_keeps_its_setup_through_a_cancel_until_it_is_cancelled_too() {
    let family = cuzk_kernels::circuits::CircuitRegistry::builtin().get("mimc-chain").unwrap().clone();
    // Large enough that the cancel comes while its key is being computed
    // (asked every chunk), not in its last steps (the matrices and the
    // key file), which nothing stops.
    let shape = family.shape(&json!({"log2_constraints": 16})).unwrap();
    let estimate = cuzk::keys::SetupCost::of(&shape).memory_bytes;
    let mut key_file = std::path::PathBuf::new();
    let d = start_with(|c| {
        // One partition synthesized at a time: the queue drains slowly.
        c.scheduler.synthesis_threads = 1;
        c.scheduler.budget = Budget::Bytes(4 << 30);
        key_file = mimc_key_file(&c.data_dir, 16);
    });
    let submit = |body: Value| d.post("/v1/jobs", &body).1["id"].as_str().unwrap().to_string();
    let large = |seed, priority| json!({"circuit": "mimc-chain", "params": {"log2_constraints": 16}, "seed": seed, "priority": priority});
    // Jobs of higher priority queued ahead of the shape's second job keep
    // it in the queue: 16 partitions of a small shape, set up first, proved
    // one after another while their own remain queued.
    let ahead = |seed, partitions| {
        json!({"circuit": "mimc-chain", "params": {"log2_constraints": 13}, "seed": seed,
               "partitions": partitions, "priority": "high"})
    };
    let set_up = submit(ahead(1, 1));
    assert_eq!(d.wait(&set_up, Duration::from_secs(300))["status"], "done");
    let (_, small_key) = budget_in_use(&d);
    let cancel = |job: &str| {
        let (status, cancelled) = d.post(&format!("/v1/jobs/{job}/cancel"), &json!({}));
        assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    };
    let setup_counted = || budget_in_use(&d).1 >= small_key + estimate;
    // A first job starts the setup; the small shape's partitions queue;
    // a second job of the shape is queued behind them, not asking for the
    // key.
    let start_and_queue_behind = |seeds: (u64, u64)| {
        let first = submit(large(seeds.0, "critical"));
        within(EVENT_BOUND, "the setup starts", setup_counted);
        let holder = submit(ahead(seeds.0, 16));
        let queued = submit(large(seeds.1, "low"));
        let (_, behind) = d.get(&format!("/v1/jobs/{queued}"));
        assert_eq!(behind["partitions"][0]["stage"], "queued", "{behind}");
        assert!(!key_file.exists(), "the setup finished before the cancel: nothing left to test");
        (first, queued, holder)
    };

    // Both cancelled, the queued one first: nothing waits, the setup stops.
    // The budget back to the small key alone says so: a setup that
    // finished would have left its own key loaded and written.
    let (first, queued, holder) = start_and_queue_behind((2, 3));
    cancel(&queued);
    cancel(&first);
    within(EVENT_BOUND, "the budget returns", || budget_in_use(&d).1 == small_key);
    assert!(!key_file.exists(), "a stopped setup wrote its key");
    assert_eq!(d.wait(&holder, Duration::from_secs(300))["status"], "done");
    assert!(!key_file.exists(), "a stopped setup wrote its key");

    // Only the first cancelled: the setup goes on for the queued job. Its
    // estimate stays counted for as long as the holder's partitions keep
    // the queued job from asking (a setup told to stop drops it at once,
    // and a new setup would start only when the queued job asks), and the
    // queued job is proved with the first attempt of its partition.
    let (first, queued, holder) = start_and_queue_behind((4, 5));
    cancel(&first);
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut held = 0;
    loop {
        let (_, job) = d.get(&format!("/v1/jobs/{queued}"));
        if job["status"] != "queued" && job["status"] != "running" {
            assert_eq!(job["status"], "done", "{job}");
            assert_eq!(job["partitions"][0]["attempts"], 1, "{job}");
            break;
        }
        let (_, ahead_now) = d.get(&format!("/v1/jobs/{holder}"));
        let ahead_queued =
            ahead_now["partitions"].as_array().unwrap().iter().filter(|p| p["stage"] == "queued").count();
        if ahead_queued > 0 {
            held += 1;
            // The queued job has not asked for the key (partitions ahead
            // of it in the queue are still waiting): only its being
            // expected keeps the setup, and its estimate in the budget
            // until the key replaces it.
            assert!(
                budget_in_use(&d).1 > small_key,
                "the setup stopped while a job of its shape was queued: {job}"
            );
        }
        assert!(
            held > 0 || ahead_queued > 0,
            "the holder's partitions were all taken before the first reading: nothing tested"
        );
        assert!(Instant::now() < deadline, "{job}");
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("{held} readings with the queued job held by the holder's partitions after the cancel");
    assert!(key_file.exists(), "the setup's key was not written");
    assert_eq!(d.wait(&first, Duration::from_secs(5))["status"], "cancelled");
}

#[test]
fn a_parameter_file_load_counts_its_size_as_resident_while_it_reads() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let keys = cuzk::keys::KeyStore::open(dir.path()).unwrap();
    let file = dir.path().join("v28-test.params");
    std::fs::write(&file, vec![0u8; 12_345]).unwrap();
    let told = Arc::new(AtomicUsize::new(0));
    let counter = told.clone();
    keys.on_resident_change(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });

    let loaded = keys.prepared_with("v28-test", &file, || {
        // Counted, and the budget told, before the build reads anything.
        assert_eq!(keys.resident_bytes(), 12_345);
        assert_eq!(told.load(Ordering::SeqCst), 1);
        Err("not a parameter file")
    });
    assert!(loaded.is_err());
    // A failed load holds nothing; the budget is told of that too.
    assert_eq!(keys.resident_bytes(), 0);
    assert_eq!(told.load(Ordering::SeqCst), 2);
}

/// The parse budget's accounting (the operator's own submissions, held to
/// no tenant's share): a share is the estimate of the bytes
/// received, reserved when the head arrives and grown as the body does;
/// refused when the bytes or the requests would pass their class's limits
/// (a bulk body's leave out the urgent reserve), and returned when its
/// permit drops.
#[test]
fn the_parse_budget_admits_refuses_and_releases() {
    use cuzk::config::Limits;
    use cuzk::jobs::{parse_estimate, ParseBudget, ParseBudgetFull};

    let mut limits = Limits {
        max_body_bytes: 1 << 20,
        max_parsing_requests: 4,
        urgent_body_bytes: 64 << 10,
        urgent_parsing_requests: 1,
        ..Limits::default()
    };
    let (full, urgent, nothing) = (parse_estimate(1 << 20), parse_estimate(64 << 10), parse_estimate(0));
    assert_eq!(full, 8 * (1 << 20) + (8 << 20), "body x factor + slack");
    // Room for two full-size bodies and a third's head besides the reserve
    // of one urgent body.
    limits.parse_budget_bytes = Some(2 * full + nothing + urgent);
    let budget = ParseBudget::new(&limits).unwrap();
    let in_use = |budget: &ParseBudget| {
        let status = budget.status();
        (status.bytes_in_use, status.requests)
    };
    assert_eq!((budget.status().urgent_reserve_bytes, budget.status().urgent_reserve_requests), (urgent, 1));

    // Declared full-size, nothing received: the slack alone, three of them.
    let mut first = budget.reserve(None, 1 << 20, 0).unwrap();
    let mut second = budget.reserve(None, 1 << 20, 0).unwrap();
    let mut third = budget.reserve(None, 1 << 20, 0).unwrap();
    assert_eq!(in_use(&budget), (3 * nothing, 3));
    // A fourth bulk body would take the urgent body's place.
    assert!(matches!(
        budget.reserve(None, 1 << 20, 0),
        Err(ParseBudgetFull::Requests { limit: 3, bulk: true })
    ));
    // The bodies arrive: the first two grow to their whole estimates.
    first.received(1 << 19).unwrap();
    first.received(1 << 20).unwrap();
    second.received(1 << 20).unwrap();
    assert_eq!(in_use(&budget), (2 * full + nothing, 3));
    // The third cannot grow into the reserve: refused, its share kept
    // until the front end drops it.
    match third.received(1 << 20) {
        Err(ParseBudgetFull::Bytes { needed, in_use, limit, bulk: true, .. }) => {
            assert_eq!((needed, in_use, limit), (full, 2 * full, 2 * full + nothing))
        }
        other => panic!("a third full-size body grew into the reserve: {other:?}"),
    }
    // An urgent body still finds its place and its bytes.
    let mut small = budget.reserve(None, 64 << 10, 0).expect("the urgent reserve");
    drop(third);
    small.received(64 << 10).unwrap();
    assert_eq!(in_use(&budget), (2 * full + urgent, 3));
    // Every share comes back.
    drop((first, small));
    assert_eq!(in_use(&budget), (full, 1));
    let fourth = budget.reserve(None, 1 << 20, 1 << 20).expect("the first body's share came back");
    drop((second, fourth));
    assert_eq!(in_use(&budget), (0, 0));

    // A message that arrives whole (gRPC's) is charged whole at once; one
    // over its class's ceiling is never admitted, an urgent one over the
    // whole budget neither.
    assert_eq!(budget.never_admits(1 << 20), None);
    assert_eq!(budget.never_admits(8 << 20), Some(2 * full + nothing));
    let whole = budget.reserve(None, 1 << 20, 1 << 20).unwrap();
    assert_eq!(in_use(&budget), (full, 1));
    drop(whole);

    // A budget that a full-size body could never fit beside the reserve,
    // or a reserve of every request, is refused at start.
    limits.parse_budget_bytes = Some(full + urgent - 1);
    assert!(ParseBudget::new(&limits).is_err());
    limits.parse_budget_bytes = Some(full + urgent);
    assert!(ParseBudget::new(&limits).is_ok());
    limits.urgent_parsing_requests = 4;
    limits.parse_budget_bytes = None;
    assert!(ParseBudget::new(&limits).is_err());
    limits.urgent_parsing_requests = 1;
    limits.max_body_bytes = 1 << 30;
    let large = ParseBudget::new(&limits).expect("unset: grows to one full-size body and the reserve");
    assert!(large.reserve(None, 1 << 30, 1 << 30).is_ok());
}

/// Each tenant holds at most its share of a class's requests and bytes
/// (half by default, never less than one request and one of the class's
/// largest bodies): at its share a tenant is refused, by name, while
/// another tenant is admitted, and a share comes back with its permits.
#[test]
fn each_tenant_holds_at_most_its_share_of_the_parse_budget() {
    use cuzk::config::Limits;
    use cuzk::jobs::{parse_estimate, ParseBudget, ParseBudgetFull};
    use cuzk_actors::Tenant;

    let limits = Limits {
        max_body_bytes: 1 << 20,
        max_parsing_requests: 9,
        urgent_body_bytes: 64 << 10,
        urgent_parsing_requests: 1,
        // Alpha's half of the bulk bytes holds four heads and one whole
        // body (40 MiB), not two whole bodies (48 MiB).
        parse_budget_bytes: Some(96 << 20),
        ..Limits::default()
    };
    assert_eq!(limits.parse_share_per_tenant, 0.5, "the default");
    let budget = ParseBudget::new(&limits).unwrap();
    let (alpha, beta) = (Tenant("alpha".into()), Tenant("beta".into()));
    // Bulk: 8 places, 4 for alpha; heads only, a few bytes each.
    let held: Vec<_> = (0..4).map(|_| budget.reserve(Some(&alpha), 1 << 20, 0).unwrap()).collect();
    match budget.reserve(Some(&alpha), 1 << 20, 0) {
        Err(ParseBudgetFull::TenantRequests { tenant, limit: 4 }) => assert_eq!(tenant, "alpha"),
        other => panic!("alpha's fifth bulk body: {other:?}"),
    }
    let refusal = budget.reserve(Some(&alpha), 1 << 20, 0).unwrap_err();
    assert_eq!(refusal.tenant(), Some("alpha"));
    assert!(refusal.to_string().contains("limits.parse_share_per_tenant"), "{refusal}");
    // Alpha's urgent body fits its share of the whole (4 of 9 places).
    let small = budget.reserve(Some(&alpha), 64 << 10, 64 << 10);
    assert!(matches!(small, Err(ParseBudgetFull::TenantRequests { limit: 4, .. })), "{small:?}");
    // Beta is not held by alpha's share.
    let beta_held = budget.reserve(Some(&beta), 1 << 20, 0).unwrap();
    assert_eq!((budget.status().tenants, budget.status().requests), (2, 5));
    // Bytes: alpha's share of the bulk bytes is half of (96 MiB less the
    // reserve): its first body grows to a whole one's 16 MiB, its second
    // cannot.
    let bulk_bytes = (96 << 20) - parse_estimate(64 << 10);
    let mut held = held;
    held[0].received(1 << 20).unwrap();
    match held[1].received(1 << 20) {
        Err(ParseBudgetFull::TenantBytes { tenant, needed, in_use, limit, .. }) => {
            assert_eq!(tenant, "alpha");
            assert_eq!(
                (needed, in_use, limit),
                (parse_estimate(1 << 20), parse_estimate(1 << 20) + 2 * parse_estimate(0), bulk_bytes / 2)
            );
        }
        other => panic!("alpha grew past its share of the bytes: {other:?}"),
    }
    // Beta's body grows where alpha's could not.
    let mut beta_held = beta_held;
    beta_held.received(1 << 20).unwrap();
    // The shares come back with the permits; a tenant holding none is gone.
    drop(held);
    assert_eq!((budget.status().tenants, budget.status().requests), (1, 1));
    drop(beta_held);
    assert_eq!((budget.status().tenants, budget.status().requests, budget.status().bytes_in_use), (0, 0, 0));

    // A share below one request or one full-size body is raised to it; a
    // share that is no fraction is refused at start.
    let tiny = ParseBudget::new(&Limits { parse_share_per_tenant: 0.01, ..limits.clone() }).unwrap();
    let whole = tiny.reserve(Some(&alpha), 1 << 20, 1 << 20).expect("one full-size body");
    assert!(matches!(
        tiny.reserve(Some(&alpha), 1 << 20, 0),
        Err(ParseBudgetFull::TenantRequests { limit: 1, .. })
    ));
    // The operator's own (no tenant) are held to no share.
    let operators: Vec<_> = (0..3).map(|_| tiny.reserve(None, 1 << 20, 0).unwrap()).collect();
    assert_eq!((tiny.status().requests, tiny.status().tenants), (4, 1));
    drop((whole, operators));
    for share in [0.0, -0.5, 1.5, f64::NAN] {
        let refused = ParseBudget::new(&Limits { parse_share_per_tenant: share, ..limits.clone() });
        assert!(refused.unwrap_err().to_string().contains("parse_share_per_tenant"), "{share}");
    }
}

/// A submission whose head declares `declared` bytes of body and whose body
/// stops after its first byte, on a connection whose answer can be looked
/// for without waiting (`answered`).
fn stalled_body(d: &TestDaemon, declared: usize, token: Option<&str>) -> std::net::TcpStream {
    use std::io::Write;

    let address = d.url.trim_start_matches("http://");
    let mut stalled = std::net::TcpStream::connect(address).unwrap();
    let authorization = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        stalled,
        "POST /v1/jobs HTTP/1.1\r\nHost: {address}\r\n{authorization}Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{{"
    )
    .unwrap();
    stalled.set_nonblocking(true).unwrap();
    stalled
}

/// Whether the daemon has answered (or closed) a `stalled_body`.
fn answered(stalled: &std::net::TcpStream) -> bool {
    stalled.peek(&mut [0u8; 1]).is_ok()
}

/// The answer to a `stalled_body` the daemon refused, waited for.
fn refusal(mut stalled: std::net::TcpStream) -> String {
    use std::io::Read;

    stalled.set_nonblocking(false).unwrap();
    stalled.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut answer = String::new();
    let _ = stalled.read_to_string(&mut answer);
    answer
}

/// The parse budget's `(requests, bytes_in_use)` in `/v1/status`.
fn parsing(d: &TestDaemon) -> (u64, u64) {
    let (status, body) = d.get("/v1/status");
    assert_eq!(status, 200, "{body}");
    (body["parsing"]["requests"].as_u64().unwrap(), body["parsing"]["bytes_in_use"].as_u64().unwrap())
}

/// Waits (60 s at most) until the parse budget's `(requests, bytes_in_use)`
/// satisfy `reached`; else fails, saying what was awaited.
fn await_parsing(d: &TestDaemon, what: &str, reached: impl Fn((u64, u64)) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reached(parsing(d)) {
        assert!(Instant::now() < deadline, "{what}: {:?}", parsing(d));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Fast simulated jobs, bodies of at most 1 MiB, `places` parse places and
/// none kept for urgent bodies, Retry-After 3.
fn parse_places(c: &mut cuzk::config::Config, places: usize) {
    c.backend = BackendKind::Sim;
    c.sim.time_scale = 0.001;
    c.limits.max_body_bytes = 1 << 20;
    c.limits.max_parsing_requests = places;
    c.limits.urgent_parsing_requests = 0;
    c.limits.queue_full_retry_after_s = 3;
}

/// Over the HTTP API: a body that stops short holds its share, and the
/// next submission is answered 503 parsing_full with Retry-After at once.
#[test]
fn a_full_parse_budget_answers_503_with_retry_after() {
    let d = start_with(|c| parse_places(c, 1));
    let stall = || stalled_body(&d, 1000, None);
    let mut stalled = stall();
    // Once the stalled body holds the one place, a submission is refused.
    // Until the daemon has read its head, submissions are accepted (jobs of
    // the simulated backend, harmless here), and the stalled one may come
    // while one of them is parsed and be refused itself: then it is sent
    // again. The test waits for the refusal, not for a time.
    let deadline = Instant::now() + Duration::from_secs(60);
    let refused = loop {
        match agent().post(&format!("{}/v1/jobs", d.url)).send_json(job(1)) {
            Err(ureq::Error::Status(503, response)) => break response,
            Ok(accepted) if accepted.status() == 202 && Instant::now() < deadline => {
                if answered(&stalled) {
                    stalled = stall();
                }
                std::thread::sleep(Duration::from_millis(10))
            }
            other => panic!("expected 503 while a body stalls, got {other:?}"),
        }
    };
    assert!(!answered(&stalled), "the stalled body was answered while it held the place");
    assert_eq!(refused.header("Retry-After"), Some("3"));
    let body: Value = refused.into_json().unwrap();
    assert_eq!(body["reason"], "parsing_full", "{body}");
    assert!(body["error"].as_str().unwrap().contains("max_parsing_requests"), "{body}");
    drop(stalled);
    let deadline = Instant::now() + Duration::from_secs(60);
    while d.post("/v1/jobs", &job(2)).0 != 202 {
        assert!(Instant::now() < deadline, "the closed connection's share did not come back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Over the HTTP API: a declared length costs nothing until its bytes come,
/// bulk bodies that stall cannot take the places kept for urgent ones, and
/// a small submission (a WinningPoSt's size) is taken while they hold the
/// rest.
#[test]
fn stalled_bulk_bodies_leave_the_urgent_reserve_to_a_small_submission() {
    use cuzk::jobs::parse_estimate;

    let (full, urgent) = (parse_estimate(2 << 20), parse_estimate(64 << 10));
    let d = start_with(|c| {
        c.backend = BackendKind::Sim;
        c.sim.time_scale = 0.001;
        c.limits.max_body_bytes = 2 << 20;
        c.limits.max_parsing_requests = 3;
        c.limits.urgent_body_bytes = 64 << 10;
        c.limits.urgent_parsing_requests = 1;
        // Bulk bodies may hold one full-size body's estimate and 8 MiB: by
        // their declared lengths, two stalled 2 MiB bodies would not fit even
        // the whole budget.
        c.limits.parse_budget_bytes = Some(full + parse_estimate(0) + urgent);
    });
    let bulk = [stalled_body(&d, 2 << 20, None), stalled_body(&d, 2 << 20, None)];
    // Both are admitted, each holding the estimate of the byte it sent.
    await_parsing(&d, "two stalled bulk bodies were not both admitted", |p| p == (2, 2 * parse_estimate(1)));
    assert!(!bulk.iter().any(answered), "a stalled bulk body was answered");
    // A third bulk body would take the urgent place: refused at its head.
    let third = refusal(stalled_body(&d, 2 << 20, None));
    assert!(third.starts_with("HTTP/1.1 503"), "{third}");
    assert!(third.contains("parsing_full") && third.contains("urgent_parsing_requests"), "{third}");
    // A small submission takes it.
    let (status, body) = d.post("/v1/jobs", &job(1));
    assert_eq!(status, 202, "{body}");
    assert!(!bulk.iter().any(answered), "a stalled bulk body was answered");
    // The stalled bodies' shares come back when they leave.
    drop(bulk);
    await_parsing(&d, "the stalled bodies' shares did not come back", |p| p == (0, 0));
}

/// Over the HTTP API, two tenants: one whose bodies stall holds only its
/// share of the parse places (half by default); its next submission is
/// answered 429 with the reason and counted, and the other tenant's job is
/// taken beside them. Without shares the stalled tenant would take every
/// place and the other's submission would be answered 503.
#[test]
fn a_tenants_stalled_bodies_leave_the_other_tenants_their_share() {
    const ALPHA: &str = "alpha-0123456789abcdef";
    const BETA: &str = "beta-0123456789abcdef";
    let d = start_with(|c| {
        parse_places(c, 4);
        c.auth.tokens = [format!("{ALPHA}@alpha"), format!("{BETA}@beta")]
            .iter()
            .map(|entry| cuzk::auth::parse_token_entry(entry).unwrap())
            .collect();
    });
    let series = r#"cuzk_tenant_refusals_total{tenant="alpha",reason="parse_share"}"#;
    let alpha = [stalled_body(&d, 1000, Some(ALPHA)), stalled_body(&d, 1000, Some(ALPHA))];
    await_parsing(&d, "alpha's two stalled bodies were not admitted", |p| p.0 == 2);
    // Alpha's third is over its share: 429 at its head.
    let third = refusal(stalled_body(&d, 1000, Some(ALPHA)));
    assert!(third.starts_with("HTTP/1.1 429"), "{third}");
    assert!(third.contains("alpha") && third.contains("parse_share_per_tenant"), "{third}");
    assert!(third.to_ascii_lowercase().contains("retry-after: 3"), "{third}");
    assert_eq!(metric_value(&d.metrics(), series), 1.0);
    // Beta's job is taken while alpha's bodies hold their places.
    let taken = agent()
        .post(&format!("{}/v1/jobs", d.url))
        .set("Authorization", &format!("Bearer {BETA}"))
        .send_json(job(1));
    let (status, body) = common::response(taken);
    assert_eq!(status, 202, "{body}");
    assert!(!alpha.iter().any(answered), "a stalled body of alpha's was answered");
    drop(alpha);
    await_parsing(&d, "alpha's shares did not come back", |p| p == (0, 0));
}
