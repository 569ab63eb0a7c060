//! What every handler shares: the actors, the job parser, the key store and
//! the daemon's limits, built once by `server::build`.

use std::sync::Arc;

use cuzk_actors::store::JobStore;
use cuzk_actors::ProvingSystem;

use crate::fleet::Fleet;
use crate::job_input::JobParser;
use crate::keys::CircuitStore;
use crate::shutdown::Intake;
use crate::tenants::SubmitRates;

pub struct AppState {
    /// The actors handlers ask: tracker, dispatcher, monitor, budget.
    pub system: ProvingSystem,
    /// Turns a submission into work; shared with the job store's restore.
    pub jobs: Arc<JobParser>,
    /// Proving keys: the shapes set up so far and their verifying keys.
    pub store: Arc<CircuitStore>,
    /// Seconds a client is told to wait when the job queue is full.
    pub retry_after_s: u64,
    /// The largest request body read (limits.max_body_bytes).
    pub max_body_bytes: usize,
    /// How long a body may take to arrive (limits.body_read_timeout_s).
    pub body_read_timeout: std::time::Duration,
    /// Renders `/metrics`.
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// Closed once a shutdown begins.
    pub intake: Intake,
    /// The job store: whether it can write (submissions, `/readyz`).
    pub job_store: Arc<dyn JobStore>,
    /// Where the job store lives, and the free space its filesystem must
    /// keep before a submission is written (`store.min_free_bytes`).
    pub data_dir: std::path::PathBuf,
    pub min_free_bytes: u64,
    /// Set while stored unfinished jobs are rebuilt after a start.
    pub recovering: crate::restore::Recovering,
    /// Each tenant's submit-rate bucket.
    pub submit_rates: SubmitRates,
    /// Set on a fleet node (a PostgreSQL store): jobs are submitted to, read
    /// from and cancelled in the database, for the whole fleet.
    pub fleet: Option<Arc<Fleet>>,
    /// limits.max_queued_jobs: a fleet node applies it to the fleet's
    /// unfinished jobs (a single daemon's tracker has its own copy).
    pub max_queued_jobs: Option<usize>,
}
