//! The daemon's TOML configuration. Every field has a default that runs on a
//! laptop: the CPU backend on 127.0.0.1 with ./data.

use std::path::{Path, PathBuf};

use cuzk_filecoin::record::Evaluation;
use cuzk_filecoin::Kind;
use cuzk_kernels::circuits::CircuitRegistry;
use serde::{Deserialize, Serialize};

/// Why the configuration cannot be used: the file, or the setting named,
/// is what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read.
    #[error("cannot read config {}: {source}", path.display())]
    Unreadable {
        /// The file that was named, for the message.
        path: PathBuf,
        /// What reading it failed with.
        source: std::io::Error,
    },
    /// The config file is not TOML of the configuration's shape (boxed:
    /// the parser's error is several times the size of the others).
    #[error("invalid config {}: {source}", path.display())]
    Invalid {
        /// The file that was named, for the message.
        path: PathBuf,
        /// Where and why the TOML parser stopped.
        source: Box<toml::de::Error>,
    },
    /// `fleet.node` is unset and the hostname, its default, cannot be read.
    #[error("fleet.node is unset and the hostname cannot be read: {0}")]
    NoHostname(std::io::Error),
    /// A node name that cannot be a lease holder's name.
    #[error("fleet.node {0:?} must be 1 to 128 visible ASCII characters")]
    NodeName(String),
    /// A lease too short to be renewed at a third of it, or no polling.
    #[error(
        "fleet.lease_secs must be at least 3 (it is {lease_secs}) and fleet.poll_secs at least 1 (it is {poll_secs})"
    )]
    FleetTiming {
        /// `fleet.lease_secs` as configured.
        lease_secs: u64,
        /// `fleet.poll_secs` as configured.
        poll_secs: u64,
    },
    /// A CUDA memory budget below [`MIN_CUDA_BUDGET`].
    #[error("cuda.{setting} must be at least {MIN_CUDA_BUDGET} bytes (1 GiB); it is {bytes}")]
    CudaBudget {
        /// The `[cuda]` setting that is too small, by its TOML name.
        setting: &'static str,
        /// The value it was given.
        bytes: u64,
    },
    /// A pass size outside 1 to [`MAX_PASS_PARTITIONS`].
    #[error("cuda.pass_partitions must be 1 to {MAX_PASS_PARTITIONS}; it is {0}")]
    PassPartitions(usize),
    /// A pass wait above [`MAX_PASS_WAIT_MS`].
    #[error("cuda.pass_wait_ms must be at most {MAX_PASS_WAIT_MS}; it is {0}")]
    PassWait(u64),
    /// A parse budget that a full-size body could never fit, or no
    /// request allowed to parse at all.
    #[error(
        "limits.parse_budget_bytes ({budget_bytes}) must hold the estimate of one limits.max_body_bytes body ({max_body_bytes} bytes: {largest}) beside the urgent reserve ({reserve_bytes}: limits.urgent_parsing_requests bodies of limits.urgent_body_bytes), and limits.max_parsing_requests ({max_requests}) must be more than limits.urgent_parsing_requests ({reserve_requests})"
    )]
    ParseBudget {
        /// The budget in effect (`limits.parse_budget_bytes`, or its default).
        budget_bytes: u64,
        /// The parse estimate of one body of `max_body_bytes`, which the budget must hold.
        largest: u64,
        /// `limits.max_body_bytes`, the body that estimate is of.
        max_body_bytes: usize,
        /// Bytes held back for urgent bodies, which the budget must hold beside the largest.
        reserve_bytes: u64,
        /// `limits.max_parsing_requests`.
        max_requests: usize,
        /// `limits.urgent_parsing_requests`, which must leave room for one
        /// request that is not urgent.
        reserve_requests: usize,
    },
    /// A tenant's share of a limit that is no fraction.
    #[error("limits.{setting} must be more than 0 and at most 1; it is {share}")]
    Share {
        /// The `[limits]` setting at fault, by its TOML name.
        setting: &'static str,
        /// The value it was given.
        share: f64,
    },
    /// More critical-lane workers per device than [`MAX_CRITICAL_WORKERS`].
    #[error("scheduler.critical_workers_per_device must be at most {MAX_CRITICAL_WORKERS}; it is {0}")]
    CriticalWorkers(usize),
    /// A name in `scheduler.critical_kinds` that is no circuit this daemon proves.
    #[error(
        "scheduler.critical_kinds names {0:?}, which is neither a Filecoin kind (porep-c2, winning-post, window-post, snap-prove) nor a registered circuit family"
    )]
    CriticalKind(String),
}

