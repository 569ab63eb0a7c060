//! `mimc-chain`: a MiMC-style chain of cubings, x_{i+1} = (x_i + c_i)^3,
//! sized so that constraints plus instance variables are exactly 2^k. The NTT
//! domain is then exactly 2^k with no padding, which makes it the benchmark
//! circuit for a given domain size.
//!
//! Each round costs two constraints (the square, then the cube); the last
//! cube is enforced directly onto the public output y. With the constant one
//! and y as instance variables, 2^(k−1) − 1 rounds give 2^k − 2 constraints.
//! (x³ is not a permutation of this field, as 3 divides r − 1; that does not
//! matter for a benchmark.)

use ark_ff::{BigInteger256, Field, PrimeField};
use ark_relations::r1cs::{ConstraintSystemRef, SynthesisError};
use ark_std::UniformRand;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::{json, Value};

use super::field_json::{parse_fr, parse_integer, parse_object, required, FIELD_ELEMENT_FORMAT};
use super::{CircuitFamily, CircuitInstance, CircuitShape, InputError, Wire, WitnessSource};
use crate::Fr;

/// The family's name in a job's `"circuit"`.
pub const FAMILY: &str = "mimc-chain";
const MIN_LOG2_CONSTRAINTS: u64 = 2;
const MAX_LOG2_CONSTRAINTS: u64 = 24;
/// Seeds the ChaCha20 stream of round constants ("mimc" in ASCII).
const ROUND_CONSTANTS_SEED: u64 = 0x6d69_6d63;

/// The MiMC chain family: a chain of MiMC rounds of a chosen length.
#[derive(Debug)]
pub struct MimcChain;

/// Rounds of the chain for domain size 2^log2_constraints.
pub fn rounds(log2_constraints: u32) -> usize {
    (1 << (log2_constraints - 1)) - 1
}

/// The round constants: c_i is the i-th 256-bit block of the ChaCha20 stream
/// seeded with [`ROUND_CONSTANTS_SEED`], as four little-endian u64 words with
/// the top two bits cleared. Below 2^254 every block is a field element, so
/// nothing is rejected or reduced, and the constants depend on that stream
/// only, not on how arkworks samples: stored proving keys bake them in.
fn round_constants() -> impl Iterator<Item = Fr> {
    let mut rng = ChaCha20Rng::seed_from_u64(ROUND_CONSTANTS_SEED);
    std::iter::repeat_with(move || {
        let mut words: [u64; 4] = std::array::from_fn(|_| rng.next_u64());
        words[3] >>= 2;
        Fr::from_bigint(BigInteger256::new(words)).expect("2^254 is below the modulus")
    })
}

/// The end of the chain that starts at `x`.
pub fn evaluate_chain(x: Fr, rounds: usize) -> Fr {
    round_constants().take(rounds).fold(x, |state, constant| {
        let shifted = state + constant;
        shifted.square() * shifted
    })
}

fn parse_log2_constraints(params: &Value) -> Result<u32, InputError> {
    let object = parse_object(params, "params", &["log2_constraints"])?;
    let log2 = parse_integer(
        required(object, "params", "log2_constraints")?,
        "params.log2_constraints",
        MIN_LOG2_CONSTRAINTS..=MAX_LOG2_CONSTRAINTS,
    )?;
    Ok(log2 as u32)
}

fn parse_start(inputs: &Value) -> Result<Fr, InputError> {
    let object = parse_object(inputs, "inputs", &["x"])?;
    parse_fr(required(object, "inputs", "x")?, "inputs.x")
}

impl CircuitFamily for MimcChain {
    fn name(&self) -> &str {
        FAMILY
    }

    fn describe(&self) -> Value {
        json!({
            "name": FAMILY,
            "summary": "A MiMC-style chain x_{i+1} = (x_i + c_i)^3 whose constraints plus \
                        instance variables are exactly 2^log2_constraints: the NTT domain \
                        has no padding. For benchmarks.",
            "circuit_id": "mimc-chain-k{log2_constraints}",
            "params": {
                "log2_constraints": {
                    "type": "integer",
                    "required": true,
                    "min": MIN_LOG2_CONSTRAINTS,
                    "max": MAX_LOG2_CONSTRAINTS,
                    "description": "k: 2^(k-1) - 1 rounds, 2^k - 2 constraints, 2 instance \
                                    variables (the constant one and y)",
                },
            },
            "inputs": {
                "x": { "type": "field", "required": true, "format": FIELD_ELEMENT_FORMAT,
                       "description": "the private start of the chain" },
            },
            "seed": "x drawn with ChaCha20 seeded by the seed",
            "public_inputs": ["y: the end of the chain"],
        })
    }

    fn shape(&self, params: &Value) -> Result<CircuitShape, InputError> {
        let log2 = parse_log2_constraints(params)?;
        Ok(CircuitShape {
            family: FAMILY.to_string(),
            circuit_id: format!("{FAMILY}-k{log2}"),
            params: json!({ "log2_constraints": log2 }),
            estimated_constraints: 1 << log2,
        })
    }

    fn instance(
        &self,
        shape: &CircuitShape,
        source: &WitnessSource,
    ) -> Result<Box<dyn CircuitInstance>, InputError> {
        let rounds = rounds(parse_log2_constraints(&shape.params)?);
        let x = match source {
            WitnessSource::Seed(seed) => Fr::rand(&mut ChaCha20Rng::seed_from_u64(*seed)),
            WitnessSource::Inputs(inputs) => parse_start(inputs)?,
        };
        Ok(Box::new(MimcInstance { rounds, x, y: evaluate_chain(x, rounds) }))
    }
}

