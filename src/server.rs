//! Starting the daemon: backend, actors, HTTP server; and, for `cuzk
//! serve`, reloading the tokens on SIGHUP.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actix_web::dev::Service;
use actix_web::middleware::{from_fn, ErrorHandlers};
use actix_web::{web, App, HttpServer};
use cuzk_actors::store::{FleetLoad, JobStore, Persistence};
use cuzk_actors::messages::SetMaxUnfinished;
use cuzk_actors::{Backend, ProvingSystem, SystemConfig};
use cuzk_kernels::circuits::CircuitRegistry;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::auth::{AuthConfig, AuthError, Gate, Gates};
use crate::backend::{Device, ProofJob, ProvingBackend};
use crate::config::{BackendKind, Config, ConfigError};
use crate::http::{self, AppState};
use crate::job_input::{self, JobParser, ReservationRule, SetupLimits};
use crate::fleet::Fleet;
use crate::grpc::{Calls, GrpcServer, GrpcState, ListenError, ProvingService};
use crate::jobs::Jobs;
use crate::keys::KeyStore;
use crate::param_files::ParamFiles;
use crate::shutdown::{self, Intake, StopRequests};
use crate::sim::SimBackend;
use crate::tls::TlsError;

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
    Grpc(#[from] ListenError),
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
        source: std::io::Error,
    },
    /// The server bound its listener but reports no address for it.
    #[error("the server bound no address")]
    NoAddress,
    /// The signal named cannot be handled, so the daemon could not be
    /// stopped gracefully (or its tokens reloaded).
    #[error("cannot handle {signal}: {source}")]
    Signal { signal: &'static str, source: std::io::Error },
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

/// Why no proving backend could be built.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// An engine could not start on its device.
    #[error("{0}")]
    Engine(#[from] cuzk_kernels::KernelError),
    /// `backend = "cuda"` on a host where none is found.
    #[error("backend = \"cuda\" but no CUDA device was found")]
    NoCudaDevice,
    /// A device of `cuda.devices` that is not there.
    #[error("CUDA device {0} does not exist")]
    NoSuchDevice(usize),
    /// `backend = "cuda"` in a build without the `cuda` feature.
    #[error("this cuzk was built without CUDA support; rebuild with --features cuda")]
    NoCudaSupport,
    /// A `[cuda]` setting out of its range.
    #[error(transparent)]
    Settings(#[from] ConfigError),
    /// `[sim]` names no profile, or one of its values is out of range.
    #[error(transparent)]
    Simulation(#[from] crate::sim::SimError),
}

/// The process-wide Prometheus recorder, installed once with the catalogue's
/// histogram buckets.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for def in crate::telemetry::CATALOGUE
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

/// The backend and how it sizes one partition's reservation.
fn backend(
    config: &Config,
    store: Arc<KeyStore>,
) -> Result<(Arc<dyn Backend>, ReservationRule), BackendError> {
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
            let sim = SimBackend::from_config(&config.sim).map_err(BackendError::Simulation)?;
            let reservation = sim.profile().reservation;
            log::warn!(
                "simulated backend ({}): proofs are not real",
                sim.profile().name
            );
            Ok((Arc::new(sim), Arc::new(move |_: &ProofJob| reservation)))
        }
    }
}

fn cpu_devices(config: &Config) -> Result<Vec<Device>, BackendError> {
    let threads = match config.cpu.threads_per_device {
        0 => crate::config::available_cores(),
        n => n,
    };
    (0..config.cpu.devices.max(1))
        .map(|i| {
            let engine = cuzk_kernels::cpu::CpuEngine::new(threads)?;
            Ok(Device {
                name: format!("cpu{i}"),
                engine: Arc::new(engine),
            })
        })
        .collect()
}

#[cfg(feature = "cuda")]
fn cuda_devices(config: &Config) -> Result<Vec<Device>, BackendError> {
    use cuzk_kernels::cuda::{detect_devices, CudaEngine, CudaOptions};
    let (resident_budget, pinned_budget) = config.cuda.budgets()?;
    let (pass_partitions, pass_wait) = config.cuda.passes()?;
    let detected = detect_devices()?;
    let ordinals: Vec<usize> = if config.cuda.devices.is_empty() {
        detected.iter().map(|d| d.ordinal).collect()
    } else {
        config.cuda.devices.clone()
    };
    if ordinals.is_empty() {
        return Err(BackendError::NoCudaDevice);
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
                .ok_or(BackendError::NoSuchDevice(ordinal))?;
            let engine = CudaEngine::new(ordinal, options.clone())?;
            Ok(Device {
                name: format!("cuda{ordinal} {}", info.name),
                engine: Arc::new(engine),
            })
        })
        .collect()
}

