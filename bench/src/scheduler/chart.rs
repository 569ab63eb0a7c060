//! The `--svg` chart: worker and device lanes (the whole run, and a zoom on
//! the longest idle gap), the pacer's interval and the buffer against its
//! target.

use std::path::Path;

use plotters::prelude::*;

use super::observe::Run;
use super::plan::Plan;
use super::report::{device_phase, merge, Interval, SchedulerReport};

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 1200;
const STAGING: RGBColor = RGBColor(158, 202, 225);
const DEVICE_PHASE: RGBColor = RGBColor(33, 113, 181);
const DEVICE_BUSY: RGBColor = RGBColor(49, 163, 84);
const WARMUP: RGBColor = RGBColor(235, 235, 235);

/// One row of the lane charts: a name and its busy intervals, each with
/// its colour.
struct Lane {
    /// The row's label: a worker or a device.
    name: String,
    /// Busy intervals, each drawn in its colour.
    bars: Vec<(Interval, RGBColor)>,
}

/// One line of a line chart: (seconds, value) points.
struct Series<'a> {
    /// The legend's label.
    name: &'a str,
    /// (seconds since start, value), in time order.
    points: &'a [(f64, f64)],
    colour: RGBColor,
}

type Failure = String;

fn failed(e: impl std::fmt::Display) -> Failure {
    format!("drawing the chart: {e}")
}

/// Lanes of every worker (whole span light, device phase dark) and every
/// device (merged device phases); two views of them (the whole run, and
/// around the longest idle gap of the measured window); then the pacer
/// interval and the buffer against its target over time.
pub(super) fn draw(path: &Path, plan: &Plan, run: &Run, report: &SchedulerReport) -> Result<(), Failure> {
    let lanes = lanes(plan, run);
    let end = plan.window().1;
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(failed)?;
    let title = format!(
        "cuzk-bench scheduler: {} on {} devices x {} workers; busy {}",
        plan.profile.name,
        plan.args.devices,
        plan.args.workers_per_device,
        report
            .devices
            .iter()
            .map(|d| format!("{:.2}%", 100.0 * d.busy_fraction))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let root = root.titled(&title, ("sans-serif", 22)).map_err(failed)?;
    let panels = root.split_evenly((4, 1));
    draw_lanes(&panels[0], "worker and device lanes, whole run (grey: warm-up)", &lanes, (0.0, end), plan)?;
    let zoom = zoom_window(report, run, plan);
    draw_lanes(&panels[1], "zoom on the measured window's longest device idle gap", &lanes, zoom, plan)?;
    let interval: Vec<(f64, f64)> = run.samples.iter().map(|s| (s.at, s.pacer.interval_ms)).collect();
    draw_lines(
        &panels[2],
        "pacer interval (ms)",
        &[Series { name: "interval_ms", points: &interval, colour: RED }],
        end,
        plan,
    )?;
    let waiting: Vec<(f64, f64)> = run.samples.iter().map(|s| (s.at, s.waiting_gpu as f64)).collect();
    let target: Vec<(f64, f64)> = run.samples.iter().map(|s| (s.at, s.pacer.target_buffer as f64)).collect();
    draw_lines(
        &panels[3],
        "synthesized partitions waiting for a GPU worker",
        &[
            Series { name: "waiting_gpu", points: &waiting, colour: BLUE },
            Series { name: "target", points: &target, colour: BLACK },
        ],
        end,
        plan,
    )?;
    root.present().map_err(failed)
}

fn lanes(plan: &Plan, run: &Run) -> Vec<Lane> {
    let mut lanes = Vec::new();
    for device in 0..plan.args.devices {
        for worker in 0..plan.args.workers_per_device {
            let mut bars = Vec::new();
            for span in run.spans.iter().filter(|s| s.worker.device == device && s.worker.worker == worker) {
                bars.push((Interval { start: run.seconds(span.start), end: run.seconds(span.end) }, STAGING));
                bars.extend(device_phase(span, run).map(|phase| (phase, DEVICE_PHASE)));
            }
            lanes.push(Lane { name: format!("gpu{device}/w{worker}"), bars });
        }
        let phases =
            run.spans.iter().filter(|s| s.worker.device == device).filter_map(|s| device_phase(s, run));
        let bars = merge(phases.collect()).into_iter().map(|i| (i, DEVICE_BUSY)).collect();
        lanes.push(Lane { name: format!("device {device}"), bars });
    }
    lanes
}

/// Forty mean device phases around the longest idle gap in the window.
fn zoom_window(report: &SchedulerReport, run: &Run, plan: &Plan) -> (f64, f64) {
    let (from, to) = plan.window();
    let longest = (0..plan.args.devices)
        .flat_map(|device| {
            let phases = run.spans.iter().filter(move |s| s.worker.device == device);
            let busy = merge(phases.filter_map(|s| device_phase(s, run)).collect());
            busy.windows(2)
                .map(|pair| (pair[1].start - pair[0].end, pair[0].end))
                .filter(|(_, at)| *at >= from && *at <= to)
                .collect::<Vec<_>>()
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let half = 20.0 * report.mean_device_ms / 1e3;
    let centre = longest.map(|(_, at)| at).unwrap_or((from + to) / 2.0);
    ((centre - half).max(0.0), centre + half)
}

fn draw_lanes<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    lanes: &[Lane],
    (from, to): (f64, f64),
    plan: &Plan,
) -> Result<(), Failure> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(80)
        .build_cartesian_2d(from..to, (0..lanes.len() as i32).into_segmented())
        .map_err(failed)?;
    let names: Vec<&str> = lanes.iter().map(|l| l.name.as_str()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("seconds since start")
        .y_labels(lanes.len())
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).map(|n| n.to_string()).unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(failed)?;
    let warmup_end = plan.window().0.min(to);
    if warmup_end > from {
        let whole = [(from, SegmentValue::Exact(0)), (warmup_end, SegmentValue::Exact(lanes.len() as i32))];
        chart.draw_series(std::iter::once(Rectangle::new(whole, WARMUP.filled()))).map_err(failed)?;
    }
    for (row, lane) in lanes.iter().enumerate() {
        let row = row as i32;
        let visible = lane.bars.iter().filter(|(i, _)| i.end > from && i.start < to);
        chart
            .draw_series(visible.map(|(interval, colour)| {
                let corners = [
                    (interval.start.max(from), SegmentValue::Exact(row)),
                    (interval.end.min(to), SegmentValue::Exact(row + 1)),
                ];
                let mut bar = Rectangle::new(corners, colour.filled());
                bar.set_margin(3, 3, 0, 0);
                bar
            }))
            .map_err(failed)?;
    }
    Ok(())
}

fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    series: &[Series],
    end: f64,
    plan: &Plan,
) -> Result<(), Failure> {
    let top = series.iter().flat_map(|line| line.points.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end, 0.0..top)
        .map_err(failed)?;
    chart.configure_mesh().x_desc("seconds since start").draw().map_err(failed)?;
    let warmup = [(0.0, 0.0), (plan.window().0, top)];
    chart.draw_series(std::iter::once(Rectangle::new(warmup, WARMUP.filled()))).map_err(failed)?;
    for line in series {
        let colour = line.colour;
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), colour.stroke_width(2)))
            .map_err(failed)?
            .label(line.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(failed)
}
