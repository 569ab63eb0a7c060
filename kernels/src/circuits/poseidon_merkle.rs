//! `poseidon-merkle`: the shape of a proof-of-spacetime partition, `challenges`
//! Merkle inclusion proofs in one Poseidon tree of depth `depth`.
//!
//! Public inputs: the root, then each challenged leaf index. Per challenge the
//! circuit decomposes the index into `depth` bits (a booleanity constraint
//! each, one packing constraint binding them to the public index), then walks
//! up the tree: at each level the bit orders (node, sibling) into (left, right)
//! with one constraint and [`hash2_gadget`] hashes the pair. The computed root
//! is enforced equal to the public root.

use std::collections::BTreeMap;

use ark_ff::{AdditiveGroup, Field, Zero};
use ark_relations::r1cs::{ConstraintSystemRef, SynthesisError};
use ark_std::UniformRand;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde_json::{json, Value};

use super::field_json::{parse_array, parse_fr, parse_integer, parse_object, required, FIELD_ELEMENT_FORMAT};
use super::poseidon::{hash2, hash2_gadget, HASH2_CONSTRAINTS};
use super::{CircuitFamily, CircuitInstance, CircuitShape, InputError, Wire, WitnessSource};
use crate::Fr;

/// The family's name in a job's `"circuit"`.
pub const FAMILY: &str = "poseidon-merkle";
const MAX_DEPTH: u64 = 32;
const MAX_CHALLENGES: u64 = 64;
/// Deepest tree whose leaves a client may send whole (2^20 leaves, ~80 MB of
/// JSON); deeper trees come as root and paths, or from a seed.
const MAX_LEAVES_DEPTH: u32 = 20;

/// The Poseidon Merkle family: inclusion proofs in a Poseidon-hashed tree.
#[derive(Debug)]
pub struct PoseidonMerkle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MerkleParams {
    depth: u32,
    challenges: usize,
}

impl MerkleParams {
    fn parse(params: &Value) -> Result<Self, InputError> {
        let object = parse_object(params, "params", &["depth", "challenges"])?;
        let depth = parse_integer(required(object, "params", "depth")?, "params.depth", 1..=MAX_DEPTH)?;
        let challenges = parse_integer(
            required(object, "params", "challenges")?,
            "params.challenges",
            1..=MAX_CHALLENGES,
        )?;
        Ok(Self { depth: depth as u32, challenges: challenges as usize })
    }

    fn leaf_count(&self) -> u64 {
        1 << self.depth
    }

    /// Constraints of one challenge: per level a booleanity, a selection and
    /// a hash; then the index packing and the root check.
    fn constraints_per_challenge(&self) -> usize {
        self.depth as usize * (2 + HASH2_CONSTRAINTS) + 2
    }

    /// Instance variables: the constant one, the root and the indices.
    fn instance_variables(&self) -> usize {
        2 + self.challenges
    }
}

/// One challenge's inclusion proof.
#[derive(Clone, Debug, PartialEq)]
pub struct MerklePath {
    /// The leaf's position, its bits the path's left/right choices from the leaf up.
    pub index: u64,
    /// The leaf's value.
    pub leaf: Fr,
    /// From the leaf's sibling up to the root's children.
    pub siblings: Vec<Fr>,
}

impl MerklePath {
    /// The root this path hashes to: bit `level` of the index says whether
    /// the node at that level is a right child.
    pub fn root(&self) -> Fr {
        self.siblings.iter().enumerate().fold(self.leaf, |node, (level, sibling)| {
            if (self.index >> level) & 1 == 0 {
                hash2(node, *sibling)
            } else {
                hash2(*sibling, node)
            }
        })
    }
}

/// A root and `challenges` paths that all hash to it.
struct MerkleInstance {
    root: Fr,
    paths: Vec<MerklePath>,
}

