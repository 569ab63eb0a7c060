//! Helpers shared by the integration tests: a daemon on an ephemeral
//! loopback port with its own data directory, and a small HTTP client.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use cuzk::config::{Budget, Config};
use cuzk::server::{spawn, RunningDaemon};
use cuzk_kernels::circuits::CircuitRegistry;
use serde_json::Value;

pub struct TestDaemon {
    pub daemon: RunningDaemon,
    pub url: String,
    _dir: tempfile::TempDir,
}

pub fn test_config(dir: &std::path::Path) -> Config {
    let mut config = Config {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.scheduler.synthesis_threads = 2;
    config.scheduler.budget = Budget::Bytes(1 << 30);
    config.cpu.threads_per_device = 2;
    config
}

pub fn start_with(edit: impl FnOnce(&mut Config)) -> TestDaemon {
    let _ = env_logger::builder().is_test(true).try_init();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = test_config(dir.path());
    edit(&mut config);
    let daemon = spawn(config, CircuitRegistry::builtin()).expect("daemon starts");
    let url = daemon.url();
    TestDaemon {
        daemon,
        url,
        _dir: dir,
    }
}

pub fn start() -> TestDaemon {
    start_with(|_| {})
}

pub fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build()
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
            agent()
                .post(&format!("{}{path}", self.url))
                .set("Content-Type", content_type)
                .send_bytes(body),
        )
    }

    /// Polls a job until it reaches a final status.
    pub fn wait(&self, id: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, job) = self.get(&format!("/v1/jobs/{id}"));
            assert_eq!(status, 200, "{job}");
            if matches!(
                job["status"].as_str(),
                Some("done" | "failed" | "cancelled")
            ) {
                return job;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} still {} after {timeout:?}",
                job["status"]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn metrics(&self) -> String {
        agent()
            .get(&format!("{}/metrics", self.url))
            .call()
            .expect("metrics")
            .into_string()
            .expect("text")
    }
}

/// The value of one series in Prometheus text (0 when absent).
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}
