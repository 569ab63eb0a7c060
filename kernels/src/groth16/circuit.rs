//! A shape made ready to prove: its proving key (held, compacted, or read
//! by range from its file) and its R1CS matrices, extracted once by
//! running the circuit in setup mode and shared by every proof of it.

use std::borrow::Cow;
use std::sync::Arc;

use ark_ec::AffineRepr;
use ark_groth16::{ProvingKey, VerifyingKey};
use ark_poly::EvaluationDomain;
use ark_relations::r1cs::{
    ConstraintMatrices, ConstraintSynthesizer, ConstraintSystem, OptimizationGoal, SynthesisMode,
};
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;

use super::Domain;
use crate::circuits::{CircuitInstance, InstanceCircuit};
use crate::key_source::{KeySource, Query};
use crate::r1cs::Matrices;
use crate::{Bls12_381, Fr, KernelError};

/// Everything a shape needs to be proved: its proving key and its R1CS
/// matrices, extracted once and shared by every proof of that shape.
pub struct PreparedCircuit {
    /// The shape's id: its key is stored under it.
    pub circuit_id: String,
    /// The key. With a [`KeySource`] (`key_source`) its queries hold only
    /// their first point and the source holds the rest.
    pub pk: ProvingKey<Bls12_381>,
    /// Where the queries are read from, range by range, when the key is too
    /// large to hold decoded on the host (an engine that reads keys by range,
    /// [`ProveStartEngine::reads_key_by_range`]); None when `pk` is whole.
    pub key_source: Option<Arc<dyn KeySource>>,
    /// The R1CS, for [`evaluate`]. Empty for circuits whose a, b and c are
    /// evaluated as they are synthesized (Filecoin's direct evaluation).
    pub matrices: Matrices,
    /// Instance variables, the constant one included.
    pub num_inputs: usize,
    /// Constraints of the R1CS.
    pub num_constraints: usize,
    /// The evaluation domain's size, a power of two.
    pub domain_size: usize,
    /// The variables `pk.a_query[1..]` pairs with.
    pub a_selection: Selection,
    /// The variables `pk.b_g1_query[1..]` and `pk.b_g2_query[1..]` pair with.
    pub b_selection: Selection,
}

/// Which assignment entries a query's points after the first pair with (the
/// first point always pairs with the constant one). arkworks' keys hold one
/// point per variable; Filecoin's hold only the variables that appear in the
/// query (bellperson's densities), so the prover gathers those scalars.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every variable after the constant one, in order.
    #[default]
    All,
    /// These variables only: ascending indices into `assignment[1..]`.
    Only(Vec<u32>),
}

impl Selection {
    /// The values the query's points after the first pair with, from values
    /// indexed like `assignment[1..]`.
    pub fn gather<'a, T: Copy + Send + Sync>(&self, values: &'a [T]) -> Cow<'a, [T]> {
        match self {
            Selection::All => Cow::Borrowed(values),
            Selection::Only(indices) => Cow::Owned(indices.par_iter().map(|&i| values[i as usize]).collect()),
        }
    }

    /// How many points after the first the query holds, for `variables`
    /// variables after the constant one.
    pub fn len(&self, variables: usize) -> usize {
        match self {
            Selection::All => variables,
            Selection::Only(indices) => indices.len(),
        }
    }

    /// Whether an index lies beyond `variables` or the order is broken.
    fn invalid(&self, variables: usize) -> bool {
        match self {
            Selection::All => false,
            Selection::Only(indices) => {
                indices.windows(2).any(|w| w[0] >= w[1])
                    || indices.last().is_some_and(|&i| i as usize >= variables)
            }
        }
    }
}

/// The NTT domain of `rows` constraints (the input rows included).
fn domain_size(rows: usize) -> Result<usize, KernelError> {
    Domain::new(rows)
        .map(|d| d.size())
        .ok_or_else(|| KernelError::Synthesis("circuit too large for the NTT domain".into()))
}

/// A constraint system in `mode`, optimized as ark-groth16's setup is.
pub(super) fn constraint_system(mode: SynthesisMode) -> ark_relations::r1cs::ConstraintSystemRef<Fr> {
    let cs = ConstraintSystem::<Fr>::new_ref();
    // Must match ark-groth16's setup, which optimizes for constraints: then no
    // linear combination is outlined into extra witness variables.
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(mode);
    cs
}

/// Runs the circuit in setup mode and returns its R1CS matrices.
pub fn extract_matrices(instance: Box<dyn CircuitInstance>) -> Result<ConstraintMatrices<Fr>, KernelError> {
    let cs = constraint_system(SynthesisMode::Setup);
    InstanceCircuit(instance)
        .generate_constraints(cs.clone())
        .map_err(|e| KernelError::Synthesis(e.to_string()))?;
    cs.finalize();
    cs.to_matrices().ok_or_else(|| KernelError::Synthesis("constraint system has no matrices".into()))
}