#[cfg(not(feature = "cuda"))]
fn cuda_devices(_: &Config) -> Result<Vec<Device>, BackendError> {
    Err(BackendError::NoCudaSupport)
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
    /// The job seam, for in-process callers (tests).
    pub jobs: Arc<Jobs>,
    /// Where gRPC listens (`host:port` or `unix:///path`), when
    /// `grpc.listen` is set.
    pub grpc_addr: Option<String>,
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

/// Where a built server listens.
#[derive(Clone)]
struct Bound {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    tls: bool,
    /// The gRPC listener's address.
    grpc: Option<String>,
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
    job_store: Arc<dyn JobStore>,
    /// The job seam the handlers use, handed to in-process callers.
    jobs: Arc<Jobs>,
    grace: Duration,
    /// A fleet node's side of the database: a stop waits for its claimer to
    /// put back what it had not started.
    fleet: Option<Arc<Fleet>>,
    /// Curio's gRPC service, stopped with the HTTP server.
    grpc: Option<GrpcServer>,
}

impl Daemon {
    /// Serves until the first stop request (or until no one can send one),
    /// then drains and stops.
    async fn run(self, mut stop_requests: UnboundedReceiver<Duration>) -> std::io::Result<()> {
        let handle = self.server.handle();
        let serving = actix_rt::spawn(self.server);
        let grace = stop_requests.recv().await.unwrap_or(Duration::ZERO);
        shutdown::drain(&self.system, &self.intake, self.job_store, grace).await;
        if let Some(fleet) = &self.fleet {
            fleet.claimer_stopped(Duration::from_secs(5)).await;
        }
        handle.stop(true).await;
        if let Some(grpc) = self.grpc {
            grpc.stop();
        }
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
    let mut gate = Gate::new(&mut config.auth, &config.listen)?;
    let tls = crate::tls::server_config(&config.tls)?;
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
    let grpc_listener = match &config.grpc.listen {
        Some(listen) => {
            let tokens = gates.current().token_count() > 0;
            Some(crate::grpc::bind(listen, tls.as_ref(), tokens, config.auth.insecure)?)
        }
        None => None,
    };
    let metrics = metrics_handle();
    crate::telemetry::TenantsConfigured { tenants: &gates.current().tenant_names() }.emit();
    // A PostgreSQL store makes this daemon a node of the fleet on it, whose
    // nodes share the built-in circuits' keys through it.
    let node = match &config.store.url {
        Some(_) => Some(config.fleet.node_name()?),
        None => None,
    };
    let fleet_store = config.store.url.as_ref().zip(node.as_deref());
    let keys = match &config.store.url {
        // The database client blocks: it connects off this (actix) thread.
        Some(url) => std::thread::scope(|scope| scope.spawn(|| KeyStore::open_shared(&config.data_dir, url)).join())
            .map_err(|_| ServerError::KeysPanicked)?,
        None => KeyStore::open(&config.data_dir),
    };
    let keys = Arc::new(keys?);
    let (backend, reservation) = backend(&config, keys.clone())?;
    let job_store = crate::store::open(fleet_store, &config.data_dir)?;
    // A fleet node restores nothing: jobs stay in the database, and its
    // partitions come as claims.
    let stored = if node.is_some() { Vec::new() } else { job_store.load()? };
    let load = node.as_ref().map(|_| Arc::new(FleetLoad::default()));
    let persistence = Persistence {
        store: Some(job_store.clone()),
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
            keys: keys.clone(),
            budget_bytes: config.budget_bytes(),
        }),
    });
    let recovering = crate::restore::start(&system, parser.clone(), job_store.clone(), stored)?;
    let fleet = match (fleet_store, load) {
        (Some((url, node)), Some(load)) => Some(
            Fleet::start(&config, (url, node), &system, parser.clone(), job_store.clone(), load, intake.clone())?,
        ),
        _ => None,
    };
    let jobs = Arc::new(Jobs::new(&config, system.clone(), parser.clone(), job_store.clone(), fleet.clone(), intake.clone(), recovering));
    let params = Arc::new(ParamFiles::new(parser.params_dir.clone(), keys.clone(), system.clone()));
    let grpc = grpc_listener.map(|listener| {
        let state = GrpcState {
            jobs: jobs.clone(),
            gates: gates.clone().into_inner(),
            params: params.clone(),
            metrics: metrics.clone(),
            system: system.clone(),
            calls: Arc::new(Calls::new(config.grpc.max_waiting_calls, intake.clone())),
            started: Instant::now(),
            trusted: listener.trusted,
        };
        let address = listener.address.clone();
        let service = ProvingService { state: Arc::new(state) };
        (address, listener.serve(service, config.grpc.max_message_bytes, config.grpc.max_waiting_calls))
    });
    let state = web::Data::new(AppState {
        jobs: jobs.clone(),
        system: system.clone(),
        parser,
        keys,
        params,
        max_body_bytes: config.limits.max_body_bytes,
        body_read_timeout: Duration::from_secs(config.limits.body_read_timeout_s),
        metrics,
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
                    crate::telemetry::HttpRequest {
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
    let addr = *server.addrs().first().ok_or(ServerError::NoAddress)?;
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
            grpc: grpc.as_ref().map(|(address, _)| address.clone()),
        },
        gates,
        reload: (config.auth, config.listen),
        system,
        intake,
        job_store,
        jobs,
        grace: Duration::from_secs(config.shutdown_grace_secs),
        fleet,
        grpc: grpc.map(|(_, server)| server),
    })
}