/// The whole configuration file (`cuzk serve --config`), one field per
/// TOML table; any field left out takes its default.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The HTTP API's address (`host:port`).
    pub listen: String,
    /// Where the redb job store and the daemon's other files live.
    pub data_dir: PathBuf,
    /// Filecoin's parameter files (`v28-*.params`, `.vk`); unset: the
    /// FIL_PROOFS_PARAMETER_CACHE directory, else
    /// /var/tmp/filecoin-proof-parameters, as filecoin-proofs looks.
    pub params_dir: Option<PathBuf>,
    /// Which prover runs the partitions: CPU, CUDA or simulated.
    pub backend: BackendKind,
    /// `[scheduler]`: the threads, workers and memory budget of the pipeline.
    pub scheduler: SchedulerConfig,
    /// `[cpu]`: the CPU backend's devices; read only with `backend = "cpu"`.
    pub cpu: CpuConfig,
    /// `[cuda]`: the GPUs and their memory plan; read only with `backend = "cuda"`.
    pub cuda: CudaConfig,
    /// `[sim]`: the simulated backend's profile and faults; read only with
    /// `backend = "sim"`.
    pub sim: SimConfig,
    /// `[proving]`: what the finalizer checks and how Filecoin partitions are evaluated.
    pub proving: ProvingConfig,
    /// `[limits]`: the bounds on what clients may submit and hold.
    pub limits: Limits,
    /// A second listener serving only /metrics and /healthz (plain HTTP).
    pub metrics_listen: Option<String>,
    /// Curio's gRPC service beside the HTTP API (docs/curio.md).
    pub grpc: GrpcConfig,
    /// `[auth]`: the bearer tokens and tenants that may use the API.
    pub auth: crate::auth::AuthConfig,
    /// `[tls]`: the certificate and key the API listener (and gRPC off
    /// loopback) serve TLS with; unset: plaintext.
    pub tls: crate::tls::TlsConfig,
    /// `[store]`: where jobs are kept and for how long.
    pub store: StoreConfig,
    /// `[fleet]`: this node's name and lease timing, used only with a PostgreSQL store.
    pub fleet: FleetConfig,
    /// On SIGTERM or Ctrl-C, how long partitions already started may run
    /// before the daemon exits anyway (they resume on the next start).
    pub shutdown_grace_secs: u64,
}

/// The job store: `<data_dir>/jobs.redb`, or a PostgreSQL database.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// A PostgreSQL database to keep jobs in instead of the redb file
    /// (`postgres://user:password@host:port/database`); shown everywhere
    /// with its password hidden. Unset: the redb file.
    pub url: Option<crate::postgres::StoreUrl>,
    /// Finished jobs (and their proofs) are kept this long, then forgotten.
    pub retention_secs: u64,
    /// How often finished jobs past retention are looked for.
    pub sweep_interval_secs: u64,
    /// Free bytes the data directory's filesystem must keep: below this a
    /// submission is answered 507 before anything is written, so the store
    /// never fills the disk with new jobs while finishing old ones still
    /// needs space for their proofs. Only for the redb file: a database's
    /// disk is the database server's.
    pub min_free_bytes: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { url: None, retention_secs: 7 * 24 * 3600, sweep_interval_secs: 300, min_free_bytes: 256 << 20 }
    }
}

/// `[grpc]`: Curio's `cuzk.v1.ProvingEngine` (docs/curio.md).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcConfig {
    /// `host:port`, or `unix:///path/to.sock` (Curio's `[Cuzk] Address`
    /// forms); unset: no gRPC listener.
    pub listen: Option<String>,
    /// The largest message read or written, in bytes (Curio's client
    /// allows 256 MiB each way). A request's job is then held to
    /// `limits.max_input_bytes` like any other.
    pub max_message_bytes: usize,
    /// Prove and AwaitProof calls of one tenant waiting on jobs at once,
    /// over every connection; one more of that tenant's is answered
    /// RESOURCE_EXHAUSTED, and other tenants' are not touched.
    pub max_waiting_calls: usize,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        Self { listen: None, max_message_bytes: 256 << 20, max_waiting_calls: 4096 }
    }
}

/// A fleet node's part in the shared queue: used only with a PostgreSQL
/// store, which makes every daemon on it a node of one fleet
/// (docs/operations.md, "Fleet").
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// The name leases are held under: unique in the fleet and the same
    /// after a restart, so that a restarted node releases what it held.
    /// Unset: the machine's hostname.
    pub node: Option<String>,
    /// How long a claim holds a partition without renewal; the owner renews
    /// every third of it. A node silent this long loses its partitions.
    pub lease_secs: u64,
    /// How often a node with room looks for work when no wake-up came (a
    /// lease that ran out sends none; nor does a database without
    /// LISTEN/NOTIFY).
    pub poll_secs: u64,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self { node: None, lease_secs: 30, poll_secs: 5 }
    }
}

