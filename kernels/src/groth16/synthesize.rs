//! Stage 1, on the CPU: the witness, by running the circuit without
//! building constraints, then a, b and c as the cached matrices times it,
//! or left to an engine that evaluates them on its device.

use ark_relations::r1cs::{ConstraintSynthesizer, SynthesisMode};

use super::circuit::{constraint_system, PreparedCircuit};
use crate::circuits::{CircuitInstance, InstanceCircuit};
use crate::r1cs::Matrices;
use crate::{Fr, KernelError};

/// The output of synthesis: a, b, c (or that the engine evaluates them)
/// and the full assignment (the constant one, public inputs, then
/// witnesses).
pub struct Synthesized {
    /// a, b and c, or that prove_start evaluates them.
    pub abc: Abc,
    /// The constant one, the public inputs, then the witnesses.
    pub assignment: Vec<Fr>,
    /// Instance variables, the constant one included.
    pub num_inputs: usize,
}

/// A partition's a, b and c: its circuit's A, B and C rows at its
/// assignment, then the input constraints (A = x_i, B = C = 0), zeros to the
/// domain.
pub enum Abc {
    /// Evaluated on the host, over the domain.
    Host {
        /// The A rows at the assignment.
        a: Vec<Fr>,
        /// The B rows at the assignment.
        b: Vec<Fr>,
        /// The C rows at the assignment.
        c: Vec<Fr>,
    },
    /// Left to prove_start, from the circuit's compiled matrices and the
    /// assignment: on the device for an engine that evaluates there (3 x 4.3
    /// GB a 32 GiB PoRep partition never holds on the host nor copies over
    /// PCIe), on the host for one that does not.
    Deferred,
}

impl Synthesized {
    /// Bytes held by a, b and c: what prove_start frees once H exists.
    pub fn abc_bytes(&self) -> u64 {
        match &self.abc {
            Abc::Host { a, b, c } => field_bytes(a.capacity() + b.capacity() + c.capacity()),
            Abc::Deferred => 0,
        }
    }

    /// Bytes held by the assignment.
    pub fn assignment_bytes(&self) -> u64 {
        field_bytes(self.assignment.capacity())
    }

    /// The public inputs (the assignment's inputs after the constant one).
    pub fn public_inputs(&self) -> &[Fr] {
        &self.assignment[1..self.num_inputs]
    }
}

/// Bytes of `elements` field elements.
pub fn field_bytes(elements: usize) -> u64 {
    (elements * std::mem::size_of::<Fr>()) as u64
}

/// The synthesize stage: witness generation without building constraints,
/// then a, b, c from the cached matrices.
pub fn synthesize(
    circuit: &PreparedCircuit,
    instance: Box<dyn CircuitInstance>,
) -> Result<Synthesized, KernelError> {
    evaluate(circuit, assign(circuit, instance)?)
}

/// Witness generation without building constraints: the assignment
/// (inputs, then aux), checked against the shape's counts.
pub fn assign(circuit: &PreparedCircuit, instance: Box<dyn CircuitInstance>) -> Result<Vec<Fr>, KernelError> {
    let cs = constraint_system(SynthesisMode::Prove { construct_matrices: false });
    InstanceCircuit(instance)
        .generate_constraints(cs.clone())
        .map_err(|e| KernelError::Synthesis(e.to_string()))?;
    let cs =
        cs.into_inner().ok_or_else(|| KernelError::Synthesis("constraint system still borrowed".into()))?;
    if cs.num_instance_variables != circuit.num_inputs || cs.num_constraints != circuit.num_constraints {
        return Err(KernelError::Synthesis(format!(
            "instance has {} inputs and {} constraints; shape {} has {} and {}",
            cs.num_instance_variables,
            cs.num_constraints,
            circuit.circuit_id,
            circuit.num_inputs,
            circuit.num_constraints
        )));
    }
    let mut assignment = cs.instance_assignment;
    assignment.extend_from_slice(&cs.witness_assignment);
    Ok(assignment)
}

/// A partition from its assignment (inputs, then aux): a, b and c as the
/// circuit's compiled matrices times the assignment, on every core.
pub fn evaluate(circuit: &PreparedCircuit, assignment: Vec<Fr>) -> Result<Synthesized, KernelError> {
    let [a, b, c] = compiled(circuit)?.evaluate(&assignment, circuit.domain_size)?;
    Ok(Synthesized { abc: Abc::Host { a, b, c }, assignment, num_inputs: circuit.num_inputs })
}

/// A partition from its assignment (inputs, then aux), a, b and c left to
/// prove_start ([`Abc::Deferred`]): for an engine that evaluates them on its
/// device. Its size is checked here; its rows, whether they hold, there.
pub fn defer(circuit: &PreparedCircuit, assignment: Vec<Fr>) -> Result<Synthesized, KernelError> {
    compiled(circuit)?.check_assignment(assignment.len(), circuit.domain_size)?;
    Ok(Synthesized { abc: Abc::Deferred, assignment, num_inputs: circuit.num_inputs })
}

/// The circuit's compiled matrices, or why it has none (Filecoin's direct
/// evaluation records a, b and c instead).
pub fn compiled(circuit: &PreparedCircuit) -> Result<&Matrices, KernelError> {
    if circuit.matrices.num_constraints() != circuit.num_constraints {
        return Err(KernelError::Synthesis(format!("{} has no compiled matrices", circuit.circuit_id)));
    }
    Ok(&circuit.matrices)
}
