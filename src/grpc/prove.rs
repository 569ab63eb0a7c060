//! SubmitProof, AwaitProof, Prove and CancelProof, on the job seam.
//!
//! `Prove` is what Curio calls: submit, wait, answer. Curio reuses a
//! request id on every retry, sometimes with other inputs (a PoRep after a
//! reorg changes its seed), so a `Prove` always proves the inputs it was
//! given. Identical requests (same tenant, request id and inputs) share a
//! job while it is in flight: the job's idempotency key is the request id
//! with the inputs' digest, so a retry after a restart joins the job that
//! resumed, on any node of a fleet. A job that already ended is never the
//! answer: the request is proved again, under no key.
//!
//! A `Prove` whose caller leaves (a disconnect, a passed deadline) cancels
//! its job unless another call waits on it (`calls.rs`).

use std::sync::Arc;
use std::time::Duration;

use cuzk_actors::messages::JobStatus;
use cuzk_actors::{JobId, Stage, Tenant, TenantScope};
use sha2::{Digest, Sha256};
use tonic::Status;

use super::calls::Waiting;
use super::curio::{self, CurioError};
use super::error::{jobs_status, too_many_status};
use super::proto::await_proof_response::Status as Outcome;
use super::proto::{
    AwaitProofRequest, AwaitProofResponse, CancelProofRequest, CancelProofResponse, ProveRequest,
    ProveResponse, SubmitProofRequest, SubmitProofResponse,
};
use super::state::GrpcState;
use crate::job_input::Submission;
use crate::jobs::{JobsError, Offered};
use crate::telemetry::GrpcJob;
use crate::tenants::Caller;

/// The longest request id taken: it is part of the job's idempotency key,
/// kept with the job (Curio's are under 100 characters).
const MAX_REQUEST_ID_BYTES: usize = 1024;

/// The longest job id looked up: the daemon makes 32-character ids, and a
/// longer one is refused without being copied into the answer.
const MAX_JOB_ID_BYTES: usize = 128;

/// Queues the request and answers its job id at once. Inputs the daemon
/// cannot prove are refused here (INVALID_ARGUMENT, with the reason): the
/// answer has no result to carry a FAILED status.
pub async fn submit(
    state: &GrpcState,
    caller: Caller,
    request: SubmitProofRequest,
) -> Result<SubmitProofResponse, Status> {
    let request_id = checked_request_id(&request.request_id)?;
    let submission =
        curio::submission(request).map_err(|error| Status::invalid_argument(error.to_string()))?;
    let circuit = submission.circuit.name().to_string();
    let text_bytes = submission.text().len();
    let admission =
        state.jobs.admit_arrived(tenant(&caller)?, &caller, text_bytes).await.map_err(jobs_status)?;
    let offered = Offered::Typed(Arc::new(submission));
    let submitted = state.jobs.submit(admission, offered, None).await.map_err(jobs_status)?;
    GrpcJob { request_id: &request_id, job: &submitted.id, circuit: &circuit, call: "SubmitProof" }.emit();
    // On a fleet node, the fleet's queue: any node may take the job.
    let queued = state.jobs.queued().await.map_err(jobs_status)?;
    let ahead = queued.saturating_sub(usize::from(submitted.status == JobStatus::Queued));
    Ok(SubmitProofResponse {
        job_id: submitted.id.0,
        queue_position: u32::try_from(ahead).unwrap_or(u32::MAX),
        // A job's partitions go to whichever GPU worker is free first.
        assigned_gpu: String::new(),
    })
}

/// Submits and waits for the end; `deadline` is the call's own
/// (`grpc-timeout`), past which the call ends DEADLINE_EXCEEDED and its
/// job is cancelled unless another call waits on it.
pub async fn prove(
    state: &Arc<GrpcState>,
    caller: Caller,
    request: ProveRequest,
    deadline: Option<Duration>,
) -> Result<ProveResponse, Status> {
    let submit = request.submit.ok_or_else(|| Status::invalid_argument("missing submit field"))?;
    let request_id = checked_request_id(&submit.request_id)?;
    let _place = state.calls.place(&tenant(&caller)?).map_err(too_many_status)?;
    let submission = match curio::submission(submit) {
        Ok(submission) => submission,
        Err(error @ CurioError::UnknownKind(_)) => return Err(Status::invalid_argument(error.to_string())),
        Err(error) => return Ok(failed(String::new(), error.to_string())),
    };
    // A task of its own: a caller that leaves while its job is being
    // accepted does not stop the acceptance half way, and the answer it
    // leaves unread (its `Waiting`) cancels the job.
    let scope = caller.jobs();
    let accepting = tokio::spawn(accept(state.clone(), caller, submission, request_id));
    let Accepted { job, waiting } = match accepting.await {
        Ok(Ok(accepted)) => accepted,
        Ok(Err(NotAccepted::Failed(reason))) => return Ok(failed(String::new(), reason)),
        Ok(Err(NotAccepted::Refused(status))) => return Err(status),
        Err(error) => return Err(Status::internal(format!("accepting the job failed: {error}"))),
    };
    let status = within(deadline, &job, state.jobs.wait(&job, &scope, None)).await?;
    if !status.has_ended() {
        // Unbounded waits end only with the job, or when the tracker
        // stops watching: the daemon is stopping.
        return Err(Status::unavailable(format!(
            "job {job} is {}: the daemon stopped watching it",
            status.as_str()
        )));
    }
    waiting.ended();
    Ok(ProveResponse { result: Some(result(state, &job, &scope, status).await?) })
}

