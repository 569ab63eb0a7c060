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
    #[error("stored key for {id} is unreadable ({error})")]
    Unreadable { id: String, error: SerializationError },
    #[error("stored key for {id} does not fit the circuit ({error})")]
    Misfit { id: String, error: KernelError },
    #[error("cannot serialize the key of {id}: {error}")]
    Serialize { id: String, error: SerializationError },
    #[error("cannot {doing} {}: {error}", path.display())]
    File { doing: &'static str, path: PathBuf, error: io::Error },
    #[error("cannot start preparing {id}: {error}")]
    Thread { id: String, error: io::Error },
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
    #[error("cannot create {}: {error}", path.display())]
    Dir { path: PathBuf, error: io::Error },
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
