//! A start as named steps: the settings checked (the gRPC listener bound
//! among them), the telemetry, the key store, the backend, the job store,
//! the actors, the job parser, the restore, the fleet, the job seam, the
//! front ends' shared context, the gRPC service, the HTTP server. `Daemon::build` lists them in order; each
//! step is one function here or in a sibling file (`backend.rs`,
//! `listen.rs`). `Daemon::run` serves and drains.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::web;
use cuzk_actors::messages::{SetMaxUnfinished, SetResident};
use cuzk_actors::store::{FleetLoad, JobStore, Persistence, StoredJob};
use cuzk_actors::{Backend, ProvingSystem, SystemConfig};
use cuzk_kernels::circuits::CircuitRegistry;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::mpsc::UnboundedReceiver;

use super::engines::{backend, Built};
use super::listen::{http_server, Bound};
use super::{metrics_handle, ServerError};
use crate::auth::{AuthConfig, Gate, Gates};
use crate::config::{BackendKind, Config};
use crate::fleet::Fleet;
use crate::front::{FrontEnd, MetricsText};
use crate::grpc::{Calls, GrpcListener, GrpcServer, GrpcState, ProvingService};
use crate::http::AppState;
use crate::job_input::{JobParser, ReservationRule, SetupLimits};
use crate::jobs::Jobs;
use crate::keys::KeyStore;
use crate::param_files::ParamFiles;
use crate::postgres::StoreUrl;
use crate::shutdown::{self, Intake};

/// A daemon built and bound, not yet serving.
pub(super) struct Daemon {
    /// The HTTP server, bound; it serves once `run` spawns it.
    server: actix_web::dev::Server,
    /// Where it listens, for the log line and in-process callers.
    pub bound: Bound,
    /// The token gate in force, replaced on SIGHUP.
    pub gates: web::Data<Gates>,
    /// What a reload starts from: `[auth]` as configured, its tokens taken
    /// (where they came from, `--insecure`), and the address the loopback
    /// rule is checked for.
    pub reload: (AuthConfig, String),
    /// The actors, drained on stop.
    pub system: ProvingSystem,
    /// Closed on stop, so that new jobs are refused while the rest drains.
    pub intake: Intake,
    /// Closed last on stop, once it holds what the drain finished.
    job_store: Arc<dyn JobStore>,
    /// The job seam the handlers use, handed to in-process callers.
    pub jobs: Arc<Jobs>,
    /// How long a graceful stop waits for running partitions.
    pub grace: Duration,
    /// A fleet node's side of the database: a stop waits for its claimer to
    /// put back what it had not started.
    fleet: Option<Arc<Fleet>>,
    /// Curio's gRPC service, stopped with the HTTP server.
    grpc: Option<GrpcServer>,
}