impl MerkleInstance {
    /// The paths to `indices` in the full tree over `leaves`.
    fn from_leaves(leaves: Vec<Fr>, indices: &[u64]) -> Self {
        // levels[0] holds the leaves, every next level the hashes of the pairs below.
        let mut levels = vec![leaves];
        while let Some(below) = levels.last().filter(|level| level.len() > 1) {
            let above = below.par_chunks(2).map(|pair| hash2(pair[0], pair[1])).collect();
            levels.push(above);
        }
        let root = levels.pop().expect("the top level holds the root")[0];
        let paths = indices
            .iter()
            .map(|&index| MerklePath {
                index,
                leaf: levels[0][index as usize],
                siblings: levels
                    .iter()
                    .enumerate()
                    .map(|(level, nodes)| nodes[((index >> level) ^ 1) as usize])
                    .collect(),
            })
            .collect();
        Self { root, paths }
    }

    /// A random tree, built only along the challenged paths: every subtree
    /// no challenge enters is represented by a random node. Challenges that
    /// share a subtree share its nodes, so all paths meet in one root.
    fn random(params: MerkleParams, rng: &mut ChaCha20Rng) -> Self {
        let indices: Vec<u64> =
            (0..params.challenges).map(|_| rng.gen_range(0..params.leaf_count())).collect();
        // The known nodes of the current level, by index.
        let mut nodes = BTreeMap::new();
        for &index in &indices {
            nodes.entry(index).or_insert_with(|| Fr::rand(rng));
        }
        let leaves: Vec<Fr> = indices.iter().map(|index| nodes[index]).collect();
        let mut siblings = vec![Vec::with_capacity(params.depth as usize); params.challenges];
        for level in 0..params.depth {
            let on_paths: Vec<u64> = nodes.keys().copied().collect();
            for index in on_paths {
                nodes.entry(index ^ 1).or_insert_with(|| Fr::rand(rng));
            }
            for (path, index) in siblings.iter_mut().zip(&indices) {
                path.push(nodes[&((index >> level) ^ 1)]);
            }
            // Every node now has its sibling: the keys run in pairs (2j, 2j+1).
            let pairs: Vec<(u64, Fr)> = nodes.into_iter().collect();
            nodes = pairs.chunks(2).map(|pair| (pair[0].0 >> 1, hash2(pair[0].1, pair[1].1))).collect();
        }
        let paths = indices
            .into_iter()
            .zip(leaves)
            .zip(siblings)
            .map(|((index, leaf), siblings)| MerklePath { index, leaf, siblings })
            .collect();
        Self { root: nodes[&0], paths }
    }

    fn from_inputs(params: MerkleParams, inputs: &Value) -> Result<Self, InputError> {
        let object = parse_object(inputs, "inputs", &["leaves", "indices", "root", "paths"])?;
        let has_tree = object.contains_key("leaves") || object.contains_key("indices");
        let has_paths = object.contains_key("root") || object.contains_key("paths");
        match (has_tree, has_paths) {
            (true, false) => Self::parse_leaves(params, inputs),
            (false, true) => Self::parse_paths(params, inputs),
            _ => Err(InputError::new(
                "inputs must hold either \"leaves\" and \"indices\", or \"root\" and \"paths\"",
            )),
        }
    }

    fn parse_leaves(params: MerkleParams, inputs: &Value) -> Result<Self, InputError> {
        let (leaves, indices) = Self::leaves_and_indices(params, inputs)?;
        Ok(Self::from_leaves(leaves, &indices))
    }

    /// The leaves form's values, parsed and range-checked, the tree not built.
    fn leaves_and_indices(params: MerkleParams, inputs: &Value) -> Result<(Vec<Fr>, Vec<u64>), InputError> {
        if params.depth > MAX_LEAVES_DEPTH {
            return Err(InputError::new(format!(
                "inputs.leaves: a depth-{} tree has too many leaves to send (the limit is \
                 depth {MAX_LEAVES_DEPTH}); use a seed, or send \"root\" and \"paths\"",
                params.depth
            )));
        }
        let object = parse_object(inputs, "inputs", &["leaves", "indices"])?;
        let leaves = parse_array(
            required(object, "inputs", "leaves")?,
            "inputs.leaves",
            params.leaf_count() as usize,
            parse_fr,
        )?;
        let indices = parse_array(
            required(object, "inputs", "indices")?,
            "inputs.indices",
            params.challenges,
            |index, path| parse_index(params, index, path),
        )?;
        Ok((leaves, indices))
    }

