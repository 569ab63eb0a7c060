//! The compiled R1CS: a shape's A, B and C matrices recorded once and
//! evaluated against each partition's assignment (matrix × witness), so a
//! proof's synthesis only computes the assignment and the evaluation runs on
//! every core.
//!
//! Rows are compressed: a term is a `u32` variable index and a `u32` index
//! into one table of the distinct coefficients (Filecoin's circuits use few:
//! one, minus one, powers of two), 8 bytes against the 40 of arkworks'
//! `(Fr, usize)`. At 32 GiB PoRep's 130 million constraints that difference
//! is the one between a key-sized and a several-times-key-sized cache.

use std::collections::HashMap;

use ark_ff::{One, Zero};
use ark_relations::r1cs::ConstraintMatrices;
use rayon::prelude::*;

use crate::{Fr, KernelError};

/// A variable as the circuit allocated it; aux indices become
/// `num_inputs + j` once the number of inputs is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Var {
    Input(usize),
    Aux(usize),
}

/// One term of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Term {
    /// Index into the assignment (inputs, then aux); tagged with [`AUX`] while
    /// the matrices are being built.
    var: u32,
    /// Index into [`Matrices::coeffs`].
    coeff: u32,
}

/// Marks an aux variable in a row under construction (inputs may be
/// allocated after aux variables, so their count is known only at the end).
const AUX: u32 = 1 << 31;

/// One matrix in compressed sparse rows.
#[derive(Clone, Debug, Default)]
struct Rows {
    /// Row i is `terms[ends[i - 1]..ends[i]]`.
    ends: Vec<u64>,
    terms: Vec<Term>,
}

impl Rows {
    fn row(&self, i: usize) -> &[Term] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.terms[start..self.ends[i] as usize]
    }
}

/// A shape's R1CS, without the input constraints A = x_i (appended when a, b
/// and c are evaluated, as the libsnark reduction does).
#[derive(Clone, Debug)]
pub struct Matrices {
    /// Instance variables, the constant one included.
    num_inputs: usize,
    num_aux: usize,
    /// The distinct coefficients; index 0 is one, added without a
    /// multiplication.
    coeffs: Vec<Fr>,
    /// A, B and C.
    rows: [Rows; 3],
}

impl Matrices {
    /// No rows: for circuits whose a, b and c are computed elsewhere.
    pub fn empty(num_inputs: usize, num_aux: usize) -> Self {
        Self {
            num_inputs,
            num_aux,
            coeffs: vec![Fr::one()],
            rows: Default::default(),
        }
    }

    /// arkworks' matrices (variable i < num_instance_variables is input i).
    pub fn from_arkworks(m: &ConstraintMatrices<Fr>) -> Result<Self, KernelError> {
        let inputs = m.num_instance_variables;
        let mut builder = MatricesBuilder::default();
        for (k, matrix) in [&m.a, &m.b, &m.c].into_iter().enumerate() {
            for row in matrix {
                let var = |v: usize| if v < inputs { Var::Input(v) } else { Var::Aux(v - inputs) };
                builder.push_row(k, row.iter().map(|(coeff, v)| (*coeff, var(*v))))?;
            }
        }
        Ok(builder.finish(inputs, m.num_witness_variables))
    }

    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    pub fn num_aux(&self) -> usize {
        self.num_aux
    }

    /// Rows recorded (0 for [`Matrices::empty`]).
    pub fn num_constraints(&self) -> usize {
        self.rows[0].ends.len()
    }

    /// Row `i` of matrix `k` (0 = A, 1 = B, 2 = C) as (coefficient,
    /// assignment index) pairs.
    pub fn row(&self, k: usize, i: usize) -> impl Iterator<Item = (&Fr, usize)> + '_ {
        self.rows[k]
            .row(i)
            .iter()
            .map(|t| (&self.coeffs[t.coeff as usize], t.var as usize))
    }

    /// Host bytes held.
    pub fn resident_bytes(&self) -> u64 {
        let rows: usize = self
            .rows
            .iter()
            .map(|r| r.ends.len() * 8 + r.terms.len() * std::mem::size_of::<Term>())
            .sum();
        (rows + self.coeffs.len() * std::mem::size_of::<Fr>()) as u64
    }

    /// a, b and c for `assignment` (inputs, then aux): every row, then the
    /// input constraints (A = x_i, B = C = 0), zero-padded to `domain_size`.
    /// Fails at the first row the assignment does not satisfy.
    pub fn evaluate(
        &self,
        assignment: &[Fr],
        domain_size: usize,
    ) -> Result<[Vec<Fr>; 3], KernelError> {
        let m = self.num_constraints();
        if assignment.len() != self.num_inputs + self.num_aux || m + self.num_inputs > domain_size {
            return Err(KernelError::Synthesis(format!(
                "an assignment of {} variables for matrices of {} inputs and {} aux, {m} rows in a domain of {domain_size}",
                assignment.len(),
                self.num_inputs,
                self.num_aux
            )));
        }
        let mut abc: [Vec<Fr>; 3] = std::array::from_fn(|_| vec![Fr::zero(); domain_size]);
        let [a, b, c] = &mut abc;
        a[..m]
            .par_iter_mut()
            .zip(b[..m].par_iter_mut())
            .zip(c[..m].par_iter_mut())
            .enumerate()
            .for_each(|(i, ((a, b), c))| {
                *a = self.evaluate_row(0, i, assignment);
                *b = self.evaluate_row(1, i, assignment);
                *c = self.evaluate_row(2, i, assignment);
            });
        if let Some(row) = (0..m).into_par_iter().find_first(|&i| a[i] * b[i] != c[i]) {
            return Err(KernelError::Unsatisfied(row));
        }
        a[m..m + self.num_inputs].copy_from_slice(&assignment[..self.num_inputs]);
        Ok(abc)
    }

    fn evaluate_row(&self, k: usize, i: usize, assignment: &[Fr]) -> Fr {
        self.rows[k].row(i).iter().fold(Fr::zero(), |acc, t| {
            let value = assignment[t.var as usize];
            if t.coeff == 0 {
                acc + value
            } else {
                acc + value * self.coeffs[t.coeff as usize]
            }
        })
    }
}

