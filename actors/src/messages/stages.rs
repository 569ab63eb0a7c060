//! Work handed to the stage actors: a partition to synthesize (from the
//! dispatcher), to prove (from the dispatcher, into a GPU worker's mailbox)
//! and to finalize (from the GPU worker that proved it).

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::backend::Payload;
use crate::model::JobSpec;

#[derive(Message)]
#[rtype(result = "()")]
pub struct Synthesize {
    pub job: Arc<JobSpec>,
    pub index: u32,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct ProvePartition {
    pub job: Arc<JobSpec>,
    pub index: u32,
    pub input: Payload,
    /// When the dispatcher put it in this worker's mailbox.
    pub handed_at: Instant,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Finalize {
    pub job: Arc<JobSpec>,
    pub index: u32,
    pub input: Payload,
}
