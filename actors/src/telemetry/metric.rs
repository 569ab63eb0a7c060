//! What a metric is: the definition every part of the catalogue is written
//! in (the scheduler's here, the daemon's in its own crate), and the
//! constructors and default buckets both parts declare their metrics with.

/// How a metric is recorded and which Prometheus type it is exported as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// A count of whole events, exported as a counter.
    Counter,
    /// A counter of fractional amounts (seconds). The `metrics` crate's
    /// counters are integers, so these are kept as gauges that only ever
    /// increase, and the daemon's `fix_exposition` declares them as counters.
    FloatCounter,
    /// A value that goes up and down, set at each change.
    Gauge,
    /// A distribution of observations over the metric's buckets.
    Histogram,
}

impl MetricKind {
    /// The Prometheus type.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter | MetricKind::FloatCounter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One metric of the catalogue: everything docs/metrics.md's table shows
/// of it, and the buckets the exporter is set up with. `Copy`, so that the
/// daemon can join the catalogue's parts into one array at compile time.
#[derive(Clone, Copy, Debug)]
pub struct MetricDef {
    /// The exported name; emit sites record under it.
    pub name: &'static str,
    /// How it is recorded, and so its Prometheus type.
    pub kind: MetricKind,
    /// What one unit of its value is (docs' table; Prometheus' naming
    /// rules are checked against it).
    pub unit: &'static str,
    /// Its label names, in the order docs list them.
    pub labels: &'static [&'static str],
    /// The `# HELP` text, also docs' description.
    pub help: &'static str,
    /// Upper bounds of histogram buckets (empty for other kinds).
    pub buckets: &'static [f64],
}

/// Stage and latency buckets: 1 ms to 10 minutes.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0,
];

/// A metric of a kind without buckets.
const fn unbucketed(
    kind: MetricKind,
    name: &'static str,
    unit: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    MetricDef { name, kind, unit, labels, help, buckets: &[] }
}

/// A counter of whole events, in `unit`.
pub const fn counter(
    name: &'static str,
    unit: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    unbucketed(MetricKind::Counter, name, unit, labels, help)
}

/// A counter of seconds in fractions ([`MetricKind::FloatCounter`]).
pub const fn seconds_counter(
    name: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    unbucketed(MetricKind::FloatCounter, name, "seconds", labels, help)
}

/// A gauge of a value in `unit`.
pub const fn gauge(
    name: &'static str,
    unit: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    unbucketed(MetricKind::Gauge, name, unit, labels, help)
}

/// A histogram of seconds, bucketed from 1 ms to 10 minutes; a metric with
/// other buckets replaces them (`MetricDef { buckets, ..histogram(...) }`).
pub const fn histogram(name: &'static str, labels: &'static [&'static str], help: &'static str) -> MetricDef {
    MetricDef { name, kind: MetricKind::Histogram, unit: "seconds", labels, help, buckets: DURATION_BUCKETS }
}
