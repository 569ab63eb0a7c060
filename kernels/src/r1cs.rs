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
//!
//! [`Flattened`] lays the three matrices out for the CUDA engine, which
//! evaluates them on its device (kernels/cuda/r1cs.cuh) instead of the host.

use std::collections::HashMap;

use ark_ff::{One, Zero};
use ark_relations::r1cs::ConstraintMatrices;
use rayon::prelude::*;

use crate::{Fr, KernelError};

/// A variable as the circuit allocated it; aux indices become
/// `num_inputs + j` once the number of inputs is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Var {
    /// Public input `i` (0 is the constant one).
    Input(usize),
    /// Witness variable `j`.
    Aux(usize),
}

/// One term of a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Term {
    /// Index into the assignment (inputs, then aux); tagged with [`AUX`] while
    /// the matrices are being built.
    pub var: u32,
    /// Index into the matrices' coefficient table.
    pub coeff: u32,
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
        Self { num_inputs, num_aux, coeffs: vec![Fr::one()], rows: Default::default() }
    }

    /// Matrices from rows compressed elsewhere than in a constraint system
    /// (the benchmark's synthetic circuits): per matrix (A, B, C) the row
    /// ends (row i is `terms[ends[i - 1]..ends[i]]`) and the terms, over the
    /// coefficient table `coeffs`, whose index 0 must be one (the evaluators
    /// add it without a product). Every index and end is checked.
    pub fn from_parts(
        num_inputs: usize,
        num_aux: usize,
        coeffs: Vec<Fr>,
        parts: [(Vec<u64>, Vec<Term>); 3],
    ) -> Result<Self, KernelError> {
        let bad = |what: String| Err(KernelError::Synthesis(format!("compiled matrices: {what}")));
        if coeffs.first() != Some(&Fr::one()) {
            return bad("the coefficient table does not start with one".into());
        }
        let rows = parts[0].0.len();
        let vars = num_inputs + num_aux;
        for (k, (ends, terms)) in parts.iter().enumerate() {
            let unordered = ends.par_windows(2).any(|w| w[0] > w[1]);
            let covered = ends.last().map_or(0, |&e| e as usize) == terms.len();
            if ends.len() != rows || unordered || !covered {
                return bad(format!(
                    "matrix {k}'s {} row ends do not cover its {} terms in order",
                    ends.len(),
                    terms.len()
                ));
            }
            let outside = |t: &Term| t.var as usize >= vars || t.coeff as usize >= coeffs.len();
            if let Some(t) = terms.par_iter().find_any(|t| outside(t)) {
                return bad(format!(
                    "matrix {k} has a term {t:?} outside {vars} variables and {} coefficients",
                    coeffs.len()
                ));
            }
        }
        let rows = parts.map(|(ends, terms)| Rows { ends, terms });
        Ok(Self { num_inputs, num_aux, coeffs, rows })
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

    /// Instance variables, the constant one included.
    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    /// Witness variables.
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
        self.rows[k].row(i).iter().map(|t| (&self.coeffs[t.coeff as usize], t.var as usize))
    }

    /// The coefficient table (index 0 is one).
    pub fn coeffs(&self) -> &[Fr] {
        &self.coeffs
    }

    /// Matrix `k`'s (0 = A, 1 = B, 2 = C) row ends and terms, as
    /// [`Matrices::from_parts`] takes them: what a copy on disk holds.
    pub fn parts(&self, k: usize) -> (&[u64], &[Term]) {
        (&self.rows[k].ends, &self.rows[k].terms)
    }

    /// Terms of matrix `k` (0 = A, 1 = B, 2 = C).
    pub fn num_terms(&self, k: usize) -> usize {
        self.rows[k].terms.len()
    }

    /// A hash of the counts, the coefficients and up to 4097 evenly spaced
    /// row ends and terms of each matrix: what tells this circuit's matrices
    /// from another's kept under the same circuit id (a new setup) without
    /// reading 722 million terms (32 GiB PoRep) per proof. Matrices of the
    /// same counts and coefficients that agree at every sampled place would
    /// be taken for the same.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.num_inputs, self.num_aux).hash(&mut h);
        self.coeffs.hash(&mut h);
        for rows in &self.rows {
            (rows.ends.len(), rows.terms.len()).hash(&mut h);
            let step = (rows.terms.len() / 4096).max(1);
            for t in rows.terms.iter().step_by(step).chain(rows.terms.last()) {
                (t.var, t.coeff).hash(&mut h);
            }
            let step = (rows.ends.len() / 4096).max(1);
            rows.ends.iter().step_by(step).for_each(|e| e.hash(&mut h));
        }
        h.finish()
    }

    /// Whether an assignment of `variables` values fits these matrices and
    /// their rows and the input constraints fit a domain of `domain_size`:
    /// what every evaluation of them, on the host or a device, needs.
    pub fn check_assignment(&self, variables: usize, domain_size: usize) -> Result<(), KernelError> {
        let m = self.num_constraints();
        if variables != self.num_inputs + self.num_aux || m + self.num_inputs > domain_size {
            return Err(KernelError::Synthesis(format!(
                "an assignment of {variables} variables for matrices of {} inputs and {} aux, {m} rows in a domain of {domain_size}",
                self.num_inputs, self.num_aux
            )));
        }
        Ok(())
    }

    /// Host bytes held.
    pub fn resident_bytes(&self) -> u64 {
        let rows: usize =
            self.rows.iter().map(|r| r.ends.len() * 8 + r.terms.len() * std::mem::size_of::<Term>()).sum();
        (rows + self.coeffs.len() * std::mem::size_of::<Fr>()) as u64
    }

    /// a, b and c for `assignment` (inputs, then aux): every row, then the
    /// input constraints (A = x_i, B = C = 0), zero-padded to `domain_size`.
    /// Fails at the first row the assignment does not satisfy.
    pub fn evaluate(&self, assignment: &[Fr], domain_size: usize) -> Result<[Vec<Fr>; 3], KernelError> {
        let m = self.num_constraints();
        self.check_assignment(assignment.len(), domain_size)?;
        let mut abc: [Vec<Fr>; 3] = std::array::from_fn(|_| vec![Fr::zero(); domain_size]);
        let [a, b, c] = &mut abc;
        a[..m].par_iter_mut().zip(b[..m].par_iter_mut()).zip(c[..m].par_iter_mut()).enumerate().for_each(
            |(i, ((a, b), c))| {
                *a = self.evaluate_row(0, i, assignment);
                *b = self.evaluate_row(1, i, assignment);
                *c = self.evaluate_row(2, i, assignment);
            },
        );
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

/// Bits of a long row's entry that hold its row (the two above, its matrix).
const LONG_ROW_BITS: u32 = 30;

/// The three matrices laid out for the device's evaluation
/// (kernels/cuda/r1cs.cuh): one array of 3m rows, A's m, then B's, then C's,
/// each row's end a u32 offset into one array of all their terms (two ends
/// to a 64-bit word, the earlier in the low half); a term as one word, its
/// variable in the low half and its coefficient index in the high half; the
/// coefficient table as it is, with the index of minus one (which the device
/// subtracts, as it adds one, without a product); and the rows longer than
/// `long_len` terms, each summed by a warp instead of a thread, listed as
/// `k << 30 | i` for row i of matrix k. The words are produced range by
/// range (`end_pair`, `term`), so an upload never holds a second copy of
/// the 5.8 GB of terms of 32 GiB PoRep.
pub struct Flattened<'m> {
    /// The matrices laid out.
    matrices: &'m Matrices,
    /// Where A's, B's and C's terms start in the flat array, then its length.
    starts: [u64; 4],
    /// The coefficient table's index of minus one; `u32::MAX` when it has
    /// none (then no term is subtracted).
    minus_one: u32,
    /// Rows of more than `long_len` terms, `k << 30 | i`, matrix by matrix
    /// and row by row.
    long_rows: Vec<u32>,
    /// The length above which a row is summed by a warp.
    long_len: u32,
}

