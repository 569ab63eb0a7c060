//! Circuit-specific setup that can be stopped part way: ark-groth16's
//! generator (`generate_random_parameters_with_reduction`, the libsnark
//! reduction) step by step, with the question "stop?" asked between steps
//! and between chunks of every fixed-base multiplication, which is where a
//! setup spends nearly all of its time.
//!
//! A setup of a large shape runs for seconds to minutes and holds gigabytes;
//! the daemon stops it when no job waits for it any more. ark-groth16's own
//! generator is one call with no way out, so its steps are repeated here
//! (same toxic waste, same queries, same key) with [`SETUP_CHUNK`] scalars
//! multiplied between two questions.

use ark_ec::scalar_mul::{BatchMulPreprocessing, ScalarMul};
use ark_ec::CurveGroup;
use ark_ff::{Field, UniformRand, Zero};
use ark_groth16::r1cs_to_qap::{LibsnarkReduction, R1CSToQAP};
use ark_groth16::{ProvingKey, VerifyingKey};
use ark_poly::{EvaluationDomain, GeneralEvaluationDomain};
use ark_relations::r1cs::{ConstraintSynthesizer, ConstraintSystem, OptimizationGoal, SynthesisMode};
use rand::{CryptoRng, RngCore};

use crate::circuits::InstanceCircuit;
use crate::{Bls12_381, Fr, G1Projective, G2Projective, KernelError};

/// Scalars multiplied between two questions. A G2 multiplication, the
/// slowest, costs tens of microseconds on one core, so a chunk is well
/// under a second even on two busy cores.
pub const SETUP_CHUNK: usize = 1 << 12;

type Domain = GeneralEvaluationDomain<Fr>;

/// A fresh proving key for `circuit`, or [`KernelError::Cancelled`] as
/// soon as `stop` answers true (asked after each step and after every
/// [`SETUP_CHUNK`] scalars of a query).
pub fn generate_key(
    circuit: InstanceCircuit,
    rng: &mut (impl RngCore + CryptoRng),
    stop: &dyn Fn() -> bool,
) -> Result<ProvingKey<Bls12_381>, KernelError> {
    let asked = || if stop() { Err(KernelError::Cancelled) } else { Ok(()) };
    let synthesis = |e: ark_relations::r1cs::SynthesisError| KernelError::Synthesis(e.to_string());
    let [alpha, beta, gamma, delta] = [(); 4].map(|_| Fr::rand(rng));
    let g1 = G1Projective::rand(rng);
    let g2 = G2Projective::rand(rng);

    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Setup);
    circuit.generate_constraints(cs.clone()).map_err(synthesis)?;
    asked()?;
    cs.finalize();
    asked()?;
    let num_inputs = cs.num_instance_variables();
    let domain = Domain::new(cs.num_constraints() + num_inputs)
        .ok_or_else(|| KernelError::Synthesis("the circuit is larger than any evaluation domain".into()))?;
    let t = domain.sample_element_outside_domain(rng);
    let (a, b, c, zt, num_variables, m_raw) =
        LibsnarkReduction::instance_map_with_evaluation::<Fr, Domain>(cs, &t).map_err(synthesis)?;
    asked()?;

    let non_zero = |v: &[Fr]| v.iter().filter(|x| !x.is_zero()).count();
    let (non_zero_a, non_zero_b) = (non_zero(&a[..num_variables]), non_zero(&b[..num_variables]));
    let unexpected = || KernelError::Synthesis("unexpected identity in the toxic waste".into());
    let gamma_inverse = gamma.inverse().ok_or_else(unexpected)?;
    let delta_inverse = delta.inverse().ok_or_else(unexpected)?;
    let combined = |range: std::ops::Range<usize>, inverse: Fr| -> Vec<Fr> {
        range.map(|i| (beta * a[i] + alpha * b[i] + c[i]) * inverse).collect()
    };
    let gamma_abc = combined(0..num_inputs, gamma_inverse);
    let l = combined(num_inputs..a.len(), delta_inverse);
    drop(c);

    let g2_table = BatchMulPreprocessing::new(g2, non_zero_b);
    asked()?;
    let b_g2_query = chunked(&g2_table, &b, &asked)?;
    drop(g2_table);
    let g1_table = BatchMulPreprocessing::new(g1, non_zero_a + non_zero_b + num_variables + m_raw + 1);
    asked()?;
    let a_query = chunked(&g1_table, &a, &asked)?;
    drop(a);
    let b_g1_query = chunked(&g1_table, &b, &asked)?;
    drop(b);
    let h_scalars = LibsnarkReduction::h_query_scalars::<Fr, Domain>(m_raw - 1, t, zt, delta_inverse)
        .map_err(synthesis)?;
    asked()?;
    let h_query = chunked(&g1_table, &h_scalars, &asked)?;
    drop(h_scalars);
    let l_query = chunked(&g1_table, &l, &asked)?;
    drop(l);
    let gamma_abc_g1 = chunked(&g1_table, &gamma_abc, &asked)?;

    let vk = VerifyingKey::<Bls12_381> {
        alpha_g1: (g1 * alpha).into_affine(),
        beta_g2: (g2 * beta).into_affine(),
        gamma_g2: (g2 * gamma).into_affine(),
        delta_g2: (g2 * delta).into_affine(),
        gamma_abc_g1,
    };
    Ok(ProvingKey {
        vk,
        beta_g1: (g1 * beta).into_affine(),
        delta_g1: (g1 * delta).into_affine(),
        a_query,
        b_g1_query,
        b_g2_query,
        h_query,
        l_query,
    })
}

