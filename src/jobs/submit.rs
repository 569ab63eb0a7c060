//! A submission, from its tenant's rate check to its durable answer. A front
//! end asks `admit` before it reads the body, with the body's length (a
//! tenant over its rate costs no more than that; a body whose parse would
//! not fit the parse budget is not read), then hands the submission to
//! `submit` (`Offered`: a JSON body as it arrived, or a `Submission` built
//! typed), which does the rest in this order: intake, restore and free
//! space checked; the submission read and checked by the one parser (off
//! the async threads: a Filecoin input takes a while to check); a critical
//! priority the caller may not ask for lowered; the job given to the
//! tracker or written to the fleet's database; a repeated idempotency key
//! or a full queue answered; the new job waited for until it is durable,
//! and cancelled if it could not be made so.

use std::sync::Arc;
use std::time::Instant;

use cuzk_actors::messages::{CancelJob, JobStatus};
use cuzk_actors::{JobId, NewJob, Priority, RecordedRequest, Tenant, TenantScope};

use super::{Jobs, JobsError, ParseBudgetFull, ParsePermit};
use crate::job_input::{ParsedJob, Submission, SubmitError};
use crate::telemetry::{PriorityLowered, TenantLimit, TenantRefused};
use crate::tenants::Caller;

/// A submission its tenant's rate and the parse budget let through: what
/// `submit` takes, so that no front end submits without the checks.
pub struct Admission {
    /// Whose job it will be.
    tenant: Tenant,
    /// The most unfinished jobs the tenant may have: its own
    /// `max_queued_jobs` as configured when the caller was checked, and its
    /// share of the daemon's, whichever is lower.
    max_unfinished: Option<usize>,
    /// The caller's token holds the critical scope.
    critical: bool,
    /// The body's share of the parse budget, held until it is parsed.
    parsing: ParsePermit,
}

impl Admission {
    /// The body has `received` bytes so far: its share of the parse budget
    /// grows to their estimate, or the submission is refused (503
    /// `parsing_full`, or 429 at its tenant's share; nothing read further
    /// or queued) when that does not fit now.
    pub fn received(&mut self, jobs: &Jobs, received: usize) -> Result<(), JobsError> {
        self.parsing.received(received).map_err(|full| jobs.parsing_full(full))
    }
}

/// A submission as a front end hands it over.
pub enum Offered {
    /// A JSON body (a `SubmitRequest`) as it arrived: HTTP's.
    Body(Box<dyn AsRef<[u8]> + Send>),
    /// A submission the front end built typed: gRPC's. Shared, so that a
    /// caller that may submit it again (a `Prove` whose keyed job already
    /// ended) keeps it; the parse copies it only while the caller does.
    Typed(Arc<Submission>),
}

/// A job accepted: new, or the one its idempotency key already named.
#[derive(Debug)]
pub struct Submitted {
    /// The job's id: the new one, or the one the key named.
    pub id: JobId,
    /// False when the idempotency key named an existing job.
    pub created: bool,
    /// Where the job is now (an existing job may have run already).
    pub status: JobStatus,
}

impl Jobs {
    /// Takes one submission of `caller`'s (as `tenant`, the one the front
    /// end found for it) from the tenant's rate bucket, then reserves the
    /// parse of a body of at most `body_bytes` (its declared length, or the
    /// body limit when it has none) from the parse budget before any of it
    /// is read: the share grows as the body arrives
    /// (`Admission::received`), and a full budget refuses at once. A body
    /// whose estimate exceeds all its class may hold is refused first, for
    /// good.
    pub fn admit(&self, tenant: Tenant, caller: &Caller, body_bytes: usize) -> Result<Admission, JobsError> {
        let (max_unfinished, critical) = self.admissible(&tenant, caller, body_bytes)?;
        let shared = Self::parse_share_of(&tenant, caller);
        let parsing = self.parsing.reserve(shared, body_bytes, 0).map_err(|full| self.parsing_full(full))?;
        Ok(Admission { tenant, max_unfinished, critical, parsing })
    }

