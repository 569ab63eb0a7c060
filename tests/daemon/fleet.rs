//! A fleet: several `cuzk serve` processes (the simulated backend) on one
//! PostgreSQL, the throwaway cluster of scripts/pg-test-cluster.sh. Jobs
//! submitted to any node are proved across the fleet, each partition once;
//! a node killed with SIGKILL loses its partitions to the others after its
//! leases run out, and rejoins when restarted; a database restart under
//! load costs 503s with Retry-After meanwhile and no acknowledged job.
//! Skipped without CUZK_TEST_PG_URL. The tests share one database cluster
//! (one of them restarts it) and two cores: they run one at a time.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{agent, metric_value, pg_ctl, response, PgSchema, Serve};
use serde_json::{json, Value};

static SERIAL: Mutex<()> = Mutex::new(());

/// One node: its process, address and name.
struct Node {
    serve: Option<Serve>,
    name: String,
    url: String,
    dir: tempfile::TempDir,
    /// The settings it started with, to restart it alike.
    port: u16,
}

/// A node's settings: `backend` (the simulated one fast), a short lease
/// so that a killed node's partitions move on within a test, a quick poll.
fn config_file(dir: &Path, backend: &str, lease_secs: u64, time_scale: f64) -> std::path::PathBuf {
    let path = dir.join("cuzk.toml");
    std::fs::write(
        &path,
        format!(
            r#"backend = "{backend}"
[cpu]
threads_per_device = 1
[sim]
profile = "winning-post"
time_scale = {time_scale}
jitter = 0.0
[scheduler]
synthesis_threads = 2
budget = 1073741824
[fleet]
lease_secs = {lease_secs}
poll_secs = 1
"#
        ),
    )
    .unwrap();
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Node {
    fn start(schema: &PgSchema, name: &str, lease_secs: u64) -> Node {
        Self::start_on(schema, name, "sim", lease_secs, 0.01)
    }

    fn start_on(schema: &PgSchema, name: &str, backend: &str, lease_secs: u64, time_scale: f64) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let mut node = Node { serve: None, name: name.into(), url: String::new(), dir, port: free_port() };
        node.url = format!("http://127.0.0.1:{}", node.port);
        config_file(node.dir.path(), backend, lease_secs, time_scale);
        node.run(schema);
        node
    }

    /// Starts (or restarts) the process and waits until it takes jobs.
    fn run(&mut self, schema: &PgSchema) {
        let log = std::fs::File::create(self.dir.path().join("log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--node",
                &self.name,
                "--config",
            ])
            .arg(self.dir.path().join("cuzk.toml"))
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .env("CUZK_STORE_URL", schema.url.secret())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.serve = Some(Serve(child));
        let ready = format!("{}/readyz", self.url);
        poll(&format!("node {} to take jobs", self.name), Duration::from_secs(60), || {
            let exited = self.serve.as_mut().and_then(|s| s.0.try_wait().unwrap());
            assert!(exited.is_none(), "node {} exited ({exited:?}): {}", self.name, self.log());
            agent().get(&ready).call().is_ok()
        });
    }

    /// SIGTERM, then waits for the process to exit (its drain).
    fn terminate(&mut self) {
        let child = &mut self.serve.as_mut().expect("running").0;
        let sent = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(sent.success());
        let exited = (0..600).find_map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            child.try_wait().unwrap()
        });
        assert!(
            exited.is_some_and(|status| status.success()),
            "node {} exits 0 after SIGTERM: {exited:?}",
            self.name
        );
        self.serve.take();
    }

    fn kill(&mut self) {
        // SIGKILL: no drain, no release; its leases just stop being renewed.
        self.serve.take();
    }

    fn get(&self, path: &str) -> (u16, Value) {
        response(agent().get(&format!("{}{path}", self.url)).call())
    }

    fn submit(&self, body: &Value) -> (u16, Value) {
        response(agent().post(&format!("{}/v1/jobs", self.url)).send_json(body.clone()))
    }

    fn metric(&self, series: &str) -> f64 {
        let text = agent().get(&format!("{}/metrics", self.url)).call().unwrap().into_string().unwrap();
        metric_value(&text, series)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

fn poll(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn job_body(seed: u64, partitions: u32) -> Value {
    json!({"circuit": "poseidon-merkle", "params": {"depth": 2, "challenges": 1}, "partitions": partitions, "seed": seed})
}

/// Submits one job per seed of `seeds` (`partitions` each) to `nodes` in
/// turn; returns their ids.
fn submit_round_robin(nodes: &[&Node], seeds: std::ops::Range<u64>, partitions: u32) -> Vec<String> {
    seeds
        .enumerate()
        .map(|(i, seed)| {
            let (status, accepted) = nodes[i % nodes.len()].submit(&job_body(seed, partitions));
            assert_eq!(status, 202, "{accepted}");
            accepted["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Waits until every job is finished, reading each from `nodes` in turn
/// (any node answers for any job); returns their views.
fn wait_all(nodes: &[&Node], ids: &[String], timeout: Duration) -> Vec<Value> {
    let started = Instant::now();
    let mut views = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        loop {
            let (status, view) = nodes[i % nodes.len()].get(&format!("/v1/jobs/{id}"));
            assert_eq!(status, 200, "{view}");
            if matches!(view["status"].as_str(), Some("done" | "failed" | "cancelled")) {
                views.push(view);
                break;
            }
            assert!(started.elapsed() < timeout, "job {id} not finished in {timeout:?}: {view}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    views
}

/// Every partition of every job has exactly one row in the database, proved
/// (by one of `nodes`); returns how many each node proved.
fn proved_once(schema: &PgSchema, ids: &[String], partitions: u32, nodes: &[&Node]) -> BTreeMap<String, i64> {
    let mut client = schema.client();
    let rows = client
        .query(
            "SELECT job, count(*), count(proof), count(DISTINCT partition_index) FROM cuzk_partitions
             WHERE job = ANY($1) GROUP BY job",
            &[&ids],
        )
        .unwrap();
    assert_eq!(rows.len(), ids.len(), "every job has its partitions recorded");
    for row in rows {
        let counts: [i64; 3] = [row.get(1), row.get(2), row.get(3)];
        assert_eq!(
            counts,
            [i64::from(partitions); 3],
            "job {}: one proved row per partition",
            row.get::<_, String>(0)
        );
    }
    let names: HashSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let by_node: BTreeMap<String, i64> = client
        .query("SELECT node, count(*) FROM cuzk_partitions WHERE job = ANY($1) GROUP BY node", &[&ids])
        .unwrap()
        .iter()
        .map(|row| (row.get::<_, Option<String>>(0).unwrap_or_default(), row.get(1)))
        .collect();
    assert!(by_node.keys().all(|n| names.contains(n.as_str())), "proved by the fleet's nodes: {by_node:?}");
    let leases: i64 =
        client.query_one("SELECT count(*) FROM cuzk_leases WHERE job = ANY($1)", &[&ids]).unwrap().get(0);
    assert_eq!(leases, 0, "no lease outlives its partition");
    by_node
}

#[test]
fn postgres_fleet_of_three_proves_300_jobs_submitted_round_robin_each_partition_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_fleet_of_three") else { return };
    let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|name| Node::start(&schema, name, 30)).collect();
    let all: Vec<&Node> = nodes.iter().collect();
    let ids = submit_round_robin(&all, 0..300, 2);
    // Read from another node than the one each job was submitted to.
    let views = wait_all(&[&nodes[1], &nodes[2], &nodes[0]], &ids, Duration::from_secs(240));
    assert!(views.iter().all(|v| v["status"] == "done"), "all done");
    // Each partition shows what its node recorded of it, whichever node
    // answers: the node, its worker, its stage times, summed in the job's.
    for view in &views {
        for p in view["partitions"].as_array().unwrap() {
            assert!(["a", "b", "c"].contains(&p["node"].as_str().unwrap_or("")), "{view}");
            assert!(p["worker"].is_string() && p["attempts"] == 1, "{view}");
            assert!(p["timings_ms"]["synthesis"].as_f64().is_some_and(|ms| ms >= 0.0), "{view}");
        }
        let synthesis: f64 = view["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["timings_ms"]["synthesis"].as_f64().unwrap())
            .sum();
        assert!((view["timings_ms"]["synthesis"].as_f64().unwrap() - synthesis).abs() < 1e-6, "{view}");
    }
    let by_node = proved_once(&schema, &ids, 2, &all);
    assert_eq!(by_node.len(), 3, "every node proved some: {by_node:?}");
    // No partition was claimed twice (no lease lapsed): the claims the
    // nodes counted are exactly the partitions.
    let claimed: f64 = nodes.iter().map(|n| n.metric("cuzk_fleet_claimed_partitions_total")).sum();
    let lost: f64 = nodes.iter().map(|n| n.metric("cuzk_fleet_leases_lost_total")).sum();
    assert_eq!((claimed, lost), (600.0, 0.0));
    // Proofs from any node, whoever proved them.
    let (status, proofs) = nodes[2].get(&format!("/v1/jobs/{}/proofs", ids[0]));
    assert_eq!(status, 200, "{proofs}");
    assert_eq!(proofs["proofs"].as_array().unwrap().len(), 2);
    let (status, fleet) = nodes[0].get("/v1/status?scope=fleet");
    assert_eq!(status, 200, "{fleet}");
    assert_eq!(fleet["fleet"]["jobs"]["done"], 300, "{fleet}");
    assert_eq!(fleet["fleet"]["partitions_waiting"], 0, "{fleet}");
}

#[test]
fn postgres_fleet_takes_over_a_killed_nodes_partitions_and_the_node_rejoins() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_fleet_kill") else { return };
    let lease = Duration::from_secs(3);
    // Slower partitions than the other tests': node a must still hold some
    // when it is killed (at 0.01 it can finish what it held in between).
    let mut nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .map(|name| Node::start_on(&schema, name, "sim", lease.as_secs(), 0.05))
        .collect();
    let ids = submit_round_robin(&nodes.iter().collect::<Vec<_>>(), 0..60, 3);
    // Kill node a while it holds leases.
    let mut client = schema.client();
    poll("node a to hold partitions", Duration::from_secs(30), || {
        let held: i64 =
            client.query_one("SELECT count(*) FROM cuzk_leases WHERE owner = 'a'", &[]).unwrap().get(0);
        held > 0
    });
    nodes[0].kill();
    let killed = Instant::now();
    let orphaned: Vec<(String, i64)> = client
        .query("SELECT job, partition_index FROM cuzk_leases WHERE owner = 'a'", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert!(!orphaned.is_empty());
    // Once the lease has run out (and a claim interval passed), every one
    // of them is held by another node or proved (by another node, or by
    // node a itself in a commit that was on its way when it died). The
    // bound, far past the lease and a claim interval, only ends a test
    // where they never move.
    poll("the killed node's partitions to move", lease + Duration::from_secs(60), || {
        orphaned.iter().all(|(job, index)| {
            let row = client
                .query_one(
                    "SELECT (SELECT owner FROM cuzk_leases WHERE job = $1 AND partition_index = $2),
                            EXISTS (SELECT 1 FROM cuzk_partitions WHERE job = $1 AND partition_index = $2)",
                    &[job, index],
                )
                .unwrap();
            let (owner, proved): (Option<String>, bool) = (row.get(0), row.get(1));
            proved || owner.is_some_and(|owner| owner != "a")
        })
    });
    eprintln!("the killed node's {} partitions moved on within {:?}", orphaned.len(), killed.elapsed());
    let survivors = [&nodes[1], &nodes[2]];
    let views = wait_all(&survivors, &ids, Duration::from_secs(120));
    assert!(views.iter().all(|v| v["status"] == "done"), "nothing lost");
    proved_once(&schema, &ids, 3, &[&nodes[0], &nodes[1], &nodes[2]]);
    let reclaimed: f64 = survivors.iter().map(|n| n.metric("cuzk_fleet_reclaimed_partitions_total")).sum();
    assert!(reclaimed >= orphaned.len() as f64, "{reclaimed} reclaimed of {} orphaned", orphaned.len());

    // Restarted, node a takes work again.
    nodes[0].run(&schema);
    let again = submit_round_robin(&[&nodes[0]], 100..130, 1);
    wait_all(&[&nodes[0]], &again, Duration::from_secs(120));
    assert!(
        nodes[0].metric("cuzk_fleet_claimed_partitions_total") > 0.0,
        "node a rejoined: {}",
        nodes[0].log()
    );
}

#[test]
fn postgres_restart_under_fleet_load_costs_503s_and_no_acknowledged_job() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_fleet_restart") else { return };
    let nodes: Vec<Node> = ["a", "b"].iter().map(|name| Node::start(&schema, name, 30)).collect();
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    let started = Instant::now();
    let mut restart = None;
    let mut seed = 0u64;
    // Submit for a while before, during and after the restart.
    while started.elapsed() < Duration::from_secs(12) {
        if restart.is_none() && started.elapsed() > Duration::from_secs(2) {
            restart = Some(std::thread::spawn(|| pg_ctl("restart -m fast")));
        }
        let node = &nodes[seed as usize % 2];
        let request = agent().post(&format!("{}/v1/jobs", node.url)).send_json(job_body(seed, 2));
        seed += 1;
        match request {
            Ok(answer) => {
                assert_eq!(answer.status(), 202);
                let body: Value = answer.into_json().unwrap();
                acknowledged.push(body["id"].as_str().unwrap().to_string());
            }
            Err(ureq::Error::Status(503, answer)) => {
                assert!(answer.header("Retry-After").is_some(), "a 503 says when to retry");
                let body: Value = answer.into_json().unwrap();
                assert_eq!(body["reason"], "store_failing", "{body}");
                refused += 1;
            }
            Err(other) => panic!("submission failed otherwise: {other}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    restart.unwrap().join().unwrap();
    eprintln!("{} jobs acknowledged, {refused} refused during the restart", acknowledged.len());
    assert!(refused > 0, "the restart was seen");
    let views = wait_all(&[&nodes[0], &nodes[1]], &acknowledged, Duration::from_secs(180));
    assert!(views.iter().all(|v| v["status"] == "done"), "no acknowledged job lost");
    proved_once(&schema, &acknowledged, 2, &[&nodes[0], &nodes[1]]);
}

/// Real proofs: two nodes on the CPU backend share one job's partitions and
/// one proving key (set up once, by whichever node needed it first); both
/// serve that key, and every proof verifies against it.
#[test]
fn postgres_fleet_proves_one_job_on_two_cpu_nodes_under_one_key() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_fleet_cpu") else { return };
    let nodes: Vec<Node> =
        ["a", "b"].iter().map(|name| Node::start_on(&schema, name, "cpu", 30, 0.01)).collect();
    let body =
        json!({"circuit": "mimc-chain", "params": {"log2_constraints": 6}, "partitions": 8, "seed": 11});
    let (status, accepted) = nodes[0].submit(&body);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_string();
    let view = &wait_all(&[&nodes[1]], std::slice::from_ref(&id), Duration::from_secs(300))[0];
    assert_eq!(view["status"], "done", "{view}");
    let by_node = proved_once(&schema, std::slice::from_ref(&id), 8, &[&nodes[0], &nodes[1]]);
    // A node holds at most synthesis_threads + 1 = 3 waiting partitions,
    // fewer than 8: both nodes were woken by the submission and claimed.
    assert_eq!(by_node.len(), 2, "both nodes proved some: {by_node:?}");
    let (status, proofs) = nodes[1].get(&format!("/v1/jobs/{id}/proofs"));
    assert_eq!(status, 200, "{proofs}");
    let circuit_id = proofs["circuit_id"].as_str().unwrap();
    let vks: Vec<_> =
        nodes.iter().map(|n| cuzk::client::fetch_vk(&n.url, circuit_id, None).unwrap()).collect();
    assert_eq!(vks[0], vks[1], "every node serves the fleet's key");
    let results = cuzk::client::verify_proofs(&vks[0], &proofs).unwrap();
    assert_eq!(results.len(), 8);
    assert!(results.iter().all(|(_, valid)| *valid), "{results:?}");
    let setups: i64 = schema.client().query_one("SELECT count(*) FROM cuzk_keys", &[]).unwrap().get(0);
    assert_eq!(setups, 1, "one key for the shape, fleet-wide");
}

/// A node stopped with SIGTERM (a rolling restart) puts back the partitions
/// it claimed and had not started: the other node takes them at once, not
/// after their lease (30 s here) runs out.
#[test]
fn postgres_a_node_stopped_gracefully_puts_back_what_it_did_not_start() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(schema) = PgSchema::create("postgres_fleet_sigterm") else { return };
    let mut nodes: Vec<Node> =
        ["a", "b"].iter().map(|name| Node::start_on(&schema, name, "sim", 30, 0.05)).collect();
    let ids = submit_round_robin(&nodes.iter().collect::<Vec<_>>(), 0..40, 2);
    let mut client = schema.client();
    let held_by_a = |client: &mut postgres::Client| -> i64 {
        client.query_one("SELECT count(*) FROM cuzk_leases WHERE owner = 'a'", &[]).unwrap().get(0)
    };
    // Its claim room (synthesis threads + 1) waiting, and more running.
    poll("node a to hold partitions it has not started", Duration::from_secs(30), || {
        held_by_a(&mut client) >= 3
    });
    nodes[0].terminate();
    // Those it ran finished during the drain (their leases went with their
    // proofs); the others went back: none is left under its name.
    assert_eq!(held_by_a(&mut client), 0, "node a left leases behind: {}", nodes[0].log());
    assert!(nodes[0].log().contains("put back for the other nodes"), "{}", nodes[0].log());
    let views = wait_all(&[&nodes[1]], &ids, Duration::from_secs(120));
    assert!(views.iter().all(|v| v["status"] == "done"), "nothing lost");
    proved_once(&schema, &ids, 2, &[&nodes[0], &nodes[1]]);
}