impl<'m> Flattened<'m> {
    /// The layout of `matrices`, rows of more than `long_len` terms listed
    /// apart. Fails when the rows or the terms exceed what the device's u32
    /// offsets address (2^30 rows per matrix, 2^32 - 1 terms in all).
    pub fn new(matrices: &'m Matrices, long_len: u32) -> Result<Self, KernelError> {
        let m = matrices.num_constraints();
        let mut starts = [0u64; 4];
        for k in 0..3 {
            starts[k + 1] = starts[k] + matrices.rows[k].terms.len() as u64;
        }
        if m >= 1 << LONG_ROW_BITS || starts[3] > u64::from(u32::MAX) {
            return Err(KernelError::Synthesis(format!(
                "{m} rows and {} terms exceed the device layout's 2^{LONG_ROW_BITS} rows and 2^32 - 1 terms",
                starts[3]
            )));
        }
        let minus_one =
            (matrices.coeffs.iter()).position(|c| *c == -Fr::one()).map_or(u32::MAX, |i| i as u32);
        let mut long_rows = Vec::new();
        for (k, rows) in matrices.rows.iter().enumerate() {
            let long = |&i: &usize| rows.row(i).len() > long_len as usize;
            let tag = (k as u32) << LONG_ROW_BITS;
            long_rows.par_extend((0..m).into_par_iter().filter(long).map(|i| tag | i as u32));
        }
        Ok(Self { matrices, starts, minus_one, long_rows, long_len })
    }

