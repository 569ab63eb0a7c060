//! cuzk's actor system. It schedules partitions through the stages
//! synthesize → prove_start (GPU worker) → prove_finish (finalizer) and knows
//! no proving math: stage bodies come from a [`Backend`].
//!
//! One actor per file, each with its messages beside it and its own mailbox
//! capacity. No lock over job state is shared between actors: the
//! [`tracker::Tracker`] alone owns it, and every other actor reports to it by
//! fire-and-forget messages.

pub mod backend;
pub mod budget;
pub mod dispatcher;
pub mod finalizer;
pub mod gpu_worker;
pub mod mailbox;
pub mod model;
pub mod pacer;
pub mod store;
pub mod synthesis;
pub mod system;
pub mod telemetry;
pub mod tracker;
pub mod worker_monitor;

pub use backend::{Backend, Finished, Payload, Phases, Started, Synthesized};
pub use model::{JobId, JobSpec, NewJob, PartitionKey, Priority, Reservation, Stage, WorkerId};
pub use system::{ProvingSystem, SystemConfig};
