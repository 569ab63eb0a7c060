//! A bellperson `ConstraintSystem` that records what the daemon's stages need
//! from Filecoin's reference circuits, the way bellperson 0.27's prover sees them.
//!
//! - Witness mode (a proof, direct evaluation): the input and aux assignments,
//!   per constraint the evaluations of A, B and C, and the densities.
//! - Assignment mode (a proof, compiled evaluation; the values-only witness's
//!   `AssignmentCs`): the assignments only; no linear combination is built, and a, b and c come
//!   from the shape's compiled matrices (`cuzk_kernels::r1cs`) on every core.
//! - Shape mode (the setup and the compiled matrices, no witness): the R1CS
//!   and the densities.
//!
//! Conventions copied from bellperson (prover/mod.rs, native.rs): ONE is input 0;
//! a variable is dense in a query when it appears there with a non-zero
//! coefficient; A tracks only aux density (every input is dense in A because of
//! the input constraints), B tracks inputs and aux; after synthesis each input
//! x_i gets one constraint A = x_i, B = 0, C = 0.
//!
//! Assignment, shape and count modes are extensible, as bellperson's prover
//! is: the PoSt circuits then synthesize their sectors in parallel chunks
//! (one per core, filecoin-proofs' `window_post_synthesis_num_cpus`), each
//! into a system of its own with a temporary ONE first, joined in order by
//! `extend`, where one thread walked 2,349 sectors for a 32 GiB WindowPoSt
//! partition (343 s on the H100 machine, for a proof's assignment and for
//! the blank circuit alike). Both paths give the same variables in the same
//! order (bellperson's own parameter generator takes the sequential one, and
//! says so); a join renumbers the part's rows (its input 0 is ONE, its other
//! inputs and its aux variables follow those before it) and ORs its ONE's
//! density into ONE's, as bellperson's density tracker does, so the rows,
//! densities and `.params` files are the same either way (checked below).
//! Witness mode stays sequential (`is_extensible()` false): direct
//! evaluation is the reference the compiled path is checked against, so it
//! keeps bellperson's generator's order of work as well as its result.

use std::marker::PhantomData;

use ark_bls12_381::Fr;
use ark_ff::{One, Zero};
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_kernels::r1cs::{Matrices, MatricesBuilder, Var};
use ff::Field;
use rayon::prelude::*;

use crate::assignment::AssignmentCs;
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

    /// The circuit's constraints, without the appended input constraints.
    pub fn num_constraints(&self) -> usize {
        self.a.len() - self.inputs.len()
    }

    /// How many constraints are not satisfied (a·b ≠ c).
    pub fn unsatisfied(&self) -> usize {
        (self.a.par_iter(), self.b.par_iter(), self.c.par_iter())
            .into_par_iter()
            .filter(|(a, b, c)| **a * **b != **c)
            .count()
    }
}

/// The R1CS of a circuit without a witness, for the setup and the compiled
/// evaluation, or only its counts (`record_counts`, for circuits too large
/// to hold, such as 32 GiB PoRep's).
pub struct Shape {
    /// The synthesized constraints, inputs first then aux (arkworks' layout);
    /// no rows when only counted. The input constraints A = x_i are not rows
    /// here: like arkworks' libsnark reduction, the setup and the prover
    /// append them after the last row.
    pub matrices: Matrices,
    /// The synthesized constraints, without the input constraints.
    pub constraints: usize,
    /// Which variables the A and B queries of the `.params` file hold.
    pub densities: Densities,
}

impl Shape {
    /// Public inputs, the constant one included.
    pub fn num_inputs(&self) -> usize {
        self.matrices.num_inputs()
    }

    /// Private (aux) variables.
    pub fn num_aux(&self) -> usize {
        self.matrices.num_aux()
    }

    /// Constraints including the appended input constraints.
    pub fn num_constraints(&self) -> usize {
        self.constraints + self.num_inputs()
    }

    /// The NTT domain: the next power of two at or above all constraints.
    pub fn domain_size(&self) -> usize {
        self.num_constraints().next_power_of_two()
    }
}

/// How a partition's a, b and c are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evaluation {
    /// As each constraint is enforced, one thread, the way bellperson does.
    Direct,
    /// Synthesis computes the assignment only; a, b and c are the shape's
    /// compiled matrices times it, on every core (the original daemon's
    /// pre-compiled constraint evaluator). Measured faster for PoRep
    /// (docs/benchmarks.md), so the default. PoRep's assignment comes from
    /// the values-only witness (`crate::witness`), the other kinds' from
    /// their reference circuits.
    #[default]
    Compiled,
    /// Compiled evaluation with every kind's assignment recorded from its
    /// reference circuit, PoRep's included: the path `Compiled` is checked
    /// and measured against.
    CompiledReference,
}

