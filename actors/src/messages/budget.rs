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
    pub key: PartitionKey,
    /// Grants go in this order, whatever order requests arrive in.
    pub order: QueueOrder,
    pub bytes: u64,
    /// Who hears the decision (the dispatcher).
    pub reply: Recipient<BudgetDecision>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct BudgetDecision {
    pub key: PartitionKey,
    /// An error when the request can never fit.
    pub granted: Result<(), BudgetExceeded>,
}

/// Returns bytes held by a partition (`bytes: None`: all of them) and drops
/// its request if it is still waiting.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Release {
    pub key: PartitionKey,
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

#[derive(Message)]
#[rtype(result = "BudgetStatus")]
pub struct GetBudgetStatus;

#[derive(Debug, Clone, Serialize, MessageResponse)]
pub struct BudgetStatus {
    pub limit_bytes: u64,
    /// Reserved by partitions.
    pub used_bytes: u64,
    /// Kept by the backend across partitions.
    pub resident_bytes: u64,
    pub peak_bytes: u64,
    pub holders: usize,
    pub waiting: usize,
}
