//! gRPC calls (Curio's cuzk.v1.ProvingEngine): answered, by method, status
//! code and proof result, each refusal and FAILED answer logged once with
//! its request; waiting on jobs now; Curio requests whose `sector_size`
//! was ignored; and which Curio request became which job. A gRPC job's
//! partitions are counted as every job's are: this is the transport's own
//! part.

use cuzk_actors::telemetry::{counter, gauge, MetricDef};
use cuzk_actors::JobId;
use cuzk_filecoin::Kind;

/// `cuzk_grpc_calls_total`: every gRPC answer, by method, status code and
/// proof result, so that Curio's failures show beside the HTTP API's.
pub const GRPC_CALLS: MetricDef = counter(
    "cuzk_grpc_calls_total",
    "calls",
    &["method", "code", "result"],
    "gRPC calls answered, by method (Prove, SubmitProof, ...), status code (OK, INVALID_ARGUMENT, ...) and the proof result an OK answer of Prove or AwaitProof carries (completed, failed, cancelled, timeout; none for every other answer): a FAILED proof is code OK, result failed.",
);
/// `cuzk_grpc_sector_size_ignored_total`: Curio requests proved by their
/// registered proof although their `sector_size` said otherwise.
pub const GRPC_SECTOR_SIZE_IGNORED: MetricDef = counter(
    "cuzk_grpc_sector_size_ignored_total",
    "requests",
    &["kind"],
    "Curio requests whose sector_size disagrees with their registered_proof, by kind (winning-post, window-post, snap-prove): the registered proof decides and the request is proved, as by the original daemon (Curio's cuzk-bench sends 32 GiB for every request).",
);
/// `cuzk_grpc_waiting_calls`: Prove and AwaitProof calls holding a
/// connection while they wait on a job.
pub const GRPC_WAITING: MetricDef = gauge(
    "cuzk_grpc_waiting_calls",
    "calls",
    &[],
    "Prove and AwaitProof calls waiting on a job now (at most grpc.max_waiting_calls per tenant).",
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

/// The methods whose OK answer carries a proof result, and the results
/// each can carry (a `Prove` waits for the end, so never times out).
const RESULTS: [(&str, &[&str]); 2] = [
    ("Prove", &["completed", "failed", "cancelled"]),
    ("AwaitProof", &["completed", "failed", "cancelled", "timeout"]),
];

/// The kinds whose requests carry a `sector_size` the daemon reads (a
/// PoRep's comes from its C1 output).
const SIZED_KINDS: [Kind; 3] = [Kind::WinningPost, Kind::WindowPost, Kind::EmptySectorUpdate];

/// Starts every method's OK count (of every result it can carry), the
/// ignored sector sizes and the waiting calls at zero, so that rates and
/// dashboards have a series before the first call (and a daemon without a
/// gRPC listener exports them too, as zero).
pub(super) fn start_at_zero() {
    for method in GRPC_METHODS {
        let results = RESULTS.iter().find(|(m, _)| *m == method).map_or(&["none"][..], |(_, r)| r);
        for result in results {
            metrics::counter!(GRPC_CALLS.name, "method" => method, "code" => "OK", "result" => *result)
                .absolute(0);
        }
    }
    for kind in SIZED_KINDS {
        metrics::counter!(GRPC_SECTOR_SIZE_IGNORED.name, "kind" => kind.api_name()).absolute(0);
    }
    metrics::gauge!(GRPC_WAITING.name).set(0.0);
}

/// A gRPC call was answered.
pub struct GrpcCall<'a> {
    /// The method, as the service names it.
    pub method: &'a str,
    /// Its status code, as gRPC names it (`OK`, `NOT_FOUND`, ...).
    pub code: &'a str,
    /// The proof result an OK answer carries (`completed`, `failed`, ...),
    /// `none` for an answer without one.
    pub result: &'a str,
}

impl GrpcCall<'_> {
    /// Counts the call in `cuzk_grpc_calls_total`.
    pub fn emit(&self) {
        metrics::counter!(GRPC_CALLS.name, "method" => self.method.to_string(), "code" => self.code.to_string(), "result" => self.result.to_string())
            .increment(1);
    }
}

/// A call the daemon refused (an error status) or answered with a FAILED
/// result: logged once, with the request it was for and the reason, so
/// that an operator sees every proof Curio did not get.
pub struct GrpcNotProved<'a> {
    /// The method, as the service names it.
    pub method: &'a str,
    /// What the call was about: `request "<id>"` or `job <id>`.
    pub subject: &'a str,
    /// The status code (`FAILED` for an OK answer whose result is FAILED).
    pub code: &'a str,
    /// The status message or the proof's error text: why it was not proved.
    pub reason: &'a str,
}

impl GrpcNotProved<'_> {
    /// Logs the refusal as a warning.
    pub fn emit(&self) {
        log::warn!("gRPC {} of {}: {}: {}", self.method, self.subject, self.code, self.reason);
    }
}

/// A Curio request whose `sector_size` disagrees with its registered
/// proof: proved as the registered proof says, as the original daemon does.
pub struct SectorSizeIgnored<'a> {
    /// Curio's request id, so the operator can find the request.
    pub request_id: &'a str,
    /// The kind the registered proof names, the metric's label.
    pub kind: Kind,
    /// The request's `sector_size`.
    pub given: u64,
    /// Its registered proof's, which the proof is made for.
    pub expected: u64,
    /// Curio's `registered_proof` number, which decided the kind and size.
    pub registered_proof: u64,
}

impl SectorSizeIgnored<'_> {
    /// Logs a warning and counts it in `cuzk_grpc_sector_size_ignored_total`.
    pub fn emit(&self) {
        log::warn!(
            "gRPC: request {:?} ({}): sector_size {} disagrees with registered_proof {} ({} bytes); ignored, the registered proof decides",
            self.request_id,
            self.kind.api_name(),
            self.given,
            self.registered_proof,
            self.expected
        );
        metrics::counter!(GRPC_SECTOR_SIZE_IGNORED.name, "kind" => self.kind.api_name()).increment(1);
    }
}

/// A call began or stopped waiting on a job.
pub struct GrpcWaiting {
    /// Calls waiting now.
    pub calls: usize,
}

impl GrpcWaiting {
    /// Sets `cuzk_grpc_waiting_calls`.
    pub fn emit(&self) {
        metrics::gauge!(GRPC_WAITING.name).set(self.calls as f64);
    }
}

/// A Curio request was given a job: a new one, or one in flight with the
/// same request and inputs.
pub struct GrpcJob<'a> {
    /// Curio's request id (its task's, reused on retries).
    pub request_id: &'a str,
    /// The job the request was given.
    pub job: &'a JobId,
    /// The daemon's kind.
    pub circuit: &'a str,
    /// How: `SubmitProof`, `Prove`, or `Prove (joined)`.
    pub call: &'a str,
}

impl GrpcJob<'_> {
    /// Logs which request became which job, for tracing Curio's tasks.
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
