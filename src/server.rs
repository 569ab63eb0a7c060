//! Starting the daemon: backend, actors, HTTP server; and, for `cuzk
//! serve`, reloading the tokens on SIGHUP.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix_web::dev::Service;
use actix_web::middleware::{from_fn, ErrorHandlers};
use actix_web::{web, App, HttpServer};
use cuzk_actors::store::{FleetLoad, JobStore, Persistence};
use cuzk_actors::messages::SetMaxUnfinished;
use cuzk_actors::{Backend, ProvingSystem, SystemConfig};
use cuzk_kernels::circuits::CircuitRegistry;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::auth::{AuthConfig, Gate, Gates};
use crate::backend::{Device, ProofJob, ProvingBackend};
use crate::config::{BackendKind, Config};
use crate::http::{self, AppState};
use crate::job_input::{self, JobParser, ReservationRule, SetupLimits};
use crate::fleet::Fleet;
use crate::keys::CircuitStore;
use crate::shutdown::{self, Intake, StopRequests};
use crate::sim::SimBackend;
use crate::tenants::SubmitRates;

/// Why the daemon could not start, or stopped with an error. The kinds are
/// what a caller acts on: fix the configuration, free the address, look at
/// the data directory or the devices.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Refused before anything starts: tokens, the loopback rule, TLS files.
    #[error("{0}")]
    Refused(String),
    /// No backend: a device missing, CUDA not built in, a bad simulation.
    #[error("{0}")]
    Backend(String),
    /// The data directory (the key store, the redb job store) cannot be
    /// opened or read, or the job store's database cannot be reached.
    #[error("{0}")]
    Storage(String),
    /// The job store opened but its records cannot be read back.
    #[error("job store: {0}")]
    JobStore(#[from] cuzk_actors::store::StoreError),
    /// An address cannot be listened on.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address as configured, and the setting it came from when
        /// that is not `listen`.
        address: String,
        source: std::io::Error,
    },
    /// The daemon's own threads, its signal handling, or the server failed.
    #[error("{0}")]
    Runtime(String),
}

/// The process-wide Prometheus recorder, installed once with the catalogue's
/// histogram buckets.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for def in cuzk_actors::telemetry::CATALOGUE
                .iter()
                .filter(|d| !d.buckets.is_empty())
            {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full(def.name.to_string()), def.buckets)
                    .expect("catalogue buckets are non-empty");
            }
            let handle = builder
                .install_recorder()
                .expect("no other metrics recorder is installed");
            cuzk_actors::telemetry::describe_all();
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

/// The backend and how it sizes one partition's reservation.
fn backend(
    config: &Config,
    store: Arc<CircuitStore>,
) -> Result<(Arc<dyn Backend>, ReservationRule), String> {
    let proving = |devices| -> (Arc<dyn Backend>, ReservationRule) {
        let backend = ProvingBackend::new(config.backend.as_str(), store, devices, &config.proving);
        let rule = job_input::proving_reservation(
            config.proving.filecoin_evaluation,
            backend.device_evaluation(),
        );
        (Arc::new(backend), rule)
    };
    match config.backend {
        BackendKind::Cpu => Ok(proving(cpu_devices(config)?)),
        BackendKind::Cuda => Ok(proving(cuda_devices(config)?)),
        BackendKind::Sim => {
            let sim = SimBackend::from_config(&config.sim)?;
            let reservation = sim.profile().reservation;
            log::warn!(
                "simulated backend ({}): proofs are not real",
                sim.profile().name
            );
            Ok((Arc::new(sim), Arc::new(move |_: &ProofJob| reservation)))
        }
    }
}

fn cpu_devices(config: &Config) -> Result<Vec<Device>, String> {
    let threads = match config.cpu.threads_per_device {
        0 => crate::config::available_cores(),
        n => n,
    };
    (0..config.cpu.devices.max(1))
        .map(|i| {
            let engine = cuzk_kernels::cpu::CpuEngine::new(threads).map_err(|e| e.to_string())?;
            Ok(Device {
                name: format!("cpu{i}"),
                engine: Arc::new(engine),
            })
        })
        .collect()
}

