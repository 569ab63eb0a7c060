//! What both front ends (the HTTP API and Curio's gRPC service) share,
//! built once at start (`Daemon::build`): the job seam, the actors, the job
//! parser, the key store, the parameter files, the coalesced metrics text,
//! the token gates and the start time. `http::AppState` and
//! `grpc::GrpcState` are views of one `FrontEnd`, each adding only what is
//! its own (HTTP's body limits; gRPC's waiting calls and listener trust),
//! so that the two cannot drift apart; and the share of the process's file
//! descriptors each front end's connections may hold. It sits below both
//! and imports neither.

use std::sync::Arc;
use std::time::Instant;

use actix_web::web::Bytes;
use cuzk_actors::ProvingSystem;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::Gates;
use crate::job_input::JobParser;
use crate::jobs::Jobs;
use crate::keys::KeyStore;
use crate::param_files::ParamFiles;

/// The daemon as its front ends see it.
pub struct FrontEnd {
    /// Submitting, reading, awaiting and cancelling jobs; readiness and the
    /// counts: every job read of either front end goes through it.
    pub jobs: Arc<Jobs>,
    /// The actors asked beyond jobs: the monitor (workers, timeline), the
    /// budget (resident keys), the backend's devices.
    pub system: ProvingSystem,
    /// The circuits this daemon knows and where Filecoin's parameter files
    /// are.
    pub parser: Arc<JobParser>,
    /// Proving keys: the shapes set up so far and their verifying keys.
    pub keys: Arc<KeyStore>,
    /// Filecoin's parameter files: preloaded and evicted (`/v1/params`,
    /// PreloadSRS, EvictSRS).
    pub params: Arc<ParamFiles>,
    /// The Prometheus text `/metrics` and GetMetrics answer.
    pub metrics: MetricsText,
    /// The token gate in force, replaced on SIGHUP for both front ends.
    pub gates: Arc<Gates>,
    /// When the daemon started (GetStatus' uptime).
    pub started: Instant,
}

/// The metrics text, rendered once for every scrape waiting: a render
/// takes CPU from the provers on a small machine, and a flood of scrapers
/// rendering side by side once slowed a WinningPoSt several times over.
/// At most one render runs; a scrape that arrives while it runs waits for
/// the next one, which answers every scrape that arrived before it
/// started. No scrape sees figures older than its own arrival.
pub struct MetricsText {
    /// The exporter's registry.
    handle: PrometheusHandle,
    /// The last render and when it started; the lock is held while
    /// rendering, so waiting scrapers queue on it (in arrival order).
    last: tokio::sync::Mutex<Option<(Instant, Bytes)>>,
}

impl MetricsText {
    /// Renders `handle`'s registry.
    pub fn new(handle: PrometheusHandle) -> Self {
        Self { handle, last: tokio::sync::Mutex::new(None) }
    }

    /// The text as of no earlier than this call.
    pub async fn text(&self) -> Bytes {
        let arrived = Instant::now();
        let mut last = self.last.lock().await;
        if let Some((_, text)) = last.as_ref().filter(|(started, _)| *started >= arrived) {
            return text.clone();
        }
        let started = Instant::now();
        let text = Bytes::from(crate::telemetry::fix_exposition(&self.handle.render()));
        *last = Some((started, text.clone()));
        text
    }
}

/// The connections one front end's listeners may hold open together: a
/// quarter of the process's soft limit on open files (`RLIMIT_NOFILE`), at
/// least 16 and at most 4,096, so that neither the HTTP API nor gRPC can
/// take the descriptors the other, the job store and the parameter files
/// need.
pub fn connection_share() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given, nothing else.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    let files = if read == 0 { usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX) } else { usize::MAX };
    (files / 4).clamp(16, MAX_CONNECTIONS)
}

/// `connection_share`'s bound whatever the file limit.
const MAX_CONNECTIONS: usize = 4096;
