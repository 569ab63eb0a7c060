//! The crate's error type: every public function returns it, so the daemon can
//! map a failure to an HTTP status or a CLI message without string matching.

use std::path::PathBuf;

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
    /// The circuit cannot have Groth16 parameters (too large a domain, an
    /// unconstrained variable).
    #[error("setup failed: {0}")]
    Setup(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