#[cfg(feature = "cuda")]
fn cuda_devices(config: &Config) -> Result<Vec<Device>, String> {
    use cuzk_kernels::cuda::{detect_devices, CudaEngine, CudaOptions};
    let (resident_budget, pinned_budget) = config.cuda.budgets()?;
    let (pass_partitions, pass_wait) = config.cuda.passes()?;
    let detected = detect_devices().map_err(|e| e.to_string())?;
    let ordinals: Vec<usize> = if config.cuda.devices.is_empty() {
        detected.iter().map(|d| d.ordinal).collect()
    } else {
        config.cuda.devices.clone()
    };
    if ordinals.is_empty() {
        return Err("backend = \"cuda\" but no CUDA device was found".into());
    }
    let defaults = CudaOptions::default();
    let options = CudaOptions {
        g2_on_gpu: config.cuda.g2_on_gpu.unwrap_or(true),
        resident_budget,
        pinned_budget,
        pass_partitions: pass_partitions.unwrap_or(defaults.pass_partitions),
        pass_wait: pass_wait.unwrap_or(defaults.pass_wait),
        ..defaults
    };
    ordinals
        .into_iter()
        .map(|ordinal| {
            let info = detected
                .iter()
                .find(|d| d.ordinal == ordinal)
                .ok_or_else(|| format!("CUDA device {ordinal} does not exist"))?;
            let engine = CudaEngine::new(ordinal, options.clone()).map_err(|e| e.to_string())?;
            Ok(Device {
                name: format!("cuda{ordinal} {}", info.name),
                engine: Arc::new(engine),
            })
        })
        .collect()
}

#[cfg(not(feature = "cuda"))]
fn cuda_devices(_: &Config) -> Result<Vec<Device>, String> {
    Err("this cuzk was built without CUDA support; rebuild with --features cuda".into())
}

