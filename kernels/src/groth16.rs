//! Groth16 over BLS12-381, split into the three stages the daemon schedules.
//!
//! 1. [`synthesize`] (CPU): witness generation, then the a, b, c vectors as the
//!    cached R1CS matrices times the witness ([`evaluate`], [`Matrices`]). No
//!    constraint is built per proof. For an engine that evaluates them on its
//!    device ([`ProveStartEngine::evaluates_on_device`]) the stage stops at
//!    the assignment ([`defer`], [`Abc::Deferred`]).
//! 2. prove_start ([`ProveStartEngine`], the GPU worker's stage): H from seven
//!    size-n NTTs, then the G1 MSMs for A, B1, L and H. a, b and c are dropped
//!    as soon as H exists.
//! 3. [`prove_finish`] (finalizer): the G2 MSM for B (unless the engine did it),
//!    the randomizers r and s, assembly.
//!
//! Given the same r and s the result is exactly ark-groth16's proof.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_ec::{AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{FftField, Field, PrimeField, Zero};
use ark_groth16::{Proof, ProvingKey, VerifyingKey};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use ark_relations::r1cs::{
    ConstraintMatrices, ConstraintSynthesizer, ConstraintSystem, OptimizationGoal, SynthesisMode,
};
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;

use crate::circuits::{CircuitInstance, InstanceCircuit};
use crate::key_source::{read_all, KeySource, Query};
use crate::r1cs::Matrices;
use crate::{Bls12_381, Fr, G1Projective, G2Affine, G2Projective, KernelError};

pub type Domain = Radix2EvaluationDomain<Fr>;

/// Everything a shape needs to be proved: its proving key and its R1CS
/// matrices, extracted once and shared by every proof of that shape.
pub struct PreparedCircuit {
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
    pub num_constraints: usize,
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

/// The output of synthesis: a, b, c (or that the engine evaluates them)
/// and the full assignment (the constant one, public inputs, then
/// witnesses).
pub struct Synthesized {
    pub abc: Abc,
    pub assignment: Vec<Fr>,
    pub num_inputs: usize,
}

/// A partition's a, b and c: its circuit's A, B and C rows at its
/// assignment, then the input constraints (A = x_i, B = C = 0), zeros to the
/// domain.
pub enum Abc {
    /// Evaluated on the host, over the domain.
    Host { a: Vec<Fr>, b: Vec<Fr>, c: Vec<Fr> },
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

    pub fn assignment_bytes(&self) -> u64 {
        field_bytes(self.assignment.capacity())
    }

    pub fn public_inputs(&self) -> &[Fr] {
        &self.assignment[1..self.num_inputs]
    }
}

pub fn field_bytes(elements: usize) -> u64 {
    (elements * std::mem::size_of::<Fr>()) as u64
}

/// One timed phase of a stage, for the worker's span.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseTiming {
    pub phase: &'static str,
    pub duration: Duration,
}

/// Runs `f` and appends its duration under `phase`.
pub fn timed<T>(phases: &mut Vec<PhaseTiming>, phase: &'static str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    phases.push(PhaseTiming { phase, duration: start.elapsed() });
    out
}

/// What prove_start hands to the finalizer.
pub struct ProveStartOutput {
    /// MSM of a_query[1..] with assignment[1..].
    pub a_acc: G1Projective,
    /// MSM of b_g1_query[1..] with assignment[1..].
    pub b1_acc: G1Projective,
    /// MSM of l_query with the witness part of the assignment.
    pub l_acc: G1Projective,
    /// MSM of h_query with H.
    pub h_acc: G1Projective,
    /// MSM of b_g2_query[1..] with assignment[1..], when the engine did it.
    pub b2_acc: Option<G2Projective>,
    /// The assignment: whole when `b2_acc` is None (prove_finish's G2 MSM
    /// reads it), else at least the constant one and the public inputs.
    pub assignment: Vec<Fr>,
    pub num_inputs: usize,
    /// Bytes of a, b and c released during the stage.
    pub freed_bytes: u64,
    pub phases: Vec<PhaseTiming>,
    /// The call's share of its device's kernel-active time: how long its
    /// kernels ran while no earlier call's did (from the CUDA engine's
    /// events), so that the shares of all calls add up to the time the
    /// device had any kernels running. None from an engine without a
    /// device (the CPU engine).
    pub device_active: Option<Duration>,
}

impl ProveStartOutput {
    pub fn public_inputs(&self) -> &[Fr] {
        &self.assignment[1..self.num_inputs]
    }
}

/// How soon a prove_start call's result is needed, for an engine that runs
/// calls side by side on one device (the CUDA engine's stream priorities).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Urgency {
    /// In turn with the other calls.
    #[default]
    Normal,
    /// Ahead of every normal call (WinningPoSt: a block reward is lost when
    /// its proof is late).
    Urgent,
}