impl FleetConfig {
    /// The configured name, else the hostname.
    pub fn node_name(&self) -> Result<String, ConfigError> {
        let name = match &self.node {
            Some(node) => node.clone(),
            None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|name| name.trim().to_string())
                .map_err(ConfigError::NoHostname)?,
        };
        let valid = !name.is_empty() && name.len() <= 128 && name.chars().all(|c| c.is_ascii_graphic());
        if !valid {
            return Err(ConfigError::NodeName(name));
        }
        if self.lease_secs < 3 || self.poll_secs == 0 {
            return Err(ConfigError::FleetTiming { lease_secs: self.lease_secs, poll_secs: self.poll_secs });
        }
        Ok(name)
    }
}

/// Which prover the daemon runs partitions on (`backend` in the config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Proving on the host's cores: the default, and runs anywhere.
    #[default]
    Cpu,
    /// Proving on NVIDIA GPUs; needs a build with the `cuda` feature.
    Cuda,
    /// The simulated backend: for tests and capacity planning only.
    Sim,
}

impl BackendKind {
    /// The config spelling of the backend, as metrics and logs show it.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Sim => "sim",
        }
    }
}

/// `[scheduler]`: how many threads and workers run each stage of the
/// pipeline, and the memory budget they share.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// 0: half the cores, at least one. Critical partitions have one more
    /// thread of their own, so a WinningPoSt never waits for a slot.
    pub synthesis_threads: usize,
    /// Finalizer threads: they finish each partition's proof on the CPU after
    /// the GPU's part, and check it when `proving.verify_proofs` is set.
    pub finalizer_threads: usize,
    /// GPU workers per device taking any partition; each proves one at a time.
    pub workers_per_device: usize,
    /// Extra GPU workers per device that take only critical partitions, so
    /// a WinningPoSt starts at once during a bulk stream (0: none; each
    /// holds one more workspace on the device while it proves).
    pub critical_workers_per_device: usize,
    /// The kinds (a Filecoin kind's API name, or a registered family's)
    /// any submitter may ask priority critical for. Elsewhere critical
    /// takes a token with the `critical` scope, and is otherwise lowered to
    /// the kind's default, so that bulk work cannot crowd the critical lane
    /// (docs/api.md, "Priorities").
    pub critical_kinds: Vec<String>,
    /// Partitions waiting in a worker's mailbox behind the one it proves, so the
    /// GPU never idles between two.
    pub gpu_lookahead: usize,
    /// Host memory the partitions in flight may hold at once.
    pub budget: Budget,
    /// The controller that paces synthesis to keep the GPUs fed without piling
    /// up synthesized partitions.
    pub pacer: cuzk_actors::pacer::PacerConfig,
    /// Attempts a partition gets when a stage fails or panics (1: no retry).
    pub max_attempts: u32,
}

/// The memory budget: `"auto"` or a number of bytes.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Budget {
    /// A fixed number of bytes.
    Bytes(u64),
    /// `"auto"`: a share of the host's memory and any cgroup limit
    /// (`Config::budget_bytes`).
    Auto(AutoBudget),
}

/// The one word `"auto"` for `Budget`, a type of its own so that serde reads
/// the budget as either a number or this string.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoBudget {
    /// The budget is worked out from the host's memory.
    Auto,
}

/// `[cpu]`: the CPU backend's provers.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuConfig {
    /// CPU "devices": each is one prover with its own thread pool and its
    /// own GPU workers.
    pub devices: usize,
    /// Threads per device (0: all cores).
    pub threads_per_device: usize,
}