/// A daemon running in its own actix system thread (tests, embedding).
pub struct RunningDaemon {
    pub addr: SocketAddr,
    /// The metrics-only listener, when `metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    /// Whether `addr` speaks TLS.
    pub tls: bool,
    /// The actors, for in-process observers (benchmarks).
    pub system: ProvingSystem,
    stop_requests: StopRequests,
    grace: Duration,
    intake: Intake,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl RunningDaemon {
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
        thread
            .join()
            .map_err(|_| ServerError::Runtime("the daemon thread panicked".into()))?
            .map_err(|e| ServerError::Runtime(e.to_string()))
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

/// Where a built server listens.
#[derive(Clone, Copy)]
struct Bound {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    tls: bool,
}

/// A daemon built and bound, not yet serving.
struct Daemon {
    server: actix_web::dev::Server,
    bound: Bound,
    /// The token gate in force, replaced on SIGHUP.
    gates: web::Data<Gates>,
    /// What a reload starts from: `[auth]` as configured, its tokens taken
    /// (where they came from, `--insecure`), and the address the loopback
    /// rule is checked for.
    reload: (AuthConfig, String),
    system: ProvingSystem,
    intake: Intake,
    jobs: Arc<dyn JobStore>,
    grace: Duration,
    /// A fleet node's side of the database: a stop waits for its claimer to
    /// put back what it had not started.
    fleet: Option<Arc<Fleet>>,
}

impl Daemon {
    /// Serves until the first stop request (or until no one can send one),
    /// then drains and stops.
    async fn run(self, mut stop_requests: UnboundedReceiver<Duration>) -> std::io::Result<()> {
        let handle = self.server.handle();
        let serving = actix_rt::spawn(self.server);
        let grace = stop_requests.recv().await.unwrap_or(Duration::ZERO);
        shutdown::drain(&self.system, &self.intake, self.jobs, grace).await;
        if let Some(fleet) = &self.fleet {
            fleet.claimer_stopped(Duration::from_secs(5)).await;
        }
        handle.stop(true).await;
        let served = serving.await.unwrap_or(Ok(()));
        // Ends the actors' threads too (partitions still running are
        // abandoned: the store already has what they had finished).
        actix_rt::System::current().stop();
        served
    }
}

/// Builds everything, restores stored jobs and binds the listeners. Must run
/// inside an actix system.
fn build(mut config: Config, registry: CircuitRegistry) -> Result<Daemon, ServerError> {
    // Refusals (no tokens off loopback, unreadable TLS files) come before
    // anything starts.
    let mut gate = Gate::new(&mut config.auth, &config.listen).map_err(ServerError::Refused)?;
    let tls = crate::tls::server_config(&config.tls).map_err(ServerError::Refused)?;
    let metrics_listener = match &config.metrics_listen {
        Some(listen) => {
            let not_listening = |source| ServerError::Listen {
                address: format!("{listen} (metrics_listen)"),
                source,
            };
            let listener = std::net::TcpListener::bind(listen).map_err(not_listening)?;
            let addr = listener.local_addr().map_err(not_listening)?;
            gate = gate.with_metrics_listener(addr);
            Some((listener, addr))
        }
        None => None,
    };
    let gates = web::Data::new(Gates::new(gate));
    let metrics = metrics_handle();
    cuzk_actors::telemetry::TenantsConfigured { tenants: &gates.current().tenant_names() }.emit();
    // A PostgreSQL store makes this daemon a node of the fleet on it, whose
    // nodes share the built-in circuits' keys through it.
    let node = match &config.store.url {
        Some(_) => Some(config.fleet.node_name().map_err(ServerError::Refused)?),
        None => None,
    };
    let fleet_store = config.store.url.as_ref().zip(node.as_deref());
    let keys = match &config.store.url {
        // The database client blocks: it connects off this (actix) thread.
        Some(url) => std::thread::scope(|scope| {
            scope.spawn(|| CircuitStore::open_shared(&config.data_dir, url)).join().unwrap_or_else(|_| {
                Err("connecting the shared key store panicked".to_string())
            })
        }),
        None => CircuitStore::open(&config.data_dir),
    };
    let store = Arc::new(keys.map_err(ServerError::Storage)?);
    let (backend, reservation) = backend(&config, store.clone()).map_err(ServerError::Backend)?;
    let jobs = crate::store::open(fleet_store, &config.data_dir).map_err(ServerError::Storage)?;
    // A fleet node restores nothing: jobs stay in the database, and its
    // partitions come as claims.
    let stored = if node.is_some() { Vec::new() } else { jobs.load()? };
    let load = node.as_ref().map(|_| Arc::new(FleetLoad::default()));
    let persistence = Persistence {
        store: Some(jobs.clone()),
        fleet: load.clone(),
        // The fleet's claimers sweep the database.
        retention: node.is_none().then(|| Duration::from_secs(config.store.retention_secs)),
        sweep_interval: Duration::from_secs(config.store.sweep_interval_secs.max(1)),
    };
    let system = ProvingSystem::start_with(
        SystemConfig {
            synthesis_threads: config.synthesis_threads(),
            finalizer_threads: config.scheduler.finalizer_threads,
            workers_per_device: config.scheduler.workers_per_device,
            gpu_lookahead: config.scheduler.gpu_lookahead,
            budget_bytes: config.budget_bytes(),
            pacer: config.scheduler.pacer.clone(),
            max_attempts: config.scheduler.max_attempts,
        },
        backend,
        persistence,
    );
    log::info!("scheduler: {:?}", system.config);
    let intake = Intake::default();
    let max_queued = config.limits.max_queued_jobs;
    system
        .tracker
        .do_send(SetMaxUnfinished((max_queued > 0).then_some(max_queued)));
    let params_dir = cuzk_filecoin::params::parameter_dir(config.params_dir.as_deref());
    log::info!("Filecoin parameters: {}", params_dir.display());
    let parser = Arc::new(JobParser {
        registry,
        params_dir,
        max_partitions: config.limits.max_partitions,
        max_input_bytes: config.limits.max_input_bytes,
        reservation,
        // The simulated backend sets nothing up.
        setups: (config.backend != BackendKind::Sim).then(|| SetupLimits {
            keys: store.clone(),
            budget_bytes: config.budget_bytes(),
        }),
    });
    let recovering = crate::restore::start(&system, parser.clone(), jobs.clone(), stored)
        .map_err(ServerError::Runtime)?;
    let fleet = match (fleet_store, load) {
        (Some((url, node)), Some(load)) => Some(
            Fleet::start(&config, url, node.to_string(), &system, parser.clone(), jobs.clone(), load, intake.clone())
                .map_err(ServerError::Storage)?,
        ),
        _ => None,
    };
    let node_fleet = fleet.clone();
    let state = web::Data::new(AppState {
        system: system.clone(),
        jobs: parser,
        store,
        retry_after_s: config.limits.queue_full_retry_after_s,
        max_body_bytes: config.limits.max_body_bytes,
        body_read_timeout: Duration::from_secs(config.limits.body_read_timeout_s),
        metrics,
        intake: intake.clone(),
        job_store: jobs.clone(),
        data_dir: config.data_dir.clone(),
        // The redb file fills the data directory's disk; a database, its own.
        min_free_bytes: match config.store.url {
            Some(_) => 0,
            None => config.store.min_free_bytes,
        },
        recovering,
        submit_rates: SubmitRates::default(),
        fleet: fleet.clone(),
        max_queued_jobs: (max_queued > 0).then_some(max_queued),
    });
    let app_gates = gates.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(app_gates.clone())
            .wrap(from_fn(crate::auth::gate))
            .wrap(ErrorHandlers::new().default_handler(http::json_errors))
            .wrap_fn(|req, srv| {
                let route = req.match_pattern().unwrap_or_else(|| "unmatched".into());
                let call = srv.call(req);
                async move {
                    let res = call.await?;
                    cuzk_actors::telemetry::HttpRequest {
                        route: &route,
                        status: res.status().as_u16(),
                    }
                    .emit();
                    Ok(res)
                }
            })
            .wrap(from_fn(http::head_as_get))
            .configure(http::configure)
    })
    .workers(2)
    .client_request_timeout(Duration::from_secs(config.limits.header_read_timeout_s))
    .disable_signals()
    .shutdown_timeout(5);
    let listen_error = |source| ServerError::Listen {
        address: config.listen.clone(),
        source,
    };
    let tls_enabled = tls.is_some();
    let server = match tls {
        Some(tls) => server.bind_rustls_0_23(&config.listen, tls),
        None => server.bind(&config.listen),
    }
    .map_err(listen_error)?;
    let addr = *server
        .addrs()
        .first()
        .ok_or_else(|| ServerError::Runtime("the server bound no address".into()))?;
    let metrics_addr = metrics_listener.as_ref().map(|(_, addr)| *addr);
    let server = match metrics_listener {
        Some((listener, addr)) => server.listen(listener).map_err(|source| ServerError::Listen {
            address: format!("{addr} (metrics_listen)"),
            source,
        })?,
        None => server,
    };
    Ok(Daemon {
        server: server.run(),
        bound: Bound {
            addr,
            metrics_addr,
            tls: tls_enabled,
        },
        gates,
        reload: (config.auth, config.listen),
        system,
        intake,
        jobs,
        grace: Duration::from_secs(config.shutdown_grace_secs),
        fleet: node_fleet,
    })
}

