//! The `cuzk` command: `serve`, `submit`, `verify`, `params generate`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use cuzk::client::{self, Submission};
use cuzk::config::{BackendKind, Config};
use cuzk_kernels::circuits::CircuitRegistry;
use serde_json::{json, Value};

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
        /// API tokens, one per line: TOKEN or TOKEN:SCOPE,SCOPE (scopes:
        /// submit, read; default both). Added to the config's and to
        /// CUZK_API_TOKENS (whitespace-separated entries of the same form).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Serve /metrics and /healthz on this address as well, overriding the config.
        #[arg(long)]
        metrics_listen: Option<String>,
        /// Accept unauthenticated requests on a non-loopback address when no
        /// token is configured.
        #[arg(long)]
        insecure: bool,
    },
    /// Submit a job, wait for it, and write its proofs to a file.
    Submit {
        #[arg(long, default_value = "http://127.0.0.1:9820", env = "CUZK_SERVER")]
        server: String,
        #[arg(long)]
        circuit: String,
        /// Circuit params as JSON, e.g. '{"depth": 8, "challenges": 2}'.
        #[arg(long, default_value = "{}")]
        params: String,
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        #[arg(long, default_value = "normal")]
        priority: String,
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
        /// Where to write the proofs document.
        #[arg(long, default_value = "proofs.json")]
        out: PathBuf,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600)]
        timeout: u64,
    },
    /// Verify a proofs document against the verifying key the daemon serves.
    Verify {
        #[arg(long, default_value = "http://127.0.0.1:9820", env = "CUZK_SERVER")]
        server: String,
        /// The proofs document written by `submit` (or fetched from /proofs).
        proofs: PathBuf,
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
        /// Circuits, comma-separated: porep, winning, window, snap.
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

#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    Cpu,
    Cuda,
    Sim,
}

fn parse_json(what: &str, text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Serve {
            config,
            listen,
            data_dir,
            backend,
            sim_profile,
            time_scale,
            token_file,
            metrics_listen,
            insecure,
        } => {
            let mut config = match config {
                Some(path) => Config::load(&path)?,
                None => Config::default(),
            };
            if let Some(listen) = listen {
                config.listen = listen;
            }
            if let Some(dir) = data_dir {
                config.data_dir = dir;
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
            if let Some(path) = token_file {
                config.auth.tokens.extend(cuzk::auth::read_token_file(&path)?);
            }
            if let Ok(list) = std::env::var("CUZK_API_TOKENS") {
                config.auth.tokens.extend(cuzk::auth::parse_token_list(&list)?);
            }
            if metrics_listen.is_some() {
                config.metrics_listen = metrics_listen;
            }
            config.auth.insecure = insecure;
            cuzk::server::serve(config, CircuitRegistry::builtin()).map_err(|e| e.to_string())
        }
        Command::Submit {
            server,
            circuit,
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
            let mut body = json!({
                "circuit": circuit,
                "params": parse_json("--params", &params)?,
                "partitions": partitions,
                "priority": priority,
            });
            match (seed, inputs) {
                (Some(seed), _) => body["seed"] = json!(seed),
                (None, Some(path)) => {
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    body["inputs"] = parse_json(&path.display().to_string(), &text)?;
                }
                (None, None) => return Err("give --seed or --inputs".into()),
            }
            let proofs = client::submit_and_wait(&Submission {
                server,
                body,
                idempotency_key,
                token,
                timeout: Duration::from_secs(timeout),
                progress: true,
            })?;
            let text = serde_json::to_string_pretty(&proofs).expect("JSON values serialize");
            std::fs::write(&out, text)
                .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
            println!("proofs written to {}", out.display());
            Ok(())
        }
        Command::Verify {
            server,
            proofs,
            token,
        } => {
            let text = std::fs::read_to_string(&proofs)
                .map_err(|e| format!("cannot read {}: {e}", proofs.display()))?;
            let doc = parse_json(&proofs.display().to_string(), &text)?;
            let circuit_id = doc["circuit_id"]
                .as_str()
                .ok_or("the document has no circuit_id")?;
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
                bad => Err(format!("{bad} of {} proofs are invalid", results.len())),
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
            let files = cuzk_filecoin::generate(sector_size, &kinds, &out, force)
                .map_err(|e| e.to_string())?;
            for file in files {
                println!("{} {} bytes {} (TEST-ONLY)", file.kind, file.bytes, file.path.display());
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cuzk: {message}");
            ExitCode::FAILURE
        }
    }
}
