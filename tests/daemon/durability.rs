//! The job store and graceful shutdown, through the real server: two daemons
//! started one after the other on one data directory, or on one PostgreSQL
//! schema (when CUZK_TEST_PG_URL names a database: scripts/pg-test-cluster.sh).

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{agent, response, test_config};
use cuzk::config::{BackendKind, Config};
use cuzk::server::RunningDaemon;
use cuzk_actors::store::JobStore;
use serde_json::{json, Value};

/// The sim backend with slow, predictable partitions (about a second each,
/// two at a time), so that a test can stop a daemon with work in flight.
fn slow_sim(dir: &Path) -> Config {
    let mut config = test_config(dir);
    config.backend = BackendKind::Sim;
    config.sim.profile = "winning-post".into();
    config.sim.jitter = 0.0;
    config.scheduler.synthesis_threads = 2;
    config
}

fn start(config: Config) -> RunningDaemon {
    let _ = env_logger::builder().is_test(true).try_init();
    // A lookup while stored jobs are rebuilt (503 recovering) is not what
    // these tests are about.
    common::spawn_ready(config)
}

fn get(d: &RunningDaemon, path: &str) -> (u16, Value) {
    response(agent().get(&format!("{}{path}", d.url())).call())
}

fn submit(d: &RunningDaemon, key: &str, body: &Value) -> (u16, Value) {
    response(agent().post(&format!("{}/v1/jobs", d.url())).set("Idempotency-Key", key).send_json(body))
}

fn job(d: &RunningDaemon, id: &str) -> Value {
    let (status, job) = get(d, &format!("/v1/jobs/{id}"));
    assert_eq!(status, 200, "{job}");
    job
}

fn stages(job: &Value) -> Vec<String> {
    job["partitions"].as_array().unwrap().iter().map(|p| p["stage"].as_str().unwrap().to_string()).collect()
}

fn count_done(job: &Value) -> usize {
    stages(job).iter().filter(|s| *s == "done").count()
}

fn poll(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The job once it has ended. One read per look: two reads (one for each
/// unfinished status) let a job moving from queued to running between them
/// pass for finished.
fn wait_done(d: &RunningDaemon, id: &str) -> Value {
    let mut last = Value::Null;
    poll("the job to finish", Duration::from_secs(180), || {
        last = job(d, id);
        last["status"] != "running" && last["status"] != "queued"
    });
    last
}

fn stored_job_ids(dir: &Path) -> Vec<String> {
    let store = cuzk::store::RedbJobStore::open(&dir.join("jobs.redb")).expect("store opens");
    let ids = store.load().expect("store loads").into_iter().map(|job| job.record.id.0).collect();
    store.close().expect("store closes");
    ids
}

#[test]
fn a_restarted_daemon_resumes_unfinished_jobs_and_keeps_finished_ones() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = test_config(dir.path());
        config.scheduler.synthesis_threads = 1;
        config
    };
    let body = json!({
        "circuit": "poseidon-merkle",
        "params": {"depth": 4, "challenges": 2},
        "partitions": 8,
        "seed": 11
    });

    let first = start(config());
    let (status, accepted) = submit(&first, "resume-me", &body);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_string();
    poll("a first proved partition", Duration::from_secs(120), || count_done(&job(&first, &id)) > 0);
    first.stop();

    let second = start(config());
    // Proofs made before the stop are kept, not proved again.
    let restored = job(&second, &id);
    let done_before = count_done(&restored);
    assert!(
        (1..8).contains(&done_before),
        "expected some but not all partitions proved at restart: {restored}"
    );
    let (status, again) = submit(&second, "resume-me", &body);
    assert_eq!((status, &again["id"]), (200, &json!(id)), "{again}");
    let finished = wait_done(&second, &id);
    assert_eq!(finished["status"], "done", "{finished}");
    let (status, proofs) = get(&second, &format!("/v1/jobs/{id}/proofs"));
    assert_eq!(status, 200, "{proofs}");
    let indices: Vec<u64> =
        proofs["proofs"].as_array().unwrap().iter().map(|p| p["partition"].as_u64().unwrap()).collect();
    assert_eq!(indices, (0..8).collect::<Vec<_>>());
    let vk = cuzk::client::fetch_vk(&second.url(), "poseidon-merkle-d4-c2", None).unwrap();
    let results = cuzk::client::verify_proofs(&vk, &proofs).unwrap();
    assert!(results.iter().all(|(_, valid)| *valid), "{results:?}");
    second.stop();

    let third = start(config());
    assert_eq!(job(&third, &id)["status"], "done");
    let (status, kept) = get(&third, &format!("/v1/jobs/{id}/proofs"));
    assert_eq!((status, &kept), (200, &proofs));
    let (status, again) = submit(&third, "resume-me", &body);
    assert_eq!((status, &again["id"]), (200, &json!(id)), "{again}");
    // A new job after a restart is ordered after the restored ones and
    // gets an id of its own.
    let (status, fresh) = submit(&third, "another", &body);
    assert_eq!(status, 202, "{fresh}");
    assert_ne!(fresh["id"], json!(id));
    third.stop();
}

