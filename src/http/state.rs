//! What every handler shares: the job seam, the actors, the job parser, the
//! key store and the HTTP limits, built once at start (`Daemon::build`).

use std::sync::Arc;

use cuzk_actors::ProvingSystem;

use crate::job_input::JobParser;
use crate::jobs::Jobs;
use crate::keys::KeyStore;
use crate::param_files::ParamFiles;

pub struct AppState {
    /// Submitting, reading, cancelling jobs; readiness and the counts.
    pub jobs: Arc<Jobs>,
    /// The actors handlers ask beyond jobs: the monitor (workers,
    /// timeline), the budget (resident keys).
    pub system: ProvingSystem,
    /// The circuits this daemon knows and where Filecoin's parameter files
    /// are.
    pub parser: Arc<JobParser>,
    /// Proving keys: the shapes set up so far and their verifying keys.
    pub keys: Arc<KeyStore>,
    /// Filecoin's parameter files: preloaded and evicted (`/v1/params`).
    pub params: Arc<ParamFiles>,
    /// The largest request body read (limits.max_body_bytes).
    pub max_body_bytes: usize,
    /// How long a body may take to arrive (limits.body_read_timeout_s).
    pub body_read_timeout: std::time::Duration,
    /// Renders `/metrics`.
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
}
