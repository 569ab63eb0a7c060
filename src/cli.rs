//! The `cuzk` command, one file per subcommand (`serve.rs`, `submit.rs`,
//! `verify.rs`, `params.rs`; `input.rs` reads the files they name). The
//! binary (`main.rs`) only parses the arguments, runs [`Cli::run`] and
//! prints its error: `CliError` gathers the typed errors, and only that
//! final print makes them text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::auth::AuthError;
use crate::client::{ClientError, DocumentError};
use crate::config::ConfigError;
use crate::server::ServerError;

mod input;
mod params;
mod serve;
mod submit;
mod verify;

/// The command line.
#[derive(Parser)]
#[command(name = "cuzk", version, about = "GPU proving daemon for BLS12-381 Groth16")]
pub struct Cli {
    /// The subcommand and its flags.
    #[command(subcommand)]
    command: Command,
}

// The subcommands, each with its flags in its own file.
#[derive(Subcommand)]
enum Command {
    /// Run the daemon.
    Serve(serve::ServeArgs),
    /// Submit a job, wait for it, and write its proofs to a file: a
    /// Filecoin kind (`cuzk submit porep-c2 --c1 c1.json --prover-id HEX
    /// --sector-id N --out proof.bin`, or any kind with `--input FILE`), or a
    /// registered family (`--circuit NAME`).
    Submit(submit::SubmitArgs),
    /// Verify a proofs document against the verifying key the daemon serves;
    /// or, with `--kind`, a Filecoin proof file with filecoin-proofs-api's
    /// own verifier (`--c1 --prover-id --sector-id` for porep-c2, else
    /// `--input FILE`: docs/filecoin.md).
    Verify(verify::VerifyArgs),
    /// Filecoin Groth16 parameter files.
    Params {
        /// What to do with them.
        #[command(subcommand)]
        which: params::ParamsCommand,
    },
}

impl Cli {
    /// Runs the command. `serve` first takes its secrets out of the
    /// environment, so it must be called before any thread starts.
    pub fn run(self) -> Result<(), CliError> {
        match self.command {
            Command::Serve(args) => serve::run(args),
            Command::Submit(args) => submit::run(args),
            Command::Verify(args) => verify::run(args),
            Command::Params { which } => params::run(which),
        }
    }
}

/// Why a command failed: what `main` prints after `cuzk: `.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Flags that do not make a command (clap checks the rest).
    #[error("{0}")]
    Usage(&'static str),
    /// A Filecoin kind given neither of its input forms.
    #[error("{} needs --c1 (porep-c2) or --input FILE", kind.api_name())]
    NoFilecoinInput {
        /// The kind that needs an input.
        kind: cuzk_filecoin::Kind,
    },
    /// `CUZK_API_TOKENS` holds bytes that are not UTF-8.
    #[error("{} is not UTF-8", serve::ENV_TOKENS)]
    TokensNotUtf8,
    /// The config file, or a setting given on the command line.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The tokens or tenants `serve` was given.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The daemon could not start, or stopped with an error.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The daemon refused a request, did not answer, or the job failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A proofs or key document that does not decode.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A file named on the command line cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file named.
        path: PathBuf,
        /// What reading it failed with.
        source: std::io::Error,
    },
    /// The output file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The output file named.
        path: PathBuf,
        /// What writing it failed with.
        source: std::io::Error,
    },
    /// A file or flag (`what` names it) that should hold JSON.
    #[error("{what} is not valid JSON: {source}")]
    Json {
        /// The file or flag, for the message.
        what: String,
        /// Where and why the JSON parser stopped.
        source: serde_json::Error,
    },
    /// A Filecoin proof the daemon served that is not hex.
    #[error("the daemon's proof is not hex: {0}")]
    ProofNotHex(hex::FromHexError),
    /// A Filecoin proof that could not be checked.
    #[error(transparent)]
    Filecoin(#[from] crate::filecoin::InputError),
    /// filecoin-proofs-api's verifier rejects the proof.
    #[error("INVALID: filecoin-proofs-api's verifier rejects the {} proof", kind.api_name())]
    FilecoinRejected {
        /// The kind of the rejected proof.
        kind: cuzk_filecoin::Kind,
    },
    /// Proofs of a document that the served key rejects.
    #[error("{invalid} of {total} proofs are invalid")]
    InvalidProofs {
        /// Proofs the key rejects.
        invalid: usize,
        /// Proofs the document holds.
        total: usize,
    },
    /// Test parameter files that could not be written.
    #[error(transparent)]
    Params(#[from] cuzk_filecoin::Error),
}
