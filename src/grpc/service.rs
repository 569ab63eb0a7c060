//! The `ProvingEngine` service: each RPC takes the caller the token gate
//! admitted from its headers (`admit.rs`), runs its handler (`prove.rs`, `status.rs`,
//! `srs.rs`) and is counted by method, status code and proof result; a
//! refusal or a FAILED result is logged once, with the request it was for.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Code, Request, Response, Status};

use super::proto::await_proof_response::Status as Outcome;
use super::proto::proving_engine_server::ProvingEngine;
use super::proto::{
    AwaitProofRequest, AwaitProofResponse, CancelProofRequest, CancelProofResponse, EvictSrsRequest,
    EvictSrsResponse, GetMetricsRequest, GetMetricsResponse, GetStatusRequest, GetStatusResponse,
    PreloadSrsRequest, PreloadSrsResponse, ProveRequest, ProveResponse, SubmitProofRequest,
    SubmitProofResponse,
};
use super::state::GrpcState;
use super::{prove, srs, status};
use crate::telemetry::{GrpcCall, GrpcNotProved};
use crate::tenants::Caller;

/// The service tonic's generated server dispatches to.
pub struct ProvingService {
    /// What every RPC shares: the job seam, the gate, the waiting calls.
    pub state: Arc<GrpcState>,
}

#[tonic::async_trait]
impl ProvingEngine for ProvingService {
    async fn submit_proof(
        &self,
        request: Request<SubmitProofRequest>,
    ) -> Result<Response<SubmitProofResponse>, Status> {
        let subject = request_subject(&request.get_ref().request_id);
        self.answer("SubmitProof", subject, async {
            let caller = self.caller(&request)?;
            prove::submit(&self.state, caller, request.into_inner()).await
        })
        .await
    }

    async fn await_proof(
        &self,
        request: Request<AwaitProofRequest>,
    ) -> Result<Response<AwaitProofResponse>, Status> {
        let subject = job_subject(&request.get_ref().job_id);
        self.answer("AwaitProof", subject, async {
            let caller = self.caller(&request)?;
            let deadline = deadline(&request);
            prove::await_proof(&self.state, caller, request.into_inner(), deadline).await
        })
        .await
    }

    async fn prove(&self, request: Request<ProveRequest>) -> Result<Response<ProveResponse>, Status> {
        let subject = match &request.get_ref().submit {
            Some(submit) => request_subject(&submit.request_id),
            None => "a request without submit".into(),
        };
        self.answer("Prove", subject, async {
            let caller = self.caller(&request)?;
            let deadline = deadline(&request);
            prove::prove(&self.state, caller, request.into_inner(), deadline).await
        })
        .await
    }

    async fn cancel_proof(
        &self,
        request: Request<CancelProofRequest>,
    ) -> Result<Response<CancelProofResponse>, Status> {
        let subject = job_subject(&request.get_ref().job_id);
        self.answer("CancelProof", subject, async {
            let caller = self.caller(&request)?;
            prove::cancel(&self.state, caller, request.into_inner()).await
        })
        .await
    }

    async fn get_status(
        &self,
        request: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        self.answer("GetStatus", "the status".into(), async {
            let caller = self.caller(&request)?;
            status::status(&self.state, &caller).await
        })
        .await
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        self.answer("GetMetrics", "the metrics".into(), async {
            self.caller(&request)?;
            Ok(status::metrics(&self.state).await)
        })
        .await
    }

    async fn preload_srs(
        &self,
        request: Request<PreloadSrsRequest>,
    ) -> Result<Response<PreloadSrsResponse>, Status> {
        let subject = format!("circuit {}", shown(&request.get_ref().circuit_id));
        self.answer("PreloadSRS", subject, async {
            self.caller(&request)?;
            srs::preload(&self.state, &request.get_ref().circuit_id).await
        })
        .await
    }

    async fn evict_srs(
        &self,
        request: Request<EvictSrsRequest>,
    ) -> Result<Response<EvictSrsResponse>, Status> {
        let subject = format!("circuit {}", shown(&request.get_ref().circuit_id));
        self.answer("EvictSRS", subject, async {
            self.caller(&request)?;
            srs::evict(&self.state, &request.get_ref().circuit_id)
        })
        .await
    }
}

impl ProvingService {
    /// Who calls: the caller the token gate admitted from the call's
    /// headers (`admit.rs`), before its message was read.
    fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        request
            .extensions()
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| Status::internal("a call that passed no token gate"))
    }

    /// Runs a handler and counts its answer by code and proof result; a
    /// refusal (an error status) or a FAILED result is logged once with
    /// `subject`, and a FAILED result that no job stands behind (inputs
    /// that never became one) is kept for `GetStatus`' failed count. A call
    /// dropped before it answers (its caller went away) is counted as
    /// CANCELLED.
    async fn answer<T: ProofResult>(
        &self,
        method: &'static str,
        subject: String,
        handler: impl Future<Output = Result<T, Status>>,
    ) -> Result<Response<T>, Status> {
        let mut counted = Unanswered(Some(method));
        let answered = handler.await;
        counted.0 = None;
        match &answered {
            Ok(answer) => {
                let result = answer.proof_result();
                let outcome = result.map(|r| Outcome::try_from(r.status).unwrap_or(Outcome::Unknown));
                GrpcCall { method, code: "OK", result: outcome.map_or("none", result_name) }.emit();
                if let Some(failed) = result.filter(|_| outcome == Some(Outcome::Failed)) {
                    let subject = match failed.job_id.is_empty() {
                        true => {
                            self.state.failed_without_job.fetch_add(1, Ordering::Relaxed);
                            subject
                        }
                        false => format!("{subject} (job {})", failed.job_id),
                    };
                    GrpcNotProved {
                        method,
                        subject: &subject,
                        code: "FAILED",
                        reason: &failed.error_message,
                    }
                    .emit();
                }
            }
            Err(status) => {
                let code = code_name(status.code());
                GrpcCall { method, code, result: "none" }.emit();
                GrpcNotProved { method, subject: &subject, code, reason: status.message() }.emit();
            }
        }
        answered.map(Response::new).map_err(bounded)
    }
}