/// Builds [`Matrices`] a row at a time, as a constraint system records them.
pub struct MatricesBuilder {
    coeffs: Vec<Fr>,
    /// Where each distinct coefficient is in `coeffs`.
    index: HashMap<Fr, u32>,
    rows: [Rows; 3],
}

impl Default for MatricesBuilder {
    fn default() -> Self {
        Self {
            coeffs: vec![Fr::one()],
            index: HashMap::from([(Fr::one(), 0)]),
            rows: Default::default(),
        }
    }
}

impl MatricesBuilder {
    /// Appends a row to matrix `k` (0 = A, 1 = B, 2 = C). Zero coefficients
    /// are dropped.
    pub fn push_row(
        &mut self,
        k: usize,
        terms: impl IntoIterator<Item = (Fr, Var)>,
    ) -> Result<(), KernelError> {
        for (coeff, var) in terms {
            if coeff.is_zero() {
                continue;
            }
            let var = match var {
                Var::Input(i) if i < AUX as usize => i as u32,
                Var::Aux(j) if j < AUX as usize => j as u32 | AUX,
                _ => {
                    return Err(KernelError::Synthesis(format!(
                        "variable {var:?} beyond the 2^31 the compiled matrices index"
                    )))
                }
            };
            let next = self.coeffs.len() as u32;
            let coeff = *self.index.entry(coeff).or_insert_with(|| {
                self.coeffs.push(coeff);
                next
            });
            self.rows[k].terms.push(Term { var, coeff });
        }
        let end = self.rows[k].terms.len() as u64;
        self.rows[k].ends.push(end);
        Ok(())
    }

    /// The matrices, with aux variables placed after the `num_inputs` inputs.
    pub fn finish(mut self, num_inputs: usize, num_aux: usize) -> Matrices {
        for rows in &mut self.rows {
            rows.terms.par_iter_mut().for_each(|t| {
                if t.var & AUX != 0 {
                    t.var = (num_inputs as u32) + (t.var & !AUX);
                }
            });
        }
        Matrices {
            num_inputs,
            num_aux,
            coeffs: self.coeffs,
            rows: self.rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x · y = z with x an input allocated after the aux y, z; the matrices
    /// place aux after inputs and evaluate like the arkworks rows they mirror.
    #[test]
    fn rows_evaluate_and_satisfy() {
        let mut b = MatricesBuilder::default();
        let two = Fr::from(2u64);
        // (2·x + 0·y) · (y) = (z)
        b.push_row(0, [(two, Var::Input(1)), (Fr::zero(), Var::Aux(0))]).unwrap();
        b.push_row(1, [(Fr::one(), Var::Aux(0))]).unwrap();
        b.push_row(2, [(Fr::one(), Var::Aux(1))]).unwrap();
        let m = b.finish(2, 2);
        assert_eq!(m.num_constraints(), 1);
        assert_eq!(m.row(0, 0).count(), 1, "zero coefficients are dropped");
        let [x, y] = [Fr::from(3u64), Fr::from(5u64)];
        let assignment = [Fr::one(), x, y, two * x * y];
        let [a, bv, c] = m.evaluate(&assignment, 4).unwrap();
        assert_eq!(a, vec![two * x, Fr::one(), x, Fr::zero()]);
        assert_eq!(bv, vec![y, Fr::zero(), Fr::zero(), Fr::zero()]);
        assert_eq!(c[0], two * x * y);
        let wrong = [Fr::one(), x, y, x * y];
        assert!(matches!(m.evaluate(&wrong, 4), Err(KernelError::Unsatisfied(0))));
        assert!(m.evaluate(&assignment, 2).is_err(), "rows and inputs exceed the domain");
    }

    #[test]
    fn arkworks_matrices_convert_term_for_term() {
        let three = Fr::from(3u64);
        let ark = ConstraintMatrices {
            num_instance_variables: 2,
            num_witness_variables: 1,
            num_constraints: 2,
            a_num_non_zero: 2,
            b_num_non_zero: 1,
            c_num_non_zero: 2,
            a: vec![vec![(Fr::one(), 1)], vec![(three, 2)]],
            b: vec![vec![(Fr::one(), 0)], vec![]],
            c: vec![vec![(Fr::one(), 2)], vec![(three, 0)]],
        };
        let m = Matrices::from_arkworks(&ark).unwrap();
        for (k, matrix) in [&ark.a, &ark.b, &ark.c].into_iter().enumerate() {
            for (i, row) in matrix.iter().enumerate() {
                let ours: Vec<(Fr, usize)> = m.row(k, i).map(|(c, v)| (*c, v)).collect();
                assert_eq!(&ours, row);
            }
        }
        assert_eq!(m.coeffs.len(), 2, "one and three, each stored once");
    }
}
