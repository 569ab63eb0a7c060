//! The calls waiting on jobs (`Prove`, `AwaitProof`), counted per job, so
//! that a caller who leaves early (a disconnect, a passed deadline) cancels
//! a `Prove`'s job only when no other caller waits on it, and bounded in
//! number per tenant (`grpc.max_waiting_calls` each): a tenant that takes
//! all its places refuses only itself, never another tenant's WinningPoSt.
//! The tenants are the configured ones (and `default`), so the daemon's
//! total is bounded too. Small maps under locks touched when a call starts
//! and ends, never while it waits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cuzk_actors::{JobId, Tenant, TenantScope};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::jobs::Jobs;
use crate::shutdown::Intake;
use crate::telemetry::GrpcWaiting;

/// Every waiting call of this daemon.
pub struct Calls {
    /// Each tenant's places: one permit per waiting call.
    shares: Mutex<HashMap<Tenant, Arc<Semaphore>>>,
    /// `grpc.max_waiting_calls`: each tenant's share.
    limit: usize,
    /// Calls waiting now, over every tenant (the gauge).
    waiting: AtomicUsize,
    /// Jobs waited on now, by id.
    jobs: Mutex<HashMap<JobId, Waited>>,
    /// Closed once a shutdown begins: calls then end because the daemon
    /// stops, and their jobs resume on the next start instead.
    intake: Intake,
}

/// One job's waiting calls.
#[derive(Default)]
struct Waited {
    /// Calls waiting on it now.
    calls: usize,
    /// A `Prove` waits on it: once no call does, nobody will take its
    /// proof, so it is cancelled (a job `SubmitProof` made is left to run:
    /// its submitter said it would come back).
    cancel_when_alone: bool,
    /// Its last caller left and its cancel is under way: a `Prove` that
    /// finds it by its request proves anew rather than join it.
    abandoned: bool,
}

/// A call refused a place: its tenant's `grpc.max_waiting_calls` calls
/// wait already.
#[derive(Debug, thiserror::Error)]
#[error("tenant {:?} has {limit} calls waiting on jobs already (grpc.max_waiting_calls, each tenant's share); retry later", tenant.as_str())]
pub struct TooManyCalls {
    pub tenant: Tenant,
    pub limit: usize,
}

impl Calls {
    /// No calls waiting yet, at most `limit` per tenant. Once `intake` closes (a
    /// shutdown), a `Prove` whose last caller left no longer cancels its job.
    pub fn new(limit: usize, intake: Intake) -> Self {
        Self { shares: Mutex::default(), limit, waiting: AtomicUsize::new(0), jobs: Mutex::default(), intake }
    }

    /// A place among `tenant`'s waiting calls, taken before any work is
    /// done for the call and held until it ends.
    pub fn place(self: &Arc<Self>, tenant: &Tenant) -> Result<Place, TooManyCalls> {
        let share = {
            // Semaphores only: a panic elsewhere left them whole.
            let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
            shares.entry(tenant.clone()).or_insert_with(|| Arc::new(Semaphore::new(self.limit))).clone()
        };
        // The semaphore is never closed: every refusal is a full share.
        let permit = share
            .try_acquire_owned()
            .map_err(|_: TryAcquireError| TooManyCalls { tenant: tenant.clone(), limit: self.limit })?;
        let waiting = self.waiting.fetch_add(1, Ordering::Relaxed) + 1;
        GrpcWaiting { calls: waiting }.emit();
        Ok(Place { calls: self.clone(), permit: Some(permit) })
    }

    /// Registers a call waiting on `job` until the returned guard drops;
    /// `prove`: the call is a `Prove`, whose job nobody else will collect.
    /// None: the job's last caller left and its cancel is under way.
    pub fn wait_on(self: &Arc<Self>, jobs: &Arc<Jobs>, job: &JobId, prove: bool) -> Option<Waiting> {
        let mut waited = self.lock();
        let entry = waited.entry(job.clone()).or_default();
        if entry.abandoned {
            return None;
        }
        entry.calls += 1;
        entry.cancel_when_alone |= prove;
        Some(Waiting { calls: self.clone(), jobs: jobs.clone(), job: job.clone(), ended: false })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Waited>> {
        // Counts only: a panic elsewhere left them whole.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call on `job` left; `ended`: it saw the job end. Answers whether
    /// the job is to be cancelled (it did not end, and it was the last
    /// call of a `Prove`'s job).
    fn leave(&self, job: &JobId, ended: bool) -> bool {
        let mut waited = self.lock();
        let Some(entry) = waited.get_mut(job) else { return false };
        entry.calls -= 1;
        if entry.calls > 0 {
            return false;
        }
        let cancel = !ended && entry.cancel_when_alone && self.intake.is_open();
        match cancel {
            true => entry.abandoned = true,
            false => {
                waited.remove(job);
            }
        }
        cancel
    }

    /// The cancel of an abandoned job is done (or failed): a `Prove` that
    /// finds it next joins it or proves anew as its status says.
    fn forget(&self, job: &JobId) {
        let mut waited = self.lock();
        if waited.get(job).is_some_and(|entry| entry.calls == 0) {
            waited.remove(job);
        }
    }
}

/// A call's place among the waiting calls.
pub struct Place {
    calls: Arc<Calls>,
    /// Given back on drop, before the count is published.
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.permit = None;
        let waiting = self.calls.waiting.fetch_sub(1, Ordering::Relaxed) - 1;
        GrpcWaiting { calls: waiting }.emit();
    }
}

/// A call waiting on a job. Dropped without `ended` (the caller went away,
/// or its deadline passed), it cancels a `Prove`'s job nobody else waits
/// on.
pub struct Waiting {
    calls: Arc<Calls>,
    jobs: Arc<Jobs>,
    job: JobId,
    /// Set once the call saw the job end.
    ended: bool,
}

impl Waiting {
    /// The call saw its job end: leaving cancels nothing.
    pub fn ended(mut self) {
        self.ended = true;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.calls.leave(&self.job, self.ended) {
            return;
        }
        // A dropped call runs inside the runtime that served it; if that
        // runtime is already going away, so is the daemon, and the job
        // resumes on the next start.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.calls.forget(&self.job);
            return;
        };
        let (calls, jobs, job) = (self.calls.clone(), self.jobs.clone(), self.job.clone());
        runtime.spawn(async move {
            match jobs.cancel(&job, &TenantScope::All).await {
                Ok(()) => log::info!("gRPC: job {job} cancelled: its last caller left before it ended"),
                Err(error) => {
                    log::debug!("gRPC: job {job}, left by its last caller, was not cancelled: {error}")
                }
            }
            calls.forget(&job);
        });
    }
}
