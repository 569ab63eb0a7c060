//! The `cuzk` command: `serve`, `submit`, `verify`, `params generate`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use cuzk::auth::{AuthError, TokenConfig, TokenSources};
use cuzk::client::{self, ClientError, DocumentError, Submission};
use cuzk::config::{BackendKind, Config, ConfigError};
use cuzk::server::ServerError;
use cuzk_kernels::circuits::CircuitRegistry;
use serde_json::{json, Value};
use zeroize::Zeroize;

#[derive(Parser)]
#[command(
    name = "cuzk",
    version,
    about = "GPU proving daemon for BLS12-381 Groth16"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon.
    Serve {
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
        #[arg(long, env = "CUZK_STORE_URL", hide_env_values = true)]
        store_url: Option<String>,
        /// This daemon's name in a fleet (a PostgreSQL store), overriding
        /// the config's fleet.node (default: the hostname).
        #[arg(long)]
        node: Option<String>,
    },
    /// Submit a job, wait for it, and write its proofs to a file: a
    /// Filecoin kind (`cuzk submit porep-c2 --c1 c1.json --prover-id HEX
    /// --sector-id N --out proof.bin`, or any kind with `--input FILE`), or a
    /// registered family (`--circuit NAME`).
    Submit {
        #[arg(long, default_value = "http://127.0.0.1:9820", env = "CUZK_SERVER")]
        server: String,
        /// A Filecoin kind: porep-c2 (more in docs/filecoin.md).
        #[arg(conflicts_with = "circuit", required_unless_present = "circuit")]
        kind: Option<String>,
        /// A registered circuit family.
        #[arg(long)]
        circuit: Option<String>,
        /// porep-c2: the commit-phase-1 output (JSON, as Lotus and Curio write it).
        #[arg(long, requires = "kind")]
        c1: Option<PathBuf>,
        /// porep-c2: the miner's prover id, 32 bytes hex.
        #[arg(long, requires = "c1")]
        prover_id: Option<String>,
        /// porep-c2: the sector number.
        #[arg(long, requires = "c1")]
        sector_id: Option<u64>,
        /// A Filecoin kind's whole input object, as JSON (docs/filecoin.md).
        #[arg(long, requires = "kind", conflicts_with = "c1")]
        input: Option<PathBuf>,
        /// Circuit params as JSON, e.g. '{"depth": 8, "challenges": 2}'.
        #[arg(long, default_value = "{}")]
        params: String,
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        /// Default: normal; a Filecoin kind's own (critical for winning-post).
        #[arg(long)]
        priority: Option<String>,
        /// Draw a random valid instance from this seed.
        #[arg(long, conflicts_with = "inputs")]
        seed: Option<u64>,
        /// A JSON file with witness inputs.
        #[arg(long)]
        inputs: Option<PathBuf>,
        #[arg(long)]
        idempotency_key: Option<String>,
        /// API token (needs the submit and read scopes).
        #[arg(long, env = "CUZK_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Where to write the proofs document (a Filecoin kind: the proof
        /// bytes filecoin-proofs-api would return).
        #[arg(long, default_value = "proofs.json")]
        out: PathBuf,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600)]
        timeout: u64,
    },
    /// Verify a proofs document against the verifying key the daemon serves;
    /// or, with `--kind`, a Filecoin proof file with filecoin-proofs-api's
    /// own verifier (`--c1 --prover-id --sector-id` for porep-c2, else
    /// `--input FILE`: docs/filecoin.md).
    Verify {
        #[arg(long, default_value = "http://127.0.0.1:9820", env = "CUZK_SERVER")]
        server: String,
        /// The proofs document written by `submit` (or fetched from /proofs);
        /// with --kind, the proof bytes.
        proofs: PathBuf,
        /// A Filecoin kind (porep-c2 or porep, ...): verify without the daemon.
        #[arg(long)]
        kind: Option<cuzk_filecoin::Kind>,
        /// porep-c2: the commit-phase-1 output the proof was made from.
        #[arg(long, requires_all = ["kind", "prover_id", "sector_id"])]
        c1: Option<PathBuf>,
        /// The public values the proof is checked against, as JSON.
        #[arg(long, requires = "kind", conflicts_with = "c1")]
        input: Option<PathBuf>,
        /// porep-c2: the prover id, 32 bytes hex.
        #[arg(long)]
        prover_id: Option<String>,
        /// porep-c2: the sector number.
        #[arg(long)]
        sector_id: Option<u64>,
        /// API token, when the daemon requires one for reading.
        #[arg(long, env = "CUZK_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Filecoin Groth16 parameter files.
    Params {
        #[command(subcommand)]
        which: ParamsCommand,
    },
}