/// Runs the daemon until SIGTERM or Ctrl-C, then shuts down gracefully.
pub fn serve(config: Config, registry: CircuitRegistry) -> Result<(), ServerError> {
    actix_rt::System::new().block_on(async move {
        let daemon = build(config, registry)?;
        let (stop, stop_requests) = unbounded_channel();
        shutdown::forward_signals(stop, daemon.grace, daemon.intake.clone())
            .map_err(|source| ServerError::Signal { signal: "signals", source })?;
        let (auth, listen) = daemon.reload.clone();
        reload_tokens_on_sighup(daemon.gates.clone(), auth, listen)
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

/// Why a reload on SIGHUP left the old gate in force.
#[derive(Debug, thiserror::Error)]
enum ReloadError {
    /// The config file, whose `[auth]` is read again.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The tokens or tenants read.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The thread that reads the files.
    #[error("the reload thread failed: {0}")]
    Thread(#[from] actix_rt::task::JoinError),
}

/// On each SIGHUP, reads the tokens and tenants again (the config file's
/// `[auth]`, the token file; the environment's tokens as read at start) and
/// puts a new gate in force; requests already admitted finish under the
/// old one. A reload that fails leaves the old gate in force.
fn reload_tokens_on_sighup(gates: web::Data<Gates>, auth: AuthConfig, listen: String) -> std::io::Result<()> {
    use crate::telemetry::{TenantsConfigured, TokensReloaded};
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
                Ok::<_, ReloadError>(auth)
            })
            .await
            .unwrap_or_else(|e| Err(e.into()));
            match reread.and_then(|mut auth| Ok(gates.replace(&mut auth, &listen)?)) {
                Ok(gate) => {
                    TenantsConfigured { tenants: &gate.tenant_names() }.emit();
                    TokensReloaded { outcome: Ok(gate.token_count()) }.emit();
                }
                Err(error) => TokensReloaded { outcome: Err(&error.to_string()) }.emit(),
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
