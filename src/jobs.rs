//! The job seam: every front end (the HTTP API; gRPC next) submits, reads,
//! awaits and cancels jobs through `Jobs`, and gets the same guarantees:
//! durable before answered, idempotency keys, tenant scopes, queue limits,
//! the refusals while recovering or shutting down. `Jobs` owns the one
//! choice between a single daemon's tracker and a fleet node's database
//! (`keeper.rs`, made once at start); its answers are the tracker's types
//! either way, its refusals one typed error (`JobsError`) that each front
//! end maps once.
//!
//! `submit.rs` takes a submission from its tenant's rate check and its
//! parse budget (`parse_budget.rs`) to its durable answer, `wait.rs` waits
//! for a job to end; reads, cancels and the daemon's counts are here. It
//! sits below the front ends and imports none.

mod error;
mod keeper;
mod parse_budget;
mod submit;
mod wait;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use actix::Message;
use cuzk_actors::messages::{CircuitLoad, JobStatus, JobView, ProofsError, ProofsView};
use cuzk_actors::store::{JobStore, StoreError, StoreHealth};
use cuzk_actors::system::SystemStatus;
use cuzk_actors::tracker::Tracker;
use cuzk_actors::{JobId, ProvingSystem, TenantScope};
use serde::Serialize;

use crate::config::{Config, ConfigError};
use crate::fleet::{Fleet, FleetStatus};
use crate::job_input::JobParser;
use crate::restore::Recovering;
use crate::shutdown::Intake;
use crate::tenants::SubmitRates;

pub use error::{JobsError, Unready};
use keeper::Keeper;
pub use parse_budget::{
    parse_estimate, ParseBudget, ParseBudgetFull, ParsePermit, ParsingStatus, PARSE_PEAK_FACTOR,
    PARSE_SLACK_BYTES,
};
pub use submit::{Admission, Offered, Submitted};

/// The jobs of this daemon, or of its fleet.
pub struct Jobs {
    /// The actors: the tracker holds a single daemon's jobs (and a fleet
    /// node's partitions); all of them answer for the daemon's counts.
    system: ProvingSystem,
    /// Who keeps the jobs: the tracker, or on a fleet node (a PostgreSQL
    /// store) the database, for the whole fleet.
    keeper: Keeper,
    /// Turns a submission's body into work.
    parser: Arc<JobParser>,
    /// The job store: whether it can write (readiness, the counts).
    store: Arc<dyn JobStore>,
    /// Closed once a shutdown begins.
    intake: Intake,
    /// Set while stored unfinished jobs are rebuilt after a start.
    recovering: Recovering,
    /// Each tenant's submit-rate bucket.
    rates: SubmitRates,
    /// The memory submissions being read and parsed may hold
    /// (`limits.parse_budget_bytes`, `limits.max_parsing_requests`).
    parsing: ParseBudget,
    /// The redb file's directory and the free space its filesystem must
    /// keep before a submission is written (`store.min_free_bytes`); None
    /// for a database, whose disk is its own, or no minimum.
    free_space: Option<(PathBuf, u64)>,
    /// `limits.max_queued_jobs`, which a fleet node applies to the fleet's
    /// unfinished jobs (a single daemon's tracker has its own copy).
    max_queued_jobs: Option<usize>,
    /// One tenant's share of `max_queued_jobs` (`limits.queue_share_per_tenant`
    /// of it, at least one): its unfinished jobs beyond are refused, unless
    /// they are the operator's own.
    tenant_queue_share: Option<usize>,
    /// Seconds a refused caller is told to wait before trying again
    /// (`limits.queue_full_retry_after_s`).
    retry_after_s: u64,
    /// How long a message that has arrived whole waits for a place in the
    /// parse budget (`limits.parse_wait_s`).
    parse_wait: std::time::Duration,
    /// The kinds any caller may ask priority critical for
    /// (`scheduler.critical_kinds`).
    critical_kinds: Vec<String>,
}

/// `/v1/status`: this daemon's scheduler, job store and restore.
#[derive(Debug, Serialize)]
pub struct NodeStatus {
    /// The scheduler's budget, queues, job counts and workers.
    #[serde(flatten)]
    pub system: SystemStatus,
    /// Whether the job store writes, and damage found on start.
    pub store: StoreHealth,
    /// True while stored unfinished jobs are rebuilt after a start.
    pub recovering: bool,
    /// A fleet node's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The submissions being read and parsed, against the parse budget.
    pub parsing: ParsingStatus,
}

/// `/v1/status?scope=fleet`: the fleet's counts, as the database has them.
#[derive(Debug, Serialize)]
pub struct FleetReport {
    /// Always `fleet`: says which counts these are.
    pub scope: &'static str,
    /// The node that answered.
    pub node: String,
    /// Jobs by status, partitions waiting and partitions held per node.
    pub fleet: FleetStatus,
}

