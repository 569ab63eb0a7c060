//! The three-stage split (synthesize, prove_start on the CPU engine,
//! prove_finish) on the built-in circuits: given the same r and s it must
//! produce exactly ark-groth16's proof, and that proof must verify.

use ark_ff::{Field, Zero};
use ark_groth16::{prepare_verifying_key, Groth16, PreparedVerifyingKey, Proof, ProvingKey};
use ark_relations::r1cs::{ConstraintSystemRef, SynthesisError};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use ark_std::UniformRand;
use cuzk_kernels::circuits::{CircuitInstance, CircuitRegistry, InstanceCircuit, Wire, WitnessSource};
use cuzk_kernels::cpu::CpuEngine;
use cuzk_kernels::groth16::{prove_finish, synthesize, PreparedCircuit, ProveStartEngine};
use cuzk_kernels::{Bls12_381, Fr, KernelError};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::{json, Value};

type MakeInstance<'a> = dyn Fn() -> Box<dyn CircuitInstance> + 'a;

fn prove_in_three_stages(
    circuit: &PreparedCircuit,
    instance: Box<dyn CircuitInstance>,
    r: Fr,
    s: Fr,
) -> Result<Proof<Bls12_381>, KernelError> {
    let synthesized = synthesize(circuit, instance)?;
    let started = CpuEngine::new(2)?.prove_start(circuit, synthesized)?;
    Ok(prove_finish(circuit, started, r, s)?.0)
}

fn verifies(vk: &PreparedVerifyingKey<Bls12_381>, proof: &Proof<Bls12_381>, public_inputs: &[Fr]) -> bool {
    Groth16::<Bls12_381>::verify_proof(vk, proof, public_inputs).unwrap()
}

/// Proves `make()` with each (r, s), comparing each proof with ark-groth16's
/// and verifying it, also against every single tampered public input.
fn assert_matches_arkworks(circuit: &PreparedCircuit, make: &MakeInstance, randomizers: &[(Fr, Fr)]) {
    let vk = prepare_verifying_key(circuit.vk());
    for &(r, s) in randomizers {
        let proof = prove_in_three_stages(circuit, make(), r, s).unwrap();
        let expected =
            Groth16::<Bls12_381>::create_proof_with_reduction(InstanceCircuit(make()), &circuit.pk, r, s)
                .unwrap();
        assert_eq!(proof, expected, "r = {r}, s = {s}");

        let public_inputs = make().public_inputs();
        assert!(verifies(&vk, &proof, &public_inputs));
        for tampered_position in 0..public_inputs.len() {
            let mut tampered = public_inputs.clone();
            tampered[tampered_position] += Fr::ONE;
            assert!(!verifies(&vk, &proof, &tampered));
        }
    }
}

/// Sets up the shape `params` selects in `family`, then checks every source
/// with every (r, s).
fn check_family(
    family: &str,
    params: Value,
    sources: &[WitnessSource],
    randomizers: &[(Fr, Fr)],
) -> PreparedCircuit {
    let registry = CircuitRegistry::builtin();
    let family = registry.get(family).expect("a built-in family");
    let shape = family.shape(&params).unwrap();
    let setup_instance = || family.instance(&shape, &sources[0]).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(42);
    let circuit = PreparedCircuit::setup(&shape.circuit_id, setup_instance, &mut rng).unwrap();
    assert_eq!(circuit.circuit_id, shape.circuit_id);
    assert_eq!(circuit.num_constraints + circuit.num_inputs, shape.estimated_constraints);
    for source in sources {
        assert_matches_arkworks(&circuit, &|| family.instance(&shape, source).unwrap(), randomizers);
    }
    circuit
}

fn random_randomizers(seed: u64) -> (Fr, Fr) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (Fr::rand(&mut rng), Fr::rand(&mut rng))
}

#[test]
fn mimc_chain_matches_arkworks() {
    let (r, s) = random_randomizers(1);
    // The small circuit also covers the edges: with r = 0, B in G1 is skipped.
    let randomizers = [(r, s), (Fr::zero(), s), (Fr::zero(), Fr::zero())];
    let circuit = check_family(
        "mimc-chain",
        json!({ "log2_constraints": 6 }),
        &[WitnessSource::Seed(1), WitnessSource::Inputs(json!({ "x": "0x2a" }))],
        &randomizers,
    );
    assert_eq!(circuit.domain_size, 64);
}

#[test]
fn poseidon_merkle_matches_arkworks() {
    let leaves: Vec<Value> = (0..16u64).map(|i| json!(i * 1000 + 1)).collect();
    check_family(
        "poseidon-merkle",
        json!({ "depth": 4, "challenges": 2 }),
        &[
            WitnessSource::Seed(1),
            // One leaf challenged twice.
            WitnessSource::Inputs(json!({ "leaves": leaves, "indices": [13, 13] })),
        ],
        &[random_randomizers(2)],
    );
}

