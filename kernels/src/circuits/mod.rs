//! Circuits the daemon can prove, and the registry that names them.
//!
//! A circuit *family* (for example `poseidon-merkle`) is chosen by name; its
//! JSON params pick a *shape* (one R1CS, one proving key, one `circuit_id`);
//! a job's witness comes from client inputs or from a seed.
//! Users register their own arkworks circuits by implementing
//! [`CircuitFamily`] and calling [`CircuitRegistry::register`].

use std::collections::BTreeMap;
use std::sync::Arc;

use ark_ff::{Field, Zero};
use ark_relations::r1cs::{
    ConstraintSynthesizer, ConstraintSystemRef, LinearCombination, SynthesisError, Variable,
};
use serde_json::Value;

use crate::Fr;

pub mod field_json;
pub mod mimc_chain;
pub mod poseidon;
pub mod poseidon_merkle;

/// A client mistake in params or inputs; the text names the problem and is
/// returned to the client as-is (HTTP 422).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

impl InputError {
    /// A refusal saying `msg`.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// One member of a family: one R1CS and one proving key.
#[derive(Debug, Clone, PartialEq)]
pub struct CircuitShape {
    /// The family the shape belongs to.
    pub family: String,
    /// URL-safe (`[a-z0-9-]`), stable across restarts: the proving key is
    /// stored under it.
    pub circuit_id: String,
    /// The canonical params (defaults filled in).
    pub params: Value,
    /// Constraints plus public inputs, an upper bound close to the real count:
    /// used to size memory reservations before the matrices exist.
    pub estimated_constraints: usize,
}

/// Where a partition's witness comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum WitnessSource {
    /// A random valid instance drawn from this seed (load tests, benchmarks).
    Seed(u64),
    /// The client's witness inputs, in the family's own JSON form.
    Inputs(Value),
}

/// A circuit with its witness, ready to be synthesized.
pub trait CircuitInstance: Send {
    /// The public inputs in the order the verifier expects them.
    fn public_inputs(&self) -> Vec<Fr>;
    /// Allocates variables and enforces constraints (arkworks style).
    fn generate(self: Box<Self>, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError>;
}

/// A family of circuits that the daemon can prove.
pub trait CircuitFamily: Send + Sync + 'static {
    /// The name clients use in `"circuit"`.
    fn name(&self) -> &str;
    /// A JSON description of the params and inputs this family takes, served by
    /// `GET /v1/circuits`.
    fn describe(&self) -> Value;
    /// Validates params; returns the shape they select.
    fn shape(&self, params: &Value) -> Result<CircuitShape, InputError>;
    /// Builds an instance of `shape` with a valid witness from `source`.
    /// Invalid inputs are an [`InputError`]; a seed always yields an instance.
    fn instance(
        &self,
        shape: &CircuitShape,
        source: &WitnessSource,
    ) -> Result<Box<dyn CircuitInstance>, InputError>;
    /// Checks client inputs before a job is accepted, in the request's own
    /// thread. The default builds the instance; a family whose instance
    /// costs real work (a whole Merkle tree) checks only what a client can
    /// get wrong, and leaves the work to synthesis, which runs under the
    /// memory budget. Whatever passes here must build there.
    fn check_inputs(&self, shape: &CircuitShape, inputs: &Value) -> Result<(), InputError> {
        self.instance(shape, &WitnessSource::Inputs(inputs.clone())).map(drop)
    }
}

/// Adapts a boxed instance to arkworks' `ConstraintSynthesizer`.
pub struct InstanceCircuit(pub Box<dyn CircuitInstance>);

impl ConstraintSynthesizer<Fr> for InstanceCircuit {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        self.0.generate(cs)
    }
}

/// A linear combination of circuit variables together with its value: the
/// building block of the built-in gadgets. Instances always carry their
/// witness, so the value is known even in setup mode, where arkworks ignores it.
#[derive(Clone, Debug)]
pub struct Wire {
    lc: LinearCombination<Fr>,
    value: Fr,
}

impl Wire {
    /// A constant: no variable, `value` times ONE.
    pub fn constant(value: Fr) -> Self {
        let lc = if value.is_zero() {
            LinearCombination::zero()
        } else {
            LinearCombination::from((value, Variable::One))
        };
        Self { lc, value }
    }

    /// A new public input.
    pub fn input(cs: &ConstraintSystemRef<Fr>, value: Fr) -> Result<Self, SynthesisError> {
        let variable = cs.new_input_variable(|| Ok(value))?;
        Ok(Self { lc: variable.into(), value })
    }

    /// A new private witness variable.
    pub fn witness(cs: &ConstraintSystemRef<Fr>, value: Fr) -> Result<Self, SynthesisError> {
        let variable = cs.new_witness_variable(|| Ok(value))?;
        Ok(Self { lc: variable.into(), value })
    }

    /// The value the wire carries in this assignment.
    pub fn value(&self) -> Fr {
        self.value
    }

    /// Σ coefficient·wire: free, no constraint.
    pub fn weighted_sum<'a>(terms: impl IntoIterator<Item = (Fr, &'a Wire)>) -> Self {
        terms.into_iter().fold(Self::constant(Fr::zero()), |sum, (coefficient, wire)| Self {
            lc: sum.lc + (coefficient, &wire.lc),
            value: sum.value + coefficient * wire.value,
        })
    }

    /// self + constant: free, no constraint.
    pub fn plus_constant(mut self, constant: Fr) -> Self {
        // The constant one sorts first in a linear combination.
        match self.lc.first_mut() {
            Some((coefficient, Variable::One)) => *coefficient += constant,
            _ => self.lc.insert(0, (constant, Variable::One)),
        }
        self.value += constant;
        self
    }

    /// A new witness holding self·other, enforced by one constraint.
    pub fn product(&self, other: &Wire, cs: &ConstraintSystemRef<Fr>) -> Result<Self, SynthesisError> {
        let product = Self::witness(cs, self.value * other.value)?;
        Self::enforce_product(cs, self, other, &product)?;
        Ok(product)
    }

    /// One constraint: left·right = output.
    pub fn enforce_product(
        cs: &ConstraintSystemRef<Fr>,
        left: &Wire,
        right: &Wire,
        output: &Wire,
    ) -> Result<(), SynthesisError> {
        cs.enforce_constraint(left.lc.clone(), right.lc.clone(), output.lc.clone())
    }

    /// One constraint: (self − other)·1 = 0.
    pub fn enforce_equal(&self, other: &Wire, cs: &ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let difference = Self::weighted_sum([(Fr::ONE, self), (-Fr::ONE, other)]);
        Self::enforce_product(cs, &difference, &Self::constant(Fr::ONE), &Self::constant(Fr::zero()))
    }
}

/// The circuit families known to a daemon, by name.
#[derive(Clone, Default)]
pub struct CircuitRegistry {
    families: BTreeMap<String, Arc<dyn CircuitFamily>>,
}

impl CircuitRegistry {
    /// The built-in families: `mimc-chain` and `poseidon-merkle`.
    pub fn builtin() -> Self {
        let mut registry = Self::default();
        registry.register(Arc::new(mimc_chain::MimcChain));
        registry.register(Arc::new(poseidon_merkle::PoseidonMerkle));
        registry
    }

    /// Adds a family, replacing any of the same name.
    pub fn register(&mut self, family: Arc<dyn CircuitFamily>) {
        self.families.insert(family.name().to_string(), family);
    }

    /// The family registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn CircuitFamily>> {
        self.families.get(name)
    }

    /// Every registered family.
    pub fn families(&self) -> impl Iterator<Item = &Arc<dyn CircuitFamily>> {
        self.families.values()
    }
}
