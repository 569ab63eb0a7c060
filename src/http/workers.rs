//! What the GPU workers are doing: `/v1/workers`, `/v1/timeline` and the
//! built-in page at `/`. The data comes from the WorkerMonitor actor. The
//! job ids in it are shown to admins only: the workers serve every tenant.

use std::fmt::Write as _;
use std::time::SystemTime;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use cuzk_actors::messages::{GetTimeline, GetWorkers, TimelineEntry};
use cuzk_actors::time::unix_ms;
use serde::Deserialize;

use super::error::{ApiError, ErrorBody, WORKER_MONITOR};
// Named by the #[utoipa::path] attributes.
use super::schemas::{SchedulerGone, TimelineDoc, TokenRefusals, WorkersDoc};
use super::state::AppState;
use crate::tenants::Caller;

/// The page: one file, no external assets.
const INDEX_HTML: &str = include_str!("ui/index.html");

/// Spans per worker that `/v1/workers` returns unless told otherwise.
const DEFAULT_SPANS: usize = 20;
const MAX_SPANS: usize = 1000;
/// The default timeline window.
const DEFAULT_WINDOW_MS: f64 = 5.0 * 60_000.0;

/// The query of `GET /v1/workers`: how many recent busy spans to return per worker.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkersQuery {
    spans: Option<usize>,
}

/// Each GPU worker's state now, its time by cause and its last spans; job ids
/// are hidden from callers that are not admins.
#[utoipa::path(
    get, path = "/v1/workers", tag = "workers",
    params(("spans" = Option<usize>, Query, description = "busy spans per worker, default 20, at most 1000")),
    responses(
        (status = 200, description = "each GPU worker's state now, time by cause and last spans (job ids for admins only)", body = WorkersDoc),
        (status = 400, description = "spans out of range, or an unknown parameter", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn workers(
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    query: web::Query<WorkersQuery>,
) -> Result<HttpResponse, ApiError> {
    let spans = query.spans.unwrap_or(DEFAULT_SPANS);
    if spans > MAX_SPANS {
        return Err(ApiError::bad_request(format!("spans must be at most {MAX_SPANS}, got {spans}")));
    }
    let mut workers = state
        .system
        .monitor
        .send(GetWorkers { spans })
        .await
        .map_err(|e| ApiError::actor_gone(WORKER_MONITOR, e))?;
    if !caller.admin {
        for worker in &mut workers {
            (worker.job, worker.partition) = (None, None);
            worker.recent_spans.iter_mut().for_each(hide_job);
        }
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({ "workers": workers })))
}

/// The query of `GET /v1/timeline`: the window to return and its format.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineQuery {
    /// Unix milliseconds; default: five minutes ago.
    since: Option<f64>,
    /// Unix milliseconds; default: now.
    until: Option<f64>,
    /// `csv` or `json`; otherwise the Accept header decides.
    format: Option<String>,
}

fn wants_csv(req: &HttpRequest, format: Option<&str>) -> Result<bool, ApiError> {
    match format {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(other) => {
            Err(ApiError::bad_request(format!("format must be \"csv\" or \"json\", got {other:?}")))
        }
        None => Ok(req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/csv"))),
    }
}

/// Every worker's busy spans and idle intervals in a window, oldest first,
/// as JSON or CSV; job ids are hidden from callers that are not admins.
#[utoipa::path(
    get, path = "/v1/timeline", tag = "workers",
    params(
        ("since" = Option<f64>, Query, description = "Unix ms; default five minutes ago"),
        ("until" = Option<f64>, Query, description = "Unix ms; default now"),
        ("format" = Option<String>, Query, description = "csv or json; otherwise the Accept header decides"),
    ),
    responses(
        (status = 200, description = "busy spans and idle intervals of every worker, oldest first (job ids for admins only)", content(
            (TimelineDoc = "application/json"),
            (String = "text/csv"),
        )),
        (status = 400, description = "since/until not a Unix time, in the future or reversed; an unknown format or parameter", body = ErrorBody),
        TokenRefusals,
        SchedulerGone,
    )
)]
pub async fn timeline(
    req: HttpRequest,
    state: web::Data<AppState>,
    caller: web::ReqData<Caller>,
    query: web::Query<TimelineQuery>,
) -> Result<HttpResponse, ApiError> {
    let csv = wants_csv(&req, query.format.as_deref())?;
    let now = unix_ms(SystemTime::now()) as f64;
    let since = query.since.unwrap_or(now - DEFAULT_WINDOW_MS);
    let until = query.until;
    let valid = |t: f64| t.is_finite() && t >= 0.0 && t <= now + DEFAULT_WINDOW_MS;
    if !valid(since) || !until.is_none_or(valid) {
        return Err(ApiError::bad_request(
            "since and until are Unix times in milliseconds, not in the future",
        ));
    }
    if until.is_some_and(|until| until < since) {
        return Err(ApiError::bad_request("until is before since"));
    }
    let mut entries = state
        .system
        .monitor
        .send(GetTimeline { since_unix_ms: since, until_unix_ms: until })
        .await
        .map_err(|e| ApiError::actor_gone(WORKER_MONITOR, e))?;
    if !caller.admin {
        entries.iter_mut().for_each(hide_job);
    }
    if csv {
        return Ok(HttpResponse::Ok().content_type("text/csv; charset=utf-8").body(timeline_csv(&entries)));
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "since_unix_ms": since,
        "until_unix_ms": until.unwrap_or(now),
        "entries": entries,
    })))
}

/// Leaves out which job a span served, for a caller that may not see every
/// tenant's jobs.
fn hide_job(entry: &mut TimelineEntry) {
    (entry.job, entry.partition) = (None, None);
}

/// The first line of the timeline's CSV, naming its columns.
pub const CSV_HEADER: &str =
    "start_unix_ms,end_unix_ms,duration_ms,device,worker,kind,cause,job,partition,ok,open,waited_ms,phases";

/// One line per busy span or idle interval; phases as `name=ms` joined by `;`.
fn timeline_csv(entries: &[TimelineEntry]) -> String {
    let mut out = String::with_capacity(64 * (entries.len() + 1));
    out.push_str(CSV_HEADER);
    out.push('\n');
    let opt = |v: Option<String>| v.unwrap_or_default();
    for e in entries {
        let phases: Vec<String> = e.phases.iter().map(|(n, ms)| format!("{n}={ms}")).collect();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            e.start_unix_ms,
            e.end_unix_ms,
            e.duration_ms,
            e.device,
            e.worker,
            e.kind,
            opt(e.cause.map(|c| c.as_str().to_string())),
            opt(e.job.clone()),
            opt(e.partition.map(|p| p.to_string())),
            opt(e.ok.map(|ok| ok.to_string())),
            e.open,
            opt(e.waited_ms.map(|w| w.to_string())),
            phases.join(";"),
        );
    }
    out
}

/// The built-in page (worker timeline and idle causes), one HTML file with no
/// external assets.
#[utoipa::path(
    get, path = "/", tag = "workers",
    responses(
        (status = 200, description = "the built-in page: worker timeline and idle causes", body = String,
         content_type = "text/html"),
        TokenRefusals,
    )
)]
pub async fn index() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(INDEX_HTML)
}