/// A partition as its synthesis recorded it.
pub enum Recorded {
    /// Direct evaluation: everything the prover needs.
    Witness(Witness),
    /// Compiled evaluation: the assignment.
    Assignment {
        /// Inputs (ONE first), then aux.
        values: Vec<Fr>,
        /// How many inputs lead `values`.
        num_inputs: usize,
    },
}

/// Synthesizes `circuit` with its witness and records what `evaluation`
/// needs.
pub fn record<C: Circuit<Scalar>>(circuit: C, evaluation: Evaluation) -> Result<Recorded, Error> {
    match evaluation {
        Evaluation::Direct => record_witness(circuit).map(Recorded::Witness),
        Evaluation::Compiled | Evaluation::CompiledReference => {
            let cs = synthesize(circuit, AssignmentCs::default())?;
            let num_inputs = cs.inputs.len();
            let values = [&cs.inputs[..], cs.aux.values()].concat();
            Ok(Recorded::Assignment { values, num_inputs })
        }
    }
}

/// Synthesizes `circuit` with its witness and records it.
pub fn record_witness<C: Circuit<Scalar>>(circuit: C) -> Result<Witness, Error> {
    let cs = synthesize(circuit, RecordingCs::<WitnessMode>::default())?;
    let to_fr = |v: &[Scalar]| -> Vec<Fr> { v.par_iter().map(fr_from_blstrs).collect() };
    let mut a = to_fr(&cs.a);
    let mut b = to_fr(&cs.b);
    let mut c = to_fr(&cs.c);
    let inputs = to_fr(&cs.inputs);
    a.extend_from_slice(&inputs);
    b.resize(a.len(), Fr::zero());
    c.resize(a.len(), Fr::zero());
    Ok(Witness { aux: to_fr(&cs.aux), inputs, a, b, c, densities: cs.densities })
}

/// Synthesizes `circuit` without a witness and records its R1CS.
pub fn record_shape<C: Circuit<Scalar>>(circuit: C) -> Result<Shape, Error> {
    let mut cs = synthesize(circuit, RecordingCs::<ShapeMode>::default())?;
    if let Some(e) = cs.failure.take() {
        return Err(e);
    }
    Ok(Shape {
        matrices: cs.rows.finish(cs.num_inputs, cs.num_aux),
        constraints: cs.num_constraints,
        densities: cs.densities,
    })
}

/// Synthesizes `circuit` without a witness and counts it: constraints,
/// variables and densities, no rows (memory of a few bits per variable).
pub fn record_counts<C: Circuit<Scalar>>(circuit: C) -> Result<Shape, Error> {
    let cs = synthesize(circuit, RecordingCs::<CountMode>::default())?;
    Ok(Shape {
        matrices: Matrices::empty(cs.num_inputs, cs.num_aux),
        constraints: cs.num_constraints,
        densities: cs.densities,
    })
}

/// `circuit` synthesized into `cs`, ONE allocated first as bellperson does.
fn synthesize<C: Circuit<Scalar>, CS: ConstraintSystem<Scalar>>(circuit: C, mut cs: CS) -> Result<CS, Error> {
    let synth = |e: SynthesisError| Error::Synthesis(e.to_string());
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE)).map_err(synth)?;
    circuit.synthesize(&mut cs).map_err(synth)?;
    Ok(cs)
}

/// What the constraint system records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Witness,
    Shape,
    /// Shape mode without the rows.
    Count,
}

impl Mode {
    /// Whether values are asked for (blank circuits have none).
    fn has_values(self) -> bool {
        self == Mode::Witness
    }
}

/// A recording mode as a type: bellperson's `ConstraintSystem::new()`,
/// which makes the systems of an extensible circuit's parts, takes no
/// argument, so the parts learn what to record from their type.
trait Recording {
    const MODE: Mode;
}

#[derive(Default)]
struct WitnessMode;
#[derive(Default)]
struct ShapeMode;
#[derive(Default)]
struct CountMode;

impl Recording for WitnessMode {
    const MODE: Mode = Mode::Witness;
}
impl Recording for ShapeMode {
    const MODE: Mode = Mode::Shape;
}
impl Recording for CountMode {
    const MODE: Mode = Mode::Count;
}