    /// `admit` for a message that has arrived whole, `body_bytes` of it (a
    /// gRPC call's): its whole estimate is reserved, and when the parse
    /// budget is full now the call waits its turn for at most
    /// `limits.parse_wait_s` before it is refused.
    pub async fn admit_arrived(
        &self,
        tenant: Tenant,
        caller: &Caller,
        body_bytes: usize,
    ) -> Result<Admission, JobsError> {
        let (max_unfinished, critical) = self.admissible(&tenant, caller, body_bytes)?;
        let shared = Self::parse_share_of(&tenant, caller);
        let parsing = self
            .parsing
            .reserve_waiting(shared, body_bytes, self.parse_wait)
            .await
            .map_err(|full| self.parsing_full(full))?;
        Ok(Admission { tenant, max_unfinished, critical, parsing })
    }

    /// The checks before a submission's parse is reserved: a body too large
    /// for the budget ever, then the tenant's rate (a token taken). The
    /// tenant's limit of unfinished jobs and the caller's critical scope,
    /// for the admission.
    fn admissible(
        &self,
        tenant: &Tenant,
        caller: &Caller,
        body_bytes: usize,
    ) -> Result<(Option<usize>, bool), JobsError> {
        let (limits, critical) = (caller.limits, caller.critical);
        if let Some(limit) = self.parsing.never_admits(body_bytes) {
            let needed = super::parse_estimate(body_bytes);
            return Err(JobsError::TooLargeToParse { body_bytes, needed, limit });
        }
        if let Err(retry_after_s) = self.rates.take(tenant, &limits, Instant::now()) {
            TenantRefused { tenant: tenant.as_str(), reason: TenantLimit::RateLimited }.emit();
            let tenant = tenant.clone();
            return Err(JobsError::RateLimited { tenant, rate: limits.submit_rate_per_s, retry_after_s });
        }
        let own = (limits.max_queued_jobs > 0).then_some(limits.max_queued_jobs);
        let share = self.tenant_queue_share.filter(|_| Self::held_to_shares(caller));
        let max_unfinished = [own, share].into_iter().flatten().min();
        Ok((max_unfinished, critical))
    }

    /// Whether `caller`'s tenant is held to its shares of the queue and the
    /// parse budget: not the operator's own (the admin scope, which every
    /// caller of a daemon without tokens has), whom they do not protect
    /// anyone from.
    fn held_to_shares(caller: &Caller) -> bool {
        !caller.admin
    }

