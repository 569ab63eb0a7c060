//! A constraint system that keeps only the assignment, in arkworks' field:
//! each `alloc` and `alloc_input` appends its value, `enforce` does nothing.
//! The reference gadgets that stay cheap (allocations, bit decompositions,
//! Poseidon, the Merkle paths of trees C and R) run through it, and the
//! values-only SHA-256 appends to its `aux` directly, so one challenge's
//! assignment is one of these, its aux values in their own vector or
//! straight in their place in the partition's. Variable indices are local
//! to it: nothing
//! reads them, because no constraint is built (compiled evaluation takes the
//! constraints from the circuit's matrices).
//!
//! It also records a whole reference circuit's assignment (compiled
//! evaluation of the kinds other than PoRep, `record::record`), and is
//! extensible as bellperson's prover is: a circuit made of independent
//! parts (the PoSt circuits' sectors) synthesizes each part into a system
//! of its own, with a temporary ONE first, and joins them in order.

use ark_bls12_381::Fr;
use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

use crate::convert::fr_from_blstrs;
use crate::Error;

/// A gadget's failure as the crate reports a failed synthesis.
pub fn synthesis(e: SynthesisError) -> Error {
    Error::Synthesis(e.to_string())
}

/// The values allocated through it, in allocation order.
#[derive(Default)]
pub struct AssignmentCs<'a> {
    /// Public inputs.
    pub inputs: Vec<Fr>,
    /// Private (aux) values.
    pub aux: Aux<'a>,
}

/// Where aux values go: a growing vector, or a window of a partition's
/// assignment already sized for them (so that the challenges after the
/// first write their values where they end up, without a copy).
pub struct Aux<'a>(Slots<'a>);

enum Slots<'a> {
    /// The values so far.
    Growing(Vec<Fr>),
    /// `slots` filled from the start; `filled` counts every value pushed,
    /// also any beyond the window, which are dropped (the recording that
    /// sized the window checks the count afterwards).
    Window { slots: &'a mut [Fr], filled: usize },
}

impl Default for Aux<'_> {
    fn default() -> Self {
        Aux(Slots::Growing(Vec::new()))
    }
}

impl<'a> Aux<'a> {
    /// Values written into `slots`, from its start.
    pub fn window(slots: &'a mut [Fr]) -> Self {
        Aux(Slots::Window { slots, filled: 0 })
    }

    /// The next aux variable's value (past a window's end, counted only).
    #[inline]
    pub fn push(&mut self, value: Fr) {
        match &mut self.0 {
            Slots::Growing(values) => values.push(value),
            Slots::Window { slots, filled } => {
                if let Some(slot) = slots.get_mut(*filled) {
                    *slot = value;
                }
                *filled += 1;
            }
        }
    }

    /// How many values were pushed.
    pub fn len(&self) -> usize {
        match &self.0 {
            Slots::Growing(values) => values.len(),
            Slots::Window { filled, .. } => *filled,
        }
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values pushed (of a window, those that fit).
    pub fn values(&self) -> &[Fr] {
        match &self.0 {
            Slots::Growing(values) => values,
            Slots::Window { slots, filled } => &slots[..(*filled).min(slots.len())],
        }
    }
}

impl ConstraintSystem<Scalar> for AssignmentCs<'_> {
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

    fn new() -> Self {
        Self::default()
    }

    fn is_extensible() -> bool {
        true
    }

    /// `other`'s values after this system's, less its temporary ONE (the
    /// part's first input, which bellperson's `ProvingAssignment::extend`
    /// skips too).
    fn extend(&mut self, other: &Self) {
        self.inputs.extend(other.inputs.iter().skip(1));
        for &value in other.aux.values() {
            self.aux.push(value);
        }
    }
}
