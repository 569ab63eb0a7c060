//! The one error shape of the API, `{"error": reason}` with its status code,
//! for our handlers and for actix-web's own refusals alike; and the HTTP
//! answer to each refusal of the job seam (`JobsError`), written once.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use cuzk_actors::messages::JobStatus;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{HttpRefusal, TokenRefusal};
use crate::job_input::SubmitError;
use crate::jobs::JobsError;

/// Every error's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Why, in words.
    error: String,
    /// For clients that act on more than words: why a 503 refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<ErrorReason>,
    /// A 409's job status, which forbade what was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<JobStatus>,
}

impl ErrorBody {
    fn new(error: String) -> Self {
        Self { error, reason: None, status: None }
    }

    /// `{"error": error}` as bytes, for answers written below actix-web
    /// (the connection wrapper's rewritten refusals).
    pub fn encoded(error: &str) -> Vec<u8> {
        serde_json::to_vec(&Self::new(error.to_string())).expect("a struct of strings serializes")
    }
}

/// Why the daemon refused for now (a 503's `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorReason {
    /// A graceful shutdown is under way: no new jobs.
    ShuttingDown,
    /// Stored jobs are still being rebuilt after a start.
    Recovering,
    /// The job store cannot write, or the fleet's database does not answer.
    StoreFailing,
    /// Submissions being read and parsed hold the parse budget
    /// (`limits.parse_budget_bytes`, `limits.max_parsing_requests`).
    ParsingFull,
}

/// An error answered as `{"error": "..."}` with its status code.
#[derive(Debug)]
pub struct ApiError {
    /// The status code answered.
    status: StatusCode,
    body: ErrorBody,
    /// Seconds a client should wait before trying again (`Retry-After`).
    retry_after_s: Option<u64>,
    /// A 401's or 403's `WWW-Authenticate` challenge (RFC 6750).
    challenge: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, body: ErrorBody::new(message.into()), retry_after_s: None, challenge: None }
    }

    /// 400: the request cannot be read as asked.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 401: the request needs a caller this one is not.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 404: nothing by that name (for this caller).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 408: the body did not arrive in time.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, message)
    }

    /// 409: the job's `status` forbids what was asked; the body carries it.
    pub fn conflict(message: impl Into<String>, status: JobStatus) -> Self {
        let mut error = Self::new(StatusCode::CONFLICT, message);
        error.body.status = Some(status);
        error
    }

    /// 413: the body is larger than allowed.
    pub fn payload_too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    /// 422: well-formed, but not something this daemon can do.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    /// 429: a limit refused it; nothing was done. Always says when to retry.
    pub fn too_many_requests(message: impl Into<String>, retry_after_s: u64) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, message).retry_after(retry_after_s)
    }

    /// 500: the daemon failed (no input should lead here).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 503: not now; `because` and `retry_after` say more where known.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// 503: an actor did not answer: its mailbox is closed, so the daemon
    /// is stopping or broken.
    pub fn actor_gone(what: &str, error: impl std::fmt::Display) -> Self {
        Self::unavailable(format!("{what} unavailable: {error}"))
    }

    /// 507: the disk is too full to take it.
    pub fn insufficient_storage(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INSUFFICIENT_STORAGE, message)
    }

    /// Tells the client when trying again may succeed.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }

    /// The `WWW-Authenticate` challenge a token refusal answers with.
    fn challenge(mut self, challenge: String) -> Self {
        self.challenge = Some(challenge);
        self
    }

    /// Adds the machine-readable reason.
    pub fn because(mut self, reason: ErrorReason) -> Self {
        self.body.reason = Some(reason);
        self
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.body.error)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if let Some(seconds) = self.retry_after_s {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        if let Some(challenge) = &self.challenge {
            response.insert_header((header::WWW_AUTHENTICATE, challenge.as_str()));
        }
        response.json(&self.body)
    }
}