/// `[cuda]`: which GPUs to use and how their memory is planned.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CudaConfig {
    /// Device ordinals to use; empty: every detected device.
    pub devices: Vec<usize>,
    /// Run B's G2 MSM on the GPU (default) or in the finalizer on the CPU.
    pub g2_on_gpu: Option<bool>,
    /// Most device bytes each device's memory plan hands out (unset: what
    /// the device has free once the daemon's context is on it). The plan
    /// (docs/gpu.md, "Device memory plan") decides from it which parts of
    /// each key stay resident and which stream from pinned host memory, and
    /// how many general workers prove at once; a circuit the device cannot
    /// hold even streamed is refused at its preload, naming this setting.
    pub memory_limit_bytes: Option<u64>,
    /// Most device bytes a circuit's NTT tables, matrices and resident key
    /// parts may take (unset: whatever the plan leaves beside the
    /// workspaces). Parts beyond it stream, even where the device could
    /// hold them.
    pub resident_budget_bytes: Option<u64>,
    /// Host bytes of pinned memory each device's streamed key parts may
    /// take (unset: half the host's memory). Counted, as they are held,
    /// under `scheduler.budget` with the partitions in flight.
    pub pinned_budget_bytes: Option<u64>,
    /// Most partitions that share one pass over a streamed key (unset: 2;
    /// 1: every partition streams the key itself). A device's workers
    /// supply them, so more than `scheduler.workers_per_device` never fill.
    pub pass_partitions: Option<usize>,
    /// How long a pass over a streamed key waits for more partitions after
    /// its first one's H step (unset: 0, docs/gpu.md says why).
    pub pass_wait_ms: Option<u64>,
}

/// The most partitions per pass accepted: each holds its scalars on the
/// device until the pass ends (about 14 GB at the 32 GiB PoRep shape).
pub const MAX_PASS_PARTITIONS: usize = 8;
/// The longest pass wait accepted (ms): beyond it a lone partition waits
/// longer than a streamed 32 GiB pass takes.
pub const MAX_PASS_WAIT_MS: u64 = 10_000;

/// The most critical-lane workers per device accepted: critical work is a
/// proof or two at a time (WinningPoSt is one partition), and each worker
/// proving holds a workspace of device memory, so more only cost memory.
pub const MAX_CRITICAL_WORKERS: usize = 4;

impl SchedulerConfig {
    /// `critical_kinds`, checked: each a Filecoin kind's API name or a
    /// family `registry` holds.
    pub fn critical_kinds(&self, registry: &CircuitRegistry) -> Result<&[String], ConfigError> {
        let known = |name: &str| Kind::from_api_name(name).is_some() || registry.get(name).is_some();
        match self.critical_kinds.iter().find(|name| !known(name)) {
            Some(unknown) => Err(ConfigError::CriticalKind(unknown.clone())),
            None => Ok(&self.critical_kinds),
        }
    }

    /// The critical lane's workers per device, checked.
    pub fn critical_workers(&self) -> Result<usize, ConfigError> {
        match self.critical_workers_per_device {
            n if n > MAX_CRITICAL_WORKERS => Err(ConfigError::CriticalWorkers(n)),
            n => Ok(n),
        }
    }
}

/// The smallest device memory limit, resident or pinned budget accepted:
/// below it nothing of use fits (NTT tables alone of a 2^22 domain take
/// 268 MB).
pub const MIN_CUDA_BUDGET: u64 = 1 << 30;

/// `[cuda]`'s byte settings, checked (`None`: unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaBudgets {
    /// `cuda.memory_limit_bytes`: most device bytes the memory plan hands out.
    pub memory_limit: Option<u64>,
    /// `cuda.resident_budget_bytes`: most device bytes a circuit's resident parts take.
    pub resident: Option<u64>,
    /// `cuda.pinned_budget_bytes`: pinned host bytes for streamed key parts.
    pub pinned: Option<u64>,
}

impl CudaConfig {
    /// The device memory limit and the resident and pinned budgets,
    /// checked.
    pub fn budgets(&self) -> Result<CudaBudgets, ConfigError> {
        for (setting, value) in [
            ("memory_limit_bytes", self.memory_limit_bytes),
            ("resident_budget_bytes", self.resident_budget_bytes),
            ("pinned_budget_bytes", self.pinned_budget_bytes),
        ] {
            if let Some(bytes) = value.filter(|&bytes| bytes < MIN_CUDA_BUDGET) {
                return Err(ConfigError::CudaBudget { setting, bytes });
            }
        }
        Ok(CudaBudgets {
            memory_limit: self.memory_limit_bytes,
            resident: self.resident_budget_bytes,
            pinned: self.pinned_budget_bytes,
        })
    }

    /// The shared passes' size and wait, checked.
    pub fn passes(&self) -> Result<(Option<usize>, Option<std::time::Duration>), ConfigError> {
        if let Some(n) = self.pass_partitions.filter(|n| !(1..=MAX_PASS_PARTITIONS).contains(n)) {
            return Err(ConfigError::PassPartitions(n));
        }
        if let Some(ms) = self.pass_wait_ms.filter(|&ms| ms > MAX_PASS_WAIT_MS) {
            return Err(ConfigError::PassWait(ms));
        }
        Ok((self.pass_partitions, self.pass_wait_ms.map(std::time::Duration::from_millis)))
    }
}

