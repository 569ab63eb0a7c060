//! gRPC calls (Curio's cuzk.v1.ProvingEngine): answered, by method and
//! status code; waiting on jobs now; and which Curio request became which
//! job. A gRPC job's partitions are counted as every job's are: this is
//! the transport's own part.

use cuzk_actors::telemetry::{counter, gauge, MetricDef};
use cuzk_actors::JobId;

pub const GRPC_CALLS: MetricDef = counter(
    "cuzk_grpc_calls_total",
    "calls",
    &["method", "code"],
    "gRPC calls answered, by method (Prove, SubmitProof, ...) and status code (OK, INVALID_ARGUMENT, ...; a FAILED proof is OK).",
);
pub const GRPC_WAITING: MetricDef = gauge(
    "cuzk_grpc_waiting_calls",
    "calls",
    &[],
    "Prove and AwaitProof calls waiting on a job now (at most grpc.max_waiting_calls).",
);

/// The service's methods, as calls are counted by.
pub const GRPC_METHODS: [&str; 8] = [
    "SubmitProof",
    "AwaitProof",
    "Prove",
    "CancelProof",
    "GetStatus",
    "GetMetrics",
    "PreloadSRS",
    "EvictSRS",
];

/// Starts every method's OK count and the waiting calls at zero, so that
/// rates and dashboards have a series before the first call (and a daemon
/// without a gRPC listener exports them too, as zero).
pub(super) fn start_at_zero() {
    for method in GRPC_METHODS {
        metrics::counter!(GRPC_CALLS.name, "method" => method, "code" => "OK").absolute(0);
    }
    metrics::gauge!(GRPC_WAITING.name).set(0.0);
}

/// A gRPC call was answered.
pub struct GrpcCall<'a> {
    /// The method, as the service names it.
    pub method: &'a str,
    /// Its status code, as gRPC names it (`OK`, `NOT_FOUND`, ...).
    pub code: &'a str,
}

impl GrpcCall<'_> {
    pub fn emit(&self) {
        metrics::counter!(GRPC_CALLS.name, "method" => self.method.to_string(), "code" => self.code.to_string())
            .increment(1);
    }
}

/// A call began or stopped waiting on a job.
pub struct GrpcWaiting {
    /// Calls waiting now.
    pub calls: usize,
}

impl GrpcWaiting {
    pub fn emit(&self) {
        metrics::gauge!(GRPC_WAITING.name).set(self.calls as f64);
    }
}

/// A Curio request was given a job: a new one, or one in flight with the
/// same request and inputs.
pub struct GrpcJob<'a> {
    /// Curio's request id (its task's, reused on retries).
    pub request_id: &'a str,
    pub job: &'a JobId,
    /// The daemon's kind.
    pub circuit: &'a str,
    /// How: `SubmitProof`, `Prove`, or `Prove (joined)`.
    pub call: &'a str,
}

impl GrpcJob<'_> {
    pub fn emit(&self) {
        log::info!(
            "gRPC {}: request {:?} ({}) is job {}",
            self.call,
            self.request_id,
            self.circuit,
            self.job
        );
    }
}
