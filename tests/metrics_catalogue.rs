//! The metrics catalogue, docs/metrics.md and a live `/metrics` agree.

mod common;

use std::time::Duration;

use cuzk::telemetry::CATALOGUE;
use serde_json::json;

fn catalogue_table() -> String {
    let mut table = String::from("| name | type | unit | labels | help |\n| --- | --- | --- | --- | --- |\n");
    for def in CATALOGUE {
        let labels = def.labels.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ");
        table.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            def.name,
            def.kind.as_str(),
            def.unit,
            labels,
            def.help
        ));
    }
    table
}

#[test]
fn docs_list_exactly_the_catalogue() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    let expected = catalogue_table();
    assert!(docs.contains(&expected), "docs/metrics.md is out of date; its table must read:\n\n{expected}");
}

/// The catalogue joins the scheduler's part and the daemon's, declared in two
/// crates: a name in both would be one series fed by two meanings.
#[test]
fn every_metric_is_declared_once() {
    let mut names = std::collections::BTreeSet::new();
    for def in CATALOGUE {
        assert!(names.insert(def.name), "{} is declared twice", def.name);
    }
}

#[test]
fn catalogue_follows_prometheus_conventions() {
    for def in CATALOGUE {
        assert!(def.name.starts_with("cuzk_"), "{}", def.name);
        let is_counter = def.kind.as_str() == "counter";
        assert_eq!(
            def.name.ends_with("_total"),
            is_counter,
            "{}: counters and only counters end in _total",
            def.name
        );
        if def.unit == "seconds" {
            assert!(def.name.contains("_seconds"), "{}", def.name);
        }
        if def.unit == "bytes" {
            assert!(def.name.ends_with("_bytes"), "{}", def.name);
        }
        if def.unit == "ratio" {
            assert!(def.name.ends_with("_ratio"), "{}", def.name);
        }
        assert!(!def.labels.iter().any(|l| l.contains("job")), "{}: no job ids as labels", def.name);
        assert!(!def.help.is_empty());
    }
}

/// A dashboard charts these before anything happened: every known label
/// value is exported as 0 before its first event. (The recorder is the
/// process's, shared with the other tests here, which submit normal jobs
/// that end done: these label values are ones they never touch.)
#[test]
fn labelled_counters_start_at_zero() {
    let d = common::start();
    let text = d.metrics();
    for series in [
        r#"cuzk_jobs_deadline_missed_total{priority="critical"} 0"#,
        r#"cuzk_jobs_deadline_missed_total{priority="low"} 0"#,
        r#"cuzk_jobs_submitted_total{priority="critical"} 0"#,
        r#"cuzk_jobs_finished_total{outcome="failed"} 0"#,
        r#"cuzk_partitions_finished_total{outcome="cancelled"} 0"#,
        r#"cuzk_partition_retries_total{stage="proving"} 0"#,
        r#"cuzk_token_reloads_total{outcome="failed"} 0"#,
        // Without tokens every caller is the tenant "default".
        r#"cuzk_tenant_refusals_total{tenant="default",reason="rate_limited"} 0"#,
        // Curio's answers and requests, and critical priorities lowered
        // (issue 40), before the first.
        r#"cuzk_grpc_calls_total{method="Prove",code="OK",result="failed"} 0"#,
        r#"cuzk_grpc_sector_size_ignored_total{kind="winning-post"} 0"#,
        r#"cuzk_priority_lowered_total{kind="porep-c2"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == series), "{series} missing:\n{text}");
    }
}

/// Every series a dashboard queries is in a fresh daemon's first scrape,
/// histograms included (issue 40: the idle-gap panels said "No data" until
/// the first gap). A process of its own: this binary's recorder is shared
/// with tests that run jobs.
#[test]
fn a_fresh_daemon_exports_every_series_the_dashboards_query() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url, _log) = common::Serve::logged(
        std::process::Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["serve", "--backend", "sim", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data")),
    );
    let text = common::agent().get(&format!("{url}/metrics")).call().unwrap().into_string().unwrap();
    let dashboards = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards");
    let mut queried = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dashboards).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let json = std::fs::read_to_string(&path).unwrap();
            for (at, _) in json.match_indices("cuzk_") {
                let name: String = json[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                queried.insert(name);
            }
        }
    }
    assert!(queried.contains("cuzk_gpu_idle_gap_seconds_bucket"), "{queried:?}");
    let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let missing: Vec<&String> = queried
        .iter()
        .filter(|name| {
            // A histogram's own name (in a panel's description) is there as its buckets.
            let prefixes = [format!("{name}{{"), format!("{name} "), format!("{name}_bucket{{")];
            !prefixes.iter().any(|prefix| samples.iter().any(|l| l.starts_with(prefix.as_str())))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboards query {missing:?}, which have no series on a fresh daemon:\n{text}"
    );
}

#[test]
fn a_live_scrape_shows_every_catalogued_metric_and_nothing_else() {
    let d = common::start();
    let (status, accepted) = d.post(
        "/v1/jobs",
        // A deadline it cannot meet, so that the deadline counter exists too.
        &json!({"circuit": "mimc-chain", "params": {"log2_constraints": 5}, "partitions": 2, "seed": 3, "deadline_ms": 0}),
    );
    assert_eq!(status, 202);
    let job = d.wait(accepted["id"].as_str().unwrap(), Duration::from_secs(120));
    assert_eq!(job["status"], "done");
    let text = d.metrics();
    for def in CATALOGUE {
        assert!(
            text.contains(&format!("# TYPE {} {}", def.name, def.kind.as_str())),
            "{} ({}) missing from /metrics:\n{text}",
            def.name,
            def.kind.as_str()
        );
    }
    for line in text.lines().filter(|l| l.starts_with("# TYPE cuzk_")) {
        let name = line.split_whitespace().nth(2).unwrap();
        assert!(CATALOGUE.iter().any(|d| d.name == name), "{name} is exported but not catalogued");
    }
}