/// A `Prove`'s job, with the call registered as one of its waiters.
struct Accepted {
    job: JobId,
    waiting: Waiting,
}

/// Why a `Prove` got no job: inputs it cannot prove (answered FAILED), or
/// a refusal (a status).
enum NotAccepted {
    Failed(String),
    Refused(Status),
}

/// A refusal of the job seam as a `Prove` answers it: inputs it cannot
/// prove, and a request too large ever to be parsed (as one over
/// `limits.max_input_bytes` is), are FAILED; the rest are statuses.
fn not_accepted(error: JobsError) -> NotAccepted {
    match error {
        JobsError::Rejected(_) | JobsError::TooLargeToParse { .. } => NotAccepted::Failed(error.to_string()),
        error => NotAccepted::Refused(jobs_status(error)),
    }
}

/// The job for a `Prove`: the one in flight with the same request and
/// inputs, or a new one. Identical requests share a job through its
/// idempotency key (the request id with the inputs' digest); a keyed
/// submission that found a job which ended, or whose last caller just
/// left, is made again without a key, so this submits at most twice.
async fn accept(
    state: Arc<GrpcState>,
    caller: Caller,
    submission: Submission,
    request_id: String,
) -> Result<Accepted, NotAccepted> {
    let tenant = tenant(&caller).map_err(NotAccepted::Refused)?;
    // The key holds the digest of the text the job stores.
    let text = submission.text();
    let (text_bytes, digest) = (text.len(), Sha256::digest(text.as_bytes()));
    drop(text);
    let circuit = submission.circuit.name().to_string();
    // Held only until the job is accepted: a waiting call keeps ids, not inputs.
    let submission = Arc::new(submission);
    let mut key = Some(format!("curio {} {request_id}", hex::encode(digest)));
    loop {
        let admission =
            state.jobs.admit_arrived(tenant.clone(), &caller, text_bytes).await.map_err(not_accepted)?;
        let keyed = key.is_some();
        let offered = Offered::Typed(submission.clone());
        let submitted = state.jobs.submit(admission, offered, key.take()).await.map_err(not_accepted)?;
        if keyed && !submitted.created && submitted.status.has_ended() {
            continue;
        }
        if let Some(waiting) = state.calls.wait_on(&state.jobs, &submitted.id, true) {
            let call = if submitted.created { "Prove" } else { "Prove (joined)" };
            GrpcJob { request_id: &request_id, job: &submitted.id, circuit: &circuit, call }.emit();
            return Ok(Accepted { job: submitted.id, waiting });
        }
    }
}

/// Waits for a job's end, up to `timeout_ms` (0: no limit; TIMEOUT then)
/// and the call's own deadline; NOT_FOUND for a job the caller cannot see.
pub async fn await_proof(
    state: &Arc<GrpcState>,
    caller: Caller,
    request: AwaitProofRequest,
    deadline: Option<Duration>,
) -> Result<AwaitProofResponse, Status> {
    let job = checked_job_id(request.job_id)?;
    // Every gRPC caller has a tenant (`Gate::grpc_caller`); were one
    // without, it would share `default`'s places.
    let _place = state.calls.place(&caller.tenant.clone().unwrap_or_default()).map_err(too_many_status)?;
    let scope = caller.jobs();
    // None: its last caller left and it is being cancelled; the wait sees that end.
    let waiting = state.calls.wait_on(&state.jobs, &job, false);
    let timeout = (request.timeout_ms > 0).then(|| Duration::from_millis(request.timeout_ms));
    let status = within(deadline, &job, state.jobs.wait(&job, &scope, timeout)).await?;
    if !status.has_ended() {
        return Ok(AwaitProofResponse {
            job_id: job.0,
            status: Outcome::Timeout as i32,
            ..Default::default()
        });
    }
    if let Some(waiting) = waiting {
        waiting.ended();
    }
    result(state, &job, &scope, status).await
}

