//! Why the job seam refused or could not answer: one variant per reason a
//! front end answers differently (a status code, a gRPC code, a retry
//! hint), each with the words a client is shown.

use actix::MailboxError;
use cuzk_actors::messages::{JobStatus, QueueFull};
use cuzk_actors::store::StoreError;
use cuzk_actors::{JobId, Tenant};

use crate::job_input::SubmitError;

/// What `Jobs` answers instead of a result. `retry_after_s` is the seconds
/// a caller is told to wait before trying again, where that may help.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// No such job, or another tenant's (the same answer, so that a tenant
    /// learns nothing of another's).
    #[error("no job {:?}", .0 .0)]
    NotFound(JobId),
    /// Stored jobs are still being rebuilt after a start: a job not found
    /// may be one of them, and submissions wait for them.
    #[error("restarting: stored jobs are still being rebuilt; retry shortly")]
    Recovering {
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// A graceful shutdown began: no new jobs.
    #[error("shutting down: not taking new jobs; retry on another daemon or after the restart")]
    ShuttingDown,
    /// The tenant submits faster than its `submit_rate_per_s`; nothing was
    /// read or queued.
    #[error(
        "tenant {:?} is over its submit rate (submit_rate_per_s = {rate}, from [auth.tenants.{tenant}] or [auth.tenant_defaults]); retry in {retry_after_s} s",
        tenant.as_str()
    )]
    RateLimited {
        /// The tenant over its rate, named in the message.
        tenant: Tenant,
        /// Its `submit_rate_per_s`, shown so the client sees the limit it hit.
        rate: f64,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// Submissions being read and parsed hold the parse budget; nothing
    /// was read or queued.
    #[error("{full}")]
    ParsingFull {
        /// What the budget holds and what this request needed, for the message.
        full: super::ParseBudgetFull,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// A submission whose parse estimate alone exceeds
    /// `limits.parse_budget_bytes` (a gRPC message may be larger than any
    /// HTTP body): final, never worth a retry; nothing was read or queued.
    #[error(
        "reading and parsing this {body_bytes}-byte request is estimated at {needed} bytes, over limits.parse_budget_bytes ({limit}): it can never be admitted; nothing was queued"
    )]
    TooLargeToParse {
        /// The request's body length, which the estimate is from.
        body_bytes: usize,
        /// The bytes parsing it is estimated to take.
        needed: u64,
        /// `limits.parse_budget_bytes`, which that estimate exceeds.
        limit: u64,
    },
    /// The data directory's filesystem is under `store.min_free_bytes`;
    /// nothing was written.
    #[error("the data directory has {free} bytes free, under store.min_free_bytes ({min_free}); nothing was written")]
    NoSpace {
        /// Free bytes the filesystem has now.
        free: u64,
        /// `store.min_free_bytes`, the floor it fell under.
        min_free: u64,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// The body is not a job (not JSON, or JSON this daemon cannot run).
    #[error(transparent)]
    Rejected(#[from] SubmitError),
    /// An empty `request_id` would merge every client's keyless-by-mistake
    /// jobs.
    #[error("request_id must not be empty")]
    EmptyRequestId,
    /// The idempotency key belongs to `job`, created from another body;
    /// nothing was queued.
    #[error("idempotency key {key:?} belongs to job {job} submitted with a different body")]
    KeyConflict {
        /// The idempotency key (`request_id`) the client sent.
        key: String,
        /// The job that key already names, so the client can fetch it.
        job: JobId,
    },
    /// Too many unfinished jobs, the daemon's (or fleet's) or the tenant's;
    /// nothing was queued.
    #[error("{}", queue_full(full))]
    QueueFull {
        /// Which limit was hit and how many jobs hold it, for the message.
        full: QueueFull,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// The job could not be made durable (the store failed to commit it);
    /// it was cancelled, not run.
    #[error("the job could not be stored: {cause}")]
    NotStored {
        /// The store's failure.
        cause: StoreError,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// A fleet node's database failed to answer.
    #[error("the fleet's database failed: {cause}")]
    Database {
        /// The database's failure.
        cause: StoreError,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// The job's proofs exist only once it is done.
    #[error("job {id} is {}; proofs exist only once it is done", status.as_str())]
    NotDone {
        /// The job asked for.
        id: JobId,
        /// Where the job is now (queued, running, failed, cancelled).
        status: JobStatus,
    },
    /// A cancel of a job that already ended otherwise.
    #[error("job {id} already finished: {}", status.as_str())]
    AlreadyEnded {
        /// The job asked to cancel.
        id: JobId,
        /// How it ended (done, failed or cancelled).
        status: JobStatus,
    },
    /// The fleet's counts were asked of a daemon that is no fleet node.
    #[error("scope=fleet needs a fleet node: this daemon has no PostgreSQL store (store.url)")]
    NotAFleetNode,
    /// The tracker (or another actor) no longer answers: the daemon is
    /// stopping or broken.
    #[error("scheduler unavailable: {0}")]
    SchedulerGone(#[from] MailboxError),
    /// A blocking thread (parsing a body, asking the database) died.
    #[error("{what} thread failed: {cause}")]
    Thread {
        /// Which thread it was, for the message.
        what: &'static str,
        /// Why it died: a panic, or the runtime's cancel.
        cause: actix_rt::task::JoinError,
    },
}

/// The words of a queue-full refusal: the tenant's own limit names the
/// tenant and where its limit is set.
fn queue_full(full: &QueueFull) -> String {
    match &full.tenant {
        Some(tenant) => format!(
            "tenant {:?} has {} unfinished jobs, its limit of {} (the lower of max_queued_jobs from [auth.tenants.{tenant}] or [auth.tenant_defaults] and its share of limits.max_queued_jobs, limits.queue_share_per_tenant); retry later",
            tenant.as_str(),
            full.unfinished,
            full.limit
        ),
        None => format!(
            "queue full: {} unfinished jobs (limits.max_queued_jobs = {}); retry later",
            full.unfinished, full.limit
        ),
    }
}

/// Why the daemon takes no jobs now (readiness, `/readyz`).
#[derive(Debug)]
pub enum Unready {
    /// A graceful shutdown began; the daemon will not take jobs again.
    ShuttingDown,
    /// Stored jobs are still being rebuilt after a start.
    Recovering {
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
    /// The job store cannot write; the text says why.
    StoreFailing {
        /// The store's last error, shown to the probe.
        why: String,
        /// Seconds the caller is told to wait before retrying (Retry-After).
        retry_after_s: u64,
    },
}
