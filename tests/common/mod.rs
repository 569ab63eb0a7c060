//! Helpers shared by the integration tests: a daemon on an ephemeral
//! loopback port with its own data directory, and a small HTTP client; a
//! schema of its own on the test PostgreSQL, and the records the store
//! tests write.

// Each binary that declares this module (daemon, observe,
// metrics_catalogue) uses only a part of it.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use cuzk::config::{Budget, Config};
use cuzk::server::{spawn, RunningDaemon};
use cuzk_actors::model::ProofRecord;
use cuzk_actors::store::JobRecord;
use cuzk_actors::{JobId, Priority};
use cuzk_kernels::circuits::CircuitRegistry;
use serde_json::Value;

/// A `cuzk serve` process a test started, killed when the test ends,
/// failed or not.
pub struct Serve(pub std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Serve {
    /// Starts `command` (a `cuzk serve`) with its log piped, and returns it
    /// once it says where it listens: the process, its URL, and a thread
    /// that keeps reading its log (so that it never blocks on a full pipe)
    /// and returns it once the process has ended.
    pub fn logged(command: &mut std::process::Command) -> (Serve, String, std::thread::JoinHandle<String>) {
        use std::io::BufRead;
        let mut child = command
            .env("RUST_LOG", "info")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("cuzk serve starts");
        let stderr = std::io::BufReader::new(child.stderr.take().expect("a piped stderr"));
        let serve = Serve(child);
        let mut lines = stderr.lines();
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| Some(line.split("cuzk listening on ").nth(1)?.trim().to_string()))
            .expect("the daemon says where it listens");
        let log = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
        (serve, url, log)
    }
}

pub struct TestDaemon {
    pub daemon: RunningDaemon,
    pub url: String,
    _dir: tempfile::TempDir,
    /// With `CUZK_TEST_STORE=postgres`: the daemon's own schema (a fleet of
    /// one node), dropped after it.
    _schema: Option<PgSchema>,
}

pub fn test_config(dir: &std::path::Path) -> Config {
    let mut config =
        Config { listen: "127.0.0.1:0".into(), data_dir: dir.to_path_buf(), ..Config::default() };
    config.scheduler.synthesis_threads = 2;
    config.scheduler.budget = Budget::Bytes(1 << 30);
    config.cpu.threads_per_device = 2;
    config
}

/// A daemon with the test settings as `edit` changes them. With
/// `CUZK_TEST_STORE=postgres` (and the test cluster's CUZK_TEST_PG_URL) its
/// job store is a schema of its own on PostgreSQL, which makes it a fleet
/// node: the same tests, the other store.
pub fn start_with(edit: impl FnOnce(&mut Config)) -> TestDaemon {
    let _ = env_logger::builder().is_test(true).try_init();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = test_config(dir.path());
    let schema = match std::env::var("CUZK_TEST_STORE").as_deref() {
        Ok("postgres") => {
            Some(PgSchema::create("a test daemon").expect("CUZK_TEST_STORE=postgres needs CUZK_TEST_PG_URL"))
        }
        _ => None,
    };
    if let Some(schema) = &schema {
        config.store.url = Some(schema.url.clone());
        config.fleet.node = Some("test".into());
    }
    edit(&mut config);
    let daemon = spawn(config, CircuitRegistry::builtin()).expect("daemon starts");
    let url = daemon.url();
    TestDaemon { daemon, url, _dir: dir, _schema: schema }
}

/// A daemon started from `config`, returned once `/readyz` answers 200:
/// unfinished stored jobs are rebuilt after the listener is up, and until
/// then a lookup answers 503 recovering (never 404).
pub fn spawn_ready(config: Config) -> RunningDaemon {
    let daemon = spawn(config, CircuitRegistry::builtin()).expect("daemon starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while response(agent().get(&format!("{}/readyz", daemon.url())).call()).0 != 200 {
        assert!(Instant::now() < deadline, "stored jobs not rebuilt within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon
}

pub fn start() -> TestDaemon {
    start_with(|_| {})
}

pub fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build()
}

/// (status, JSON body) of any response, errors included.
pub fn response(result: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    let response = match result {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("transport error: {e}"),
    };
    let status = response.status();
    let text = response.into_string().expect("body");
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("body is not JSON: {text:?}"));
    (status, body)
}