/// Cancels a job: queued partitions are dropped, running ones stop at their
/// next stage boundary. `was_running`: a partition was in a stage (past the
/// queue and the budget) when it was cancelled.
pub async fn cancel(
    state: &GrpcState,
    caller: Caller,
    request: CancelProofRequest,
) -> Result<CancelProofResponse, Status> {
    let (job, scope) = (checked_job_id(request.job_id)?, caller.jobs());
    let view = state.jobs.view(&job, &scope).await.map_err(jobs_status)?;
    let in_stage = view.partitions.iter().any(|p| p.stage >= Stage::Synthesizing && !p.stage.is_terminal());
    match state.jobs.cancel(&job, &scope).await {
        Ok(()) => Ok(CancelProofResponse { was_running: in_stage }),
        // Done or failed already: nothing was running to stop.
        Err(JobsError::AlreadyEnded { .. }) => Ok(CancelProofResponse { was_running: false }),
        Err(error) => Err(jobs_status(error)),
    }
}

/// An ended job's answer: its proof (the partitions' proofs concatenated in
/// partition order), or why it failed, and its timings (each stage's
/// milliseconds summed over partitions; `total_ms` the job's wall time).
async fn result(
    state: &GrpcState,
    job: &JobId,
    scope: &TenantScope,
    status: JobStatus,
) -> Result<AwaitProofResponse, Status> {
    let view = state.jobs.view(job, scope).await.map_err(jobs_status)?;
    let ms = |stage: &str| view.timings_ms.get(stage).map_or(0, |ms| *ms as u64);
    let mut answer = AwaitProofResponse {
        job_id: job.0.clone(),
        queue_wait_ms: ms("queue_wait"),
        // The parameter file's load is part of its first job's synthesis.
        srs_load_ms: 0,
        synthesis_ms: ms("synthesis"),
        gpu_compute_ms: ms("gpu"),
        total_ms: ms("total"),
        ..Default::default()
    };
    match status {
        JobStatus::Done => {
            let proofs = state.jobs.proofs(job, scope).await.map_err(jobs_status)?;
            answer.proof = proofs.proofs.into_iter().flat_map(|(_, record)| record.proof).collect();
            answer.status = Outcome::Completed as i32;
        }
        JobStatus::Failed => {
            answer.status = Outcome::Failed as i32;
            answer.error_message = view.error.unwrap_or_else(|| "the job failed".into());
        }
        JobStatus::Cancelled => {
            answer.status = Outcome::Cancelled as i32;
            answer.error_message = "the job was cancelled".into();
        }
        JobStatus::Queued | JobStatus::Running => answer.status = Outcome::Timeout as i32,
    }
    Ok(answer)
}

/// A wait for `job`'s end, given up with DEADLINE_EXCEEDED when the call's
/// own deadline passes first.
async fn within(
    deadline: Option<Duration>,
    job: &JobId,
    wait: impl std::future::Future<Output = Result<JobStatus, JobsError>>,
) -> Result<JobStatus, Status> {
    let waited = match deadline {
        Some(deadline) => tokio::time::timeout(deadline, wait).await.map_err(|_| {
            Status::deadline_exceeded(format!("the call's deadline passed before job {job} ended"))
        })?,
        None => wait.await,
    };
    waited.map_err(jobs_status)
}

/// What Curio expects of an input it cannot have proved: an OK answer
/// whose result is FAILED, with the reason.
fn failed(job_id: String, error_message: String) -> ProveResponse {
    ProveResponse {
        result: Some(AwaitProofResponse {
            job_id,
            status: Outcome::Failed as i32,
            error_message,
            ..Default::default()
        }),
    }
}

/// Submitting needs a tenant; the gate gives every caller with the
/// submit scope one.
fn tenant(caller: &Caller) -> Result<Tenant, Status> {
    caller.tenant.clone().ok_or_else(|| Status::unauthenticated("submitting needs a token"))
}

/// Any string Curio sends (its WindowPoSt ids hold spaces and brackets),
/// up to `MAX_REQUEST_ID_BYTES`.
fn checked_request_id(request_id: &str) -> Result<String, Status> {
    if request_id.len() > MAX_REQUEST_ID_BYTES {
        return Err(Status::invalid_argument(format!(
            "request_id is {} bytes; at most {MAX_REQUEST_ID_BYTES} are taken",
            request_id.len()
        )));
    }
    Ok(request_id.to_string())
}

/// A job id no longer than `MAX_JOB_ID_BYTES`; a longer one is refused by
/// its length alone (echoed whole, a 64 MiB id would cost its size again
/// in the error's trailer and the log).
fn checked_job_id(job_id: String) -> Result<JobId, Status> {
    if job_id.len() > MAX_JOB_ID_BYTES {
        return Err(Status::invalid_argument(format!(
            "job_id is {} bytes; no job has an id over {MAX_JOB_ID_BYTES}",
            job_id.len()
        )));
    }
    Ok(JobId(job_id))
}