    /// Rows per matrix (m; the flat array has 3m).
    pub fn rows(&self) -> usize {
        self.matrices.num_constraints()
    }

    /// Inputs, the constant one included: the input constraints after the
    /// last row.
    pub fn inputs(&self) -> usize {
        self.matrices.num_inputs()
    }

    /// Terms of the three matrices.
    pub fn terms(&self) -> usize {
        self.starts[3] as usize
    }

    /// 64-bit words of row ends: two per word, 3m ends.
    pub fn end_words(&self) -> usize {
        (3 * self.rows()).div_ceil(2)
    }

    /// The end of flat row r (< 3m): an offset into the flat terms.
    pub fn end(&self, r: usize) -> u32 {
        let m = self.rows();
        let (k, i) = (r / m, r % m);
        (self.starts[k] + self.matrices.rows[k].ends[i]) as u32
    }

    /// Word `w` of the row ends: ends 2w (low half) and 2w + 1 (high half;
    /// zero past the last row).
    pub fn end_pair(&self, w: usize) -> u64 {
        let rows = 3 * self.rows();
        let at = |r: usize| if r < rows { u64::from(self.end(r)) } else { 0 };
        at(2 * w) | at(2 * w + 1) << 32
    }

    /// Term `t` of the flat array: its variable (low half) and coefficient
    /// index (high half).
    pub fn term(&self, t: usize) -> u64 {
        let t = t as u64;
        let k = usize::from(t >= self.starts[1]) + usize::from(t >= self.starts[2]);
        let term = self.matrices.rows[k].terms[(t - self.starts[k]) as usize];
        u64::from(term.var) | u64::from(term.coeff) << 32
    }

    /// The coefficient table the terms index.
    pub fn coeffs(&self) -> &[Fr] {
        &self.matrices.coeffs
    }

    /// The coefficient table's index of minus one, `u32::MAX` when none.
    pub fn minus_one(&self) -> u32 {
        self.minus_one
    }

    /// The long rows, `k << 30 | i`.
    pub fn long_rows(&self) -> &[u32] {
        &self.long_rows
    }

    /// Terms a row may have before it is long.
    pub fn long_len(&self) -> u32 {
        self.long_len
    }

    /// Bytes of the row ends and terms, all but a few kilobytes of the
    /// layout: what the device-memory plan may keep in pinned host memory.
    pub fn ends_and_terms_bytes(&self) -> u64 {
        (8 * (self.end_words() + self.terms())) as u64
    }

