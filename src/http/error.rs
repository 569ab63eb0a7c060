//! The one error shape of the API, `{"error": reason}` with its status code,
//! for our handlers and for actix-web's own refusals alike.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Value};

use crate::job_input::SubmitError;

/// An error answered as `{"error": "..."}` with its status code.
#[derive(Debug)]
pub struct ApiError {
    /// The status code answered.
    status: StatusCode,
    /// `{"error": reason}`, plus what some errors add (`status`, `reason`).
    body: Value,
    /// Seconds a client should wait before trying again (`Retry-After`).
    retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::from_u16(status).expect("valid status code"),
            body: json!({ "error": message.into() }),
            retry_after_s: None,
        }
    }

    /// Tells the client when trying again may succeed.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }

    /// Adds a field beside `error`, for clients that act on more than text.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.body[key] = value;
        self
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.body["error"].as_str().unwrap_or("error"))
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
        response.json(&self.body)
    }
}

/// A body that is not JSON is a bad request; JSON that is not a job is
/// unprocessable.
impl From<SubmitError> for ApiError {
    fn from(error: SubmitError) -> Self {
        let status = match error {
            SubmitError::NotJson(_) => 400,
            SubmitError::Invalid(_) => 422,
        };
        ApiError::new(status, error.to_string())
    }
}

/// What a 503 names as gone when the tracker or dispatcher does not answer.
pub const SCHEDULER: &str = "scheduler";
/// What a 503 names as gone when the worker monitor does not answer.
pub const WORKER_MONITOR: &str = "worker monitor";

/// An actor did not answer: its mailbox is closed, so the daemon is
/// stopping or broken.
pub fn unavailable(what: &str, error: impl std::fmt::Display) -> ApiError {
    ApiError::new(503, format!("{what} unavailable: {error}"))
}

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
        return Ok(actix_web::middleware::ErrorHandlerResponse::Response(
            res.map_into_left_body(),
        ));
    }
    let status = res.status();
    let message = match res.response().error() {
        Some(error) => error.to_string(),
        None => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let (req, _) = res.into_parts();
    let response = HttpResponse::build(status)
        .json(json!({ "error": message }))
        .map_into_right_body();
    Ok(actix_web::middleware::ErrorHandlerResponse::Response(
        actix_web::dev::ServiceResponse::new(req, response),
    ))
}
