//! What every handler shares: the job seam, the actors, the job parser, the
//! key store and the HTTP limits, built once at start (`Daemon::build`).

use std::sync::Arc;
use std::time::Instant;

use actix_web::web::Bytes;
use cuzk_actors::ProvingSystem;
use metrics_exporter_prometheus::PrometheusHandle;

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
    /// Renders `/metrics`, once for every scrape waiting.
    pub metrics: MetricsText,
}

/// `/metrics`' text, rendered once for every scrape waiting: a render
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