impl Daemon {
    /// Builds everything, restores stored jobs and binds the listeners. Must
    /// run inside an actix system.
    pub fn build(mut config: Config, registry: CircuitRegistry) -> Result<Daemon, ServerError> {
        let checked = check_settings(&mut config)?;
        let gates = web::Data::new(Gates::new(checked.gate));
        let metrics = start_telemetry(&gates);
        let fleet_store = config.store.url.as_ref().zip(checked.node.as_deref());
        let keys = open_keys(&config)?;
        let Built { backend, reservation, loading, engines } = backend(&config, keys.clone())?;
        let (job_store, stored) = open_job_store(&config, fleet_store)?;
        let (system, load) = start_actors(&config, backend, &job_store, fleet_store.is_some());
        watch_resident(&keys, &system);
        let intake = Intake::default();
        let parser = job_parser(&config, registry, reservation, &keys);
        let recovering = crate::restore::start(&system, parser.clone(), job_store.clone(), stored)?;
        let fleet = fleet_store
            .zip(load)
            .map(|(fleet_store, load)| {
                Fleet::start(
                    &config,
                    fleet_store,
                    &system,
                    parser.clone(),
                    job_store.clone(),
                    load,
                    intake.clone(),
                )
            })
            .transpose()?;
        let jobs = Arc::new(Jobs::new(
            &config,
            system.clone(),
            parser.clone(),
            job_store.clone(),
            fleet.clone(),
            intake.clone(),
            recovering,
        )?);
        let params = Arc::new(ParamFiles::new(parser.params_dir.clone(), keys.clone(), loading, engines));
        let front = Arc::new(FrontEnd {
            jobs: jobs.clone(),
            system: system.clone(),
            parser,
            keys,
            params,
            metrics: MetricsText::new(metrics),
            gates: gates.clone().into_inner(),
            started: Instant::now(),
        });
        let grpc = checked.grpc.map(|listener| {
            let state = GrpcState {
                front: front.clone(),
                calls: Arc::new(Calls::new(config.grpc.max_waiting_calls, intake.clone())),
                trusted: listener.trusted,
                failed_without_job: AtomicU64::new(0),
            };
            grpc_server(&config, listener, state)
        });
        let grpc_address = grpc.as_ref().map(|(address, _)| address.clone());
        let state = web::Data::new(AppState {
            front,
            max_body_bytes: config.limits.max_body_bytes,
            body_read_timeout: Duration::from_secs(config.limits.body_read_timeout_s),
        });
        let (server, bound) =
            http_server(&config, state, gates.clone(), checked.tls, checked.metrics_listener, grpc_address)?;
        Ok(Daemon {
            server,
            bound,
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

    /// Serves until the first stop request (or until no one can send one),
    /// then drains and stops.
    pub async fn run(self, mut stop_requests: UnboundedReceiver<Duration>) -> std::io::Result<()> {
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

/// What the settings step hands on: everything refused before anything
/// starts has been refused.
struct Checked {
    /// The token gate, knowing the metrics listener's address.
    gate: Gate,
    /// The TLS server config, when `[tls]` names its files.
    tls: Option<rustls::ServerConfig>,
    /// The metrics-only listener, bound here because the gate needs its
    /// address (it answers /metrics there without a token).
    metrics_listener: Option<(TcpListener, SocketAddr)>,
    /// The gRPC listener, when `grpc.listen` is set: bound here because its
    /// rules (no plaintext with tokens off loopback) are settings refused.
    grpc: Option<GrpcListener>,
    /// This daemon's name in the fleet, when the store is PostgreSQL.
    node: Option<String>,
}

/// The refusals that come before anything starts: no tokens off loopback,
/// unreadable TLS files, a metrics or gRPC address that cannot be listened
/// on (or a gRPC listener its rules refuse), a fleet node name that cannot
/// be a lease holder's, too many critical-lane workers.
fn check_settings(config: &mut Config) -> Result<Checked, ServerError> {
    let mut gate = Gate::new(&mut config.auth, &config.listen)?;
    let tls = crate::tls::server_config(&config.tls)?;
    let metrics_listener = match &config.metrics_listen {
        Some(listen) => {
            let not_listening =
                |source| ServerError::Listen { address: format!("{listen} (metrics_listen)"), source };
            let listener = TcpListener::bind(listen).map_err(not_listening)?;
            let addr = listener.local_addr().map_err(not_listening)?;
            gate = gate.with_metrics_listener(addr);
            Some((listener, addr))
        }
        None => None,
    };
    let tokens = gate.token_count() > 0;
    let grpc = config
        .grpc
        .listen
        .as_ref()
        .map(|listen| crate::grpc::bind(listen, tls.as_ref(), tokens, config.auth.insecure))
        .transpose()?;
    config.scheduler.critical_workers()?;
    // A PostgreSQL store makes this daemon a node of the fleet on it.
    let node = match &config.store.url {
        Some(_) => Some(config.fleet.node_name()?),
        None => None,
    };
    Ok(Checked { gate, tls, metrics_listener, grpc, node })
}

/// Curio's gRPC service on the listener the settings step bound, serving
/// until stopped; and the address it serves on.
fn grpc_server(config: &Config, listener: GrpcListener, state: GrpcState) -> (String, GrpcServer) {
    let address = listener.address.clone();
    let service = ProvingService { state: Arc::new(state) };
    (address, listener.serve(service, config.grpc.max_message_bytes, config.grpc.max_waiting_calls))
}

/// The process's metrics recorder, and the first event it counts: the
/// tenants the gate knows.
fn start_telemetry(gates: &Gates) -> PrometheusHandle {
    let metrics = metrics_handle();
    crate::telemetry::TenantsConfigured { tenants: &gates.current().tenant_names() }.emit();
    metrics
}

/// The key store: the data directory's, or, on a fleet node, one whose
/// built-in circuits' keys the fleet's nodes share through the database.
fn open_keys(config: &Config) -> Result<Arc<KeyStore>, ServerError> {
    let keys = match &config.store.url {
        // The database client blocks: it connects off this (actix) thread.
        Some(url) => {
            std::thread::scope(|scope| scope.spawn(|| KeyStore::open_shared(&config.data_dir, url)).join())
                .map_err(|_| ServerError::KeysPanicked)?
        }
        None => KeyStore::open(&config.data_dir),
    };
    Ok(Arc::new(keys?))
}

/// Setups and parameter loads change the resident bytes off the synthesis
/// threads: the key store tells the budget, so that admission counts a
/// setup's estimate from its start and stops counting a stopped one at once.
/// The backend is held weakly: it holds the key store.
fn watch_resident(keys: &KeyStore, system: &ProvingSystem) {
    let (budget, backend) = (system.budget.clone(), Arc::downgrade(&system.backend));
    keys.on_resident_change(move || {
        if let Some(backend) = backend.upgrade() {
            budget.do_send(SetResident::of(backend.as_ref()));
        }
    });
}

/// The job store and the jobs it holds. A fleet node restores nothing:
/// jobs stay in the database, and its partitions come as claims.
fn open_job_store(
    config: &Config,
    fleet_store: Option<(&StoreUrl, &str)>,
) -> Result<(Arc<dyn JobStore>, Vec<StoredJob>), ServerError> {
    let job_store = crate::store::open(fleet_store, &config.data_dir)?;
    let stored = if fleet_store.is_some() { Vec::new() } else { job_store.load()? };
    Ok((job_store, stored))
}

/// The actors, recording into the job store, with the queue limit set; on
/// a fleet node also the load its claimer reads.
fn start_actors(
    config: &Config,
    backend: Arc<dyn Backend>,
    job_store: &Arc<dyn JobStore>,
    fleet_node: bool,
) -> (ProvingSystem, Option<Arc<FleetLoad>>) {
    let load = fleet_node.then(|| Arc::new(FleetLoad::default()));
    let persistence = Persistence {
        store: Some(job_store.clone()),
        fleet: load.clone(),
        // The fleet's claimers sweep the database.
        retention: (!fleet_node).then(|| Duration::from_secs(config.store.retention_secs)),
        sweep_interval: Duration::from_secs(config.store.sweep_interval_secs.max(1)),
    };
    let system = ProvingSystem::start_with(
        SystemConfig {
            synthesis_threads: config.synthesis_threads(),
            finalizer_threads: config.scheduler.finalizer_threads,
            workers_per_device: config.scheduler.workers_per_device,
            critical_workers_per_device: config.scheduler.critical_workers_per_device,
            gpu_lookahead: config.scheduler.gpu_lookahead,
            budget_bytes: config.budget_bytes(),
            pacer: config.scheduler.pacer.clone(),
            max_attempts: config.scheduler.max_attempts,
        },
        backend,
        persistence,
    );
    log::info!("scheduler: {:?}", system.config);
    let max_queued = config.limits.max_queued_jobs;
    system.tracker.do_send(SetMaxUnfinished((max_queued > 0).then_some(max_queued)));
    (system, load)
}

/// The parser every submission (and every restored or claimed job) goes
/// through: the circuits known, where Filecoin's parameter files are, the
/// limits, and how the backend sizes a partition.
fn job_parser(
    config: &Config,
    registry: CircuitRegistry,
    reservation: ReservationRule,
    keys: &Arc<KeyStore>,
) -> Arc<JobParser> {
    let params_dir = cuzk_filecoin::params::parameter_dir(config.params_dir.as_deref());
    log::info!("Filecoin parameters: {}", params_dir.display());
    Arc::new(JobParser {
        registry,
        params_dir,
        max_partitions: config.limits.max_partitions,
        max_input_bytes: config.limits.max_input_bytes,
        reservation,
        // The simulated backend sets nothing up.
        setups: (config.backend != BackendKind::Sim)
            .then(|| SetupLimits { keys: keys.clone(), budget_bytes: config.budget_bytes() }),
    })
}