    fn parse_paths(params: MerkleParams, inputs: &Value) -> Result<Self, InputError> {
        let object = parse_object(inputs, "inputs", &["root", "paths"])?;
        let root = parse_fr(required(object, "inputs", "root")?, "inputs.root")?;
        let paths = parse_array(
            required(object, "inputs", "paths")?,
            "inputs.paths",
            params.challenges,
            |path, path_name| parse_path(params, path, path_name),
        )?;
        if let Some(challenge) = paths.iter().position(|path| path.root() != root) {
            return Err(InputError::new(format!(
                "inputs.paths[{challenge}]: challenge {challenge} does not hash to inputs.root"
            )));
        }
        Ok(Self { root, paths })
    }
}

fn parse_index(params: MerkleParams, value: &Value, path: &str) -> Result<u64, InputError> {
    parse_integer(value, path, 0..=params.leaf_count() - 1)
}

fn parse_path(params: MerkleParams, value: &Value, path: &str) -> Result<MerklePath, InputError> {
    let object = parse_object(value, path, &["index", "leaf", "siblings"])?;
    let index = parse_index(params, required(object, path, "index")?, &format!("{path}.index"))?;
    let leaf = parse_fr(required(object, path, "leaf")?, &format!("{path}.leaf"))?;
    let siblings = parse_array(
        required(object, path, "siblings")?,
        &format!("{path}.siblings"),
        params.depth as usize,
        parse_fr,
    )?;
    Ok(MerklePath { index, leaf, siblings })
}

impl CircuitFamily for PoseidonMerkle {
    fn name(&self) -> &str {
        FAMILY
    }

    fn describe(&self) -> Value {
        json!({
            "name": FAMILY,
            "summary": "The shape of a proof-of-spacetime partition: `challenges` Merkle \
                        inclusion proofs in one Poseidon tree (BLS12-381, width 3, x^5, \
                        8 full and 57 partial rounds) of depth `depth`.",
            "circuit_id": "poseidon-merkle-d{depth}-c{challenges}",
            "params": {
                "depth": { "type": "integer", "required": true, "min": 1, "max": MAX_DEPTH,
                           "description": "levels of the tree: 2^depth leaves" },
                "challenges": { "type": "integer", "required": true, "min": 1,
                                "max": MAX_CHALLENGES,
                                "description": "inclusion proofs per partition" },
            },
            "inputs": {
                "one_of": [
                    {
                        "leaves": format!("2^depth field elements, only for depth <= {MAX_LEAVES_DEPTH}"),
                        "indices": "`challenges` integers below 2^depth",
                    },
                    {
                        "root": "a field element",
                        "paths": "`challenges` objects {\"index\": integer below 2^depth, \
                                  \"leaf\": field element, \"siblings\": depth field \
                                  elements from the leaf's sibling up}, each hashing to root",
                    },
                ],
                "field_element": FIELD_ELEMENT_FORMAT,
            },
            "seed": "random leaves, siblings and uniform indices drawn with ChaCha20 seeded \
                     by the seed",
            "public_inputs": ["the root", "each challenged leaf index, in order"],
        })
    }

    fn shape(&self, params: &Value) -> Result<CircuitShape, InputError> {
        let parsed = MerkleParams::parse(params)?;
        Ok(CircuitShape {
            family: FAMILY.to_string(),
            circuit_id: format!("{FAMILY}-d{}-c{}", parsed.depth, parsed.challenges),
            params: json!({ "depth": parsed.depth, "challenges": parsed.challenges }),
            estimated_constraints: parsed.challenges * parsed.constraints_per_challenge()
                + parsed.instance_variables(),
        })
    }