impl TestDaemon {
    pub fn get(&self, path: &str) -> (u16, Value) {
        response(agent().get(&format!("{}{path}", self.url)).call())
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        response(agent().post(&format!("{}{path}", self.url)).send_json(body))
    }

    pub fn post_raw(&self, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        response(
            agent().post(&format!("{}{path}", self.url)).set("Content-Type", content_type).send_bytes(body),
        )
    }

    /// Polls a job until it reaches a final status.
    pub fn wait(&self, id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, job) = self.get(&format!("/v1/jobs/{id}"));
            assert_eq!(status, 200, "{job}");
            if matches!(job["status"].as_str(), Some("done" | "failed" | "cancelled")) {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id} still {} after {timeout:?}", job["status"]);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn metrics(&self) -> String {
        agent().get(&format!("{}/metrics", self.url)).call().expect("metrics").into_string().expect("text")
    }
}

/// The value of one series in Prometheus text (0 when absent).
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
}

/// A schema of its own in the test database, so that tests run in parallel
/// on one PostgreSQL; dropped with everything in it at the end. The
/// database is `CUZK_TEST_PG_URL` (a URL), which scripts/pg-test-cluster.sh
/// sets for the command it runs.
pub struct PgSchema {
    /// The test database's URL with this schema first on the search path:
    /// what a store or a daemon under test is given.
    pub url: cuzk::postgres::StoreUrl,
    /// To drop the schema at the end.
    admin_url: String,
    name: String,
}

impl PgSchema {
    /// A new empty schema; None (the test says it skipped) without
    /// CUZK_TEST_PG_URL.
    pub fn create(test: &str) -> Option<Self> {
        let Ok(admin_url) = std::env::var("CUZK_TEST_PG_URL") else {
            eprintln!("{test}: skipped, CUZK_TEST_PG_URL is not set (scripts/pg-test-cluster.sh sets it)");
            return None;
        };
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut admin =
            postgres::Client::connect(&admin_url, postgres::NoTls).expect("the test database is up");
        admin.batch_execute(&format!("CREATE SCHEMA {name}")).expect("schema created");
        let separator = if admin_url.contains('?') { '&' } else { '?' };
        let url = format!("{admin_url}{separator}options=-c%20search_path%3D{name}");
        Some(Self { url: cuzk::postgres::StoreUrl::new(url), admin_url, name })
    }

    /// A connection to the schema, for looking at or changing its tables.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(self.url.secret(), postgres::NoTls).expect("the test database is up")
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        // Best effort: the throwaway cluster goes at exit anyway.
        if let Ok(mut admin) = postgres::Client::connect(&self.admin_url, postgres::NoTls) {
            let _ = admin.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
        }
    }
}

/// Runs `CUZK_TEST_PG_CTL` with `action` (`stop -m fast`, `start`,
/// `restart -m fast`) on the test cluster.
pub fn pg_ctl(action: &str) {
    let command = std::env::var("CUZK_TEST_PG_CTL").expect("CUZK_TEST_PG_CTL is set with CUZK_TEST_PG_URL");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} {action} > /dev/null"))
        .status()
        .expect("sh runs");
    assert!(status.success(), "pg_ctl {action}: {status}");
}

/// A job's record as a store test writes it: every field set, so that a
/// round trip shows each one kept.
pub fn record(id: &str, seq: u64) -> JobRecord {
    JobRecord {
        id: JobId(id.into()),
        seq,
        priority: Priority::High,
        partitions: 3,
        circuit: "mimc-chain".into(),
        circuit_id: "mimc-chain-k4".into(),
        idempotency_key: Some(format!("key-{id}")),
        tenant: cuzk_actors::Tenant(format!("tenant-{id}")),
        submitted_unix_ms: 1_700_000_000_000 + seq,
        deadline_ms: Some(5000),
        request: format!(r#"{{"circuit":"mimc-chain","seed":{seq}}}"#),
        request_digest: None,
    }
}

/// A proof whose bytes say which write it came from.
pub fn proof(byte: u8) -> ProofRecord {
    ProofRecord { proof: vec![byte; 192], public_inputs: vec![vec![byte, 1], vec![byte, 2]] }
}