impl Jobs {
    /// The seam over `system`'s tracker, or over `fleet`'s database on a
    /// fleet node, with the limits and the job store `config` names;
    /// refused when its parse budget cannot admit a full-size body.
    pub fn new(
        config: &Config,
        system: ProvingSystem,
        parser: Arc<JobParser>,
        store: Arc<dyn JobStore>,
        fleet: Option<Arc<Fleet>>,
        intake: Intake,
        recovering: Recovering,
    ) -> Result<Self, ConfigError> {
        let min_free = config.store.min_free_bytes;
        let max_queued = config.limits.max_queued_jobs;
        let queue_share = crate::config::tenant_share(
            "queue_share_per_tenant",
            config.limits.queue_share_per_tenant,
            max_queued,
        )?;
        let critical_kinds = config.scheduler.critical_kinds(&parser.registry)?.to_vec();
        Ok(Self {
            system,
            keeper: fleet.map_or(Keeper::Tracker, Keeper::Fleet),
            parser,
            store,
            intake,
            recovering,
            rates: SubmitRates::default(),
            parsing: ParseBudget::new(&config.limits)?,
            // The redb file fills the data directory's disk; a database, its own.
            free_space: (config.store.url.is_none() && min_free > 0)
                .then(|| (config.data_dir.clone(), min_free)),
            max_queued_jobs: (max_queued > 0).then_some(max_queued),
            tenant_queue_share: (max_queued > 0).then_some(queue_share),
            retry_after_s: config.limits.queue_full_retry_after_s,
            parse_wait: std::time::Duration::from_secs(config.limits.parse_wait_s),
            critical_kinds,
        })
    }

    /// A job's view, per partition.
    pub async fn view(&self, id: &JobId, scope: &TenantScope) -> Result<JobView, JobsError> {
        let was_recovering = self.recovering.is_set();
        let view = self.keeper.view(self, id, scope).await?;
        view.ok_or_else(|| self.missing(was_recovering, id))
    }

    /// A done job's proofs, in partition order.
    pub async fn proofs(&self, id: &JobId, scope: &TenantScope) -> Result<ProofsView, JobsError> {
        let was_recovering = self.recovering.is_set();
        let proofs = self.keeper.proofs(self, id, scope).await?;
        proofs.map_err(|error| match error {
            ProofsError::NotFound => self.missing(was_recovering, id),
            ProofsError::NotReady(status) => JobsError::NotDone { id: id.clone(), status },
        })
    }

    /// Cancels a job: its queued partitions are dropped, running ones stop
    /// at their next stage boundary (on a fleet, at their node's next lease
    /// renewal). Also Ok for a job already cancelled.
    pub async fn cancel(&self, id: &JobId, scope: &TenantScope) -> Result<(), JobsError> {
        let was_recovering = self.recovering.is_set();
        match self.keeper.cancel(self, id, scope).await? {
            None => Err(self.missing(was_recovering, id)),
            Some(JobStatus::Cancelled) => Ok(()),
            Some(status) => Err(JobsError::AlreadyEnded { id: id.clone(), status }),
        }
    }

    /// Unfinished jobs per circuit (a Filecoin kind or a family), queued
    /// and running: this daemon's, or on a fleet node the fleet's.
    pub async fn circuit_load(&self) -> Result<BTreeMap<String, CircuitLoad>, JobsError> {
        self.keeper.circuit_load(self).await
    }

    /// Jobs waiting for their first partition to start: this daemon's, or
    /// on a fleet node the fleet's (any node may take a new job).
    pub async fn queued(&self) -> Result<usize, JobsError> {
        self.keeper.queued(self).await
    }

    /// This daemon's scheduler (budget, queues, job counts, workers), its
    /// job store's health and whether it is still restoring.
    pub async fn status(&self) -> Result<NodeStatus, JobsError> {
        Ok(NodeStatus {
            system: self.system.status().await?,
            store: self.store.health(),
            recovering: self.recovering.is_set(),
            node: self.keeper.fleet().map(|fleet| fleet.node.clone()),
            parsing: self.parsing.status(),
        })
    }

    /// The fleet's jobs by status and partitions by holder, from the
    /// database; refused on a daemon that is no fleet node.
    pub async fn fleet_status(&self) -> Result<FleetReport, JobsError> {
        let fleet = self.keeper.fleet().ok_or(JobsError::NotAFleetNode)?;
        let counts = self.database(fleet, |fleet| fleet.status()).await?;
        Ok(FleetReport { scope: "fleet", node: fleet.node.clone(), fleet: counts })
    }

    /// Whether new jobs are taken now, and why not.
    pub fn readiness(&self) -> Result<(), Unready> {
        if !self.intake.is_open() {
            return Err(Unready::ShuttingDown);
        }
        if self.recovering.is_set() {
            return Err(Unready::Recovering { retry_after_s: self.retry_after_s });
        }
        match self.store.health().failing {
            Some(why) => Err(Unready::StoreFailing { why, retry_after_s: self.retry_after_s }),
            None => Ok(()),
        }
    }

    /// A job not found: gone for good, or (`was_recovering`, the flag as
    /// read *before* the job was looked up) maybe one still being rebuilt.
    /// The flag clears only once the rebuilt jobs are queued to the
    /// tracker, so a clear flag means they were ahead of the lookup; read
    /// after the answer, a rebuild finishing in between turned a resumed
    /// job into a NotFound (seen in the durability test).
    fn missing(&self, was_recovering: bool, id: &JobId) -> JobsError {
        match was_recovering {
            true => JobsError::Recovering { retry_after_s: self.retry_after_s },
            false => JobsError::NotFound(id.clone()),
        }
    }

    /// Asks the tracker; one that no longer answers is `SchedulerGone`.
    async fn ask<M>(&self, message: M) -> Result<M::Result, JobsError>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        Tracker: actix::Handler<M>,
    {
        Ok(self.system.tracker.send(message).await?)
    }

    /// Asks the fleet's database on a blocking thread (its client blocks).
    async fn database<T: Send + 'static>(
        &self,
        fleet: &Arc<Fleet>,
        question: impl FnOnce(&Arc<Fleet>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, JobsError> {
        let fleet = fleet.clone();
        actix_rt::task::spawn_blocking(move || question(&fleet))
            .await
            .map_err(|cause| JobsError::Thread { what: "database", cause })?
            .map_err(|cause| JobsError::Database { cause, retry_after_s: self.retry_after_s })
    }
}
