//! Groth16 over BLS12-381, split into the three stages the daemon schedules.
//!
//! 1. [`synthesize`] (CPU): witness generation, then the a, b, c vectors as the
//!    cached R1CS matrices times the witness ([`evaluate`], [`Matrices`]). No
//!    constraint is built per proof. For an engine that evaluates them on its
//!    device ([`ProveStartEngine::evaluates_on_device`]) the stage stops at
//!    the assignment ([`defer`], [`Abc::Deferred`]).
//! 2. prove_start ([`ProveStartEngine`], the GPU worker's stage): H from seven
//!    size-n NTTs, then the G1 MSMs for A, B1, L and H. a, b and c are dropped
//!    as soon as H exists.
//! 3. [`prove_finish`] (finalizer): the G2 MSM for B (unless the engine did it),
//!    the randomizers r and s, assembly.
//!
//! Given the same r and s the result is exactly ark-groth16's proof.
//!
//! One file per stage (`synthesize`, `prove_start`, `prove_finish`) and one
//! for the prepared circuit they share (`circuit`).

mod circuit;
mod prove_finish;
mod prove_start;
mod synthesize;

use ark_poly::Radix2EvaluationDomain;

use crate::Fr;

pub use circuit::{extract_matrices, PreparedCircuit, Selection};
pub use prove_finish::prove_finish;
pub use prove_start::{
    assignment_bigints, compute_h_cpu, timed, PhaseTiming, ProveStartEngine, ProveStartOutput, Urgency,
};
pub use synthesize::{assign, compiled, defer, evaluate, field_bytes, synthesize, Abc, Synthesized};

/// The NTT domain every stage works over.
pub type Domain = Radix2EvaluationDomain<Fr>;
