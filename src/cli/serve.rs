//! `cuzk serve`: the configuration from the file and the flags, the tokens
//! from the environment (taken out of it before any thread starts), then
//! the daemon until SIGTERM.

use std::path::PathBuf;

use cuzk_kernels::circuits::CircuitRegistry;
use zeroize::Zeroize;

use super::CliError;
use crate::auth::{TokenConfig, TokenSources};
use crate::config::{BackendKind, Config};

/// The variable `serve` reads API tokens from.
pub(super) const ENV_TOKENS: &str = "CUZK_API_TOKENS";

/// The variable `serve` reads the store's URL from (clap reads it, as
/// `--store-url`'s default).
const ENV_STORE_URL: &str = "CUZK_STORE_URL";

/// `cuzk serve`'s flags: each overrides the config file's setting.
#[derive(clap::Args)]
pub(super) struct ServeArgs {
    /// TOML configuration file (every field optional).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on, overriding the config.
    #[arg(long)]
    listen: Option<String>,
    /// Data directory (proving keys), overriding the config.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Filecoin parameter directory, overriding the config (default:
    /// FIL_PROOFS_PARAMETER_CACHE, else /var/tmp/filecoin-proof-parameters).
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// Proving backend, overriding the config (`sim` is the simulated
    /// backend, for tests and capacity planning only).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Profile of the simulated backend (porep-32g, winning-post).
    #[arg(long)]
    sim_profile: Option<String>,
    /// Time scale of the simulated backend (0.01: 100 times faster).
    #[arg(long)]
    time_scale: Option<f64>,
    /// API tokens, one per line: TOKEN[@TENANT][:SCOPE,SCOPE] (scopes:
    /// submit, read, admin; default submit and read; tenant default
    /// `default`). Added to the config's and to CUZK_API_TOKENS
    /// (whitespace-separated entries of the same form, removed from the
    /// environment once read). Read again on SIGHUP.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Serve /metrics and /healthz on this address as well, overriding the config.
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Serve Curio's gRPC service on this address (host:port or
    /// unix:///path), overriding the config's grpc.listen.
    #[arg(long)]
    grpc_listen: Option<String>,
    /// Accept unauthenticated requests on a non-loopback address when no
    /// token is configured.
    #[arg(long)]
    insecure: bool,
    /// Keep jobs in this PostgreSQL database instead of the data
    /// directory's redb file, overriding the config's store.url
    /// (postgres://user:password@host:port/database). Prefer the
    /// environment variable: a command line is visible to every user.
    #[arg(long, env = ENV_STORE_URL, hide_env_values = true)]
    store_url: Option<String>,
    /// This daemon's name in a fleet (a PostgreSQL store), overriding
    /// the config's fleet.node (default: the hostname).
    #[arg(long)]
    node: Option<String>,
}

/// `--backend`'s values, the configuration's backends.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum BackendArg {
    Cpu,
    Cuda,
    Sim,
}

impl From<BackendArg> for BackendKind {
    fn from(backend: BackendArg) -> Self {
        match backend {
            BackendArg::Cpu => BackendKind::Cpu,
            BackendArg::Cuda => BackendKind::Cuda,
            BackendArg::Sim => BackendKind::Sim,
        }
    }
}

/// Runs the daemon until SIGTERM. Before any thread starts: it changes the
/// environment.
pub(super) fn run(args: ServeArgs) -> Result<(), CliError> {
    // clap has copied the store URL, which may carry the database password,
    // into `args`: the environment need not show it.
    forget_env(ENV_STORE_URL);
    let env_tokens = take_env_tokens()?;
    let config = configure(args, env_tokens)?;
    Ok(crate::server::serve(config, CircuitRegistry::builtin())?)
}

/// The config file's settings with the flags' over them, and the tokens of
/// every source (the config file, the token file, the environment's).
fn configure(args: ServeArgs, env_tokens: Option<Vec<TokenConfig>>) -> Result<Config, CliError> {
    let ServeArgs {
        config: config_path,
        listen,
        data_dir,
        params_dir,
        backend,
        sim_profile,
        time_scale,
        token_file,
        metrics_listen,
        grpc_listen,
        insecure,
        store_url,
        node,
    } = args;
    let mut config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(listen) = listen {
        config.listen = listen;
    }
    if let Some(dir) = data_dir {
        config.data_dir = dir;
    }
    if let Some(dir) = params_dir {
        config.params_dir = Some(dir);
    }
    if let Some(backend) = backend {
        config.backend = backend.into();
    }
    if let Some(profile) = sim_profile {
        config.sim.profile = profile;
    }
    if let Some(scale) = time_scale {
        config.sim.time_scale = scale;
    }
    config.auth.sources = TokenSources { config_file: config_path, token_file, from_env: env_tokens };
    config.auth.add_source_tokens()?;
    if metrics_listen.is_some() {
        config.metrics_listen = metrics_listen;
    }
    if grpc_listen.is_some() {
        config.grpc.listen = grpc_listen;
    }
    config.auth.insecure = insecure;
    if let Some(url) = store_url {
        config.store.url = Some(crate::postgres::StoreUrl::new(url));
    }
    if node.is_some() {
        config.fleet.node = node;
    }
    Ok(config)
}

/// The tokens of `CUZK_API_TOKENS`, hashed, the variable's value overwritten
/// where the kernel shows it (/proc/PID/environ) and the variable removed,
/// so that neither that file nor a child process reveals them. Runs before
/// any thread starts: changing the environment is not thread-safe. None:
/// the variable is not set (set but empty is a refusal at start).
fn take_env_tokens() -> Result<Option<Vec<TokenConfig>>, CliError> {
    let Some(value) = std::env::var_os(ENV_TOKENS) else {
        return Ok(None);
    };
    let mut text = value.into_string().map_err(|_| CliError::TokensNotUtf8)?;
    let tokens = crate::auth::parse_token_list(&text);
    text.zeroize();
    forget_env(ENV_TOKENS);
    Ok(Some(tokens?))
}

/// Removes `name` from the environment and overwrites its value in the
/// block /proc/PID/environ shows. Before any thread starts only.
fn forget_env(name: &str) {
    scrub_initial_environment(name);
    std::env::remove_var(name);
}

/// Overwrites the value of `name` in the environment block the process
/// started with. /proc/PID/environ reads that block, not the current
/// environment, so removing the variable alone leaves the value there.
fn scrub_initial_environment(name: &str) {
    extern "C" {
        static mut environ: *mut *mut std::ffi::c_char;
    }
    let prefix = format!("{name}=");
    // SAFETY: single-threaded (before any thread starts), so nothing else
    // reads or changes the environment; each entry is a NUL-terminated
    // string the process owns, overwritten within its length.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry);
            if let Some(value_len) = text.to_bytes().strip_prefix(prefix.as_bytes()).map(<[u8]>::len) {
                std::ptr::write_bytes((*entry).add(prefix.len()), b'x', value_len);
            }
            entry = entry.add(1);
        }
    }
}