    /// Device bytes of the layout: row ends, terms, coefficients, long rows.
    pub fn device_bytes(&self) -> u64 {
        self.ends_and_terms_bytes() + (32 * self.coeffs().len() + 4 * self.long_rows.len()) as u64
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
        Self { coeffs: vec![Fr::one()], index: HashMap::from([(Fr::one(), 0)]), rows: Default::default() }
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

    /// Appends the rows `part` recorded on its own, as the next rows of these
    /// matrices: bellperson's extensible synthesis, where a part of a circuit
    /// is synthesized into a system of its own whose input 0 is a temporary
    /// one. `before` is the (inputs, aux) allocated here before the part,
    /// `part_vars` the part's own (its temporary one included): the part's
    /// input 0 stays input 0 (one), its input i becomes input
    /// `inputs + i - 1` and its aux j aux `aux + j`, so the rows equal what
    /// one system would have recorded had it synthesized the part itself
    /// (coefficient table included, new coefficients added in the order the
    /// part met them).
    pub fn append(
        &mut self,
        part: &MatricesBuilder,
        before: (usize, usize),
        part_vars: (usize, usize),
    ) -> Result<(), KernelError> {
        let ((inputs, aux), (part_inputs, part_aux)) = (before, part_vars);
        if inputs + part_inputs > AUX as usize || aux + part_aux > AUX as usize {
            return Err(KernelError::Synthesis(format!(
                "variables beyond the 2^31 the compiled matrices index: {inputs} + {part_inputs} inputs, {aux} + {part_aux} aux"
            )));
        }
        let coeff_at: Vec<u32> = part
            .coeffs
            .iter()
            .map(|&coeff| {
                let next = self.coeffs.len() as u32;
                *self.index.entry(coeff).or_insert_with(|| {
                    self.coeffs.push(coeff);
                    next
                })
            })
            .collect();
        let renumber = |t: &Term| {
            let var = match t.var {
                v if v & AUX != 0 => (aux as u32 + (v & !AUX)) | AUX,
                0 => 0,
                v => inputs as u32 + v - 1,
            };
            Term { var, coeff: coeff_at[t.coeff as usize] }
        };
        for (rows, from) in self.rows.iter_mut().zip(&part.rows) {
            let offset = rows.terms.len() as u64;
            rows.ends.extend(from.ends.iter().map(|e| offset + e));
            rows.terms.par_extend(from.terms.par_iter().map(renumber));
        }
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
        Matrices { num_inputs, num_aux, coeffs: self.coeffs, rows: self.rows }
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

    /// Random matrices: `m` rows per matrix of 0-6 terms, every fifth A row
    /// of 7-40 terms, coefficients one, minus one, two and three.
    fn random_matrices(m: usize, seed: u64) -> Matrices {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let coeffs = [Fr::one(), -Fr::one(), Fr::from(2u64), Fr::from(3u64)];
        let mut b = MatricesBuilder::default();
        let (inputs, aux) = (3, 50);
        for i in 0..m {
            for k in 0..3 {
                let long = k == 0 && i % 5 == 0;
                let len = if long { rng.gen_range(7..40) } else { rng.gen_range(0..7) };
                let terms: Vec<(Fr, Var)> = (0..len)
                    .map(|_| {
                        let c = coeffs[rng.gen_range(0..4)];
                        let v = rng.gen_range(0..inputs + aux);
                        (c, if v < inputs { Var::Input(v) } else { Var::Aux(v - inputs) })
                    })
                    .collect();
                b.push_row(k, terms).unwrap();
            }
        }
        b.finish(inputs, aux)
    }

    #[test]
    fn the_flattened_layout_holds_every_row_and_lists_the_long_ones() {
        let m = random_matrices(200, 7);
        let flat = Flattened::new(&m, 6).unwrap();
        let rows = flat.rows();
        assert_eq!(rows, 200);
        assert_eq!(flat.terms(), (0..3).map(|k| m.num_terms(k)).sum::<usize>());
        let mut long = Vec::new();
        for k in 0..3 {
            for i in 0..rows {
                let r = k * rows + i;
                let start = if r == 0 { 0 } else { flat.end(r - 1) as usize };
                let terms: Vec<(Fr, usize)> = (start..flat.end(r) as usize)
                    .map(|t| {
                        let word = flat.term(t);
                        (flat.coeffs()[(word >> 32) as usize], (word & 0xffff_ffff) as usize)
                    })
                    .collect();
                let want: Vec<(Fr, usize)> = m.row(k, i).map(|(c, v)| (*c, v)).collect();
                assert_eq!(terms, want, "row {i} of matrix {k}");
                if want.len() > 6 {
                    long.push((k as u32) << 30 | i as u32);
                }
            }
        }
        assert!(long.len() >= 40, "every fifth A row is long");
        assert_eq!(flat.long_rows(), &long[..]);
        // Two ends to a word, the earlier low; the odd count's last word
        // zero-padded.
        assert_eq!(flat.end_words(), 300);
        for w in 0..flat.end_words() {
            let pair = flat.end_pair(w);
            assert_eq!(pair & 0xffff_ffff, u64::from(flat.end(2 * w)));
            assert_eq!(pair >> 32, u64::from(flat.end(2 * w + 1)));
        }
        assert_eq!(flat.coeffs()[flat.minus_one() as usize], -Fr::one());
        let bytes = 8 * (300 + flat.terms()) + 32 * 4 + 4 * long.len();
        assert_eq!(flat.device_bytes(), bytes as u64);
        // An odd number of flat rows pads the last word's high half.
        let odd = random_matrices(5, 8);
        let flat = Flattened::new(&odd, 6).unwrap();
        assert_eq!(flat.end_words(), 8);
        assert_eq!(flat.end_pair(7), u64::from(flat.end(14)));
        // Without minus one in the table, nothing is subtracted.
        let mut b = MatricesBuilder::default();
        b.push_row(0, [(Fr::from(5u64), Var::Aux(0))]).unwrap();
        (1..3).for_each(|k| b.push_row(k, []).unwrap());
        assert_eq!(Flattened::new(&b.finish(1, 1), 32).unwrap().minus_one(), u32::MAX);
    }

    #[test]
    fn matrices_from_parts_equal_the_built_ones_and_bad_parts_are_refused() {
        let built = random_matrices(60, 9);
        let parts = || built.rows.clone().map(|r| (r.ends, r.terms));
        let m = Matrices::from_parts(3, 50, built.coeffs.clone(), parts()).unwrap();
        for k in 0..3 {
            for i in 0..60 {
                assert!(m.row(k, i).eq(built.row(k, i)));
            }
        }
        assert_eq!(m.fingerprint(), built.fingerprint());
        let refused = |coeffs: Vec<Fr>, parts: [(Vec<u64>, Vec<Term>); 3]| {
            let e = Matrices::from_parts(3, 50, coeffs, parts).unwrap_err();
            assert!(matches!(e, KernelError::Synthesis(_)), "{e}");
        };
        let mut far = parts();
        far[1].1[0].var = 53;
        refused(built.coeffs.clone(), far);
        let mut unknown = parts();
        unknown[2].1[0].coeff = 4;
        refused(built.coeffs.clone(), unknown);
        let mut short = parts();
        short[0].0.pop();
        refused(built.coeffs.clone(), short);
        let mut unordered = parts();
        unordered[0].0[10] = unordered[0].0[11] + 1;
        refused(built.coeffs.clone(), unordered);
        refused(built.coeffs[1..].to_vec(), parts());
    }

    #[test]
    fn a_fingerprint_tells_other_matrices_apart() {
        let (a, b) = (random_matrices(100, 1), random_matrices(100, 2));
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(a.fingerprint(), b.fingerprint());
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
