//! The crate's error type: every public function returns it, so the daemon can
//! map a failure to an HTTP status or a CLI message without string matching.

use std::path::PathBuf;

/// Why a Filecoin call failed: a file, a request, a proof or a parameter
/// file, each with what the caller needs to say which.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed; the path says which.
    #[error("{path}: {source}")]
    Io {
        /// The file the operation was on.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A parameter file is shorter than its counts say, or holds a point that
    /// does not decode.
    #[error("{path}: malformed parameter file: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Which part is wrong, for the operator.
        reason: String,
    },
    /// The sector size has no registered proof of the requested kind.
    #[error("unsupported sector size {0} bytes")]
    UnsupportedSectorSize(u64),
    /// A sector size given by name or bytes is none filecoin-proofs registers.
    #[error("unknown sector size {name:?}; expected one of {expected}")]
    UnknownSectorSize {
        /// What was given.
        name: String,
        /// The names that would have been accepted, for the operator.
        expected: String,
    },
    /// A kind given by name is none of the four.
    #[error("unknown Filecoin kind {name:?}; expected {expected}")]
    UnknownKind {
        /// What was given.
        name: String,
        /// The names that would have been accepted, for the operator.
        expected: String,
    },
    /// A registered proof named by a client is no variant of
    /// filecoin-proofs-api's enum for it.
    #[error("registered_proof {name} is not one filecoin-proofs-api knows: {source}")]
    UnknownProof {
        /// The name as given (JSON, so a non-string shows as what it is).
        name: String,
        /// serde's reason, which lists the known variants.
        source: serde_json::Error,
    },
    /// A reference circuit failed to synthesize.
    #[error("synthesis failed: {0}")]
    Synthesis(String),
    /// A proving request (a C1 output, PoSt or update vanilla proofs) cannot
    /// be proved as given; the text names what is wrong, for the client.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// filecoin-proofs refused a request (public parameters, identifiers).
    #[error("filecoin-proofs: {0}")]
    Filecoin(String),
    /// The output would exceed the size limit and `force` was not given.
    #[error("{path} would be {bytes} bytes, above the {limit}-byte limit; give --force to write it")]
    TooLarge {
        /// The `.params` file that was not written.
        path: PathBuf,
        /// Its predicted size.
        bytes: u64,
        /// The limit it exceeds.
        limit: u64,
    },
    /// A parameter file does not fit the circuit it is named for (counts,
    /// densities): a file for another version, or a corrupt one.
    #[error("parameters do not fit the circuit: {0}")]
    KeyMismatch(String),
    /// The parameter file a request is proved with is not in the parameter
    /// directory: the job cannot run on this machine.
    #[error("parameter file {} is missing (params_dir {})", path.display(), dir.display())]
    MissingParams {
        /// The `.params` file looked for.
        path: PathBuf,
        /// The directory it was looked for in.
        dir: PathBuf,
    },
    /// The circuit cannot have Groth16 parameters (too large a domain, an
    /// unconstrained variable).
    #[error("setup failed: {0}")]
    Setup(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
