//! A constraint system that keeps only the assignment, in arkworks' field:
//! each `alloc` and `alloc_input` appends its value, `enforce` does nothing.
//! The reference gadgets that stay cheap (allocations, bit decompositions,
//! Poseidon, the Merkle paths of trees C and R) run through it, and the
//! values-only SHA-256 appends to its `aux` directly, so one challenge's
//! assignment is one of these. Variable indices are local to it: nothing
//! reads them, because no constraint is built (compiled evaluation takes the
//! constraints from the circuit's matrices).

use ark_bls12_381::Fr;
use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

use crate::convert::fr_from_blstrs;

/// The values allocated through it, in allocation order.
#[derive(Default)]
pub struct AssignmentCs {
    /// Public inputs.
    pub inputs: Vec<Fr>,
    /// Private (aux) values.
    pub aux: Vec<Fr>,
}

impl ConstraintSystem<Scalar> for AssignmentCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(fr_from_blstrs(&f()?));
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(fr_from_blstrs(&f()?));
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
