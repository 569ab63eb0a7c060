//! A fleet node: a daemon on a PostgreSQL store shares its queue with every
//! other daemon on that database (issue 14; docs/operations.md, "Fleet").
//!
//! Any node takes any request: a submission is written to the database
//! (`requests.rs`), never to this node's tracker; reads, proofs and cancels
//! are answered from the database (`stored.rs`: a job as it has it), and
//! waiting for a job's end polls it (`ends.rs`). Work reaches the tracker
//! only as partitions this node claimed from the shared queue of leases
//! (`leases.rs`; `claimer.rs`), whose leases it renews while they run
//! (`renewer.rs`); a partition's result and the end of its lease are one
//! transaction of the job store (`store/pg.rs`), and the one that records a
//! job's last partition ends the job. The job seam's queries share a few
//! connections (`pool.rs`); the claimer and the renewer have one each.

mod claimer;
mod ends;
mod leases;
mod pool;
mod renewer;
mod requests;
mod stored;

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use cuzk_actors::store::{FleetLoad, JobStore, StoreError};
use cuzk_actors::ProvingSystem;
use tokio::sync::oneshot;

use crate::config::Config;
use crate::job_input::JobParser;
use crate::postgres::{PgError, StoreUrl};
use crate::shutdown::Intake;

pub use leases::{queue_partitions, Claim, Leases, LeasesError};
pub use requests::FleetStatus;

/// Why a node could not join its fleet.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The claimer's or the renewer's connection.
    #[error(transparent)]
    Leases(#[from] LeasesError),
    /// The job seam's connections.
    #[error(transparent)]
    Database(#[from] PgError),
    /// What this node held before it restarted could not be put back.
    #[error("cannot put back what this node held: {0}")]
    PutBack(StoreError),
    /// The claimer's or the renewer's thread could not be spawned.
    #[error("cannot start the {name} thread: {error}")]
    Thread {
        /// Which thread, for the message.
        name: &'static str,
        /// Why it could not start.
        error: std::io::Error,
    },
    /// A fleet thread ended before it reported that it had started.
    #[error("a fleet thread stopped while starting")]
    ThreadDied,
}
/// What the claimer and the renewer connect with.
#[derive(Clone)]
struct Settings {
    url: StoreUrl,
    node: String,
    lease: Duration,
    poll: Duration,
}

/// A fleet node's side of the database, for the HTTP handlers.
pub struct Fleet {
    /// This node's name: the owner of the leases it holds.
    pub node: String,
    pool: pool::Pool,
    /// The jobs callers wait on to end (`watch`).
    ends: Mutex<ends::Ends>,
    /// Resolves when the claimer has stopped (after a shutdown began, once
    /// it put back what the node had not started).
    claimer_done: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Fleet {
    /// Connects the node's pool, puts back what this node's name still
    /// held (it restarted: that work is lost with the old process), and
    /// starts the claimer and the renewer.
    /// `(url, node)`: the database, and this node's name in the fleet.
    pub fn start(
        config: &Config,
        (url, node): (&StoreUrl, &str),
        system: &ProvingSystem,
        parser: Arc<JobParser>,
        store: Arc<dyn JobStore>,
        load: Arc<FleetLoad>,
        intake: Intake,
    ) -> Result<Arc<Fleet>, FleetError> {
        let node = node.to_string();
        let settings = Settings {
            url: url.clone(),
            node: node.clone(),
            lease: Duration::from_secs(config.fleet.lease_secs),
            poll: Duration::from_secs(config.fleet.poll_secs),
        };
        let claimer = claimer::Claimer {
            settings: settings.clone(),
            tracker: system.tracker.clone(),
            parser,
            store,
            load,
            // One partition ready for each synthesis thread, and one more
            // so that a thread that frees up finds the next one here.
            room: system.config.synthesis_threads.max(1) + 1,
            max_attempts: system.config.max_attempts.max(1),
            retention: Duration::from_secs(config.store.retention_secs),
            intake,
        };
        // The client blocks: it connects on the threads that use it, never
        // on this one (an actix runtime's), and the start waits for both.
        let (claimer_settings, renewer_settings) = (settings.clone(), settings.clone());
        let (claimer_stopped, claimer_done) = oneshot::channel();
        let claiming = spawn("cuzk-claimer", move |ready| {
            let connected =
                Leases::connect(&claimer_settings.url, &claimer_settings.node, claimer_settings.lease)
                    .map_err(FleetError::from)
                    .and_then(|mut leases| {
                        let released = leases.release_all().map_err(FleetError::PutBack)?;
                        if released > 0 {
                            log::info!(
                                "fleet: node {} put back {released} partitions it held before it restarted",
                                claimer_settings.node
                            );
                        }
                        // A database without LISTEN (older YugabyteDB) still
                        // works: the poll finds the work, later.
                        if let Err(e) = leases.listen() {
                            log::warn!(
                            "fleet: no wake-ups from the database ({e}); looking for work every {:?} instead",
                            claimer_settings.poll
                        );
                        }
                        Ok(leases)
                    });
            match connected {
                Ok(leases) => {
                    let _ = ready.send(Ok(()));
                    claimer.run(leases);
                    let _ = claimer_stopped.send(());
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            }
        })?;
        let tracker = system.tracker.clone();
        let renewing = spawn("cuzk-renewer", move |ready| {
            match Leases::connect(&renewer_settings.url, &renewer_settings.node, renewer_settings.lease) {
                Ok(leases) => {
                    let _ = ready.send(Ok(()));
                    renewer::run(renewer_settings, tracker, Some(leases));
                }
                Err(e) => {
                    let _ = ready.send(Err(e.into()));
                }
            }
        })?;
        for started in [claiming, renewing] {
            started.recv().map_err(|_| FleetError::ThreadDied)??;
        }
        log::info!(
            "fleet: node {node} on {url}: leases of {:?}, renewed every {:?}; polling every {:?} without a wake-up",
            settings.lease,
            settings.lease / 3,
            settings.poll
        );
        Ok(Arc::new(Fleet {
            node,
            pool: pool::Pool::new(url)?,
            ends: Mutex::default(),
            claimer_done: Mutex::new(Some(claimer_done)),
        }))
    }

    /// Waits up to `limit` for the claimer to stop: a shutdown's last step,
    /// so that what this node claimed and did not start is back in the
    /// queue before the process exits.
    pub async fn claimer_stopped(&self, limit: Duration) {
        let done = self.claimer_done.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(done) = done {
            if actix_rt::time::timeout(limit, done).await.is_err() {
                log::warn!(
                    "fleet: the claimer did not stop within {limit:?}; what it held runs out with its leases"
                );
            }
        }
    }
}

/// Starts `body` on a thread named `name`; it says on the channel given
/// whether it started (connected) or why not.
fn spawn(
    name: &'static str,
    body: impl FnOnce(mpsc::Sender<Result<(), FleetError>>) + Send + 'static,
) -> Result<mpsc::Receiver<Result<(), FleetError>>, FleetError> {
    let (ready, started) = mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || body(ready))
        .map_err(|error| FleetError::Thread { name, error })?;
    Ok(started)
}