/// The proof result an answer carries: Prove's and AwaitProof's; the other
/// methods' answers carry none.
trait ProofResult {
    fn proof_result(&self) -> Option<&AwaitProofResponse> {
        None
    }
}

impl ProofResult for ProveResponse {
    fn proof_result(&self) -> Option<&AwaitProofResponse> {
        self.result.as_ref()
    }
}

impl ProofResult for AwaitProofResponse {
    fn proof_result(&self) -> Option<&AwaitProofResponse> {
        Some(self)
    }
}

impl ProofResult for SubmitProofResponse {}
impl ProofResult for CancelProofResponse {}
impl ProofResult for GetStatusResponse {}
impl ProofResult for GetMetricsResponse {}
impl ProofResult for PreloadSrsResponse {}
impl ProofResult for EvictSrsResponse {}

/// A proof result as the metric's label names it.
fn result_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
        Outcome::Cancelled => "cancelled",
        Outcome::Timeout => "timeout",
        Outcome::Unknown => "unknown",
    }
}

/// The most characters of a client's id a log line shows: a refused
/// request may carry a long one.
const SHOWN_CHARS: usize = 128;

fn shown(id: &str) -> String {
    match id.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{}...", &id[..end]),
        None => id.to_string(),
    }
}

/// The most bytes of an error's message sent back: a message that quotes
/// what the caller sent stays this long whatever it sent.
const MAX_MESSAGE_BYTES: usize = 4096;

/// `status` with its message cut to `MAX_MESSAGE_BYTES` (at a character's
/// boundary), its code and metadata (the retry hint) kept.
fn bounded(status: Status) -> Status {
    let message = status.message();
    if message.len() <= MAX_MESSAGE_BYTES {
        return status;
    }
    let end = (0..=MAX_MESSAGE_BYTES).rev().find(|&i| message.is_char_boundary(i)).unwrap_or(0);
    let cut = format!("{}...", &message[..end]);
    Status::with_metadata(status.code(), cut, status.metadata().clone())
}

/// A call about a Curio request, as its log line names it.
fn request_subject(request_id: &str) -> String {
    format!("request {:?}", shown(request_id))
}

/// A call about a job, as its log line names it.
fn job_subject(job_id: &str) -> String {
    format!("job {:?}", shown(job_id))
}

/// Counts a call that was dropped before it answered.
struct Unanswered(Option<&'static str>);

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(method) = self.0 {
            GrpcCall { method, code: code_name(Code::Cancelled), result: "none" }.emit();
        }
    }
}

/// The call's own deadline, from its `grpc-timeout` header.
fn deadline<T>(request: &Request<T>) -> Option<Duration> {
    grpc_timeout(request.metadata().get("grpc-timeout")?.to_str().ok()?)
}

/// A `grpc-timeout` value: up to 8 digits and a unit (H M S m u n).
fn grpc_timeout(value: &str) -> Option<Duration> {
    if !value.is_ascii() || value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// A status code as gRPC names it (the metric's label).
pub(super) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_as_the_protocol_writes_them() {
        assert_eq!(grpc_timeout("1799999m"), Some(Duration::from_millis(1_799_999)));
        assert_eq!(grpc_timeout("30M"), Some(Duration::from_secs(1800)));
        assert_eq!(grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(grpc_timeout("100u"), Some(Duration::from_micros(100)));
        assert_eq!(grpc_timeout("7n"), Some(Duration::from_nanos(7)));
        for bad in ["", "S", "123456789S", "12x", "-1S", "1.5S", "1\u{e9}"] {
            assert_eq!(grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn error_messages_are_cut_with_their_code_and_retry_hint_kept() {
        let mut long = Status::unavailable("\u{e9}".repeat(MAX_MESSAGE_BYTES));
        long.metadata_mut().insert("grpc-retry-pushback-ms", "5000".parse().unwrap());
        let cut = bounded(long);
        assert_eq!(cut.code(), Code::Unavailable);
        assert!(cut.message().len() <= MAX_MESSAGE_BYTES + 3 && cut.message().ends_with("..."));
        assert_eq!(cut.metadata().get("grpc-retry-pushback-ms").unwrap(), "5000");
        let short = bounded(Status::not_found("job 1 not found"));
        assert_eq!(short.message(), "job 1 not found");
    }
}