/// The HTTP answer to each of the token gate's refusals.
impl From<HttpRefusal> for ApiError {
    fn from(refusal: HttpRefusal) -> Self {
        const REALM: &str = "Bearer realm=\"cuzk\"";
        let message = refusal.to_string();
        match refusal {
            HttpRefusal::MetricsListener => Self::not_found(message),
            HttpRefusal::NotJson => Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message),
            HttpRefusal::Browser(_) => Self::new(StatusCode::FORBIDDEN, message),
            HttpRefusal::NoToken => Self::unauthorized(message).challenge(REALM.into()),
            HttpRefusal::Token(TokenRefusal::LacksScope(needed)) => Self::new(StatusCode::FORBIDDEN, message)
                .challenge(format!("{REALM}, error=\"insufficient_scope\", scope=\"{}\"", needed.as_str())),
            HttpRefusal::Token(TokenRefusal::Invalid | TokenRefusal::Missing(_)) => {
                Self::unauthorized(message).challenge(format!("{REALM}, error=\"invalid_token\""))
            }
        }
    }
}

/// The HTTP answer to each of the job seam's refusals.
impl From<JobsError> for ApiError {
    fn from(error: JobsError) -> Self {
        let message = error.to_string();
        match error {
            JobsError::NotFound(_) => ApiError::not_found(message),
            JobsError::Recovering { retry_after_s } => {
                ApiError::unavailable(message).because(ErrorReason::Recovering).retry_after(retry_after_s)
            }
            JobsError::ShuttingDown => ApiError::unavailable(message).because(ErrorReason::ShuttingDown),
            // The tenant's share is its own limit, like its rate: 429; the
            // whole budget full is the daemon's state: 503.
            JobsError::ParsingFull { full, retry_after_s } if full.tenant().is_some() => {
                ApiError::too_many_requests(message, retry_after_s)
            }
            JobsError::ParsingFull { retry_after_s, .. } => {
                ApiError::unavailable(message).because(ErrorReason::ParsingFull).retry_after(retry_after_s)
            }
            JobsError::RateLimited { retry_after_s, .. } | JobsError::QueueFull { retry_after_s, .. } => {
                ApiError::too_many_requests(message, retry_after_s)
            }
            JobsError::TooLargeToParse { .. } => ApiError::payload_too_large(message),
            JobsError::NoSpace { retry_after_s, .. } => {
                ApiError::insufficient_storage(message).retry_after(retry_after_s)
            }
            // A body that is not JSON is a bad request; JSON that is not a
            // job is unprocessable.
            JobsError::Rejected(SubmitError::NotJson(_)) => ApiError::bad_request(message),
            JobsError::Rejected(SubmitError::Invalid(_))
            | JobsError::EmptyRequestId
            | JobsError::KeyConflict { .. }
            | JobsError::NotAFleetNode => ApiError::unprocessable(message),
            JobsError::NotStored { retry_after_s, .. } | JobsError::Database { retry_after_s, .. } => {
                ApiError::unavailable(message).because(ErrorReason::StoreFailing).retry_after(retry_after_s)
            }
            JobsError::NotDone { status, .. } | JobsError::AlreadyEnded { status, .. } => {
                ApiError::conflict(message, status)
            }
            JobsError::SchedulerGone(_) => ApiError::unavailable(message),
            JobsError::Thread { .. } => ApiError::internal(message),
        }
    }
}

/// What a 503 names as gone when the worker monitor does not answer.
pub const WORKER_MONITOR: &str = "worker monitor";

/// Gives actix-web's own error responses (body too large, wrong method,
/// unreadable payload) the same JSON shape as ours.
pub fn json_errors<B: actix_web::body::MessageBody + 'static>(
    res: actix_web::dev::ServiceResponse<B>,
) -> actix_web::Result<actix_web::middleware::ErrorHandlerResponse<B>> {
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return Ok(actix_web::middleware::ErrorHandlerResponse::Response(res.map_into_left_body()));
    }
    let status = res.status();
    let message = match res.response().error() {
        Some(error) => error.to_string(),
        None => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let (req, _) = res.into_parts();
    let response = HttpResponse::build(status).json(ErrorBody::new(message)).map_into_right_body();
    Ok(actix_web::middleware::ErrorHandlerResponse::Response(actix_web::dev::ServiceResponse::new(
        req, response,
    )))
}