/// The simulated backend (`backend = "sim"`): stage bodies that take the
/// durations and hold the bytes of a profile. Not a prover.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// `porep-32g` or `winning-post`.
    pub profile: String,
    /// Multiplies every simulated duration (0.01: a hundred times faster).
    pub time_scale: f64,
    /// Each duration varies uniformly by up to this fraction either way.
    pub jitter: f64,
    /// Simulated GPU devices.
    pub devices: usize,
    /// Extra time every finalization takes (to show it cannot delay GPUs).
    pub finalizer_stall_ms: u64,
    /// Injected faults, for tests of supervision and recovery.
    pub faults: SimFaults,
}

/// Faults the simulated backend injects. Draws come from a seeded generator,
/// so a run is repeatable for a given order of stage calls.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimFaults {
    /// Seeds the generator the faults are drawn from, so a run can be repeated.
    pub seed: u64,
    /// Faults of the synthesis stage.
    pub synthesis: StageFaults,
    /// Faults of the GPU proving stage.
    pub prove: StageFaults,
    /// Faults of the finalizer.
    pub finalize: StageFaults,
    /// Bytes the backend claims to hold across partitions: memory pressure
    /// on the budget (all of it, or more, exhausts it).
    pub resident_bytes: u64,
}

/// Per stage call: probabilities of an error, a panic and a stall.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StageFaults {
    /// Chance that a call fails with an error (retried like a device error).
    pub error_rate: f64,
    /// Chance that a call panics, to test that supervision restarts the stage.
    pub panic_rate: f64,
    /// Chance that a call stalls for `stall_ms` before it goes on.
    pub stall_rate: f64,
    /// How long a stall lasts, in milliseconds.
    pub stall_ms: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            profile: "porep-32g".into(),
            time_scale: 1.0,
            jitter: 0.1,
            devices: 1,
            finalizer_stall_ms: 0,
            faults: SimFaults::default(),
        }
    }
}

/// `[proving]`: checks and evaluation choices of the proving itself.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProvingConfig {
    /// The finalizer checks every proof against the verifying key.
    pub verify_proofs: bool,
    /// The finalizer returns freed heap to the OS after each partition
    /// (glibc `malloc_trim(0)`).
    pub malloc_trim: bool,
    /// How a Filecoin partition's a, b and c are computed: `compiled` (the
    /// circuit's R1CS recorded once and multiplied by each assignment on
    /// every core; the default, measured faster) or `direct` (evaluated as
    /// the reference circuit enforces each constraint, one thread, no
    /// matrices held).
    pub filecoin_evaluation: Evaluation,
}