#[test]
fn a_deserialized_key_proves_the_same() {
    let registry = CircuitRegistry::builtin();
    let family = registry.get("mimc-chain").unwrap();
    let shape = family.shape(&json!({ "log2_constraints": 4 })).unwrap();
    let make = || family.instance(&shape, &WitnessSource::Seed(3)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let circuit = PreparedCircuit::setup(&shape.circuit_id, make, &mut rng).unwrap();

    let mut bytes = Vec::new();
    circuit.pk.serialize_compressed(&mut bytes).unwrap();
    let pk = ProvingKey::<Bls12_381>::deserialize_compressed(bytes.as_slice()).unwrap();
    let reloaded = PreparedCircuit::from_key(&shape.circuit_id, pk, make()).unwrap();

    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    let proof = prove_in_three_stages(&circuit, make(), r, s).unwrap();
    assert_eq!(prove_in_three_stages(&reloaded, make(), r, s).unwrap(), proof);
    let vk = prepare_verifying_key(reloaded.vk());
    assert!(verifies(&vk, &proof, &make().public_inputs()));
}

#[test]
fn a_key_of_another_shape_is_rejected() {
    let registry = CircuitRegistry::builtin();
    let family = registry.get("mimc-chain").unwrap();
    let small = family.shape(&json!({ "log2_constraints": 3 })).unwrap();
    let large = family.shape(&json!({ "log2_constraints": 4 })).unwrap();
    let make_small = || family.instance(&small, &WitnessSource::Seed(0)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let circuit = PreparedCircuit::setup(&small.circuit_id, make_small, &mut rng).unwrap();
    let large_instance = family.instance(&large, &WitnessSource::Seed(0)).unwrap();
    let result = PreparedCircuit::from_key(&large.circuit_id, circuit.pk, large_instance);
    assert!(matches!(result, Err(KernelError::Key(_))));
}

/// a·b = c with c public; its witness may lie.
struct Product {
    a: Fr,
    b: Fr,
    c: Fr,
}

impl CircuitInstance for Product {
    fn public_inputs(&self) -> Vec<Fr> {
        vec![self.c]
    }

    fn generate(self: Box<Self>, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let c = Wire::input(&cs, self.c)?;
        let a = Wire::witness(&cs, self.a)?;
        let b = Wire::witness(&cs, self.b)?;
        Wire::enforce_product(&cs, &a, &b, &c)
    }
}

fn product(a: u64, b: u64, c: u64) -> Box<dyn CircuitInstance> {
    Box::new(Product { a: Fr::from(a), b: Fr::from(b), c: Fr::from(c) })
}

#[test]
fn an_unsatisfying_witness_is_rejected_by_synthesize() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let circuit = PreparedCircuit::setup("product", || product(2, 3, 6), &mut rng).unwrap();
    assert!(synthesize(&circuit, product(2, 3, 6)).is_ok());
    let result = synthesize(&circuit, product(2, 3, 7));
    assert!(matches!(result, Err(KernelError::Unsatisfied(0))), "{:?}", result.err());
}

/// The same key with the A and B queries cut down to the variables whose
/// points are not the identity (how Filecoin's parameter files store them)
/// must give exactly the proof of the full key: the prover gathers the
/// selected scalars instead of pairing every variable.
#[test]
fn a_compact_key_proves_what_the_full_key_proves() {
    use cuzk_kernels::groth16::Selection;

    let registry = CircuitRegistry::builtin();
    let family = registry.get("poseidon-merkle").expect("a built-in family");
    let shape = family.shape(&json!({ "depth": 3, "challenges": 2 })).unwrap();
    let source = WitnessSource::Seed(5);
    let make = || family.instance(&shape, &source).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let full = PreparedCircuit::setup(&shape.circuit_id, make, &mut rng).unwrap();
    let compact = full.compact().unwrap();
    let variables = full.pk.a_query.len() - 1;
    let Selection::Only(b) = &compact.b_selection else {
        panic!("a compact key selects");
    };
    assert!(b.len() < variables, "the circuit has variables absent from B");
    assert_eq!(compact.pk.b_g2_query.len(), 1 + b.len());

    let (r, s) = random_randomizers(9);
    let proof = prove_in_three_stages(&compact, make(), r, s).unwrap();
    assert_eq!(proof, prove_in_three_stages(&full, make(), r, s).unwrap());
    let vk = prepare_verifying_key(compact.vk());
    assert!(verifies(&vk, &proof, &make().public_inputs()));

    // Counts that do not fit the key are refused, naming the query.
    let Selection::Only(a) = &compact.a_selection else {
        panic!("a compact key selects");
    };
    let wrong = PreparedCircuit::sparse(
        "sparse",
        compact.pk.clone(),
        full.matrices.clone(),
        full.num_constraints,
        Selection::Only(a[1..].to_vec()),
        compact.b_selection.clone(),
    );
    assert!(matches!(wrong, Err(KernelError::Key(m)) if m.contains("the a query")));
}
