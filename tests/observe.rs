//! `/v1/workers`, `/v1/timeline` (JSON and CSV), the GPU time metrics and the
//! built-in page, against a daemon that has proved a job on the sim backend.

mod common;

use std::time::Duration;

use common::{agent, metric_value, TestDaemon};
use cuzk::config::{BackendKind, Budget};
use serde_json::{json, Value};

const PARTITIONS: u64 = 12;

fn daemon_with_finished_job() -> (TestDaemon, String) {
    let d = common::start_with(|c| {
        c.backend = BackendKind::Sim;
        c.sim.profile = "winning-post".into();
        c.sim.time_scale = 0.05;
        c.sim.devices = 2;
        c.scheduler.budget = Budget::Bytes(1 << 40);
    });
    let (status, accepted) = d.post(
        "/v1/jobs",
        &json!({"circuit": "mimc-chain", "params": {"log2_constraints": 5}, "partitions": PARTITIONS, "seed": 1}),
    );
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&id, Duration::from_secs(60))["status"], "done");
    (d, id)
}

fn get_text(d: &TestDaemon, path: &str, accept: &str) -> (u16, String, String) {
    let response =
        agent().get(&format!("{}{path}", d.url)).set("Accept", accept).call().expect("request succeeds");
    let content_type = response.content_type().to_string();
    (response.status(), content_type, response.into_string().unwrap())
}

