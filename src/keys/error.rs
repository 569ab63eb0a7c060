//! Why a shape's key could not be prepared, and why the key store could not
//! be opened.

use std::error::Error;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use ark_serialize::SerializationError;
use cuzk_kernels::KernelError;

use super::shared::SharedKeyError;
use crate::postgres::PgError;

/// Why a shape's key could not be prepared, by whether trying again could
/// help.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Kept: every later job of the shape fails the same way (a setup that
    /// failed, a key that does not fit its circuit).
    #[error(transparent)]
    Failed(Arc<PrepareError>),
    /// The fleet's key store (PostgreSQL) could not be used. Not kept: the
    /// partition may retry, and the shape's next job asks the database again.
    #[error("the fleet's key store: {0}")]
    Unavailable(SharedKeyError),
    /// The setup stopped: every job waiting for it was abandoned. Not
    /// kept: the shape's next job sets it up again.
    #[error("the setup stopped: every job waiting for it was cancelled or failed")]
    Stopped,
}

/// Why a circuit's key could not be prepared here.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The circuit-specific setup failed.
    #[error(transparent)]
    Setup(KernelError),
    /// A proving key stored on disk does not deserialize.
    #[error("stored key for {id} is unreadable ({error})")]
    Unreadable {
        /// The circuit whose key it is.
        id: String,
        /// What deserializing it answered.
        error: SerializationError,
    },
    /// A stored proving key reads, but does not fit the circuit it was stored for.
    #[error("stored key for {id} does not fit the circuit ({error})")]
    Misfit {
        /// The circuit whose key it is.
        id: String,
        /// Why the kernels refused it.
        error: KernelError,
    },
    /// A freshly set up key could not be serialized for the key directory.
    #[error("cannot serialize the key of {id}: {error}")]
    Serialize {
        /// The circuit whose key it is.
        id: String,
        /// What serializing it answered.
        error: SerializationError,
    },
    /// A file of the key directory could not be read or written.
    #[error("cannot {doing} {}: {error}", path.display())]
    File {
        /// What was being done to the file ("read", "write", ...), for the message.
        doing: &'static str,
        /// The file.
        path: PathBuf,
        /// What the filesystem answered.
        error: io::Error,
    },
    /// The thread that prepares the key could not be spawned.
    #[error("cannot start preparing {id}: {error}")]
    Thread {
        /// The circuit that was to be prepared.
        id: String,
        /// Why the thread could not start.
        error: io::Error,
    },
    /// The fleet's published key did not load.
    #[error("the fleet's key: {0}")]
    Fleet(Box<PrepareError>),
    /// What the circuit's own builder answered (`prepared_with`: a
    /// Filecoin parameter file that does not load).
    #[error(transparent)]
    Build(Box<dyn Error + Send + Sync>),
}

/// Why the key store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The key directory (`<data_dir>/keys`) cannot be created or inspected.
    #[error("cannot create {}: {error}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What the filesystem answered.
        error: io::Error,
    },
    /// The fleet's database, for its shared keys.
    #[error(transparent)]
    Shared(#[from] PgError),
}

/// A preparation that failed here, kept for the shape's later jobs; or a
/// setup that stopped, which is not.
pub(super) fn failed(error: PrepareError) -> KeyError {
    match error {
        PrepareError::Setup(KernelError::Cancelled) => KeyError::Stopped,
        error => KeyError::Failed(Arc::new(error)),
    }
}
