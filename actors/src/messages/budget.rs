//! Messages to the BudgetManager: reserve bytes before synthesis, release
//! them in two steps, report what the backend keeps resident.

use actix::prelude::*;
use serde::Serialize;

use crate::backend::Backend;
use crate::error::BudgetExceeded;
use crate::model::{PartitionKey, QueueOrder};

/// Asks for `bytes`; answered by a [`BudgetDecision`] to `reply`, at once or
/// when enough is released.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reserve {
    /// The partition the bytes are for; the decision and later releases name
    /// it.
    pub key: PartitionKey,
    /// Grants go in this order, whatever order requests arrive in.
    pub order: QueueOrder,
    /// The partition's whole reservation.
    pub bytes: u64,
    /// Who hears the decision (the dispatcher).
    pub reply: Recipient<BudgetDecision>,
}

/// The budget manager's answer to a [`Reserve`], sent to the dispatcher:
/// synthesis may start, or the partition can never fit and its job fails.
#[derive(Message)]
#[rtype(result = "()")]
pub struct BudgetDecision {
    /// The partition the decision is for.
    pub key: PartitionKey,
    /// An error when the request can never fit.
    pub granted: Result<(), BudgetExceeded>,
}

/// Returns bytes held by a partition (`bytes: None`: all of them) and drops
/// its request if it is still waiting.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Release {
    /// The partition whose bytes are returned.
    pub key: PartitionKey,
    /// How many: a, b and c once prove_start freed them (from the GPU worker),
    /// or `None` for all that is left (the finalizer, or a dropped or failed
    /// partition).
    pub bytes: Option<u64>,
}

/// The backend's resident bytes changed (fire-and-forget).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetResident {
    /// Everything the backend holds across partitions.
    pub bytes: u64,
    /// Of those, what work in flight holds until it ends (a circuit's
    /// setup, a parameter file's load): a partition that fits once they
    /// are gone waits for them instead of failing.
    pub transient: u64,
}

impl SetResident {
    /// What `backend` holds now.
    pub fn of(backend: &dyn Backend) -> Self {
        Self { bytes: backend.resident_bytes(), transient: backend.transient_bytes() }
    }
}

/// Asks the budget manager for its state, for `/v1/status`.
#[derive(Message)]
#[rtype(result = "BudgetStatus")]
pub struct GetBudgetStatus;

/// The budget manager's state, as `/v1/status` shows it under `budget`.
#[derive(Debug, Clone, Serialize, MessageResponse)]
pub struct BudgetStatus {
    /// The budget's size, from the configuration.
    pub limit_bytes: u64,
    /// Reserved by partitions.
    pub used_bytes: u64,
    /// Kept by the backend across partitions.
    pub resident_bytes: u64,
    /// The most ever in use at once, resident bytes included, to size the
    /// budget by.
    pub peak_bytes: u64,
    /// Partitions that hold granted bytes.
    pub holders: usize,
    /// Reservations waiting for bytes to be released.
    pub waiting: usize,
}
