//! Every message the actors exchange, one file per conversation. These
//! modules name no actor: an actor holds the peers it talks to as
//! `Recipient<Message>` (wired in `system.rs`), so any actor file imports
//! messages and the vocabulary in `model`, never another actor.
//!
//! | file | conversation |
//! | --- | --- |
//! | `jobs` | the daemon asks the tracker: submit, restore, cancel, watch, views |
//! | `progress` | stage actors report a partition's progress to the tracker |
//! | `queue` | the tracker and stage actors feed the dispatcher's queues |
//! | `stages` | the dispatcher (and a GPU worker) hand partitions to stage actors |
//! | `budget` | reservations and releases of the memory budget |
//! | `monitor` | GPU worker time: hand-offs, idle causes, spans, the timeline |
//! | `fleet` | a fleet node's claimer and renewer: claims, held and lost leases |

pub mod budget;
pub mod fleet;
pub mod jobs;
pub mod monitor;
pub mod progress;
pub mod queue;
pub mod stages;

pub use budget::*;
pub use fleet::*;
pub use jobs::*;
pub use monitor::*;
pub use progress::*;
pub use queue::*;
pub use stages::*;