    /// Whose share of the parse budget a submission of `caller`'s counts
    /// in: its tenant's, or none when it is held to no share.
    fn parse_share_of<'t>(tenant: &'t Tenant, caller: &Caller) -> Option<&'t Tenant> {
        Self::held_to_shares(caller).then_some(tenant)
    }

    /// The refusal of a submission the parse budget has no room for now.
    fn parsing_full(&self, full: ParseBudgetFull) -> JobsError {
        if let Some(tenant) = full.tenant() {
            TenantRefused { tenant, reason: TenantLimit::ParseShare }.emit();
        }
        JobsError::ParsingFull { full, retry_after_s: self.retry_after_s }
    }

    /// Submits the job `submission` describes, under `idempotency_key` if
    /// given (else the submission's `request_id`). Answers once the job is
    /// durable: a job answered for survives a crash.
    pub async fn submit(
        &self,
        admission: Admission,
        submission: Offered,
        idempotency_key: Option<String>,
    ) -> Result<Submitted, JobsError> {
        if !self.intake.is_open() {
            return Err(JobsError::ShuttingDown);
        }
        if self.recovering.is_set() {
            return Err(JobsError::Recovering { retry_after_s: self.retry_after_s });
        }
        if let Some((dir, min_free)) = &self.free_space {
            if let Some(free) = crate::store::free_bytes(dir).filter(|free| free < min_free) {
                let retry_after_s = self.retry_after_s;
                return Err(JobsError::NoSpace { free, min_free: *min_free, retry_after_s });
            }
        }
        let Admission { tenant, max_unfinished, critical, parsing } = admission;
        let parser = self.parser.clone();
        // The permit goes with the submission: a caller that leaves while it
        // is parsed does not return the share before the parse ends.
        let parsed = actix_rt::task::spawn_blocking(move || {
            let parsed = match submission {
                Offered::Body(body) => parser.parse((*body).as_ref()),
                Offered::Typed(submission) => {
                    parser.typed(Arc::unwrap_or_clone(submission)).map_err(SubmitError::from)
                }
            };
            drop(parsing);
            parsed
        })
        .await
        .map_err(|cause| JobsError::Thread { what: "validation", cause })??;
        if idempotency_key.is_none() && parsed.request_id.as_deref().is_some_and(|k| k.trim().is_empty()) {
            return Err(JobsError::EmptyRequestId);
        }
        let (priority, lowered) = self.allowed_priority(&parsed, critical);
        // Who asked for what, for the count once the job is made.
        let lowered = lowered.then(|| (tenant.clone(), parsed.circuit.clone()));
        let job = NewJob {
            id: JobId(uuid::Uuid::new_v4().simple().to_string()),
            priority,
            partitions: parsed.partitions,
            circuit: parsed.circuit,
            circuit_id: parsed.work.circuit_id().to_string(),
            reservation: parsed.reservation,
            idempotency_key: idempotency_key.or(parsed.request_id),
            tenant,
            tenant_max_unfinished: max_unfinished,
            deadline: parsed.deadline_ms.map(std::time::Duration::from_millis),
            work: Arc::new(parsed.work),
            request: Some(RecordedRequest { text: parsed.canonical, digest: parsed.digest }),
        };
        let key = job.idempotency_key.clone().unwrap_or_default();
        let outcome = self.keeper.submit(self, job).await?;
        if outcome.key_conflict {
            return Err(JobsError::KeyConflict { key, job: outcome.id });
        }
        if let Some(full) = outcome.queue_full {
            if let Some(tenant) = &full.tenant {
                TenantRefused { tenant: tenant.as_str(), reason: TenantLimit::QueueFull }.emit();
            }
            return Err(JobsError::QueueFull { full, retry_after_s: self.retry_after_s });
        }
        // Durable before the answer: a job answered for survives a crash.
        if let Some(durable) = outcome.durable {
            if let Err(cause) = durable.await {
                if outcome.created {
                    let _ = self.ask(CancelJob(outcome.id.clone(), TenantScope::All)).await;
                }
                return Err(match self.intake.is_open() {
                    true => JobsError::NotStored { cause, retry_after_s: self.retry_after_s },
                    false => JobsError::ShuttingDown,
                });
            }
        }
        if let Some((tenant, kind)) = lowered.filter(|_| outcome.created) {
            PriorityLowered { job: &outcome.id, tenant: tenant.as_str(), kind: &kind, to: priority }.emit();
        }
        Ok(Submitted { id: outcome.id, created: outcome.created, status: outcome.status })
    }

    /// The priority `parsed` runs at, and whether it was lowered: critical
    /// stays critical for a kind in `scheduler.critical_kinds` or a caller
    /// whose token holds the critical scope; elsewhere it is lowered to the
    /// kind's default (high where that is critical: the kind was taken off
    /// the list). Lowered rather than refused, so that a client sending
    /// critical for everything (as some of Curio's tools may) keeps working.
    fn allowed_priority(&self, parsed: &ParsedJob, critical_scope: bool) -> (Priority, bool) {
        let may = critical_scope || self.critical_kinds.contains(&parsed.circuit);
        match parsed.priority {
            Priority::Critical if !may => match parsed.default_priority {
                Priority::Critical => (Priority::High, true),
                default => (default, true),
            },
            asked => (asked, false),
        }
    }
}
