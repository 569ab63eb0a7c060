//! Starting the daemon and stopping it: `serve` (the `cuzk serve` command:
//! until SIGTERM, reloading the tokens on SIGHUP) and `spawn` (on a thread
//! of its own, for tests and embedding). The start's steps are in
//! `daemon.rs` (`Daemon::build` lists them), the backend's in `backend.rs`,
//! the HTTP server's in `listen.rs` (gRPC's in `crate::grpc`), the reload
//! in `reload.rs`.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cuzk_actors::ProvingSystem;
use cuzk_kernels::circuits::CircuitRegistry;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::sync::mpsc::unbounded_channel;

use crate::auth::AuthError;
use crate::config::{Config, ConfigError};
use crate::jobs::Jobs;
use crate::shutdown::{self, Intake, StopRequests};
use crate::tls::TlsError;

mod connection;
mod daemon;
mod engines;
mod framing;
mod listen;
mod reload;

use daemon::Daemon;
pub use engines::BackendError;

/// Why the daemon could not start, or stopped with an error. The kinds are
/// what a caller acts on: fix the configuration (tokens, TLS files, other
/// settings), free the address, look at the data directory or the devices.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Tokens or tenants refused, or the loopback rule, before anything
    /// starts.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The TLS settings or files refused, before anything starts.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Another setting refused (the fleet node's name or lease), before
    /// anything starts.
    #[error(transparent)]
    Settings(#[from] ConfigError),
    /// No backend: a device missing, CUDA not built in, a bad simulation.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The key store cannot be opened (its directory, or a fleet's shared
    /// keys in the database).
    #[error(transparent)]
    Keys(#[from] crate::keys::OpenError),
    /// Connecting the fleet's shared key store panicked.
    #[error("connecting the shared key store panicked")]
    KeysPanicked,
    /// The job store cannot be opened (the redb file, or its database).
    #[error(transparent)]
    Store(#[from] crate::store::OpenError),
    /// The fleet node cannot start (its connections to the database).
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
    /// The gRPC listener refused its settings or cannot listen.
    #[error(transparent)]
    Grpc(#[from] crate::grpc::ListenError),
    /// The job store opened but its records cannot be read back.
    #[error("job store: {0}")]
    JobStore(#[from] cuzk_actors::store::StoreError),
    /// Stored jobs cannot be handed back to the scheduler.
    #[error(transparent)]
    Restore(#[from] crate::restore::RestoreError),
    /// An address cannot be listened on.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address as configured, and the setting it came from when
        /// that is not `listen`.
        address: String,
        /// What binding it answered.
        source: std::io::Error,
    },
    /// The server bound its listener but reports no address for it.
    #[error("the server bound no address")]
    NoAddress,
    /// The signal named cannot be handled, so the daemon could not be
    /// stopped gracefully (or its tokens reloaded).
    #[error("cannot handle {signal}: {source}")]
    Signal {
        /// The signal, as the message names it (`SIGTERM`, `SIGHUP`, ...).
        signal: &'static str,
        /// Why its handler could not be installed.
        source: std::io::Error,
    },
    /// The daemon's thread cannot be started.
    #[error("cannot start the daemon thread: {0}")]
    Thread(std::io::Error),
    /// The daemon's thread ended before it listened.
    #[error("the daemon thread died while starting")]
    DiedStarting,
    /// The daemon's thread panicked.
    #[error("the daemon thread panicked")]
    Panicked,
    /// The HTTP server stopped with an error.
    #[error("{0}")]
    Serve(std::io::Error),
}

/// The process-wide Prometheus recorder, installed once with the catalogue's
/// histogram buckets.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for def in crate::telemetry::CATALOGUE.iter().filter(|d| !d.buckets.is_empty()) {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full(def.name.to_string()), def.buckets)
                    .expect("catalogue buckets are non-empty");
            }
            let handle = builder.install_recorder().expect("no other metrics recorder is installed");
            crate::telemetry::describe_all();
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("cuzk-metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(Duration::from_secs(5));
                    upkeep.run_upkeep();
                })
                .expect("cannot start the metrics upkeep thread");
            handle
        })
        .clone()
}