#[test]
fn finished_jobs_are_forgotten_after_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.store.retention_secs = 1;
    config.store.sweep_interval_secs = 1;
    let d = start(config.clone());
    let body = json!({
        "circuit": "poseidon-merkle",
        "params": {"depth": 2, "challenges": 1},
        "partitions": 1,
        "seed": 3
    });
    let (status, accepted) = submit(&d, "short-lived", &body);
    assert_eq!(status, 202);
    let id = accepted["id"].as_str().unwrap().to_string();
    assert_eq!(wait_done(&d, &id)["status"], "done");
    poll("the job to be forgotten", Duration::from_secs(10), || get(&d, &format!("/v1/jobs/{id}")).0 == 404);
    assert_eq!(get(&d, &format!("/v1/jobs/{id}/proofs")).0, 404);
    // Its idempotency key is free again.
    let (status, again) = submit(&d, "short-lived", &body);
    assert_eq!(status, 202, "{again}");
    assert_ne!(again["id"], json!(id));
    wait_done(&d, again["id"].as_str().unwrap());
    d.stop();
    assert!(!stored_job_ids(dir.path()).contains(&id));

    let restarted = start(config);
    assert_eq!(get(&restarted, &format!("/v1/jobs/{id}")).0, 404);
    restarted.stop();
}

#[test]
fn shutdown_refuses_new_jobs_finishes_started_partitions_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let config = || slow_sim(dir.path());
    let body = json!({
        "circuit": "poseidon-merkle",
        "params": {"depth": 2, "challenges": 1},
        "partitions": 6,
        "seed": 5
    });
    let d = start(config());
    let (status, accepted) = submit(&d, "drain", &body);
    assert_eq!(status, 202);
    let id = accepted["id"].as_str().unwrap().to_string();
    poll("a partition to start", Duration::from_secs(10), || {
        stages(&job(&d, &id)).iter().any(|s| s == "synthesizing")
    });
    d.begin_shutdown();
    let (status, refused) = submit(&d, "too-late", &body);
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["reason"], "shutting_down", "{refused}");
    // Reads keep working while it drains.
    assert_eq!(job(&d, &id)["status"], "running");
    d.wait().expect("clean exit");

    let restarted = start(config());
    let resumed = job(&restarted, &id);
    let done = count_done(&resumed);
    assert!(
        (1..6).contains(&done),
        "started partitions finish during the drain, queued ones wait: {resumed}"
    );
    assert_eq!(wait_done(&restarted, &id)["status"], "done");
    let (status, _) = submit(&restarted, "too-late", &body);
    assert_eq!(status, 202, "a refused job was not kept");
    restarted.stop();
}

#[test]
fn a_daemon_on_postgres_restarts_and_serves_the_same_jobs() {
    let Some(schema) = common::PgSchema::create("a_daemon_on_postgres_restarts_and_serves_the_same_jobs")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = slow_sim(dir.path());
        config.store.url = Some(schema.url.clone());
        config
    };
    let body = |partitions: u32, seed: u64| {
        json!({
            "circuit": "poseidon-merkle",
            "params": {"depth": 2, "challenges": 1},
            "partitions": partitions,
            "seed": seed
        })
    };

    let first = start(config());
    let (status, accepted) = submit(&first, "finished", &body(1, 1));
    assert_eq!(status, 202, "{accepted}");
    let finished = accepted["id"].as_str().unwrap().to_string();
    assert_eq!(wait_done(&first, &finished)["status"], "done");
    let (status, proofs) = get(&first, &format!("/v1/jobs/{finished}/proofs"));
    assert_eq!(status, 200, "{proofs}");
    let (status, accepted) = submit(&first, "resumed", &body(6, 2));
    assert_eq!(status, 202, "{accepted}");
    let resumed = accepted["id"].as_str().unwrap().to_string();
    poll("a partition to start", Duration::from_secs(10), || {
        stages(&job(&first, &resumed)).iter().any(|s| s == "synthesizing")
    });
    first.begin_shutdown();
    first.wait().expect("clean exit");
    assert!(!dir.path().join("jobs.redb").exists(), "jobs went to the database, not the data directory");

    let second = start(config());
    assert_eq!(job(&second, &finished)["status"], "done");
    let (status, kept) = get(&second, &format!("/v1/jobs/{finished}/proofs"));
    assert_eq!((status, &kept), (200, &proofs));
    let (status, again) = submit(&second, "resumed", &body(6, 2));
    assert_eq!((status, &again["id"]), (200, &json!(resumed)), "{again}");
    let done = count_done(&job(&second, &resumed));
    assert!((1..6).contains(&done), "started partitions were kept, queued ones wait: {done}");
    assert_eq!(wait_done(&second, &resumed)["status"], "done");
    second.stop();

    // The database holds both, in submission order, for whichever daemon
    // opens it next.
    let store = cuzk::store::PgJobStore::connect(&schema.url, None).expect("store opens");
    let ids: Vec<String> = store.load().unwrap().into_iter().map(|job| job.record.id.0).collect();
    assert_eq!(ids, [finished, resumed]);
    store.close().unwrap();
}

/// The store URL may carry the database password: a daemon given it in
/// CUZK_STORE_URL keeps its value out of /proc/PID/environ (and out of any
/// child's environment) once it has read it.
#[test]
fn a_postgres_url_from_the_environment_is_gone_from_proc_environ() {
    let Some(schema) =
        common::PgSchema::create("a_postgres_url_from_the_environment_is_gone_from_proc_environ")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serve = common::Serve(
        Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["serve", "--backend", "sim", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env("CUZK_STORE_URL", schema.url.secret())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The schema's tables exist once the daemon has opened the store, which
    // it does after reading (and hiding) the variable.
    let mut client = schema.client();
    poll("the daemon to open the store", Duration::from_secs(30), || {
        let row = client.query_one("SELECT to_regclass('cuzk_jobs')::text", &[]).unwrap();
        row.get::<_, Option<String>>(0).is_some()
    });
    let environ = std::fs::read(format!("/proc/{}/environ", serve.0.id())).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.contains("CUZK_STORE_URL=xxxx"), "the daemon was given the variable and overwrote it");
    assert!(!environ.contains(schema.url.secret()), "the store URL is still in /proc/PID/environ");
}
