//! The one mapping from what the daemon refuses to gRPC status codes: the
//! job seam's `JobsError`, the token gate's refusals, the waiting calls'
//! bound and the parameter files' errors. A refusal that may pass carries
//! its wait in `grpc-retry-pushback-ms`, the header gRPC's retry policies
//! read (HTTP's `Retry-After`, in milliseconds).
//!
//! Inputs the daemon cannot prove are no status at all: Curio expects them
//! as an OK answer whose result is FAILED (`prove.rs`).

use tonic::{Code, Status};

use super::calls::TooManyCalls;
use crate::auth::TokenRefusal;
use crate::jobs::JobsError;
use crate::param_files::ParamsError;

/// The status a refusal of the job seam is answered with.
pub fn jobs_status(error: JobsError) -> Status {
    let message = error.to_string();
    match error {
        JobsError::NotFound(_) => Status::not_found(message),
        // The tenant's share is its own limit, like its rate.
        JobsError::ParsingFull { full, retry_after_s } if full.tenant().is_some() => {
            retry_after(Code::ResourceExhausted, message, retry_after_s)
        }
        JobsError::Recovering { retry_after_s }
        | JobsError::NoSpace { retry_after_s, .. }
        | JobsError::ParsingFull { retry_after_s, .. }
        | JobsError::NotStored { retry_after_s, .. }
        | JobsError::Database { retry_after_s, .. } => retry_after(Code::Unavailable, message, retry_after_s),
        JobsError::ShuttingDown | JobsError::SchedulerGone(_) => Status::unavailable(message),
        JobsError::RateLimited { retry_after_s, .. } | JobsError::QueueFull { retry_after_s, .. } => {
            retry_after(Code::ResourceExhausted, message, retry_after_s)
        }
        JobsError::Rejected(_) | JobsError::EmptyRequestId | JobsError::TooLargeToParse { .. } => {
            Status::invalid_argument(message)
        }
        JobsError::KeyConflict { .. } => Status::already_exists(message),
        JobsError::NotDone { .. } | JobsError::AlreadyEnded { .. } | JobsError::NotAFleetNode => {
            Status::failed_precondition(message)
        }
        JobsError::Thread { .. } => Status::internal(message),
    }
}

/// A call whose token does not admit it: UNAUTHENTICATED without a known
/// token, PERMISSION_DENIED without the scope (HTTP's 401 and 403).
pub fn token_status(refusal: TokenRefusal) -> Status {
    match refusal {
        TokenRefusal::Missing(_) | TokenRefusal::Invalid => Status::unauthenticated(refusal.to_string()),
        TokenRefusal::LacksScope(_) => Status::permission_denied(refusal.to_string()),
    }
}

/// A call refused a place among the waiting calls: as a full queue,
/// nothing was queued; retry in a second.
pub fn too_many_status(refusal: TooManyCalls) -> Status {
    retry_after(Code::ResourceExhausted, refusal.to_string(), 1)
}

/// A parameter file not preloaded or evicted.
pub fn params_status(error: ParamsError) -> Status {
    let message = error.to_string();
    match error {
        ParamsError::NoFile { .. } | ParamsError::NoCircuit(_) | ParamsError::NotLoaded(_) => {
            Status::not_found(message)
        }
        ParamsError::Load { .. } => Status::failed_precondition(message),
        ParamsError::Warm { cause, .. } if cause.retryable() => Status::unavailable(message),
        ParamsError::Warm { .. } => Status::failed_precondition(message),
        ParamsError::Thread { .. } => Status::internal(message),
    }
}

fn retry_after(code: Code, message: String, seconds: u64) -> Status {
    let mut status = Status::new(code, message);
    let pushback = (seconds.saturating_mul(1000)).to_string();
    if let Ok(value) = pushback.parse() {
        status.metadata_mut().insert("grpc-retry-pushback-ms", value);
    }
    status
}
