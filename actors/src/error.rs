//! Why a stage failed, and whether trying again could help. A backend says
//! which of its failures are worth another attempt (a device fault) and
//! which are not (a witness that does not satisfy its circuit); the tracker
//! retries by that kind alone, and the cause travels with it, typed, for the
//! job's error text.

use std::error::Error;
use std::fmt;

/// Whether another attempt of the same partition could succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Transient: a device fault, an injected test fault, a panic (the actor
    /// that ran it restarts). The partition goes back to the queue while it
    /// has attempts left.
    Retryable,
    /// The same input fails the same way: the job fails at once.
    Permanent,
    /// Nothing failed: the partition cannot start yet (its circuit's key is
    /// being prepared on a thread of its own). It goes back to the queue
    /// after a pause, without using an attempt, and the stage thread it held
    /// serves other circuits' partitions meanwhile.
    NotReady,
}

/// A failed stage: its kind and its cause.
#[derive(Debug)]
pub struct StageError {
    /// Decides whether the tracker queues the partition again.
    kind: ErrorKind,
    /// What went wrong, kept typed so callers can look inside it.
    cause: Box<dyn Error + Send + Sync>,
}

impl StageError {
    /// A failure of the given kind, which decides whether the tracker tries the
    /// partition again.
    pub fn new(kind: ErrorKind, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self { kind, cause: cause.into() }
    }

    /// A transient failure: the partition is queued again while it has attempts
    /// left.
    pub fn retryable(cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(ErrorKind::Retryable, cause)
    }

    /// A failure that another attempt would repeat: the job fails at once.
    pub fn permanent(cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(ErrorKind::Permanent, cause)
    }

    /// Not a failure: the partition cannot start yet and is queued again after
    /// a pause, without using an attempt.
    pub fn not_ready(cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(ErrorKind::NotReady, cause)
    }

    /// What the tracker decides the partition's fate by.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether the tracker may queue the partition again (attempts allowing).
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }

    /// The stage body panicked: the actor that ran it restarts before its
    /// next message, in case the panic left it inconsistent.
    pub fn panicked(&self) -> bool {
        self.cause.is::<StagePanic>()
    }

    /// The typed cause, for a caller that looks for a particular error
    /// inside (`downcast_ref`) rather than at its text.
    pub fn cause(&self) -> &(dyn Error + Send + Sync + 'static) {
        self.cause.as_ref()
    }
}

/// The text a job reports: the cause's own.
impl fmt::Display for StageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.cause.fmt(f)
    }
}

impl Error for StageError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// A stage body panicked (caught at the stage boundary by `run_stage`).
#[derive(Debug, thiserror::Error)]
#[error("{stage} panicked: {message}")]
pub struct StagePanic {
    /// The stage, for the job's error text.
    pub stage: &'static str,
    /// The panic's message, when it carried text.
    pub message: String,
}

/// A partition's reservation can never be granted: it is larger than the
/// budget left beside what the backend keeps resident.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a partition needs {needed} bytes but the budget is {limit} bytes, {resident} of them resident")]
pub struct BudgetExceeded {
    /// The partition's whole reservation.
    pub needed: u64,
    /// The budget's size.
    pub limit: u64,
    /// Bytes the backend held at the time.
    pub resident: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_and_the_typed_cause_travel_together() {
        let error = StageError::permanent(BudgetExceeded { needed: 3, limit: 2, resident: 1 });
        assert!(!error.is_retryable());
        assert!(!error.panicked());
        assert_eq!(error.cause().downcast_ref::<BudgetExceeded>().map(|b| b.needed), Some(3));
        assert_eq!(
            error.to_string(),
            "a partition needs 3 bytes but the budget is 2 bytes, 1 of them resident"
        );
    }

    #[test]
    fn a_panic_is_a_retryable_failure_that_says_so() {
        let error = StageError::retryable(StagePanic { stage: "synthesis", message: "boom".into() });
        assert_eq!(error.kind(), ErrorKind::Retryable);
        assert!(error.panicked());
        assert_eq!(error.to_string(), "synthesis panicked: boom");
    }
}