/// `[limits]`: bounds on what clients may submit, and on the memory and
/// connections their requests may hold.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// The most partitions one job may have; more is refused at submission.
    pub max_partitions: u32,
    /// The largest request body read, in bytes; a longer one is answered 413.
    pub max_body_bytes: usize,
    /// The most bytes a job's request may hold as compact JSON: what the
    /// job keeps, in memory and in the store, until it finishes.
    pub max_input_bytes: usize,
    /// Unfinished (queued or running) jobs above which a submission is
    /// answered 429; 0: no limit.
    pub max_queued_jobs: usize,
    /// The Retry-After (seconds) of that 429.
    pub queue_full_retry_after_s: u64,
    /// Seconds a client has to send a request's headers (then 408).
    pub header_read_timeout_s: u64,
    /// Seconds a client has to send a request's body once its headers are
    /// in (then 408): a trickled body holds a connection no longer.
    pub body_read_timeout_s: u64,
    /// Bytes that submissions being read and parsed may hold at once, each
    /// counted as the bytes of its body received so far times 8, plus
    /// 8 MiB (`jobs::parse_budget`); a submission that does not fit, when
    /// its head arrives or as its body does, is answered 503 `parsing_full`
    /// with Retry-After. Unset: 2 GiB (fifteen full-size bodies of the
    /// default 16 MiB at once on a 24 GB host), or one `max_body_bytes`
    /// body's estimate and the urgent reserve where that is more; a value
    /// set must hold them.
    pub parse_budget_bytes: Option<u64>,
    /// Submissions read and parsed at once, whatever their size; one more
    /// is answered 503 `parsing_full`.
    pub max_parsing_requests: usize,
    /// The largest body that is urgent (by its declared length, or
    /// `max_body_bytes` when it declares none): a WinningPoSt's is a few
    /// hundred KB, a PoRep C1's tens of MB.
    pub urgent_body_bytes: usize,
    /// Urgent bodies kept room for: that many requests, and their bytes'
    /// estimates, of the parse budget that larger bodies cannot take, so
    /// that bulk submissions arriving slowly never refuse a WinningPoSt.
    pub urgent_parsing_requests: usize,
    /// Seconds a gRPC call whose message has arrived waits for its place in
    /// the parse budget before it is refused (UNAVAILABLE with a retry
    /// hint): a burst of calls, such as a WindowPoSt deadline's partitions
    /// submitted at once, is parsed in turn. An HTTP submission is refused
    /// at once instead, before its body is read.
    pub parse_wait_s: u64,
    /// The fraction of the parse budget's requests and bytes one tenant's
    /// submissions may hold together (of its class's: the urgent reserve
    /// is shared out the same way), never less than one request and one
    /// of the class's largest bodies: one more is answered 429 over HTTP
    /// (gRPC waits its turn, then RESOURCE_EXHAUSTED), and the rest stays
    /// for the other tenants. Anonymous callers are one tenant; the
    /// operator's own (the admin scope, and every caller of a daemon
    /// without tokens) are held to no share.
    pub parse_share_per_tenant: f64,
    /// The fraction of `max_queued_jobs` one tenant's unfinished jobs may
    /// be (at least one job; lower still where the tenant's own
    /// `max_queued_jobs` says so): one more of that tenant's is answered
    /// 429, and the rest of the queue stays for the other tenants. Held as
    /// `parse_share_per_tenant` is: not for the operator's own.
    pub queue_share_per_tenant: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9820".into(),
            data_dir: PathBuf::from("./data"),
            params_dir: None,
            backend: BackendKind::Cpu,
            scheduler: SchedulerConfig::default(),
            cpu: CpuConfig::default(),
            cuda: CudaConfig::default(),
            sim: SimConfig::default(),
            proving: ProvingConfig::default(),
            limits: Limits::default(),
            store: StoreConfig::default(),
            fleet: FleetConfig::default(),
            shutdown_grace_secs: 30,
            metrics_listen: None,
            grpc: GrpcConfig::default(),
            auth: Default::default(),
            tls: Default::default(),
        }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            synthesis_threads: 0,
            finalizer_threads: 2,
            workers_per_device: 2,
            critical_workers_per_device: 1,
            critical_kinds: vec!["winning-post".into()],
            gpu_lookahead: 1,
            budget: Budget::Auto(AutoBudget::Auto),
            pacer: Default::default(),
            max_attempts: 3,
        }
    }
}

impl Default for CpuConfig {
    fn default() -> Self {
        Self { devices: 1, threads_per_device: 0 }
    }
}

impl Default for ProvingConfig {
    fn default() -> Self {
        Self { verify_proofs: true, malloc_trim: true, filecoin_evaluation: Evaluation::default() }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_partitions: 64,
            max_body_bytes: 16 << 20,
            max_input_bytes: 16 << 20,
            max_queued_jobs: 1024,
            queue_full_retry_after_s: 5,
            header_read_timeout_s: 5,
            body_read_timeout_s: 30,
            parse_budget_bytes: None,
            max_parsing_requests: 32,
            urgent_body_bytes: 1 << 20,
            urgent_parsing_requests: 4,
            parse_wait_s: 60,
            parse_share_per_tenant: 0.5,
            queue_share_per_tenant: 0.5,
        }
    }
}

/// One tenant's share of `total` places (`limits.parse_share_per_tenant`,
/// `limits.queue_share_per_tenant`: `share` of it, rounded down, at least
/// one), or the refusal of a share that is no fraction in (0, 1], naming
/// `setting`.
pub fn tenant_share(setting: &'static str, share: f64, total: usize) -> Result<usize, ConfigError> {
    if !(share > 0.0 && share <= 1.0) {
        return Err(ConfigError::Share { setting, share });
    }
    Ok(((total as f64 * share) as usize).clamp(1, total.max(1)))
}

/// Kept free of the budget so that small machines still run: 5 GiB or a
/// quarter of memory, whichever is smaller.
fn safety_margin(total: u64) -> u64 {
    (5u64 << 30).min(total / 4)
}

/// The least of a host's memory the `auto` budget takes before it stops at
/// half: below twice this, a host is taken as it always was (its memory
/// less `safety_margin`), so a 64 GiB host keeps 59 GiB.
const HOST_SHARE_FLOOR: u64 = 60 << 30;

