//! Every `[limits]` setting, configured away from its default, on the
//! simulated backend; and what a cancelled job may still hold: a circuit
//! setup no job waits for any more (asking for its key, or queued) stops,
//! and its budget returns.

use crate::common;

use std::time::{Duration, Instant};

use common::{agent, start_with, TestDaemon};
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

fn mimc(log2_constraints: u32, seed: u64) -> Value {
    json!({"circuit": "mimc-chain", "params": {"log2_constraints": log2_constraints}, "seed": seed})
}

/// The budget's bytes in use: partitions' reservations and resident bytes
/// (keys, and setups and loads running).
fn budget_in_use(d: &TestDaemon) -> (u64, u64) {
    let budget = d.get("/v1/status").1["budget"].clone();
    (budget["used_bytes"].as_u64().unwrap(), budget["resident_bytes"].as_u64().unwrap())
}

/// Held by each test that sets a shape up, so that `setup_cpu_ticks` counts
/// its own setup only (the other tests here run the simulated backend).
static SETTING_UP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// CPU time (clock ticks) of this process's threads named after a
/// `mimc-chain` setup (`cuzk-setup-mimc`, names being cut to 15 bytes):
/// the setup's own thread, and the threads of the parallel pool when the
/// setup was the first to use it (they take their creator's name).
fn setup_cpu_ticks() -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap().flatten();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter(|stat| stat.contains("(cuzk-setup-mimc)"))
        .map(|stat| {
            // utime and stime: the 12th and 13th fields after the name.
            let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
            fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
        })
        .sum()
}

/// Whether a setup computes: its threads used more than two clock ticks
/// (20 ms at Linux's usual 100 Hz) of CPU in 0.5 s; a running one uses
/// most of the 0.5 s on each core.
fn a_mimc_setup_runs() -> bool {
    let before = setup_cpu_ticks();
    std::thread::sleep(Duration::from_millis(500));
    setup_cpu_ticks() > before + 2
}

