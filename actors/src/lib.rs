//! cuzk's actor system. It schedules partitions through the stages
//! synthesize → prove_start (GPU worker) → prove_finish (finalizer) and knows
//! no proving math: stage bodies come from a [`Backend`].
//!
//! One actor per file (the tracker's state machine spread over
//! `tracker/`), each with its own mailbox capacity. Messages live in
//! [`messages`], the shared vocabulary in [`model`], [`error`] and [`time`];
//! an actor holds its peers as `Recipient`s wired in [`system`], so no actor
//! file imports another (tests/daemon/module_graph.rs checks it). No lock over job
//! state is shared between actors: the [`tracker::Tracker`] alone owns it,
//! and every other actor reports to it by fire-and-forget messages.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod budget;
pub mod dispatcher;
pub mod error;
pub mod finalizer;
pub mod gpu_worker;
pub mod mailbox;
pub mod messages;
pub mod model;
pub mod pacer;
pub mod store;
pub mod synthesis;
pub mod system;
pub mod telemetry;
pub mod time;
pub mod tracker;
pub mod worker_monitor;

pub use backend::{Backend, Finished, Payload, Phases, Started, Synthesized};
pub use error::{ErrorKind, StageError};
pub use model::{
    Abandonment, JobId, JobSpec, Lane, NewJob, PartitionKey, Priority, RecordedRequest, Reservation, Stage,
    Tenant, TenantScope, WorkerId,
};
pub use system::{ProvingSystem, SystemConfig};