struct MimcInstance {
    rounds: usize,
    x: Fr,
    y: Fr,
}

impl CircuitInstance for MimcInstance {
    fn public_inputs(&self) -> Vec<Fr> {
        vec![self.y]
    }

    fn generate(self: Box<Self>, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let output = Wire::input(&cs, self.y)?;
        let mut state = Wire::witness(&cs, self.x)?;
        let mut constants = round_constants();
        for constant in constants.by_ref().take(self.rounds - 1) {
            let shifted = state.plus_constant(constant);
            state = shifted.product(&shifted, &cs)?.product(&shifted, &cs)?;
        }
        let last_constant = constants.next().expect("the constant stream is endless");
        let shifted = state.plus_constant(last_constant);
        let square = shifted.product(&shifted, &cs)?;
        Wire::enforce_product(&cs, &square, &shifted, &output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::extract_matrices;
    use ark_relations::r1cs::ConstraintSystem;

    fn shape(log2: u64) -> CircuitShape {
        MimcChain.shape(&json!({ "log2_constraints": log2 })).unwrap()
    }

    fn shape_error(params: Value) -> String {
        MimcChain.shape(&params).unwrap_err().0
    }

    fn instance_error(inputs: Value) -> String {
        MimcChain
            .instance(&shape(4), &WitnessSource::Inputs(inputs))
            .err()
            .expect("inputs should be rejected")
            .0
    }

    #[test]
    fn shape_is_canonical() {
        let shape = shape(10);
        assert_eq!(shape.family, "mimc-chain");
        assert_eq!(shape.circuit_id, "mimc-chain-k10");
        assert_eq!(shape.params, json!({ "log2_constraints": 10 }));
        assert_eq!(shape.estimated_constraints, 1024);
    }

    #[test]
    fn bad_params_name_the_problem() {
        let range = "params.log2_constraints must be an integer in 2..=24";
        assert_eq!(shape_error(json!({ "log2_constraints": 1 })), format!("{range}, got 1"));
        assert_eq!(shape_error(json!({ "log2_constraints": 25 })), format!("{range}, got 25"));
        assert_eq!(shape_error(json!({ "log2_constraints": -3 })), format!("{range}, got -3"));
        assert_eq!(shape_error(json!({ "log2_constraints": "10" })), format!("{range}, got \"10\""));
        assert_eq!(shape_error(json!({ "log2_constraints": 10.5 })), format!("{range}, got 10.5"));
        assert_eq!(shape_error(json!({})), "params.log2_constraints is required");
        assert_eq!(
            shape_error(json!({ "log2_constraints": 10, "rounds": 3 })),
            "params has an unknown key \"rounds\"; allowed: log2_constraints"
        );
        assert_eq!(shape_error(json!(null)), "params must be an object, got null");
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        assert_eq!(instance_error(json!({})), "inputs.x is required");
        assert_eq!(instance_error(json!({ "x": 1, "y": 2 })), "inputs has an unknown key \"y\"; allowed: x");
        assert!(instance_error(json!({ "x": "12z" })).starts_with("inputs.x: 'z' is not"));
    }

    #[test]
    fn constraints_plus_inputs_fill_the_domain_exactly() {
        for log2 in [2, 3, 10] {
            let shape = shape(log2);
            let instance = MimcChain.instance(&shape, &WitnessSource::Seed(0)).unwrap();
            let matrices = extract_matrices(instance).unwrap();
            assert_eq!(matrices.num_instance_variables, 2);
            assert_eq!(matrices.num_constraints + matrices.num_instance_variables, 1 << log2);
            assert_eq!(shape.estimated_constraints, 1 << log2);
        }
    }

    #[test]
    fn instances_satisfy_their_circuit() {
        let shape = shape(5);
        for source in [WitnessSource::Seed(3), WitnessSource::Inputs(json!({ "x": "0x1234" }))] {
            let instance = MimcChain.instance(&shape, &source).unwrap();
            let cs = ConstraintSystem::<Fr>::new_ref();
            let public_inputs = instance.public_inputs();
            instance.generate(cs.clone()).unwrap();
            assert!(cs.is_satisfied().unwrap());
            assert_eq!(cs.borrow().unwrap().instance_assignment[1..], public_inputs[..]);
        }
    }

    #[test]
    fn inputs_set_the_start_of_the_chain() {
        let instance = MimcChain.instance(&shape(4), &WitnessSource::Inputs(json!({ "x": 5 }))).unwrap();
        assert_eq!(instance.public_inputs(), vec![evaluate_chain(Fr::from(5u64), rounds(4))]);
    }

    #[test]
    fn round_constants_are_pinned() {
        // Stored proving keys bake the constants in: they must never change.
        let expected = "34375767301569131947738953682507782691265339571688086389508079611072622965235";
        assert_eq!(evaluate_chain(Fr::from(1u64), 3).to_string(), expected);
    }

    #[test]
    fn seeds_are_deterministic_and_distinct() {
        let shape = shape(4);
        let public = |seed| MimcChain.instance(&shape, &WitnessSource::Seed(seed)).unwrap().public_inputs();
        assert_eq!(public(7), public(7));
        assert_ne!(public(7), public(8));
    }
}