/// The lengths of a key's queries and of its verifying key's input points,
/// whether the key is held whole or read from a source.
struct QueryLens {
    a: usize,
    b_g1: usize,
    b_g2: usize,
    l: usize,
    h: usize,
    ic: usize,
}

impl QueryLens {
    fn of_key(pk: &ProvingKey<Bls12_381>) -> Self {
        QueryLens {
            a: pk.a_query.len(),
            b_g1: pk.b_g1_query.len(),
            b_g2: pk.b_g2_query.len(),
            l: pk.l_query.len(),
            h: pk.h_query.len(),
            ic: pk.vk.gamma_abc_g1.len(),
        }
    }

    fn of_source(source: &dyn KeySource, ic: usize) -> Self {
        QueryLens {
            a: source.len(Query::A),
            b_g1: source.len(Query::B1),
            b_g2: source.b2_len(),
            l: source.len(Query::L),
            h: source.len(Query::H),
            ic,
        }
    }
}

impl PreparedCircuit {
    /// Circuit-specific setup: a fresh proving key, and the matrices.
    pub fn setup(
        circuit_id: &str,
        make_instance: impl Fn() -> Box<dyn CircuitInstance>,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Self, KernelError> {
        Self::setup_until(circuit_id, make_instance, rng, &|| false)
    }

    /// As [`PreparedCircuit::setup`], stopped with [`KernelError::Cancelled`]
    /// once `stop` answers true: it is asked between the setup's steps and
    /// every [`crate::setup::SETUP_CHUNK`] scalars of its multiplications.
    pub fn setup_until(
        circuit_id: &str,
        make_instance: impl Fn() -> Box<dyn CircuitInstance>,
        rng: &mut (impl RngCore + CryptoRng),
        stop: &dyn Fn() -> bool,
    ) -> Result<Self, KernelError> {
        let pk = crate::setup::generate_key(InstanceCircuit(make_instance()), rng, stop)?;
        if stop() {
            return Err(KernelError::Cancelled);
        }
        Self::from_key(circuit_id, pk, make_instance())
    }

    /// Pairs a stored proving key with the matrices of the same shape.
    pub fn from_key(
        circuit_id: &str,
        pk: ProvingKey<Bls12_381>,
        instance: Box<dyn CircuitInstance>,
    ) -> Result<Self, KernelError> {
        let matrices = extract_matrices(instance)?;
        let num_inputs = matrices.num_instance_variables;
        let num_constraints = matrices.num_constraints;
        let num_variables = num_inputs + matrices.num_witness_variables;
        let matrices = Matrices::from_arkworks(&matrices)?;
        if pk.a_query.len() != num_variables || pk.vk.gamma_abc_g1.len() != num_inputs {
            return Err(KernelError::Key(format!(
                "key for {circuit_id} has {} variables and {} inputs; the circuit has {num_variables} and {num_inputs}",
                pk.a_query.len(),
                pk.vk.gamma_abc_g1.len()
            )));
        }
        Self::assemble(circuit_id, pk, matrices, num_constraints, [Selection::All, Selection::All])
    }

    /// The circuit from parts already checked against each other; only the
    /// domain can still fail.
    fn assemble(
        circuit_id: &str,
        pk: ProvingKey<Bls12_381>,
        matrices: Matrices,
        num_constraints: usize,
        [a_selection, b_selection]: [Selection; 2],
    ) -> Result<Self, KernelError> {
        let num_inputs = matrices.num_inputs();
        Ok(Self {
            circuit_id: circuit_id.to_string(),
            domain_size: domain_size(num_constraints + num_inputs)?,
            pk,
            key_source: None,
            matrices,
            num_inputs,
            num_constraints,
            a_selection,
            b_selection,
        })
    }

    /// A circuit synthesized outside this crate: a key whose A and B queries
    /// hold the selected variables only, its matrices (compiled, or
    /// [`Matrices::empty`] when a, b and c come with each partition) and its
    /// constraint count (without the input rows, which are appended). Every
    /// query length is checked against the counts.
    pub fn sparse(
        circuit_id: &str,
        pk: ProvingKey<Bls12_381>,
        matrices: Matrices,
        num_constraints: usize,
        a_selection: Selection,
        b_selection: Selection,
    ) -> Result<Self, KernelError> {
        let lens = QueryLens::of_key(&pk);
        Self::checked(circuit_id, pk, lens, matrices, num_constraints, [a_selection, b_selection])
    }

    /// As [`PreparedCircuit::sparse`], with the queries left in `source`:
    /// `head` holds the verifying key, beta_g1, delta_g1 and each query's
    /// first point (A's, B's in G1 and G2), which the finalizer adds. Only
    /// an engine that [reads keys by range](ProveStartEngine::reads_key_by_range)
    /// proves such a circuit.
    pub fn sparse_from_source(
        circuit_id: &str,
        head: ProvingKey<Bls12_381>,
        source: Arc<dyn KeySource>,
        matrices: Matrices,
        num_constraints: usize,
        a_selection: Selection,
        b_selection: Selection,
    ) -> Result<Self, KernelError> {
        let lens = QueryLens::of_source(source.as_ref(), head.vk.gamma_abc_g1.len());
        let heads = [head.a_query.len(), head.b_g1_query.len(), head.b_g2_query.len()];
        if heads != [1, 1, 1] || !head.h_query.is_empty() || !head.l_query.is_empty() {
            return Err(KernelError::Key(format!(
                "{circuit_id}: a key read from its source keeps one point of A and B and none of H and L on the host"
            )));
        }
        let mut circuit =
            Self::checked(circuit_id, head, lens, matrices, num_constraints, [a_selection, b_selection])?;
        circuit.key_source = Some(source);
        Ok(circuit)
    }

    /// The circuit from a key of query lengths `lens`, each checked against
    /// the matrices' counts and the selections.
    fn checked(
        circuit_id: &str,
        pk: ProvingKey<Bls12_381>,
        lens: QueryLens,
        matrices: Matrices,
        num_constraints: usize,
        [a_selection, b_selection]: [Selection; 2],
    ) -> Result<Self, KernelError> {
        let (num_inputs, num_aux) = (matrices.num_inputs(), matrices.num_aux());
        let rows = matrices.num_constraints();
        if rows != 0 && rows != num_constraints {
            return Err(KernelError::Key(format!(
                "{circuit_id}: matrices of {rows} rows for {num_constraints} constraints"
            )));
        }
        let domain = domain_size(num_constraints + num_inputs)?;
        let variables = num_inputs + num_aux - 1;
        let expected = [
            ("a", lens.a, 1 + a_selection.len(variables)),
            ("b_g1", lens.b_g1, 1 + b_selection.len(variables)),
            ("b_g2", lens.b_g2, 1 + b_selection.len(variables)),
            ("l", lens.l, num_aux),
            ("h", lens.h, domain - 1),
            ("ic", lens.ic, num_inputs),
        ];
        if let Some((query, len, want)) = expected.iter().find(|(_, len, want)| len != want) {
            return Err(KernelError::Key(format!(
                "key for {circuit_id}: the {query} query has {len} points, the circuit needs {want}"
            )));
        }
        if a_selection.invalid(variables) || b_selection.invalid(variables) {
            return Err(KernelError::Key(format!(
                "key for {circuit_id}: a query selection is unordered or out of range"
            )));
        }
        Self::assemble(circuit_id, pk, matrices, num_constraints, [a_selection, b_selection])
    }

    /// The same circuit with the A and B queries cut down to the variables
    /// whose points are not the identity (bellperson's layout: a variable
    /// absent from a query has the identity there), so the MSMs skip them.
    pub fn compact(&self) -> Result<Self, KernelError> {
        if self.key_source.is_some() {
            return Err(KernelError::Key(format!(
                "{}: a key read from its source is compact already",
                self.circuit_id
            )));
        }
        let pk = &self.pk;
        let variables = pk.a_query.len().saturating_sub(1);
        let kept = |present: &dyn Fn(usize) -> bool| -> Vec<u32> {
            (0..variables).filter(|&i| present(i)).map(|i| i as u32).collect()
        };
        let a = kept(&|i| !pk.a_query[1 + i].is_zero());
        let b = kept(&|i| !pk.b_g1_query[1 + i].is_zero() || !pk.b_g2_query[1 + i].is_zero());
        fn pick<P: Copy>(query: &[P], indices: &[u32]) -> Vec<P> {
            std::iter::once(query[0]).chain(indices.iter().map(|&i| query[1 + i as usize])).collect()
        }
        let mut compact = pk.clone();
        compact.a_query = pick(&pk.a_query, &a);
        compact.b_g1_query = pick(&pk.b_g1_query, &b);
        compact.b_g2_query = pick(&pk.b_g2_query, &b);
        Self::sparse(
            &self.circuit_id,
            compact,
            self.matrices.clone(),
            self.num_constraints,
            Selection::Only(a),
            Selection::Only(b),
        )
    }

    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKey<Bls12_381> {
        &self.pk.vk
    }

    /// The evaluation domain.
    pub fn domain(&self) -> Domain {
        Domain::new(self.domain_size).expect("domain size was validated at preparation")
    }

    /// Host bytes held resident for this shape: the proving key's bases
    /// (only their first points when they stay in a [`KeySource`]) and the
    /// matrices.
    pub fn resident_bytes(&self) -> u64 {
        let g1 = std::mem::size_of::<ark_bls12_381::G1Affine>();
        let g2 = std::mem::size_of::<ark_bls12_381::G2Affine>();
        let pk = &self.pk;
        let g1_points = pk.a_query.len() + pk.b_g1_query.len() + pk.h_query.len() + pk.l_query.len();
        let selected = self.a_selection.len(0) + self.b_selection.len(0);
        (g1_points * g1 + pk.b_g2_query.len() * g2 + selected * 4) as u64 + self.matrices.resident_bytes()
    }
}
