//! A fleet node's claimer and lease renewer talk to the tracker: partitions
//! claimed from the shared queue come in, the partitions held (and where
//! each is) go out to be renewed, and leases found gone come back.

use std::any::Any;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use actix::prelude::*;

use crate::model::{PartitionKey, Reservation, Stage};
use crate::store::JobRecord;

/// Partitions this node now holds leases on, with what their job needs to
/// run here. The job may be new to this node or one it holds others of.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Claimed {
    /// The job as the fleet's database records it, from which the tracker
    /// builds the job's spec and state on this node.
    pub record: JobRecord,
    /// Rebuilt from the record's request by the submit handler's parser.
    pub work: Arc<dyn Any + Send + Sync>,
    /// What each claimed partition asks this node's budget for.
    pub reservation: Reservation,
    /// (index, attempt): the attempt counts every claim of the partition
    /// fleet-wide, so a partition taken over carries its earlier attempts.
    pub partitions: Vec<(u32, u32)>,
}

/// Leases this node held and no longer does (run out and claimed by another
/// node, or their job ended elsewhere): their work stops, unrecorded.
#[derive(Message)]
#[rtype(result = "()")]
pub struct LeasesLost(pub Vec<PartitionKey>);

/// Asks for every partition this node holds and its stage; the answer goes
/// to the sender (the renewer is a plain thread, not an actor).
#[derive(Message)]
#[rtype(result = "()")]
pub struct GetHeld(pub Sender<Vec<(PartitionKey, Stage)>>);
