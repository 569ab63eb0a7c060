//! What every handler shares: the daemon's front-end context (`FrontEnd`,
//! the same one gRPC's calls see) and the HTTP limits, built once at start
//! (`Daemon::build`).

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crate::front::FrontEnd;

/// The HTTP front end's view of the daemon.
pub struct AppState {
    /// The job seam, the actors, the parser, the keys, the parameter files
    /// and the metrics text, shared with gRPC.
    pub front: Arc<FrontEnd>,
    /// The largest request body read (limits.max_body_bytes).
    pub max_body_bytes: usize,
    /// How long a body may take to arrive (limits.body_read_timeout_s).
    pub body_read_timeout: Duration,
}

impl Deref for AppState {
    type Target = FrontEnd;

    fn deref(&self) -> &FrontEnd {
        &self.front
    }
}
