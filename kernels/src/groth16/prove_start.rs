//! Stage 2, the GPU worker's: the engine trait every prove_start engine
//! implements (the CPU engine and the CUDA engine), what it hands the
//! finalizer, and the host's reference pieces (H from seven NTTs; scalars
//! as big integers for the MSMs).

use std::time::{Duration, Instant};

use ark_ff::{FftField, Field, PrimeField};
use ark_poly::EvaluationDomain;
use rayon::prelude::*;

use super::circuit::PreparedCircuit;
use super::synthesize::Synthesized;
use super::Domain;
use crate::{Fr, G1Projective, G2Projective, KernelError};

/// One timed phase of a stage, for the worker's span.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseTiming {
    /// The phase's name (`msm_h`, `ntt`, ...).
    pub phase: &'static str,
    /// How long it took.
    pub duration: Duration,
}

/// Runs `f` and appends its duration under `phase`.
pub fn timed<T>(phases: &mut Vec<PhaseTiming>, phase: &'static str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    phases.push(PhaseTiming { phase, duration: start.elapsed() });
    out
}

/// What prove_start hands to the finalizer.
pub struct ProveStartOutput {
    /// MSM of a_query[1..] with assignment[1..].
    pub a_acc: G1Projective,
    /// MSM of b_g1_query[1..] with assignment[1..].
    pub b1_acc: G1Projective,
    /// MSM of l_query with the witness part of the assignment.
    pub l_acc: G1Projective,
    /// MSM of h_query with H.
    pub h_acc: G1Projective,
    /// MSM of b_g2_query[1..] with assignment[1..], when the engine did it.
    pub b2_acc: Option<G2Projective>,
    /// The assignment: whole when `b2_acc` is None (prove_finish's G2 MSM
    /// reads it), else at least the constant one and the public inputs.
    pub assignment: Vec<Fr>,
    /// Instance variables, the constant one included.
    pub num_inputs: usize,
    /// Bytes of a, b and c released during the stage.
    pub freed_bytes: u64,
    /// The stage's phases, timed.
    pub phases: Vec<PhaseTiming>,
    /// The call's share of its device's kernel-active time: how long its
    /// kernels ran while no earlier call's did (from the CUDA engine's
    /// events), so that the shares of all calls add up to the time the
    /// device had any kernels running. None from an engine without a
    /// device (the CPU engine).
    pub device_active: Option<Duration>,
}

impl ProveStartOutput {
    /// The public inputs (the assignment's inputs after the constant one).
    pub fn public_inputs(&self) -> &[Fr] {
        &self.assignment[1..self.num_inputs]
    }
}

/// How soon a prove_start call's result is needed, for an engine that runs
/// calls side by side on one device (the CUDA engine's stream priorities).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Urgency {
    /// In turn with the other calls.
    #[default]
    Normal,
    /// Ahead of every normal call (WinningPoSt: a block reward is lost when
    /// its proof is late).
    Urgent,
}

/// The prove_start stage, implemented by the CPU engine and the CUDA engine.
pub trait ProveStartEngine: Send + Sync {
    /// The engine's name (`cpu`, `cuda`), as metrics and logs say it.
    fn name(&self) -> &str;
    /// Whether the engine evaluates a deferred partition's a, b and c
    /// ([`Abc::Deferred`]) on its device, so that synthesis should leave
    /// them to it and a partition's memory holds no host a, b, c. The CPU
    /// engine does not: it takes a deferred partition too, evaluating it on
    /// the host at prove_start.
    fn evaluates_on_device(&self) -> bool {
        false
    }
    /// Whether the engine reads a key's queries range by range (into its
    /// device or pinned memory), so that a circuit may leave them in a
    /// [`KeySource`] instead of holding them decoded on the host. The CPU
    /// engine does not: its MSMs read the whole queries.
    fn reads_key_by_range(&self) -> bool {
        false
    }
    /// Loads what the engine keeps of `circuit` between calls (the CUDA
    /// engine: its device-memory plan, then its key and compiled matrices
    /// on the device) ahead of its first call, so that a preload takes the
    /// whole cold cost and no partition waits for it; `urgency` is its
    /// calls' (the CUDA engine reserves an urgent circuit's memory beside
    /// every other). Engines that keep nothing do nothing.
    fn warm(&self, circuit: &PreparedCircuit, urgency: Urgency) -> Result<(), KernelError> {
        let _ = (circuit, urgency);
        Ok(())
    }
    /// Host bytes the engine holds outside the circuits' own (the CUDA
    /// engine's streamed key parts in pinned memory), which the daemon's
    /// memory budget counts as resident.
    fn host_bytes(&self) -> u64 {
        0
    }
    /// The device's memory plan and each circuit's, for `/v1/status`
    /// (engines without a device: none).
    fn memory_report(&self) -> Option<crate::device_plan::MemoryReport> {
        None
    }
    /// The MSMs of one synthesized partition (and its NTTs: H from a, b and c).
    fn prove_start(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
    ) -> Result<ProveStartOutput, KernelError>;
    /// As `prove_start`, with the call's urgency. By default the urgency is
    /// not used: the CPU engine's calls share its thread pool as they come
    /// (rayon has no priorities).
    fn prove_start_as(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
        urgency: Urgency,
    ) -> Result<ProveStartOutput, KernelError> {
        let _ = urgency;
        self.prove_start(circuit, synthesized)
    }
}

/// H = (a·b − c) / Z over the coset, from the seven NTTs of the libsnark
/// reduction. Consumes a, b and c.
pub fn compute_h_cpu(domain: &Domain, mut a: Vec<Fr>, mut b: Vec<Fr>, mut c: Vec<Fr>) -> Vec<Fr> {
    let coset = domain.get_coset(Fr::GENERATOR).expect("the generator spans a coset");
    domain.ifft_in_place(&mut a);
    domain.ifft_in_place(&mut b);
    domain.ifft_in_place(&mut c);
    coset.fft_in_place(&mut a);
    coset.fft_in_place(&mut b);
    coset.fft_in_place(&mut c);
    let z_inv = domain
        .evaluate_vanishing_polynomial(Fr::GENERATOR)
        .inverse()
        .expect("the vanishing polynomial is nonzero off the domain");
    a.par_iter_mut().zip(b.par_iter()).zip(c.par_iter()).for_each(|((a, b), c)| {
        *a = (*a * b - c) * z_inv;
    });
    drop(b);
    drop(c);
    coset.ifft_in_place(&mut a);
    a
}

/// MSM of the assignment (without the constant one) against query[1..].
pub fn assignment_bigints(assignment: &[Fr]) -> Vec<<Fr as PrimeField>::BigInt> {
    assignment[1..].par_iter().map(|s| s.into_bigint()).collect()
}
