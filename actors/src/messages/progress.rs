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
    /// The partition that moved.
    pub key: PartitionKey,
    /// The stage it entered.
    pub stage: Stage,
    /// When it entered it, taken by the sender, so that the stage's timings do
    /// not include the time the report spent in the mailbox.
    pub at: Instant,
}

/// A finalizer proved a partition: the tracker keeps the proof, marks the
/// partition done and settles the job once all its partitions are proved.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionProved {
    /// The partition proved.
    pub key: PartitionKey,
    /// Its proof, which the tracker serves and the store keeps.
    pub proof: ProofRecord,
    /// When the proof was ready, taken by the finalizer.
    pub at: Instant,
}

/// An attempt failed. Its kind decides: a retryable failure is queued again
/// while the partition has attempts left; a permanent one fails the job.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionFailed {
    /// The partition whose attempt failed.
    pub key: PartitionKey,
    /// Why it failed: its kind decides what the tracker does, its text is what
    /// the job reports.
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