/// A daemon running in its own actix system thread (tests, embedding).
pub struct RunningDaemon {
    /// The API's address, as bound (a port 0 resolved).
    pub addr: SocketAddr,
    /// The metrics-only listener, when `metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    /// Whether `addr` speaks TLS.
    pub tls: bool,
    /// The actors, for in-process observers (benchmarks).
    pub system: ProvingSystem,
    /// The job seam, for in-process callers (tests).
    pub jobs: Arc<Jobs>,
    /// Where gRPC listens (`host:port` or `unix:///path`), when
    /// `grpc.listen` is set.
    pub grpc_addr: Option<String>,
    /// Where a stop is asked for, with the grace it drains for.
    stop_requests: StopRequests,
    /// `shutdown_grace_secs`: what a graceful stop drains for.
    grace: Duration,
    /// Closed by a graceful stop at once, so that new jobs are refused.
    intake: Intake,
    /// The daemon's thread, joined on stop (taken then, so only once).
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl RunningDaemon {
    /// The API's base URL, with the scheme it speaks.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Stops at once, as after a crash except that the job store is
    /// committed: started partitions are abandoned and resume on the next
    /// start.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// What SIGTERM does; returns once new jobs are refused (`wait` for
    /// the exit).
    pub fn begin_shutdown(&self) {
        self.intake.close();
        let _ = self.stop_requests.send(self.grace);
    }

    /// Waits until the daemon has exited.
    pub fn wait(mut self) -> Result<(), ServerError> {
        let thread = self.thread.take().expect("joined only here and on drop");
        thread.join().map_err(|_| ServerError::Panicked)?.map_err(ServerError::Serve)
    }

    fn shutdown(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = self.stop_requests.send(Duration::ZERO);
            let _ = thread.join();
        }
    }
}

impl Drop for RunningDaemon {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Runs the daemon until SIGTERM or Ctrl-C, then shuts down gracefully.
pub fn serve(config: Config, registry: CircuitRegistry) -> Result<(), ServerError> {
    actix_rt::System::new().block_on(async move {
        let daemon = Daemon::build(config, registry)?;
        let (stop, stop_requests) = unbounded_channel();
        shutdown::forward_signals(stop, daemon.grace, daemon.intake.clone())
            .map_err(|source| ServerError::Signal { signal: "signals", source })?;
        let (auth, listen) = daemon.reload.clone();
        reload::reload_tokens_on_sighup(daemon.gates.clone(), auth, listen)
            .map_err(|source| ServerError::Signal { signal: "SIGHUP", source })?;
        let scheme = if daemon.bound.tls { "https" } else { "http" };
        log::info!("cuzk listening on {scheme}://{}", daemon.bound.addr);
        if let Some(address) = &daemon.bound.grpc {
            log::info!("cuzk gRPC (cuzk.v1.ProvingEngine) on {address}");
        }
        if let Some(addr) = daemon.bound.metrics_addr {
            log::info!("metrics on http://{addr}/metrics");
        }
        daemon.run(stop_requests).await.map_err(ServerError::Serve)?;
        log::info!("cuzk stopped");
        Ok(())
    })
}

/// Starts the daemon on a thread of its own and returns once it listens.
pub fn spawn(config: Config, registry: CircuitRegistry) -> Result<RunningDaemon, ServerError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_requests, stop_received) = unbounded_channel();
    let thread = std::thread::Builder::new()
        .name("cuzk-daemon".into())
        .spawn(move || {
            actix_rt::System::new().block_on(async move {
                match Daemon::build(config, registry) {
                    Ok(daemon) => {
                        let _ = tx.send(Ok((
                            daemon.bound.clone(),
                            daemon.system.clone(),
                            daemon.grace,
                            daemon.intake.clone(),
                            daemon.jobs.clone(),
                        )));
                        daemon.run(stop_received).await
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        Ok(())
                    }
                }
            })
        })
        .map_err(ServerError::Thread)?;
    let (bound, system, grace, intake, jobs) = rx.recv().map_err(|_| ServerError::DiedStarting)??;
    Ok(RunningDaemon {
        addr: bound.addr,
        metrics_addr: bound.metrics_addr,
        tls: bound.tls,
        grpc_addr: bound.grpc,
        system,
        jobs,
        stop_requests,
        grace,
        intake,
        thread: Some(thread),
    })
}
