//! What every RPC shares, built once by the server: the job seam, the
//! token gate, the parameter files, the metrics, the actors, the waiting
//! calls and the message limit.

use std::sync::Arc;
use std::time::Instant;

use cuzk_actors::ProvingSystem;
use metrics_exporter_prometheus::PrometheusHandle;

use super::calls::Calls;
use crate::auth::Gates;
use crate::jobs::Jobs;
use crate::param_files::ParamFiles;

pub struct GrpcState {
    /// Submitting, awaiting, reading and cancelling jobs: the same seam as
    /// HTTP's, so both front ends give the same guarantees.
    pub jobs: Arc<Jobs>,
    /// The token gate HTTP uses, replaced on SIGHUP for both.
    pub gates: Arc<Gates>,
    /// Filecoin's parameter files: PreloadSRS, EvictSRS and GetStatus'
    /// loaded keys.
    pub params: Arc<ParamFiles>,
    /// Renders GetMetrics' text, as `/metrics`.
    pub metrics: PrometheusHandle,
    /// The actors GetStatus reads: workers, budget, loads per kind.
    pub system: ProvingSystem,
    /// The calls waiting on jobs, and their bound.
    pub calls: Arc<Calls>,
    /// When the daemon started (GetStatus' uptime).
    pub started: Instant,
    /// Whether the listener's reach is the credential (a unix socket or
    /// loopback): a call without a token is then the `default` tenant's.
    pub trusted: bool,
}