#[derive(Default)]
struct RecordingCs<M> {
    /// What is recorded (`M::MODE`); shape mode never asks for values.
    mode: PhantomData<M>,
    /// Witness mode: input values, ONE first.
    inputs: Vec<Scalar>,
    /// Witness mode: aux values.
    aux: Vec<Scalar>,
    /// Inputs allocated (also in shape mode, where no value exists).
    num_inputs: usize,
    /// Aux variables allocated (also in shape mode).
    num_aux: usize,
    /// Constraints enforced (in every mode).
    num_constraints: usize,
    /// Witness mode: A evaluated per constraint.
    a: Vec<Scalar>,
    /// Witness mode: B evaluated per constraint.
    b: Vec<Scalar>,
    /// Witness mode: C evaluated per constraint.
    c: Vec<Scalar>,
    /// Shape mode: the rows of A, B and C.
    rows: MatricesBuilder,
    /// Shape mode: the first row the matrices could not hold (enforce cannot
    /// return it).
    failure: Option<Error>,
    /// Witness and shape modes: density per variable and query.
    densities: Densities,
}

/// One query's view of a linear combination: where its density goes.
struct Tracking<'a> {
    /// The query's input density, when it tracks one (B only).
    inputs: Option<&'a mut Vec<bool>>,
    /// The query's aux density, when it tracks one (A and B).
    aux: Option<&'a mut Vec<bool>>,
}

impl<M> RecordingCs<M> {
    /// Evaluates `lc` (witness mode) or records it as a row (shape mode), and
    /// marks its variables dense, skipping zero coefficients as bellperson
    /// does.
    fn record(
        mode: Mode,
        lc: &LinearCombination<Scalar>,
        mut tracking: Tracking<'_>,
        values: (&[Scalar], &[Scalar]),
        row: &mut Vec<(Fr, Var)>,
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
            let density = if is_aux { tracking.aux.as_deref_mut() } else { tracking.inputs.as_deref_mut() };
            if let Some(density) = density {
                density[index] = true;
            }
            if mode == Mode::Shape {
                let coeff = if *coeff == Scalar::ONE { Fr::one() } else { fr_from_blstrs(coeff) };
                row.push((coeff, if is_aux { Var::Aux(index) } else { Var::Input(index) }));
            } else if mode == Mode::Witness {
                let value = if is_aux { values.1[index] } else { values.0[index] };
                acc += if *coeff == Scalar::ONE { value } else { value * coeff };
            }
        }
        acc
    }
}

