//! The gRPC front end: Curio's `cuzk.v1.ProvingEngine` (docs/curio.md),
//! served beside the HTTP API on the same job seam (`crate::jobs`), token
//! gate, parameter files and metrics, so a job submitted here is durable,
//! restarts, shows in `/v1/jobs` and counts like any other. Nothing below
//! the server imports it.
//!
//! | file | what |
//! | --- | --- |
//! | `proto.rs` | the messages and the service trait, generated from proto/cuzk/v1/proving.proto at build time |
//! | `curio.rs` | Curio's encodings (the C1 envelope, bincode vanilla proofs, Go-numbered proof types, the prover id from `miner_id`) read into the daemon's submission |
//! | `admit.rs` | the token gate on each call's headers, before its message is read |
//! | `service.rs` | the service: each RPC's handler run with the admitted caller, its answer counted |
//! | `prove.rs` | SubmitProof, AwaitProof, Prove, CancelProof |
//! | `status.rs` | GetStatus, GetMetrics |
//! | `srs.rs` | PreloadSRS, EvictSRS |
//! | `calls.rs` | the calls waiting on jobs: their bound, and the cancel of a `Prove`'s job its last caller left |
//! | `error.rs` | the one mapping of the daemon's refusals to status codes |
//! | `state.rs` | what every RPC shares |
//! | `listen.rs` | the listener (TCP or unix socket, TLS and token rules) and the HTTP/2 connections (the preface's deadline) |
//! | `peers.rs` | the connections a listener holds: a quarter of the file limit in all, 64 per remote address |

// tonic's service trait answers `Result<_, tonic::Status>` (176 bytes);
// the handlers' helpers return what the trait returns.
#![allow(clippy::result_large_err)]

mod admit;
mod calls;
pub mod curio;
mod error;
mod listen;
mod peers;
pub mod proto;
mod prove;
mod service;
mod srs;
mod state;
mod status;

pub use calls::Calls;
pub use listen::{bind, GrpcListener, GrpcServer, ListenError};
pub use service::ProvingService;
pub use state::GrpcState;
