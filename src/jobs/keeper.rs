//! Where this daemon's jobs are kept, chosen once at start: a single
//! daemon's tracker, or, on a fleet node, the fleet's database. Each of the
//! seam's operations on jobs (submit, view, proofs, cancel, watch, and the
//! queue's counts) asks the keeper it is, here and nowhere else; the seam
//! around it (`jobs.rs`, `submit.rs`, `wait.rs`) adds the checks and the
//! refusals common to both.

use std::collections::BTreeMap;
use std::sync::Arc;

use cuzk_actors::messages::{
    CancelJob, CircuitLoad, GetCircuitLoad, GetJob, GetProofs, GetTrackerStatus, JobEnding, JobStatus,
    JobView, ProofsError, ProofsView, SubmitJob, SubmitOutcome, WatchJob,
};
use cuzk_actors::{JobId, NewJob, TenantScope};

use super::{Jobs, JobsError};
use crate::fleet::Fleet;

/// Who keeps the jobs.
pub(super) enum Keeper {
    /// A single daemon: its tracker has every job.
    Tracker,
    /// A fleet node: jobs are submitted to, read, watched and cancelled in
    /// the database, for the whole fleet; the tracker holds only the
    /// partitions this node claimed.
    Fleet(Arc<Fleet>),
}

impl Keeper {
    /// The fleet, on a fleet node.
    pub(super) fn fleet(&self) -> Option<&Arc<Fleet>> {
        match self {
            Keeper::Tracker => None,
            Keeper::Fleet(fleet) => Some(fleet),
        }
    }

    /// Records a new job (or finds the one its idempotency key names).
    pub(super) async fn submit(&self, jobs: &Jobs, job: NewJob) -> Result<SubmitOutcome, JobsError> {
        match self {
            Keeper::Tracker => jobs.ask(SubmitJob(job)).await,
            Keeper::Fleet(fleet) => {
                let max = jobs.max_queued_jobs;
                jobs.database(fleet, move |fleet| fleet.submit(&job, max)).await
            }
        }
    }

    /// A job's view, per partition.
    pub(super) async fn view(
        &self,
        jobs: &Jobs,
        id: &JobId,
        scope: &TenantScope,
    ) -> Result<Option<JobView>, JobsError> {
        let local = jobs.ask(GetJob(id.clone(), scope.clone())).await?;
        match self {
            Keeper::Tracker => Ok(local),
            // The database has every partition; the tracker, detail of
            // those this node holds.
            Keeper::Fleet(fleet) => {
                let (job, scope) = (id.clone(), scope.clone());
                jobs.database(fleet, move |fleet| fleet.view(&job, &scope, local)).await
            }
        }
    }

    /// A job's proofs, or why there are none.
    pub(super) async fn proofs(
        &self,
        jobs: &Jobs,
        id: &JobId,
        scope: &TenantScope,
    ) -> Result<Result<ProofsView, ProofsError>, JobsError> {
        let (job, scope) = (id.clone(), scope.clone());
        match self {
            Keeper::Tracker => jobs.ask(GetProofs(job, scope)).await,
            Keeper::Fleet(fleet) => jobs.database(fleet, move |fleet| fleet.proofs(&job, &scope)).await,
        }
    }

    /// Cancels a job; its status after, None when there is no such job.
    pub(super) async fn cancel(
        &self,
        jobs: &Jobs,
        id: &JobId,
        scope: &TenantScope,
    ) -> Result<Option<JobStatus>, JobsError> {
        let (job, scope) = (id.clone(), scope.clone());
        match self {
            Keeper::Tracker => jobs.ask(CancelJob(job, scope)).await,
            Keeper::Fleet(fleet) => jobs.database(fleet, move |fleet| fleet.cancel(&job, &scope)).await,
        }
    }

    /// What resolves when a job ends; None when there is no such job.
    pub(super) async fn watch(
        &self,
        jobs: &Jobs,
        id: &JobId,
        scope: &TenantScope,
    ) -> Result<Option<JobEnding>, JobsError> {
        let (job, scope) = (id.clone(), scope.clone());
        match self {
            Keeper::Tracker => jobs.ask(WatchJob(job, scope)).await,
            Keeper::Fleet(fleet) => jobs.database(fleet, move |fleet| fleet.watch(&job, &scope)).await,
        }
    }

    /// Unfinished jobs per circuit, queued and running.
    pub(super) async fn circuit_load(&self, jobs: &Jobs) -> Result<BTreeMap<String, CircuitLoad>, JobsError> {
        match self {
            Keeper::Tracker => jobs.ask(GetCircuitLoad).await,
            Keeper::Fleet(fleet) => jobs.database(fleet, |fleet| fleet.circuit_load()).await,
        }
    }

    /// Jobs no partition of which has started.
    pub(super) async fn queued(&self, jobs: &Jobs) -> Result<usize, JobsError> {
        match self {
            Keeper::Tracker => {
                let status = jobs.ask(GetTrackerStatus).await?;
                Ok(status.jobs.get(JobStatus::Queued.as_str()).copied().unwrap_or(0))
            }
            Keeper::Fleet(_) => Ok(self.circuit_load(jobs).await?.values().map(|load| load.queued).sum()),
        }
    }
}
