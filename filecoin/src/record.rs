//! A bellperson `ConstraintSystem` that records what the daemon's stages need
//! from Filecoin's reference circuits, the way bellperson 0.27's prover sees them.
//!
//! - Witness mode (a proof): the input and aux assignments, per constraint the
//!   evaluations of A, B and C, and the densities.
//! - Shape mode (the setup, no witness): the R1CS matrices and the densities.
//!
//! Conventions copied from bellperson (prover/mod.rs, native.rs): ONE is input 0;
//! a variable is dense in a query when it appears there with a non-zero
//! coefficient; A tracks only aux density (every input is dense in A because of
//! the input constraints), B tracks inputs and aux; after synthesis each input
//! x_i gets one constraint A = x_i, B = 0, C = 0.
//!
//! The system is not extensible (`is_extensible()` keeps bellperson's default
//! `false`): the PoSt circuits then synthesize their sectors in sequence instead
//! of in parallel chunks joined by `extend`. Both paths give the same
//! constraints and variables in the same order (bellperson's own parameter
//! generator takes the sequential one), so what is recorded matches the `.params`
//! files either way.

use ark_bls12_381::Fr;
use ark_ff::{One, Zero};
use ark_relations::r1cs::ConstraintMatrices;
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::convert::fr_from_blstrs;
use crate::Error;

/// Which variables appear in the A and B queries (bellperson's density trackers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Densities {
    /// Per aux variable: appears in some A.
    pub a_aux: Vec<bool>,
    /// Per input (ONE first): appears in some B.
    pub b_input: Vec<bool>,
    /// Per aux variable: appears in some B.
    pub b_aux: Vec<bool>,
}

impl Densities {
    /// Points in the A query: every input, then the A-dense aux variables.
    pub fn a_query_len(&self) -> usize {
        self.b_input.len() + count(&self.a_aux)
    }

    /// B-dense inputs: where bellperson splits b_g1 and b_g2 into input and aux parts.
    pub fn b_input_count(&self) -> usize {
        count(&self.b_input)
    }

    /// Points in the B queries: the B-dense inputs, then the B-dense aux variables.
    pub fn b_query_len(&self) -> usize {
        count(&self.b_input) + count(&self.b_aux)
    }
}

fn count(bits: &[bool]) -> usize {
    bits.iter().filter(|&&b| b).count()
}

/// The recorded proof of one partition, in arkworks' field.
pub struct Witness {
    /// ONE, then the public inputs.
    pub inputs: Vec<Fr>,
    /// The private assignment, in allocation order.
    pub aux: Vec<Fr>,
    /// A, B and C evaluated per constraint: the synthesized constraints, then one
    /// per input (A = x_i, B = C = 0).
    pub a: Vec<Fr>,
    /// B per constraint, as A.
    pub b: Vec<Fr>,
    /// C per constraint, as A.
    pub c: Vec<Fr>,
    /// Which assignment entries the A and B MSMs take.
    pub densities: Densities,
}

impl Witness {
    /// The public inputs as filecoin-proofs' `generate_public_inputs` lists them
    /// (without ONE).
    pub fn public_inputs(&self) -> &[Fr] {
        &self.inputs[1..]
    }

    /// How many constraints are not satisfied (a·b ≠ c).
    pub fn unsatisfied(&self) -> usize {
        (self.a.par_iter(), self.b.par_iter(), self.c.par_iter())
            .into_par_iter()
            .filter(|(a, b, c)| **a * **b != **c)
            .count()
    }
}

/// The R1CS of a circuit without a witness, for the setup.
pub struct Shape {
    /// The synthesized constraints; variable index i < num_instance_variables is
    /// input i, then aux j is num_instance_variables + j (arkworks' layout). The
    /// input constraints A = x_i are not rows here: like arkworks' libsnark
    /// reduction, the setup and the prover append them after the last row.
    pub matrices: ConstraintMatrices<Fr>,
    /// Which variables the A and B queries of the `.params` file hold.
    pub densities: Densities,
}

impl Shape {
    pub fn num_inputs(&self) -> usize {
        self.matrices.num_instance_variables
    }

    pub fn num_aux(&self) -> usize {
        self.matrices.num_witness_variables
    }

    /// Constraints including the appended input constraints.
    pub fn num_constraints(&self) -> usize {
        self.matrices.num_constraints + self.num_inputs()
    }

    /// The NTT domain: the next power of two at or above all constraints.
    pub fn domain_size(&self) -> usize {
        self.num_constraints().next_power_of_two()
    }
}

/// Synthesizes `circuit` with its witness and records it.
pub fn record_witness<C: Circuit<Scalar>>(circuit: C) -> Result<Witness, Error> {
    let cs = synthesize(circuit, false)?;
    let to_fr = |v: &[Scalar]| -> Vec<Fr> { v.par_iter().map(fr_from_blstrs).collect() };
    let mut a = to_fr(&cs.a);
    let mut b = to_fr(&cs.b);
    let mut c = to_fr(&cs.c);
    let inputs = to_fr(&cs.inputs);
    a.extend_from_slice(&inputs);
    b.resize(a.len(), Fr::zero());
    c.resize(a.len(), Fr::zero());
    Ok(Witness {
        aux: to_fr(&cs.aux),
        inputs,
        a,
        b,
        c,
        densities: cs.densities,
    })
}

