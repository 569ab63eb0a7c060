//! Stage 3, the finalizer's: the G2 MSM for B when the engine left it, then
//! the randomizers r and s and the proof's assembly.

use std::borrow::Cow;

use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::Zero;
use ark_groth16::Proof;

use super::circuit::PreparedCircuit;
use super::prove_start::{assignment_bigints, timed, PhaseTiming, ProveStartOutput};
use crate::key_source::read_all;
use crate::{Bls12_381, Fr, G1Projective, G2Affine, G2Projective, KernelError};

/// B's G2 query whole on the host: the key's, or read from its source (the
/// G2 MSM of an engine that leaves it to the finalizer; 6.6 GB at 32 GiB
/// PoRep, held for that MSM only).
fn b_g2_query(circuit: &PreparedCircuit) -> Result<Cow<'_, [G2Affine]>, KernelError> {
    match &circuit.key_source {
        None => Ok(Cow::Borrowed(&circuit.pk.b_g2_query)),
        Some(source) => {
            read_all(source.b2_len(), 1 << 20, |start, out| source.g2(start, out)).map(Cow::Owned)
        }
    }
}

/// The finalizer's stage: the G2 MSM for B when the engine did not do it,
/// then assembly with the randomizers r and s. Fails only when B's G2 query
/// had to be read from a key source that could not be read.
pub fn prove_finish(
    circuit: &PreparedCircuit,
    start: ProveStartOutput,
    r: Fr,
    s: Fr,
) -> Result<(Proof<Bls12_381>, Vec<PhaseTiming>), KernelError> {
    let pk = &circuit.pk;
    let mut phases = Vec::new();
    let b2_acc = match start.b2_acc {
        Some(acc) => acc,
        None => timed(&mut phases, "msm_b2", || {
            let scalars = assignment_bigints(&start.assignment);
            let bases = b_g2_query(circuit)?;
            Ok::<_, KernelError>(G2Projective::msm_bigint(&bases[1..], &circuit.b_selection.gather(&scalars)))
        })?,
    };
    let proof = timed(&mut phases, "assemble", || {
        let g_a = pk.delta_g1 * r + pk.a_query[0] + start.a_acc + pk.vk.alpha_g1;
        let g1_b = if r.is_zero() {
            G1Projective::zero()
        } else {
            pk.delta_g1 * s + pk.b_g1_query[0] + start.b1_acc + pk.beta_g1
        };
        let g2_b = pk.vk.delta_g2 * s + pk.b_g2_query[0] + b2_acc + pk.vk.beta_g2;
        let g_c = g_a * s + g1_b * r - pk.delta_g1 * (r * s) + start.l_acc + start.h_acc;
        let affine = G1Projective::normalize_batch(&[g_a, g_c]);
        Proof { a: affine[0], b: g2_b.into_affine(), c: affine[1] }
    });
    Ok((proof, phases))
}