/// `table`'s base times every scalar, [`SETUP_CHUNK`] at a time (each chunk
/// on every core), asking between chunks. Chunking changes nothing in the
/// result: each product is computed alone, then the chunk's are normalized.
fn chunked<G: ScalarMul<ScalarField = Fr>>(
    table: &BatchMulPreprocessing<G>,
    scalars: &[Fr],
    asked: &dyn Fn() -> Result<(), KernelError>,
) -> Result<Vec<G::MulBase>, KernelError> {
    let mut points = Vec::with_capacity(scalars.len());
    for chunk in scalars.chunks(SETUP_CHUNK) {
        points.extend(table.batch_mul(chunk));
        asked()?;
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use ark_groth16::Groth16;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;
    use serde_json::json;

    use super::*;
    use crate::circuits::{CircuitRegistry, WitnessSource};

    /// A `mimc-chain` circuit of 2^k constraints.
    fn circuit(k: u32) -> InstanceCircuit {
        let registry = CircuitRegistry::builtin();
        let family = registry.get("mimc-chain").expect("a built-in family");
        let shape = family.shape(&json!({"log2_constraints": k})).unwrap();
        InstanceCircuit(family.instance(&shape, &WitnessSource::Seed(0)).unwrap())
    }

    #[test]
    fn the_key_is_ark_groth16s_for_the_same_randomness() {
        let ours = generate_key(circuit(14), &mut ChaCha20Rng::seed_from_u64(7), &|| false).unwrap();
        let theirs = Groth16::<Bls12_381>::generate_random_parameters_with_reduction(
            circuit(14),
            &mut ChaCha20Rng::seed_from_u64(7),
        )
        .unwrap();
        assert!(ours.a_query.len() > SETUP_CHUNK, "more than one chunk");
        assert!(ours == theirs, "a different key");
    }

    #[test]
    fn it_stops_at_the_first_question_answered_yes() {
        // 2^14 constraints: more than one chunk in every large query.
        for yes_at in [1, 4, 9, 20] {
            let asked = Cell::new(0);
            let stop = || {
                asked.set(asked.get() + 1);
                asked.get() == yes_at
            };
            let stopped = generate_key(circuit(14), &mut ChaCha20Rng::seed_from_u64(7), &stop);
            assert!(matches!(stopped, Err(KernelError::Cancelled)), "question {yes_at}");
            assert_eq!(asked.get(), yes_at, "asked on after the answer");
        }
    }
}