/// The prove_start stage, implemented by the CPU engine and the CUDA engine.
pub trait ProveStartEngine: Send + Sync {
    fn name(&self) -> &str;
    /// Whether the engine evaluates a deferred partition's a, b and c
    /// ([`Abc::Deferred`]) on its device, so that synthesis should leave
    /// them to it and a partition's memory holds no host a, b, c. The CPU
    /// engine does not: it takes a deferred partition too, evaluating it on
    /// the host at prove_start.
    fn evaluates_on_device(&self) -> bool {
        false
    }
    /// Whether the engine reads a key's queries range by range (into its
    /// device or pinned memory), so that a circuit may leave them in a
    /// [`KeySource`] instead of holding them decoded on the host. The CPU
    /// engine does not: its MSMs read the whole queries.
    fn reads_key_by_range(&self) -> bool {
        false
    }
    /// Loads what the engine keeps of `circuit` between calls (the CUDA
    /// engine: its device-memory plan, then its key and compiled matrices
    /// on the device) ahead of its first call, so that a preload takes the
    /// whole cold cost and no partition waits for it; `urgency` is its
    /// calls' (the CUDA engine reserves an urgent circuit's memory beside
    /// every other). Engines that keep nothing do nothing.
    fn warm(&self, circuit: &PreparedCircuit, urgency: Urgency) -> Result<(), KernelError> {
        let _ = (circuit, urgency);
        Ok(())
    }
    /// Host bytes the engine holds outside the circuits' own (the CUDA
    /// engine's streamed key parts in pinned memory), which the daemon's
    /// memory budget counts as resident.
    fn host_bytes(&self) -> u64 {
        0
    }
    /// The device's memory plan and each circuit's, for `/v1/status`
    /// (engines without a device: none).
    fn memory_report(&self) -> Option<crate::device_plan::MemoryReport> {
        None
    }
    fn prove_start(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
    ) -> Result<ProveStartOutput, KernelError>;
    /// As `prove_start`, with the call's urgency. By default the urgency is
    /// not used: the CPU engine's calls share its thread pool as they come
    /// (rayon has no priorities).
    fn prove_start_as(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
        urgency: Urgency,
    ) -> Result<ProveStartOutput, KernelError> {
        let _ = urgency;
        self.prove_start(circuit, synthesized)
    }
}

fn constraint_system(mode: SynthesisMode) -> ark_relations::r1cs::ConstraintSystemRef<Fr> {
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

    pub fn vk(&self) -> &VerifyingKey<Bls12_381> {
        &self.pk.vk
    }

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

/// H = (a·b − c) / Z over the coset, from the seven NTTs of the libsnark
/// reduction. Consumes a, b and c.
pub fn compute_h_cpu(domain: &Domain, mut a: Vec<Fr>, mut b: Vec<Fr>, mut c: Vec<Fr>) -> Vec<Fr> {
    let coset = domain.get_coset(Fr::GENERATOR).expect("the generator spans a coset");
    domain.ifft_in_place(&mut a);
    domain.ifft_in_place(&mut b);
    domain.ifft_in_place(&mut c);
    coset.fft_in_place(&mut a);
    coset.fft_in_place(&mut b);
    coset.fft_in_place(&mut c);
    let z_inv = domain
        .evaluate_vanishing_polynomial(Fr::GENERATOR)
        .inverse()
        .expect("the vanishing polynomial is nonzero off the domain");
    a.par_iter_mut().zip(b.par_iter()).zip(c.par_iter()).for_each(|((a, b), c)| {
        *a = (*a * b - c) * z_inv;
    });
    drop(b);
    drop(c);
    coset.ifft_in_place(&mut a);
    a
}

/// MSM of the assignment (without the constant one) against query[1..].
pub fn assignment_bigints(assignment: &[Fr]) -> Vec<<Fr as PrimeField>::BigInt> {
    assignment[1..].par_iter().map(|s| s.into_bigint()).collect()
}

/// B's G2 query whole on the host: the key's, or read from its source (the
/// G2 MSM of an engine that leaves it to the finalizer; 6.6 GB at 32 GiB
/// PoRep, held for that MSM only).
fn b_g2_query(circuit: &PreparedCircuit) -> Result<Cow<'_, [G2Affine]>, KernelError> {
    match &circuit.key_source {
        None => Ok(Cow::Borrowed(&circuit.pk.b_g2_query)),
        Some(source) => {
            read_all(source.b2_len(), 1 << 20, |start, out| source.g2(start, out)).map(Cow::Owned)
        }
    }
}

/// The finalizer's stage: the G2 MSM for B when the engine did not do it,
/// then assembly with the randomizers r and s. Fails only when B's G2 query
/// had to be read from a key source that could not be read.
pub fn prove_finish(
    circuit: &PreparedCircuit,
    start: ProveStartOutput,
    r: Fr,
    s: Fr,
) -> Result<(Proof<Bls12_381>, Vec<PhaseTiming>), KernelError> {
    let pk = &circuit.pk;
    let mut phases = Vec::new();
    let b2_acc = match start.b2_acc {
        Some(acc) => acc,
        None => timed(&mut phases, "msm_b2", || {
            let scalars = assignment_bigints(&start.assignment);
            let bases = b_g2_query(circuit)?;
            Ok::<_, KernelError>(G2Projective::msm_bigint(&bases[1..], &circuit.b_selection.gather(&scalars)))
        })?,
    };
    let proof = timed(&mut phases, "assemble", || {
        let g_a = pk.delta_g1 * r + pk.a_query[0] + start.a_acc + pk.vk.alpha_g1;
        let g1_b = if r.is_zero() {
            G1Projective::zero()
        } else {
            pk.delta_g1 * s + pk.b_g1_query[0] + start.b1_acc + pk.beta_g1
        };
        let g2_b = pk.vk.delta_g2 * s + pk.b_g2_query[0] + b2_acc + pk.vk.beta_g2;
        let g_c = g_a * s + g1_b * r - pk.delta_g1 * (r * s) + start.l_acc + start.h_acc;
        let affine = G1Projective::normalize_batch(&[g_a, g_c]);
        Proof { a: affine[0], b: g2_b.into_affine(), c: affine[1] }
    });
    Ok((proof, phases))
}