/// Synthesizes `circuit` without a witness and records its R1CS.
pub fn record_shape<C: Circuit<Scalar>>(circuit: C) -> Result<Shape, Error> {
    let cs = synthesize(circuit, true)?;
    let num_inputs = cs.num_inputs;
    let [a, b, c] = cs.rows.map(|mut rows| {
        rows.par_iter_mut().for_each(|row| {
            for (_, index) in row.iter_mut() {
                if *index & AUX_TAG != 0 {
                    *index = num_inputs + (*index & !AUX_TAG);
                }
            }
        });
        rows
    });
    let non_zero = |m: &Vec<Vec<(Fr, usize)>>| -> usize { m.iter().map(Vec::len).sum() };
    Ok(Shape {
        matrices: ConstraintMatrices {
            num_instance_variables: num_inputs,
            num_witness_variables: cs.num_aux,
            num_constraints: a.len(),
            a_num_non_zero: non_zero(&a),
            b_num_non_zero: non_zero(&b),
            c_num_non_zero: non_zero(&c),
            a,
            b,
            c,
        },
        densities: cs.densities,
    })
}

fn synthesize<C: Circuit<Scalar>>(circuit: C, shape: bool) -> Result<RecordingCs, Error> {
    let mut cs = RecordingCs {
        shape,
        ..RecordingCs::default()
    };
    let synth = |e: SynthesisError| Error::Synthesis(e.to_string());
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))
        .map_err(synth)?;
    circuit.synthesize(&mut cs).map_err(synth)?;
    Ok(cs)
}

/// Marks an aux index in a shape row until the number of inputs is known (inputs
/// may be allocated after aux variables).
const AUX_TAG: usize = 1 << (usize::BITS - 1);

#[derive(Default)]
struct RecordingCs {
    /// Shape mode: record rows, never ask for values.
    shape: bool,
    /// Witness mode: input values, ONE first.
    inputs: Vec<Scalar>,
    /// Witness mode: aux values.
    aux: Vec<Scalar>,
    /// Inputs allocated (also in shape mode, where no value exists).
    num_inputs: usize,
    /// Aux variables allocated (also in shape mode).
    num_aux: usize,
    /// Witness mode: A evaluated per constraint.
    a: Vec<Scalar>,
    /// Witness mode: B evaluated per constraint.
    b: Vec<Scalar>,
    /// Witness mode: C evaluated per constraint.
    c: Vec<Scalar>,
    /// Shape mode: the rows of A, B and C with aux indices tagged.
    rows: [Vec<Vec<(Fr, usize)>>; 3],
    /// Both modes: density per variable and query.
    densities: Densities,
}

/// One query's view of a linear combination: where its density goes.
struct Tracking<'a> {
    /// The query's input density, when it tracks one (B only).
    inputs: Option<&'a mut Vec<bool>>,
    /// The query's aux density, when it tracks one (A and B).
    aux: Option<&'a mut Vec<bool>>,
}

impl RecordingCs {
    /// Evaluates `lc` (witness mode) or records it as a row (shape mode), and
    /// marks its variables dense, skipping zero coefficients as bellperson does.
    fn record(
        shape: bool,
        lc: &LinearCombination<Scalar>,
        mut tracking: Tracking<'_>,
        values: (&[Scalar], &[Scalar]),
        row: &mut Vec<(Fr, usize)>,
    ) -> Scalar {
        let mut acc = Scalar::ZERO;
        let terms = lc
            .iter_inputs()
            .map(|(i, coeff)| (*i, coeff, false))
            .chain(lc.iter_aux().map(|(i, coeff)| (*i, coeff, true)));
        for (index, coeff, is_aux) in terms {
            if bool::from(coeff.is_zero()) {
                continue;
            }
            let density = if is_aux {
                tracking.aux.as_deref_mut()
            } else {
                tracking.inputs.as_deref_mut()
            };
            if let Some(density) = density {
                density[index] = true;
            }
            if shape {
                let coeff = if *coeff == Scalar::ONE {
                    Fr::one()
                } else {
                    fr_from_blstrs(coeff)
                };
                row.push((coeff, if is_aux { index | AUX_TAG } else { index }));
            } else {
                let value = if is_aux {
                    values.1[index]
                } else {
                    values.0[index]
                };
                acc += if *coeff == Scalar::ONE {
                    value
                } else {
                    value * coeff
                };
            }
        }
        acc
    }
}

impl ConstraintSystem<Scalar> for RecordingCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if !self.shape {
            self.aux.push(f()?);
        }
        self.densities.a_aux.push(false);
        self.densities.b_aux.push(false);
        self.num_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.num_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if !self.shape {
            self.inputs.push(f()?);
        }
        self.densities.b_input.push(false);
        self.num_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.num_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        let values = (&self.inputs[..], &self.aux[..]);
        let d = &mut self.densities;
        let trackers = [
            Tracking {
                inputs: None,
                aux: Some(&mut d.a_aux),
            },
            Tracking {
                inputs: Some(&mut d.b_input),
                aux: Some(&mut d.b_aux),
            },
            Tracking {
                inputs: None,
                aux: None,
            },
        ];
        let mut evaluated = [Scalar::ZERO; 3];
        for (k, (lc, tracking)) in lcs.iter().zip(trackers).enumerate() {
            let mut row = Vec::new();
            evaluated[k] = Self::record(self.shape, lc, tracking, values, &mut row);
            if self.shape {
                self.rows[k].push(row);
            }
        }
        if !self.shape {
            self.a.push(evaluated[0]);
            self.b.push(evaluated[1]);
            self.c.push(evaluated[2]);
        }
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        // Names cost time and the records do not need them.
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