impl<M: Recording + Default + Send> ConstraintSystem<Scalar> for RecordingCs<M> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if M::MODE.has_values() {
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
        if M::MODE.has_values() {
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
        self.num_constraints += 1;
        let lcs = [a(LinearCombination::zero()), b(LinearCombination::zero()), c(LinearCombination::zero())];
        let values = (&self.inputs[..], &self.aux[..]);
        let d = &mut self.densities;
        let trackers = [
            Tracking { inputs: None, aux: Some(&mut d.a_aux) },
            Tracking { inputs: Some(&mut d.b_input), aux: Some(&mut d.b_aux) },
            Tracking { inputs: None, aux: None },
        ];
        let mut evaluated = [Scalar::ZERO; 3];
        for (k, (lc, tracking)) in lcs.iter().zip(trackers).enumerate() {
            let mut row = Vec::new();
            evaluated[k] = Self::record(M::MODE, lc, tracking, values, &mut row);
            if M::MODE == Mode::Shape {
                if let Err(e) = self.rows.push_row(k, row) {
                    self.failure.get_or_insert(Error::Synthesis(e.to_string()));
                }
            }
        }
        if M::MODE == Mode::Witness {
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

    fn new() -> Self {
        Self::default()
    }

    fn is_extensible() -> bool {
        M::MODE != Mode::Witness
    }

    /// `other`, a part synthesized on its own after a temporary ONE, as if
    /// this system had synthesized it: its ONE is this system's, its other
    /// inputs and its aux variables come after this system's. Shape and
    /// count modes only (witness mode is not extensible).
    fn extend(&mut self, other: &Self) {
        if M::MODE == Mode::Shape {
            if let Some(e) = &other.failure {
                self.failure.get_or_insert_with(|| Error::Synthesis(e.to_string()));
            } else if let Err(e) = self.rows.append(
                &other.rows,
                (self.num_inputs, self.num_aux),
                (other.num_inputs, other.num_aux),
            ) {
                self.failure.get_or_insert(Error::Synthesis(e.to_string()));
            }
        }
        let (d, o) = (&mut self.densities, &other.densities);
        d.a_aux.extend_from_slice(&o.a_aux);
        d.b_aux.extend_from_slice(&o.b_aux);
        if let (Some(one), Some(&part_one)) = (d.b_input.first_mut(), o.b_input.first()) {
            *one |= part_one;
        }
        d.b_input.extend(o.b_input.iter().skip(1));
        self.num_inputs += other.num_inputs.saturating_sub(1);
        self.num_aux += other.num_aux;
        self.num_constraints += other.num_constraints;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One part: an input x, aux y and z with x·y = z - 3, a B row on ONE
    /// (ONE's B density) and a coefficient of its own (the table's order).
    fn part<CS: ConstraintSystem<Scalar>>(cs: &mut CS, v: u64) -> Result<(), SynthesisError> {
        let s = Scalar::from;
        let x = cs.alloc_input(|| "x", || Ok(s(v)))?;
        let y = cs.alloc(|| "y", || Ok(s(v + 1)))?;
        let z = cs.alloc(|| "z", || Ok(s(v * (v + 1) + 3)))?;
        cs.enforce(|| "xy", |lc| lc + x, |lc| lc + y, |lc| lc + z - (s(3), CS::one()));
        cs.enforce(|| "one", |lc| lc + y + CS::one(), |lc| lc + CS::one(), |lc| lc + y + CS::one());
        let k = s(v + 5);
        cs.enforce(|| "own", |lc| lc + (k, y), |lc| lc + CS::one(), |lc| lc + (k, y));
        Ok(())
    }

    /// Its first value synthesized in place, the others in parts of two
    /// joined by `extend` when `split` and the system is extensible (as the
    /// PoSt circuits do), else in place too.
    struct Parts {
        values: Vec<u64>,
        split: bool,
    }

    impl Circuit<Scalar> for Parts {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            part(cs, self.values[0])?;
            if !(self.split && CS::is_extensible()) {
                return self.values[1..].iter().try_for_each(|&v| part(cs, v));
            }
            let mut parts = Vec::new();
            for chunk in self.values[1..].chunks(2) {
                let mut part_cs = CS::new();
                part_cs.alloc_input(|| "temp ONE", || Ok(Scalar::ONE))?;
                chunk.iter().try_for_each(|&v| part(&mut part_cs, v))?;
                parts.push(part_cs);
            }
            parts.iter().for_each(|p| cs.extend(p));
            Ok(())
        }
    }

    fn circuit(split: bool) -> Parts {
        Parts { values: vec![2, 7, 11, 13, 17], split }
    }

    /// Shape and count modes record the same from a circuit joined from
    /// parts as from the same circuit synthesized in one system; the joined
    /// rows hold for the joined assignment, and give what the sequential
    /// witness evaluates.
    #[test]
    fn a_joined_circuit_records_what_one_system_records() {
        let (whole, joined) = (record_shape(circuit(false)).unwrap(), record_shape(circuit(true)).unwrap());
        assert_eq!((joined.num_inputs(), joined.num_aux(), joined.constraints), (6, 10, 15));
        assert_eq!((whole.num_inputs(), whole.num_aux(), whole.constraints), (6, 10, 15));
        assert_eq!(joined.matrices.coeffs(), whole.matrices.coeffs());
        for k in 0..3 {
            assert_eq!(joined.matrices.parts(k), whole.matrices.parts(k), "matrix {k}");
        }
        assert_eq!(joined.densities, whole.densities);
        assert!(joined.densities.b_input[0], "ONE is B-dense through the parts' rows");

        let counted = record_counts(circuit(true)).unwrap();
        assert_eq!((counted.num_inputs(), counted.num_aux(), counted.constraints), (6, 10, 15));
        assert_eq!(counted.densities, whole.densities);

        let w = record_witness(circuit(true)).unwrap();
        assert_eq!(w.densities, whole.densities);
        assert_eq!(w.unsatisfied(), 0);

        let Recorded::Assignment { values, num_inputs } =
            record(circuit(true), Evaluation::Compiled).unwrap()
        else {
            panic!("compiled evaluation records the assignment");
        };
        assert_eq!((num_inputs, &values[..6], &values[6..]), (6, &w.inputs[..], &w.aux[..]));
        let [a, b, c] = joined.matrices.evaluate(&values, joined.domain_size()).unwrap();
        assert_eq!((&a[..21], &b[..21], &c[..21]), (&w.a[..], &w.b[..], &w.c[..]));
    }
}