#[derive(Subcommand)]
enum ParamsCommand {
    /// Write TEST-ONLY parameters (random toxic waste, never for mainnet) in
    /// the layout and file names filecoin-proofs reads.
    Generate {
        /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB, 64GiB (or bytes).
        #[arg(long, value_parser = cuzk_filecoin::parse_sector_size)]
        sector_size: u64,
        /// Circuits, comma-separated: porep, winning, window, snap (or
        /// their API names, porep-c2 ...).
        #[arg(long, value_delimiter = ',', default_value = "porep,winning,window,snap")]
        kinds: Vec<cuzk_filecoin::Kind>,
        /// Directory to write into (filecoin-proofs reads it as
        /// FIL_PROOFS_PARAMETER_CACHE).
        #[arg(long)]
        out: PathBuf,
        /// Write files above 512 MiB too.
        #[arg(long)]
        force: bool,
    },
}

/// Why a command failed: what `main` prints after `cuzk: `.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// Flags that do not make a command (clap checks the rest).
    #[error("{0}")]
    Usage(&'static str),
    /// A Filecoin kind given neither of its input forms.
    #[error("{kind} needs --c1 (porep-c2) or --input FILE")]
    NoFilecoinInput { kind: String },
    /// `CUZK_API_TOKENS` holds bytes that are not UTF-8.
    #[error("{ENV_TOKENS} is not UTF-8")]
    TokensNotUtf8,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A file named on the command line cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The output file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    /// A file or flag (`what` names it) that should hold JSON.
    #[error("{what} is not valid JSON: {source}")]
    Json { what: String, source: serde_json::Error },
    /// A Filecoin proof the daemon served that is not hex.
    #[error("the daemon's proof is not hex: {0}")]
    ProofNotHex(hex::FromHexError),
    /// A Filecoin proof that could not be checked.
    #[error(transparent)]
    Filecoin(#[from] cuzk::filecoin::InputError),
    /// filecoin-proofs-api's verifier rejects the proof.
    #[error("INVALID: filecoin-proofs-api's verifier rejects the {kind} proof")]
    FilecoinRejected { kind: &'static str },
    /// Proofs of a document that the served key rejects.
    #[error("{invalid} of {total} proofs are invalid")]
    InvalidProofs { invalid: usize, total: usize },
    /// Test parameter files that could not be written.
    #[error(transparent)]
    Params(#[from] cuzk_filecoin::Error),
}

/// The variable `serve` reads API tokens from.
const ENV_TOKENS: &str = "CUZK_API_TOKENS";

#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    Cpu,
    Cuda,
    Sim,
}

/// A Filecoin kind's input from the command line: porep-c2's from its
/// flags, any kind's from an `--input` JSON file.
fn filecoin_input(
    kind: &str,
    c1: Option<PathBuf>,
    prover_id: Option<String>,
    sector_id: Option<u64>,
    input: Option<PathBuf>,
) -> Result<Value, CliError> {
    match (c1, input) {
        (Some(c1), None) => Ok(json!({
            "c1": read_json(&c1)?,
            "prover_id": prover_id.ok_or(CliError::Usage("--c1 needs --prover-id"))?,
            "sector_id": sector_id.ok_or(CliError::Usage("--c1 needs --sector-id"))?,
        })),
        (None, Some(path)) => read_json(&path),
        _ => Err(CliError::NoFilecoinInput { kind: kind.to_string() }),
    }
}

/// A JSON file, or an error naming it.
fn read_json(path: &std::path::Path) -> Result<Value, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
    parse_json(&path.display().to_string(), &text)
}

fn parse_json(what: &str, text: &str) -> Result<Value, CliError> {
    serde_json::from_str(text).map_err(|source| CliError::Json { what: what.to_string(), source })
}

/// The tokens of `CUZK_API_TOKENS`, hashed, the variable's value overwritten
/// where the kernel shows it (/proc/PID/environ) and the variable removed,
/// so that neither that file nor a child process reveals them. Runs before
/// any thread starts: changing the environment is not thread-safe.
fn take_env_tokens() -> Result<Option<Vec<TokenConfig>>, CliError> {
    let Some(value) = std::env::var_os(ENV_TOKENS) else {
        return Ok(None);
    };
    let mut text = value.into_string().map_err(|_| CliError::TokensNotUtf8)?;
    let tokens = cuzk::auth::parse_token_list(&text);
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

/// Runs a command; `env_tokens` are `serve`'s tokens from the environment
/// (None: `CUZK_API_TOKENS` is not set).
fn run(cli: Cli, env_tokens: Option<Vec<TokenConfig>>) -> Result<(), CliError> {
    match cli.command {
        Command::Serve {
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
        } => {
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
                config.backend = match backend {
                    BackendArg::Cpu => BackendKind::Cpu,
                    BackendArg::Cuda => BackendKind::Cuda,
                    BackendArg::Sim => BackendKind::Sim,
                };
            }
            if let Some(profile) = sim_profile {
                config.sim.profile = profile;
            }
            if let Some(scale) = time_scale {
                config.sim.time_scale = scale;
            }
            config.auth.sources = TokenSources {
                config_file: config_path,
                token_file,
                from_env: env_tokens,
            };
            config.auth.add_source_tokens()?;
            if metrics_listen.is_some() {
                config.metrics_listen = metrics_listen;
            }
            if grpc_listen.is_some() {
                config.grpc.listen = grpc_listen;
            }
            config.auth.insecure = insecure;
            if let Some(url) = store_url {
                config.store.url = Some(cuzk::postgres::StoreUrl::new(url));
            }
            if node.is_some() {
                config.fleet.node = node;
            }
            Ok(cuzk::server::serve(config, CircuitRegistry::builtin())?)
        }
        Command::Submit {
            server,
            kind,
            circuit,
            c1,
            prover_id,
            sector_id,
            input,
            params,
            partitions,
            priority,
            seed,
            inputs,
            idempotency_key,
            token,
            out,
            timeout,
        } => {
            if kind.is_none() && (c1.is_some() || input.is_some()) {
                return Err(CliError::Usage("--c1 and --input are for Filecoin kinds (cuzk submit porep-c2 ...)"));
            }
            let mut body = match (kind.as_deref(), circuit) {
                (Some(kind), _) => {
                    let input = filecoin_input(kind, c1, prover_id, sector_id, input)?;
                    json!({ "circuit": kind, "input": input })
                }
                (None, Some(circuit)) => {
                    let mut body = json!({
                        "circuit": circuit,
                        "params": parse_json("--params", &params)?,
                        "partitions": partitions,
                    });
                    match (seed, inputs) {
                        (Some(seed), _) => body["seed"] = json!(seed),
                        (None, Some(path)) => body["inputs"] = read_json(&path)?,
                        (None, None) => return Err(CliError::Usage("give --seed or --inputs")),
                    }
                    body
                }
                (None, None) => return Err(CliError::Usage("give a Filecoin kind or --circuit")),
            };
            if let Some(priority) = priority {
                body["priority"] = json!(priority);
            }
            let proofs = client::submit_and_wait(&Submission {
                server,
                body,
                idempotency_key,
                token,
                timeout: Duration::from_secs(timeout),
                progress: true,
            })?;
            let bytes = match proofs["proof"].as_str().filter(|_| kind.is_some()) {
                Some(proof) => hex::decode(proof).map_err(CliError::ProofNotHex)?,
                None => serde_json::to_vec_pretty(&proofs).expect("JSON values serialize"),
            };
            std::fs::write(&out, bytes).map_err(|source| CliError::Write { path: out.clone(), source })?;
            println!("proofs written to {}", out.display());
            Ok(())
        }
        Command::Verify {
            kind: Some(kind),
            proofs,
            c1,
            prover_id,
            sector_id,
            input,
            ..
        } => {
            let proof = std::fs::read(&proofs).map_err(|source| CliError::Read { path: proofs, source })?;
            let name = kind.api_name();
            let public = filecoin_input(name, c1, prover_id, sector_id, input)?;
            if cuzk::filecoin::verify(kind, &public, &proof)? {
                println!("valid: filecoin-proofs-api's verifier accepts the {name} proof");
                Ok(())
            } else {
                Err(CliError::FilecoinRejected { kind: name })
            }
        }
        Command::Verify {
            server,
            proofs,
            token,
            ..
        } => {
            let doc = read_json(&proofs)?;
            let circuit_id = doc["circuit_id"].as_str().ok_or(DocumentError::NoCircuitId)?;
            let vk = client::fetch_vk(&server, circuit_id, token.as_deref())?;
            let results = client::verify_proofs(&vk, &doc)?;
            for (partition, valid) in &results {
                println!(
                    "partition {partition}: {}",
                    if *valid { "valid" } else { "INVALID" }
                );
            }
            match results.iter().filter(|(_, valid)| !valid).count() {
                0 => {
                    println!("all {} proofs valid for {circuit_id}", results.len());
                    Ok(())
                }
                invalid => Err(CliError::InvalidProofs { invalid, total: results.len() }),
            }
        }
        Command::Params {
            which: ParamsCommand::Generate {
                sector_size,
                kinds,
                out,
                force,
            },
        } => {
            let files = cuzk_filecoin::generate(sector_size, &kinds, &out, force)?;
            for file in files {
                println!("{} {} bytes {} (TEST-ONLY)", file.kind.cli_name(), file.bytes, file.path.display());
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    // Before anything can start a thread.
    let env_tokens = match &cli.command {
        Command::Serve { .. } => {
            // clap has copied the store URL, which may carry the database
            // password, into `cli`: the environment need not show it.
            forget_env("CUZK_STORE_URL");
            take_env_tokens()
        }
        _ => Ok(None),
    };
    match env_tokens.and_then(|env_tokens| run(cli, env_tokens)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cuzk: {error}");
            ExitCode::FAILURE
        }
    }
}
