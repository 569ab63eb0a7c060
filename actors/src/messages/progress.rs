//! What stage actors report to the tracker about a partition: the stages it
//! enters, its proof, its failure. All fire-and-forget: no stage actor ever
//! waits for the tracker.

use std::time::Instant;

use actix::prelude::*;

use crate::error::StageError;
use crate::model::{PartitionKey, ProofRecord, Stage};

/// A partition entered a stage (fire-and-forget).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Progress {
    pub key: PartitionKey,
    pub stage: Stage,
    pub at: Instant,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionProved {
    pub key: PartitionKey,
    pub proof: ProofRecord,
    pub at: Instant,
}

/// An attempt failed. Its kind decides: a retryable failure is queued again
/// while the partition has attempts left; a permanent one fails the job.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionFailed {
    pub key: PartitionKey,
    pub error: StageError,
}

/// The tracker as a stage actor reports to it: one recipient per message,
/// all on the tracker's one mailbox, so reports keep their order.
#[derive(Clone)]
pub struct TrackerPort {
    /// Stages entered.
    pub progress: Recipient<Progress>,
    /// Proofs (from the finalizer).
    pub proved: Recipient<PartitionProved>,
    /// Failed attempts.
    pub failed: Recipient<PartitionFailed>,
}