#[test]
fn workers_timeline_and_metrics_agree_on_every_partition() {
    let (d, job) = daemon_with_finished_job();

    let (status, body) = d.get("/v1/workers?spans=1000");
    assert_eq!(status, 200, "{body}");
    let workers = body["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 6, "2 devices x (2 general + 1 critical) workers: {body}");
    for w in workers {
        let lane = if w["worker"].as_u64().unwrap() < 2 { "general" } else { "critical" };
        assert_eq!(w["lane"], lane, "{w}");
        if lane == "critical" {
            // The job is not critical: the lane never proved, and waited
            // for critical work that never came.
            assert!(w["recent_spans"].as_array().unwrap().is_empty(), "{w}");
            assert_eq!(w["idle_cause"], "no_work", "{w}");
        }
    }
    let spans: Vec<&Value> = workers.iter().flat_map(|w| w["recent_spans"].as_array().unwrap()).collect();
    assert_eq!(spans.len() as u64, PARTITIONS, "{body}");
    let mut partitions: Vec<u64> = spans.iter().map(|s| s["partition"].as_u64().unwrap()).collect();
    partitions.sort();
    assert_eq!(partitions, (0..PARTITIONS).collect::<Vec<_>>());
    for span in &spans {
        assert_eq!(span["job"], job.as_str());
        assert_eq!(span["ok"], true);
        let phases: Vec<&str> =
            span["phases"].as_array().unwrap().iter().map(|p| p[0].as_str().unwrap()).collect();
        assert!(phases.contains(&"device") && phases.ends_with(&["handoff"]), "{span}");
    }

    // The metrics count the same busy time the spans do.
    let text = d.metrics();
    for w in workers {
        let labels = format!("device=\"{}\",worker=\"{}\"", w["device"], w["worker"]);
        let busy = metric_value(&text, &format!("cuzk_gpu_busy_seconds_total{{{labels}}}"));
        let span_seconds: f64 = w["recent_spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["duration_ms"].as_f64().unwrap() / 1e3)
            .sum();
        assert!((busy - span_seconds).abs() < 0.01, "{labels}: metric {busy}, spans {span_seconds}");
        for cause in ["no_work", "synthesis", "budget", "paced", "handoff"] {
            assert!(
                text.contains(&format!("cuzk_gpu_idle_seconds_total{{{labels},cause=\"{cause}\"}}")),
                "no {cause} series for {labels}"
            );
        }
        let states: f64 = ["proving", "no_work", "synthesis", "budget", "paced", "handoff"]
            .iter()
            .map(|s| metric_value(&text, &format!("cuzk_gpu_worker_state{{{labels},state=\"{s}\"}}")))
            .sum();
        assert_eq!(states, 1.0, "{labels}: exactly one state is 1");
    }
    // The device's kernel-active time: the sim's device runs one call at a
    // time, so it is the sum of its spans' "device" phases, and at most the
    // busy time of its workers together.
    for device in 0..2 {
        let on_device = workers.iter().filter(|w| w["device"] == device);
        let device_ms: f64 = (on_device.clone())
            .flat_map(|w| w["recent_spans"].as_array().unwrap())
            .flat_map(|s| s["phases"].as_array().unwrap())
            .filter(|p| p[0] == "device")
            .map(|p| p[1].as_f64().unwrap())
            .sum();
        let busy: f64 = on_device
            .map(|w| {
                let labels = format!("device=\"{}\",worker=\"{}\"", w["device"], w["worker"]);
                metric_value(&text, &format!("cuzk_gpu_busy_seconds_total{{{labels}}}"))
            })
            .sum();
        let active =
            metric_value(&text, &format!("cuzk_gpu_kernel_active_seconds_total{{device=\"{device}\"}}"));
        assert!(active > 0.0, "device {device}: no kernel-active time");
        assert!(
            (active - device_ms / 1e3).abs() < 0.01,
            "device {device}: metric {active}, device phases {device_ms} ms"
        );
        assert!(
            active <= busy,
            "device {device}: kernel-active {active} s beyond its workers' busy {busy} s"
        );
    }
    let gaps: f64 = workers
        .iter()
        .map(|w| {
            metric_value(
                &text,
                &format!(
                    "cuzk_gpu_idle_gap_seconds_count{{device=\"{}\",worker=\"{}\"}}",
                    w["device"], w["worker"]
                ),
            )
        })
        .sum();
    assert_eq!(gaps as u64, PARTITIONS, "one idle gap ends at each span start");

    // JSON and CSV timelines list the same busy spans.
    let (status, timeline) = d.get("/v1/timeline?since=0");
    assert_eq!(status, 200);
    let entries = timeline["entries"].as_array().unwrap();
    let busy = entries.iter().filter(|e| e["kind"] == "busy").count() as u64;
    assert_eq!(busy, PARTITIONS);
    assert!(entries.iter().any(|e| e["kind"] == "idle" && e["cause"] == "no_work"));
    for e in entries {
        let lane = if e["worker"].as_u64().unwrap() < 2 { "general" } else { "critical" };
        assert_eq!(e["lane"], lane, "{e}");
    }
    let (status, content_type, csv) = get_text(&d, "/v1/timeline?since=0", "text/csv");
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(cuzk::http::workers::CSV_HEADER));
    let busy_lines: Vec<&str> = lines.filter(|l| l.split(',').nth(5) == Some("busy")).collect();
    assert_eq!(busy_lines.len() as u64, PARTITIONS, "{csv}");
    assert!(busy_lines.iter().all(|l| l.contains(&job) && l.contains("device=")));
}

#[test]
fn bad_queries_are_400_with_a_reason() {
    let d = common::start();
    for path in [
        "/v1/timeline?since=abc",
        "/v1/timeline?since=99999999999999",
        "/v1/timeline?since=2000&until=1000",
        "/v1/timeline?format=xml",
        "/v1/timeline?window=5",
        "/v1/workers?spans=1000000",
        "/v1/workers?spans=-1",
    ] {
        let (status, body) = d.get(path);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}: {body}");
    }
}

#[test]
fn the_built_in_page_is_self_contained() {
    let d = common::start();
    let (status, content_type, html) = get_text(&d, "/", "text/html");
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(html.contains("/v1/timeline") && html.contains("/v1/workers"));
    // No external assets: no scripts, styles or images fetched from elsewhere.
    for external in ["src=", "<link", "@import", "url("] {
        assert!(!html.contains(external), "the page loads {external}");
    }
}
