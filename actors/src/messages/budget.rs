//! Messages to the BudgetManager: reserve bytes before synthesis, release
//! them in two steps, report what the backend keeps resident.

use actix::prelude::*;
use serde::Serialize;

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
    pub bytes: u64,
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
