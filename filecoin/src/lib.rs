//! Filecoin proving for cuzk: the Groth16 parameter files filecoin-proofs reads
//! (`v28-*.params`, `.vk`, `.meta`), a constraint system that records what the
//! daemon's three stages need from the reference circuits, and a fast setup that
//! writes test-only parameters in the exact layout filecoin-proofs reads, and
//! timing-only keys of the real 32 GiB and 64 GiB shapes (random points).
//! A blank circuit's compiled shape is kept on disk between starts
//! (`shape_cache`), and a large key can stay in its file, read by range by
//! the engine (`params::QueryFile`).
//!
//! Field and curve types are arkworks' (the daemon's engines use them); the
//! reference circuits are bellperson circuits over blstrs, converted at the edge.

#![warn(missing_docs)]

pub mod assignment;
pub mod convert;
pub mod error;
#[cfg(feature = "fixtures")]
pub mod fixtures;
// The setup's multiplications on a CUDA device.
#[cfg(feature = "cuda")]
pub mod gpu_setup;
pub mod kinds;
pub mod params;
pub mod porep;
pub mod post;
pub mod prepare;
pub mod record;
pub mod request;
pub mod setup;
pub mod shape_cache;
pub mod synthetic;
pub mod timing_key;
pub mod update;
mod vanilla;
pub mod verify;
pub mod witness;

pub use error::Error;
/// filecoin-proofs-api itself, for the request types the daemon reads.
pub use filecoin_proofs_api as api;
pub use kinds::{parse_sector_size, Kind, Lateness};
pub use request::ProofRequest;
pub use setup::{generate, CpuFixedBase, FixedBaseMul, Generate, GeneratedFile};