/// Polls `done` every 10 ms for at most `limit`; how long it took.
fn within(limit: Duration, what: &str, done: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

/// A setup stops at most one chunk of its multiplications (4,096 scalars)
/// or one step after its last waiter is cancelled: well under a second on
/// a busy two-core machine; allowed 3 s here, where the whole setup of
/// 2^16 constraints takes about 13 s.
const STOP_BOUND: Duration = Duration::from_secs(3);

#[test]
fn a_setup_whose_only_job_is_cancelled_stops_and_returns_its_budget() {
    let _alone = SETTING_UP.lock().unwrap_or_else(|e| e.into_inner());
    let d = start_with(|c| c.scheduler.budget = Budget::Bytes(4 << 30));
    let baseline = budget_in_use(&d);
    assert_eq!(baseline, (0, 0));
    let big = d.post("/v1/jobs", &mimc(16, 1)).1["id"].as_str().unwrap().to_string();
    // The setup has started once its estimate (2,900 bytes a constraint)
    // counts as resident.
    within(Duration::from_secs(30), "the setup starts", || budget_in_use(&d).1 > 0);
    let (status, cancelled) = d.post(&format!("/v1/jobs/{big}/cancel"), &json!({}));
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    let returned = within(STOP_BOUND, "the budget returns", || budget_in_use(&d) == baseline);
    let stopped = within(STOP_BOUND, "the setup stops computing", || !a_mimc_setup_runs());
    eprintln!("after the cancel: budget back in {returned:?}, the setup idle within {stopped:?} (0.5 s windows)");
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

#[test]
fn a_setup_another_job_waits_for_survives_a_cancel_and_finishes_for_it() {
    let _alone = SETTING_UP.lock().unwrap_or_else(|e| e.into_inner());
    let d = start_with(|c| c.scheduler.budget = Budget::Bytes(4 << 30));
    let first = d.post("/v1/jobs", &mimc(15, 1)).1["id"].as_str().unwrap().to_string();
    let second = d.post("/v1/jobs", &mimc(15, 2)).1["id"].as_str().unwrap().to_string();
    within(Duration::from_secs(30), "the setup starts", || budget_in_use(&d).1 > 0);
    // The second job's partition asks for the key within the 500 ms its
    // NotReady answer waits; then it is a waiter too.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(a_mimc_setup_runs());
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
    assert_eq!(d.wait(&first, Duration::from_secs(5))["status"], "cancelled");
    assert_eq!(budget_in_use(&d).0, 0);
}

/// The ids of this process's threads named `cuzk-setup-mimc`: the setup
/// threads running now, and the parallel pool's threads if a setup made the
/// pool (they last as long as the process).
fn setup_threads() -> std::collections::BTreeSet<String> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap().flatten();
    tasks
        .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() == "cuzk-setup-mimc"))
        .map(|task| task.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A job accepted and still queued, its partition never having asked for
/// the key (partitions of higher priority queued ahead of it), counts as
/// waiting for its shape's setup: cancelling the job that started the setup
/// leaves it running, and the queued job is proved with that one setup.
/// Once every job of the shape is cancelled, queued ones included, the
/// setup stops and its budget returns.
#[test]
fn a_queued_job_of_the_shape_keeps_its_setup_through_a_cancel_until_it_is_cancelled_too() {
    let _alone = SETTING_UP.lock().unwrap_or_else(|e| e.into_inner());
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
        key_file = c.data_dir.join("keys").join(format!("{}.pk", shape.circuit_id));
    });
    let submit = |body: Value| d.post("/v1/jobs", &body).1["id"].as_str().unwrap().to_string();
    let large = |seed, priority| {
        json!({"circuit": "mimc-chain", "params": {"log2_constraints": 16}, "seed": seed, "priority": priority})
    };
    // Jobs of higher priority queued ahead of the shape's second job keep
    // it in the queue for seconds: 16 partitions of a small shape, set up
    // first, proved one after another while their own remain queued.
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
        within(Duration::from_secs(30), "the setup starts", setup_counted);
        let holder = submit(ahead(seeds.0, 16));
        let queued = submit(large(seeds.1, "low"));
        let (_, behind) = d.get(&format!("/v1/jobs/{queued}"));
        assert_eq!(behind["partitions"][0]["stage"], "queued", "{behind}");
        assert!(a_mimc_setup_runs());
        (first, queued, holder)
    };

    // Both cancelled, the queued one first: nothing waits, the setup stops.
    let (first, queued, holder) = start_and_queue_behind((2, 3));
    cancel(&queued);
    cancel(&first);
    within(STOP_BOUND, "the budget returns", || budget_in_use(&d).1 == small_key);
    // The holder's 16 partitions are proved right after the cancel, on the
    // parallel pool, whose threads bear a setup's name when a setup made
    // the pool (`setup_cpu_ticks`): whether the setup still computes is
    // read once they are done. A setup that went on would by then still
    // run or have written its key (the whole setup takes about 13 s).
    assert_eq!(d.wait(&holder, Duration::from_secs(300))["status"], "done");
    assert!(!a_mimc_setup_runs(), "the setup still computes");
    assert!(!key_file.exists(), "a stopped setup wrote its key");

    // Only the first cancelled: the setup goes on for the queued job, and
    // no other setup starts (it would be a new thread of the name).
    let (first, queued, holder) = start_and_queue_behind((4, 5));
    let before = setup_threads();
    cancel(&first);
    let cancelled = Instant::now();
    let mut held_for = Duration::ZERO;
    loop {
        let (_, job) = d.get(&format!("/v1/jobs/{queued}"));
        let started: Vec<String> = setup_threads().difference(&before).cloned().collect();
        assert!(started.is_empty(), "another setup started after the cancel (threads {started:?}): {job}");
        if job["status"] != "queued" && job["status"] != "running" {
            assert_eq!(job["status"], "done", "{job}");
            assert_eq!(job["partitions"][0]["attempts"], 1, "{job}");
            break;
        }
        let (_, ahead_now) = d.get(&format!("/v1/jobs/{holder}"));
        let ahead_queued = ahead_now["partitions"].as_array().unwrap().iter().filter(|p| p["stage"] == "queued").count();
        if ahead_queued > 0 {
            held_for = cancelled.elapsed();
            // The queued job has not asked for the key (partitions ahead
            // of it in the queue are still waiting): only its being
            // expected keeps the setup, and its estimate in the budget
            // until the key replaces it.
            assert!(budget_in_use(&d).1 > small_key, "the setup stopped while a job of its shape was queued: {job}");
        }
        assert!(cancelled.elapsed() < Duration::from_secs(300), "{job}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A setup asks whether to stop every chunk, well under a second apart.
    assert!(held_for > Duration::from_secs(1), "the queued job could ask {held_for:?} after the cancel");
    eprintln!("the queued job was held {held_for:?} after the cancel");
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