/// The `auto` budget from the host's physical memory and the daemon's
/// cgroup limit, either unknown. Of a large host it takes half, leaving the
/// rest to what shares the host (Curio's sealing tasks): a 32 GiB PoRep
/// stream on an 80 GB card ran as fast under 64 GiB as under 120 GiB and
/// peaked at 47 GiB against 74 GiB (docs/benchmarks.md, 2026-12-07). A
/// cgroup limit was set for the daemon alone, so of it the budget takes all
/// but the margin, as before.
fn auto_budget(physical: Option<u64>, cgroup: Option<u64>) -> u64 {
    let host = physical.map(|total| (total - safety_margin(total)).min((total / 2).max(HOST_SHARE_FLOOR)));
    let limit = cgroup.map(|total| total - safety_margin(total));
    host.into_iter().chain(limit).min().unwrap_or_else(|| {
        let unknown = 8u64 << 30;
        unknown - safety_margin(unknown)
    })
}

impl Config {
    /// Reads and parses the config file at `path`; unset fields take their
    /// defaults. Errors name the file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Unreadable { path: path.to_path_buf(), source })?;
        toml::from_str(&text)
            .map_err(|source| ConfigError::Invalid { path: path.to_path_buf(), source: Box::new(source) })
    }

    /// Synthesis threads to run: `scheduler.synthesis_threads`, or half the cores
    /// (at least one) when it is 0.
    pub fn synthesis_threads(&self) -> usize {
        match self.scheduler.synthesis_threads {
            0 => (available_cores() / 2).max(1),
            n => n,
        }
    }

    /// The budget in bytes: as configured, or `auto_budget`'s share of the
    /// host's memory and the cgroup limit.
    pub fn budget_bytes(&self) -> u64 {
        match &self.scheduler.budget {
            Budget::Bytes(bytes) => *bytes,
            Budget::Auto(_) => auto_budget(cuzk_kernels::host::physical_memory(), cgroup_memory_limit()),
        }
    }
}