    fn instance(
        &self,
        shape: &CircuitShape,
        source: &WitnessSource,
    ) -> Result<Box<dyn CircuitInstance>, InputError> {
        let params = MerkleParams::parse(&shape.params)?;
        let instance = match source {
            WitnessSource::Seed(seed) => {
                MerkleInstance::random(params, &mut ChaCha20Rng::seed_from_u64(*seed))
            }
            WitnessSource::Inputs(inputs) => MerkleInstance::from_inputs(params, inputs)?,
        };
        Ok(Box::new(instance))
    }

    /// The leaves form is parsed without hashing its tree (a depth-20 tree
    /// is 2^20 hashes, seconds of CPU per partition); the paths form is
    /// checked whole, since its hashes are depth x challenges at most.
    fn check_inputs(&self, shape: &CircuitShape, inputs: &Value) -> Result<(), InputError> {
        let params = MerkleParams::parse(&shape.params)?;
        let object = parse_object(inputs, "inputs", &["leaves", "indices", "root", "paths"])?;
        if object.contains_key("leaves") && !object.contains_key("root") && !object.contains_key("paths") {
            return MerkleInstance::leaves_and_indices(params, inputs).map(drop);
        }
        MerkleInstance::from_inputs(params, inputs).map(drop)
    }
}

impl CircuitInstance for MerkleInstance {
    fn public_inputs(&self) -> Vec<Fr> {
        let indices = self.paths.iter().map(|path| Fr::from(path.index));
        std::iter::once(self.root).chain(indices).collect()
    }

    fn generate(self: Box<Self>, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let root = Wire::input(&cs, self.root)?;
        let index_inputs = self
            .paths
            .iter()
            .map(|path| Wire::input(&cs, Fr::from(path.index)))
            .collect::<Result<Vec<_>, _>>()?;
        for (path, index_input) in self.paths.iter().zip(&index_inputs) {
            path_root_gadget(path, index_input, &cs)?.enforce_equal(&root, &cs)?;
        }
        Ok(())
    }
}

/// The root computed in-circuit from `path`, its index bits bound to
/// `index_input`.
fn path_root_gadget(
    path: &MerklePath,
    index_input: &Wire,
    cs: &ConstraintSystemRef<Fr>,
) -> Result<Wire, SynthesisError> {
    let bits = (0..path.siblings.len())
        .map(|level| boolean_witness((path.index >> level) & 1 == 1, cs))
        .collect::<Result<Vec<_>, _>>()?;
    let powers_of_two = std::iter::successors(Some(Fr::ONE), |power| Some(power.double()));
    Wire::weighted_sum(powers_of_two.zip(&bits)).enforce_equal(index_input, cs)?;

    let mut node = Wire::witness(cs, path.leaf)?;
    for (bit, sibling) in bits.iter().zip(&path.siblings) {
        let sibling = Wire::witness(cs, *sibling)?;
        let (left, right) = order_children(bit, &node, &sibling, cs)?;
        node = hash2_gadget(&left, &right, cs)?;
    }
    Ok(node)
}

/// A witness bit, enforced by b·(1 − b) = 0.
fn boolean_witness(bit: bool, cs: &ConstraintSystemRef<Fr>) -> Result<Wire, SynthesisError> {
    let wire = Wire::witness(cs, Fr::from(bit))?;
    let complement = Wire::weighted_sum([(-Fr::ONE, &wire)]).plus_constant(Fr::ONE);
    Wire::enforce_product(cs, &wire, &complement, &Wire::constant(Fr::zero()))?;
    Ok(wire)
}