/// Runs the daemon until SIGTERM or Ctrl-C, then shuts down gracefully.
pub fn serve(config: Config, registry: CircuitRegistry) -> Result<(), ServerError> {
    actix_rt::System::new().block_on(async move {
        let daemon = build(config, registry)?;
        let (stop, stop_requests) = unbounded_channel();
        shutdown::forward_signals(stop, daemon.grace, daemon.intake.clone())
            .map_err(|e| ServerError::Runtime(format!("cannot handle signals: {e}")))?;
        let (auth, listen) = daemon.reload.clone();
        reload_tokens_on_sighup(daemon.gates.clone(), auth, listen)
            .map_err(|e| ServerError::Runtime(format!("cannot handle SIGHUP: {e}")))?;
        let scheme = if daemon.bound.tls { "https" } else { "http" };
        log::info!("cuzk listening on {scheme}://{}", daemon.bound.addr);
        if let Some(addr) = daemon.bound.metrics_addr {
            log::info!("metrics on http://{addr}/metrics");
        }
        daemon
            .run(stop_requests)
            .await
            .map_err(|e| ServerError::Runtime(e.to_string()))?;
        log::info!("cuzk stopped");
        Ok(())
    })
}

/// On each SIGHUP, reads the tokens and tenants again (the config file's
/// `[auth]`, the token file; the environment's tokens as read at start) and
/// puts a new gate in force; requests already admitted finish under the
/// old one. A reload that fails leaves the old gate in force.
fn reload_tokens_on_sighup(gates: web::Data<Gates>, auth: AuthConfig, listen: String) -> std::io::Result<()> {
    use cuzk_actors::telemetry::{TenantsConfigured, TokensReloaded};
    let mut hangup = actix_rt::signal::unix::signal(actix_rt::signal::unix::SignalKind::hangup())?;
    actix_rt::spawn(async move {
        while hangup.recv().await.is_some() {
            let (sources, insecure) = (auth.sources.clone(), auth.insecure);
            // Files are read off the server's threads.
            let reread = actix_rt::task::spawn_blocking(move || {
                let mut auth = match &sources.config_file {
                    Some(path) => Config::load(path)?.auth,
                    None => AuthConfig::default(),
                };
                (auth.sources, auth.insecure) = (sources, insecure);
                auth.add_source_tokens()?;
                Ok::<_, String>(auth)
            })
            .await
            .unwrap_or_else(|e| Err(format!("the reload thread failed: {e}")));
            match reread.and_then(|mut auth| gates.replace(&mut auth, &listen)) {
                Ok(gate) => {
                    TenantsConfigured { tenants: &gate.tenant_names() }.emit();
                    TokensReloaded { outcome: Ok(gate.token_count()) }.emit();
                }
                Err(error) => TokensReloaded { outcome: Err(&error) }.emit(),
            }
        }
    });
    Ok(())
}

/// Starts the daemon on a thread of its own and returns once it listens.
pub fn spawn(config: Config, registry: CircuitRegistry) -> Result<RunningDaemon, ServerError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_requests, stop_received) = unbounded_channel();
    let thread = std::thread::Builder::new()
        .name("cuzk-daemon".into())
        .spawn(move || {
            actix_rt::System::new().block_on(async move {
                match build(config, registry) {
                    Ok(daemon) => {
                        let _ = tx.send(Ok((
                            daemon.bound,
                            daemon.system.clone(),
                            daemon.grace,
                            daemon.intake.clone(),
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
        .map_err(|e| ServerError::Runtime(format!("cannot start the daemon thread: {e}")))?;
    let (bound, system, grace, intake) = rx.recv().map_err(|_| {
        ServerError::Runtime("the daemon thread died while starting".into())
    })??;
    Ok(RunningDaemon {
        addr: bound.addr,
        metrics_addr: bound.metrics_addr,
        tls: bound.tls,
        system,
        stop_requests,
        grace,
        intake,
        thread: Some(thread),
    })
}