/// The cores this process may run on (1 when that cannot be known): the base of
/// the defaults that follow the machine.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn cgroup_memory_limit() -> Option<u64> {
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::{
        auto_budget, CircuitRegistry, ConfigError, CudaBudgets, CudaConfig, FleetConfig, SchedulerConfig,
        MAX_CRITICAL_WORKERS, MAX_PASS_PARTITIONS, MAX_PASS_WAIT_MS, MIN_CUDA_BUDGET,
    };

    #[test]
    fn the_auto_budget_takes_half_of_a_large_host_and_a_cgroup_limit_less_its_margin() {
        const GIB: u64 = 1 << 30;
        // Small hosts as before: their memory less 5 GiB or a quarter.
        assert_eq!(auto_budget(Some(8 * GIB), None), 6 * GIB);
        assert_eq!(auto_budget(Some(64 * GIB), None), 59 * GIB);
        // Between, the floor; from twice it, half.
        assert_eq!(auto_budget(Some(96 * GIB), None), 60 * GIB);
        assert_eq!(auto_budget(Some(125 * GIB), None), 125 * GIB / 2);
        assert_eq!(auto_budget(Some(256 * GIB), None), 128 * GIB);
        // An operator's cgroup limit is the daemon's own: all but the margin.
        assert_eq!(auto_budget(Some(256 * GIB), Some(200 * GIB)), 128 * GIB);
        assert_eq!(auto_budget(Some(256 * GIB), Some(100 * GIB)), 95 * GIB);
        assert_eq!(auto_budget(None, Some(100 * GIB)), 95 * GIB);
        assert_eq!(auto_budget(None, None), 6 * GIB);
    }

    #[test]
    fn critical_kinds_are_known_circuits_and_winning_post_by_default() {
        let registry = CircuitRegistry::builtin();
        let defaults = SchedulerConfig::default();
        assert_eq!(defaults.critical_kinds(&registry).unwrap(), ["winning-post"]);
        let listed = |kinds: &[&str]| SchedulerConfig {
            critical_kinds: kinds.iter().map(|k| k.to_string()).collect(),
            ..SchedulerConfig::default()
        };
        assert!(listed(&["window-post", "mimc-chain"]).critical_kinds(&registry).is_ok());
        assert!(listed(&[]).critical_kinds(&registry).unwrap().is_empty());
        let error = listed(&["porep-c2", "porep"]).critical_kinds(&registry).unwrap_err();
        assert!(matches!(&error, ConfigError::CriticalKind(name) if name == "porep"), "{error}");
    }

    #[test]
    fn critical_workers_are_bounded() {
        let lane = |n| SchedulerConfig { critical_workers_per_device: n, ..SchedulerConfig::default() };
        assert_eq!(SchedulerConfig::default().critical_workers().unwrap(), 1);
        for n in [0, MAX_CRITICAL_WORKERS] {
            assert_eq!(lane(n).critical_workers().unwrap(), n);
        }
        let error = lane(MAX_CRITICAL_WORKERS + 1).critical_workers().unwrap_err();
        assert!(matches!(error, ConfigError::CriticalWorkers(n) if n == MAX_CRITICAL_WORKERS + 1));
        assert!(error.to_string().contains("scheduler.critical_workers_per_device"), "{error}");
    }

    #[test]
    fn cuda_budgets_below_one_gib_are_refused() {
        let unset = CudaBudgets { memory_limit: None, resident: None, pinned: None };
        assert_eq!(CudaConfig::default().budgets().unwrap(), unset);
        let set = CudaConfig {
            memory_limit_bytes: Some(24 << 30),
            resident_budget_bytes: Some(16 << 30),
            pinned_budget_bytes: Some(MIN_CUDA_BUDGET),
            ..CudaConfig::default()
        };
        let expected = CudaBudgets {
            memory_limit: Some(24 << 30),
            resident: Some(16 << 30),
            pinned: Some(MIN_CUDA_BUDGET),
        };
        assert_eq!(set.budgets().unwrap(), expected);
        let limit = CudaConfig { memory_limit_bytes: Some(1 << 20), ..CudaConfig::default() };
        let error = limit.budgets().unwrap_err();
        assert!(error.to_string().contains("cuda.memory_limit_bytes"), "{error}");
        let small = CudaConfig { resident_budget_bytes: Some(0), ..CudaConfig::default() };
        let error = small.budgets().unwrap_err();
        assert!(matches!(error, ConfigError::CudaBudget { setting: "resident_budget_bytes", bytes: 0 }));
        assert!(error.to_string().contains("cuda.resident_budget_bytes"), "{error}");
        let pinned = CudaConfig { pinned_budget_bytes: Some(MIN_CUDA_BUDGET - 1), ..CudaConfig::default() };
        assert!(matches!(
            pinned.budgets(),
            Err(ConfigError::CudaBudget { setting: "pinned_budget_bytes", bytes }) if bytes == MIN_CUDA_BUDGET - 1
        ));
    }

    #[test]
    fn cuda_passes_are_checked() {
        assert_eq!(CudaConfig::default().passes().unwrap(), (None, None));
        let set = CudaConfig { pass_partitions: Some(4), pass_wait_ms: Some(250), ..CudaConfig::default() };
        assert_eq!(set.passes().unwrap(), (Some(4), Some(std::time::Duration::from_millis(250))));
        for n in [0, MAX_PASS_PARTITIONS + 1] {
            let bad = CudaConfig { pass_partitions: Some(n), ..CudaConfig::default() };
            let error = bad.passes().unwrap_err();
            assert!(matches!(error, ConfigError::PassPartitions(m) if m == n), "{n}");
            assert!(error.to_string().contains("cuda.pass_partitions"), "{error}");
        }
        let long = CudaConfig { pass_wait_ms: Some(MAX_PASS_WAIT_MS + 1), ..CudaConfig::default() };
        assert!(matches!(long.passes(), Err(ConfigError::PassWait(ms)) if ms == MAX_PASS_WAIT_MS + 1));
    }

    #[test]
    fn a_node_name_and_lease_are_checked() {
        let named = |node: &str| FleetConfig { node: Some(node.into()), ..FleetConfig::default() };
        assert_eq!(named("gpu-a").node_name().unwrap(), "gpu-a");
        for bad in ["", "two words", "t\u{e9}st", &"x".repeat(129)] {
            let error = named(bad).node_name().unwrap_err();
            assert!(matches!(&error, ConfigError::NodeName(name) if name == bad), "{bad:?}: {error}");
            assert!(error.to_string().contains("fleet.node"), "{bad:?}: {error}");
        }
        let short = FleetConfig { lease_secs: 2, ..named("a") };
        let error = short.node_name().unwrap_err();
        assert!(matches!(error, ConfigError::FleetTiming { lease_secs: 2, poll_secs: 5 }));
        assert!(error.to_string().contains("lease_secs"), "{error}");
        let never = FleetConfig { poll_secs: 0, ..named("a") };
        assert!(matches!(never.node_name(), Err(ConfigError::FleetTiming { poll_secs: 0, .. })));
        // Unset: the hostname, which is a valid name on any Linux host.
        assert!(!FleetConfig::default().node_name().unwrap().is_empty());
    }
}
