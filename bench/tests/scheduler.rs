//! `cuzk-bench scheduler`, run briefly: the report is sane and the chart is
//! drawn. Timing targets belong to the benchmark, not to this test.

use clap::Parser;
use cuzk_bench::scheduler::{measure, SchedulerBenchArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SchedulerBenchArgs,
}

#[test]
fn a_short_run_reports_sane_figures_and_draws_the_chart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let svg = dir.path().join("scheduler.svg");
    let cli = Cli::parse_from([
        "bench",
        "--devices",
        "1",
        "--duration",
        "2",
        "--warmup",
        "1",
        "--time-scale",
        "0.005",
        "--svg",
        svg.to_str().expect("UTF-8 path"),
    ]);
    let report = measure(&cli.args).expect("the benchmark runs");

    assert_eq!(report.devices.len(), 1);
    let device = &report.devices[0];
    assert!(device.busy_fraction > 0.0 && device.busy_fraction <= 1.0, "{report:?}");
    assert!(device.idle_gap_p50_ms >= 0.0, "{report:?}");
    assert!(device.idle_gap_p99_ms >= device.idle_gap_p50_ms, "{report:?}");
    assert!(device.idle_gap_max_ms >= device.idle_gap_p99_ms, "{report:?}");
    assert!(device.partitions > 0, "{report:?}");
    assert!(report.throughput_ratio_to_bound > 0.0, "{report:?}");
    assert!(
        report.budget_peak_bytes > 0 && report.budget_peak_bytes <= report.budget_limit_bytes,
        "{report:?}"
    );
    assert!(report.buffer.samples > 0, "{report:?}");

    let json = serde_json::to_value(&report).expect("the report serializes");
    for field in ["busy_fraction", "idle_gap_p50_ms", "idle_gap_p99_ms", "idle_gap_max_ms", "device"] {
        assert!(json["devices"][0].get(field).is_some(), "no devices[0].{field} in {json}");
    }
    for field in ["throughput_ratio_to_bound", "budget_peak_bytes", "budget_limit_bytes"] {
        assert!(json.get(field).is_some(), "no {field} in {json}");
    }

    let chart = std::fs::read_to_string(&svg).expect("the chart is written");
    assert!(chart.contains("<svg"), "not an SVG: {}", &chart[..chart.len().min(200)]);
}
