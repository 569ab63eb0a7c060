//! What every RPC shares: the daemon's front-end context (`FrontEnd`, the
//! same one HTTP's handlers see), the waiting calls, whether the
//! listener's reach is the credential and the FAILED answers without a
//! job, built once by the server.

use std::ops::Deref;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::calls::Calls;
use crate::front::FrontEnd;

/// The gRPC front end's view of the daemon.
pub struct GrpcState {
    /// The job seam (the same as HTTP's, so both front ends give the same
    /// guarantees), the token gate, the parameter files, the metrics text,
    /// the actors GetStatus reads and the start time.
    pub front: Arc<FrontEnd>,
    /// The calls waiting on jobs, and their bound.
    pub calls: Arc<Calls>,
    /// Whether the listener's reach is the credential (a unix socket or
    /// loopback): a call without a token is then the `default` tenant's.
    pub trusted: bool,
    /// FAILED answers no job stands behind (inputs that never became one):
    /// `GetStatus` counts them with the failed jobs, as the original daemon
    /// counted every failed proof.
    pub failed_without_job: AtomicU64,
}

impl Deref for GrpcState {
    type Target = FrontEnd;

    fn deref(&self) -> &FrontEnd {
        &self.front
    }
}