/// (node, sibling) when `is_right` is 0, (sibling, node) when it is 1, in one
/// constraint: left − node = is_right·(sibling − node), and right is the
/// free remainder node + sibling − left.
fn order_children(
    is_right: &Wire,
    node: &Wire,
    sibling: &Wire,
    cs: &ConstraintSystemRef<Fr>,
) -> Result<(Wire, Wire), SynthesisError> {
    let left_value = if is_right.value().is_zero() { node.value() } else { sibling.value() };
    let left = Wire::witness(cs, left_value)?;
    let sibling_minus_node = Wire::weighted_sum([(Fr::ONE, sibling), (-Fr::ONE, node)]);
    let left_minus_node = Wire::weighted_sum([(Fr::ONE, &left), (-Fr::ONE, node)]);
    Wire::enforce_product(cs, is_right, &sibling_minus_node, &left_minus_node)?;
    let right = Wire::weighted_sum([(Fr::ONE, node), (Fr::ONE, sibling), (-Fr::ONE, &left)]);
    Ok((left, right))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::field_json::fr_to_json;
    use crate::groth16::extract_matrices;
    use ark_relations::r1cs::ConstraintSystem;

    fn shape(depth: u32, challenges: usize) -> CircuitShape {
        PoseidonMerkle.shape(&json!({ "depth": depth, "challenges": challenges })).unwrap()
    }

    fn shape_error(params: Value) -> String {
        PoseidonMerkle.shape(&params).unwrap_err().0
    }

    /// The reason inputs are refused, the same whether the handler's cheap
    /// check or synthesis's instance finds it.
    fn inputs_error(shape: &CircuitShape, inputs: Value) -> String {
        let checked = PoseidonMerkle
            .check_inputs(shape, &inputs)
            .expect_err("the handler's check should refuse the inputs")
            .0;
        let built = PoseidonMerkle
            .instance(shape, &WitnessSource::Inputs(inputs))
            .err()
            .expect("inputs should be rejected")
            .0;
        assert_eq!(checked, built);
        checked
    }

    fn leaves(count: u64) -> Vec<Fr> {
        (0..count).map(|i| Fr::from(i * i + 7)).collect()
    }

    fn path_json(path: &MerklePath) -> Value {
        json!({
            "index": path.index,
            "leaf": fr_to_json(&path.leaf),
            "siblings": path.siblings.iter().map(fr_to_json).collect::<Vec<_>>(),
        })
    }

    fn is_satisfied(instance: Box<dyn CircuitInstance>) -> bool {
        let cs = ConstraintSystem::<Fr>::new_ref();
        let public_inputs = instance.public_inputs();
        instance.generate(cs.clone()).unwrap();
        assert_eq!(cs.borrow().unwrap().instance_assignment[1..], public_inputs[..]);
        cs.is_satisfied().unwrap()
    }

    #[test]
    fn shape_is_canonical() {
        let shape = shape(8, 2);
        assert_eq!(shape.family, "poseidon-merkle");
        assert_eq!(shape.circuit_id, "poseidon-merkle-d8-c2");
        assert_eq!(shape.params, json!({ "depth": 8, "challenges": 2 }));
    }

    #[test]
    fn estimate_is_the_exact_count() {
        for (depth, challenges) in [(1, 1), (3, 2)] {
            let shape = shape(depth, challenges);
            let instance = PoseidonMerkle.instance(&shape, &WitnessSource::Seed(1)).unwrap();
            let matrices = extract_matrices(instance).unwrap();
            assert_eq!(matrices.num_instance_variables, 2 + challenges);
            assert_eq!(
                shape.estimated_constraints,
                matrices.num_constraints + matrices.num_instance_variables
            );
        }
    }

    #[test]
    fn bad_params_name_the_problem() {
        assert_eq!(shape_error(json!({ "challenges": 2 })), "params.depth is required");
        assert_eq!(shape_error(json!({ "depth": 2 })), "params.challenges is required");
        assert_eq!(
            shape_error(json!({ "depth": 0, "challenges": 2 })),
            "params.depth must be an integer in 1..=32, got 0"
        );
        assert_eq!(
            shape_error(json!({ "depth": 33, "challenges": 2 })),
            "params.depth must be an integer in 1..=32, got 33"
        );
        assert_eq!(
            shape_error(json!({ "depth": 8, "challenges": 65 })),
            "params.challenges must be an integer in 1..=64, got 65"
        );
        assert_eq!(
            shape_error(json!({ "depth": "8", "challenges": 2 })),
            "params.depth must be an integer in 1..=32, got \"8\""
        );
        assert_eq!(
            shape_error(json!({ "depth": 8, "challenges": 2, "arity": 2 })),
            "params has an unknown key \"arity\"; allowed: depth, challenges"
        );
        assert_eq!(shape_error(json!([8, 2])), "params must be an object, got an array");
    }

    #[test]
    fn seed_instances_satisfy_the_circuit() {
        let shape = shape(5, 3);
        for seed in [0, 1] {
            let instance = PoseidonMerkle.instance(&shape, &WitnessSource::Seed(seed)).unwrap();
            assert!(is_satisfied(instance));
        }
    }

    #[test]
    fn deep_seed_instances_share_one_root() {
        let params = MerkleParams { depth: 32, challenges: 64 };
        let instance = MerkleInstance::random(params, &mut ChaCha20Rng::seed_from_u64(9));
        assert_eq!(instance.paths.len(), 64);
        for path in &instance.paths {
            assert_eq!(path.siblings.len(), 32);
            assert_eq!(path.root(), instance.root);
        }
    }

    #[test]
    fn challenges_on_neighbouring_leaves_share_siblings() {
        // Depth 1 with many challenges: indices repeat and are each other's
        // siblings, which exercises the sharing of drawn nodes.
        let params = MerkleParams { depth: 1, challenges: 8 };
        let instance = MerkleInstance::random(params, &mut ChaCha20Rng::seed_from_u64(4));
        for path in &instance.paths {
            assert_eq!(path.root(), instance.root);
        }
    }

    #[test]
    fn seeds_are_deterministic_and_distinct() {
        let shape = shape(6, 2);
        let public =
            |seed| PoseidonMerkle.instance(&shape, &WitnessSource::Seed(seed)).unwrap().public_inputs();
        assert_eq!(public(5), public(5));
        assert_ne!(public(5), public(6));
    }

    #[test]
    fn leaves_and_paths_inputs_agree() {
        let shape = shape(3, 2);
        let leaves = leaves(8);
        let leaves_json: Vec<Value> = leaves.iter().map(fr_to_json).collect();
        let from_leaves = PoseidonMerkle
            .instance(&shape, &WitnessSource::Inputs(json!({ "leaves": leaves_json, "indices": [6, 1] })))
            .unwrap();
        let tree = MerkleInstance::from_leaves(leaves, &[6, 1]);
        assert_eq!(from_leaves.public_inputs(), vec![tree.root, Fr::from(6u64), Fr::from(1u64)]);
        assert_eq!(tree.paths[0].leaf, Fr::from(6u64 * 6 + 7));
        assert!(is_satisfied(from_leaves));

        let paths = json!({
            "root": fr_to_json(&tree.root),
            "paths": tree.paths.iter().map(path_json).collect::<Vec<_>>(),
        });
        let leaves_form = json!({ "leaves": leaves_json, "indices": [6, 1] });
        assert_eq!(PoseidonMerkle.check_inputs(&shape, &leaves_form), Ok(()));
        assert_eq!(PoseidonMerkle.check_inputs(&shape, &paths), Ok(()));
        let from_paths = PoseidonMerkle.instance(&shape, &WitnessSource::Inputs(paths)).unwrap();
        assert_eq!(from_paths.public_inputs(), vec![tree.root, Fr::from(6u64), Fr::from(1u64)]);
        assert!(is_satisfied(from_paths));
    }

    #[test]
    fn bad_leaves_inputs_name_the_problem() {
        let shape = shape(2, 2);
        let four = json!([1, 2, 3, 4]);
        assert_eq!(
            inputs_error(&shape, json!({ "leaves": [1, 2, 3], "indices": [0, 1] })),
            "inputs.leaves must have 4 elements, got 3"
        );
        assert_eq!(
            inputs_error(&shape, json!({ "leaves": four, "indices": [0, 4] })),
            "inputs.indices[1] must be an integer in 0..=3, got 4"
        );
        assert_eq!(
            inputs_error(&shape, json!({ "leaves": four, "indices": [0] })),
            "inputs.indices must have 2 elements, got 1"
        );
        assert_eq!(inputs_error(&shape, json!({ "leaves": four })), "inputs.indices is required");
        assert!(inputs_error(&shape, json!({ "leaves": [1, 2, "x", 4], "indices": [0, 1] }))
            .starts_with("inputs.leaves[2]: 'x' is not a decimal digit"));
        assert_eq!(
            inputs_error(&shape, json!({ "leaves": four, "indices": [0, 1], "root": 1 })),
            "inputs must hold either \"leaves\" and \"indices\", or \"root\" and \"paths\""
        );
        assert_eq!(
            inputs_error(&shape, json!({ "leafs": four })),
            "inputs has an unknown key \"leafs\"; allowed: leaves, indices, root, paths"
        );
        let deep = self::shape(21, 1);
        assert!(inputs_error(&deep, json!({ "leaves": [], "indices": [0] })).contains("use a seed"));
    }

    #[test]
    fn bad_paths_inputs_name_the_problem() {
        let shape = shape(3, 2);
        let tree = MerkleInstance::from_leaves(leaves(8), &[2, 5]);
        let with_paths = |paths: Vec<Value>| json!({ "root": fr_to_json(&tree.root), "paths": paths });
        let good: Vec<Value> = tree.paths.iter().map(path_json).collect();

        let mut wrong_leaf = good.clone();
        wrong_leaf[1]["leaf"] = json!(12345);
        assert_eq!(
            inputs_error(&shape, with_paths(wrong_leaf)),
            "inputs.paths[1]: challenge 1 does not hash to inputs.root"
        );
        let mut wrong_index = good.clone();
        wrong_index[0]["index"] = json!(3);
        assert_eq!(
            inputs_error(&shape, with_paths(wrong_index)),
            "inputs.paths[0]: challenge 0 does not hash to inputs.root"
        );
        let mut out_of_range = good.clone();
        out_of_range[0]["index"] = json!(8);
        assert_eq!(
            inputs_error(&shape, with_paths(out_of_range)),
            "inputs.paths[0].index must be an integer in 0..=7, got 8"
        );
        let mut short = good.clone();
        short[1]["siblings"].as_array_mut().unwrap().pop();
        assert_eq!(
            inputs_error(&shape, with_paths(short)),
            "inputs.paths[1].siblings must have 3 elements, got 2"
        );
        let mut bad_sibling = good.clone();
        bad_sibling[1]["siblings"][2] = json!("-1");
        assert_eq!(
            inputs_error(&shape, with_paths(bad_sibling)),
            "inputs.paths[1].siblings[2]: field elements cannot be negative"
        );
        let mut missing_leaf = good.clone();
        missing_leaf[0].as_object_mut().unwrap().remove("leaf");
        assert_eq!(inputs_error(&shape, with_paths(missing_leaf)), "inputs.paths[0].leaf is required");
        assert_eq!(
            inputs_error(&shape, with_paths(good[..1].to_vec())),
            "inputs.paths must have 2 elements, got 1"
        );
        assert_eq!(inputs_error(&shape, json!({ "paths": good })), "inputs.root is required");
    }

    #[test]
    fn a_wrong_index_bit_is_unsatisfied() {
        // An instance whose public index disagrees with its path.
        let tree = MerkleInstance::from_leaves(leaves(4), &[1]);
        let mut paths = tree.paths;
        paths[0].index = 0;
        let instance = MerkleInstance { root: tree.root, paths };
        assert!(!is_satisfied(Box::new(instance)));
    }
}
