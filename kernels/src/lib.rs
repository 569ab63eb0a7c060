//! Proving math for cuzk. Knows nothing of actors or HTTP.
//!
//! - [`circuits`]: the circuit registry and the built-in circuits.
//! - [`groth16`]: Groth16 split into the three stages cuzk schedules
//!   (synthesize, prove_start, prove_finish).
//! - [`cpu`]: the CPU engine for prove_start.
//! - `cuda` (feature `cuda`): the GPU engine.

pub mod circuits;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod groth16;

pub use ark_bls12_381::{Bls12_381, Fr, G1Affine, G1Projective, G2Affine, G2Projective};

/// Errors from the proving stages. The text is what a job reports.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("synthesis failed: {0}")]
    Synthesis(String),
    #[error("witness does not satisfy constraint {0}")]
    Unsatisfied(usize),
    #[error("device error: {0}")]
    Device(String),
    #[error("proving key: {0}")]
    Key(String),
}
