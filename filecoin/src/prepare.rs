//! A Filecoin parameter file and a recorded partition as the daemon's engines
//! take them: kernels' `PreparedCircuit` (loaded from the file with the
//! blank circuit's matrices, or with a partition's densities), whose A and B
//! queries keep the
//! file's dense layout and say which variables their points pair with, and
//! kernels' `Synthesized`, the partition's a, b and c padded to the domain
//! (recorded directly, or the compiled matrices times the assignment, or
//! that product left to an engine that evaluates it on its device).
//!
//! The densities that select the variables are structural (which variables
//! appear in which query), so the ones recorded with any partition's witness
//! are the file's (`filecoin/tests/proofs/filecoin_api.rs` checks them against the blank
//! circuit's); every query length is checked against them.

use std::path::Path;
use std::sync::Arc;

use ark_bls12_381::{G1Affine, G2Affine};
use ark_ec::AffineRepr;
use ark_ff::Zero;
use ark_groth16::ProvingKey;
use cuzk_kernels::groth16::{self, Abc, PreparedCircuit, Selection, Synthesized};
use cuzk_kernels::r1cs::Matrices;
use cuzk_kernels::{Fr, KernelError};

use crate::params::{MappedParams, QueryFile};
use crate::record::{Densities, Recorded, Shape, Witness};
use crate::shape_cache::ShapeCache;
use crate::{Error, Kind};

/// How a circuit is loaded beyond its file.
#[derive(Clone, Copy, Default)]
pub struct LoadOptions<'a> {
    /// Leave the key's queries in the file, read by range by the engine
    /// (`ProveStartEngine::reads_key_by_range`), instead of decoding them
    /// onto the host: a 32 GiB PoRep key is 50 GB decoded.
    pub key_in_file: bool,
    /// Where the blank circuit's compiled shape is kept between starts.
    pub shapes: Option<&'a ShapeCache<'a>>,
}

/// Reads `cache_id`'s parameter file (`params`, for `kind` at `sector_size`)
/// into a prepared circuit. With `witness` (a partition just recorded for
/// direct evaluation) the circuit takes that partition's densities and no
/// matrices; without one, the blank circuit's densities and compiled
/// matrices, which serve both evaluations: read from the shape cache when
/// it holds them, else recorded once (and written there).
pub fn load_circuit(
    cache_id: &str,
    params: &Path,
    kind: Kind,
    sector_size: u64,
    witness: Option<&Witness>,
    options: LoadOptions<'_>,
) -> Result<PreparedCircuit, Error> {
    let mapped = MappedParams::open(params)?;
    let key_in_file = options.key_in_file;
    match witness {
        Some(witness) => prepared_circuit(
            cache_id,
            &mapped,
            &witness.densities,
            Matrices::empty(witness.inputs.len(), witness.aux.len()),
            witness.num_constraints(),
            key_in_file,
        ),
        None => {
            let cached = options.shapes.and_then(|cache| cache.load(cache_id));
            let Shape { matrices, constraints, densities } = match cached {
                Some(shape) => shape,
                None => {
                    let started = std::time::Instant::now();
                    let shape = kind.blank(sector_size)?.shape;
                    log::info!("{cache_id}: blank circuit recorded in {:.1?}", started.elapsed());
                    if let Some(cache) = options.shapes {
                        cache.store(cache_id, &shape);
                    }
                    shape
                }
            };
            prepared_circuit(cache_id, &mapped, &densities, matrices, constraints, key_in_file)
        }
    }
}

/// Decodes the file's queries into a prepared circuit named `circuit_id`,
/// with the circuit's `matrices` (compiled, or [`Matrices::empty`] for
/// direct evaluation) and `constraints` (without the input constraints);
/// with `key_in_file` only the points the finalizer adds are decoded, the
/// queries left to be read by range from the file.
pub fn prepared_circuit(
    circuit_id: &str,
    params: &MappedParams,
    densities: &Densities,
    matrices: Matrices,
    constraints: usize,
    key_in_file: bool,
) -> Result<PreparedCircuit, Error> {
    let (inputs, aux) = (matrices.num_inputs(), matrices.num_aux());
    if densities.b_input.len() != inputs || densities.a_aux.len() != aux || densities.b_aux.len() != aux {
        return Err(Error::KeyMismatch(format!(
            "{circuit_id}: densities for {} inputs and {} aux variables, the circuit has {inputs} and {aux}",
            densities.b_input.len(),
            densities.a_aux.len(),
        )));
    }
    let vk = &params.vk;
    let (a_selection, b_selection, one_in_b) = selections(densities);
    let mismatch = |e: KernelError| Error::KeyMismatch(e.to_string());
    if key_in_file {
        // The finalizer adds A's and B's first points (ONE's); the rest stay
        // in the file. bellperson stores B's point for ONE only when ONE is
        // in B: otherwise the identity stands first.
        let lead_b = match params.first_b()? {
            Some(first) if one_in_b => first,
            _ => (G1Affine::zero(), G2Affine::zero()),
        };
        let head = ProvingKey {
            vk: vk.to_ark(),
            beta_g1: vk.beta_g1,
            delta_g1: vk.delta_g1,
            a_query: params.first_a()?.into_iter().collect(),
            b_g1_query: vec![lead_b.0],
            b_g2_query: vec![lead_b.1],
            h_query: Vec::new(),
            l_query: Vec::new(),
        };
        let source = Arc::new(QueryFile::open(params, !one_in_b)?);
        return PreparedCircuit::sparse_from_source(
            circuit_id,
            head,
            source,
            matrices,
            constraints,
            a_selection,
            b_selection,
        )
        .map_err(mismatch);
    }
    // The engines pair the first point of each query with ONE; bellperson
    // stores a B point for ONE only when ONE appears in B.
    let lead = |one: bool| usize::from(!one);
    let mut b_g1 = Vec::with_capacity(params.counts().b_g1 + lead(one_in_b));
    let mut b_g2 = Vec::with_capacity(params.counts().b_g2 + lead(one_in_b));
    if !one_in_b {
        b_g1.push(G1Affine::zero());
        b_g2.push(G2Affine::zero());
    }
    b_g1.extend(params.b_g1()?);
    b_g2.extend(params.b_g2()?);
    let pk = ProvingKey {
        vk: vk.to_ark(),
        beta_g1: vk.beta_g1,
        delta_g1: vk.delta_g1,
        a_query: params.a()?,
        b_g1_query: b_g1,
        b_g2_query: b_g2,
        h_query: params.h()?,
        l_query: params.l()?,
    };
    PreparedCircuit::sparse(circuit_id, pk, matrices, constraints, a_selection, b_selection).map_err(mismatch)
}

/// The variables after ONE that A and B hold, as indices into
/// `assignment[1..]`, and whether ONE is B-dense. A holds every input (the
/// input constraints put them there) and the A-dense aux variables; B the
/// B-dense inputs and aux variables.
fn selections(densities: &Densities) -> (Selection, Selection, bool) {
    let inputs = densities.b_input.len();
    let dense_aux = |bits: &[bool]| -> Vec<u32> {
        bits.iter().enumerate().filter(|(_, &dense)| dense).map(|(j, _)| (inputs + j - 1) as u32).collect()
    };
    let a: Vec<u32> = (0..inputs as u32 - 1).chain(dense_aux(&densities.a_aux)).collect();
    let b: Vec<u32> = (1..inputs)
        .filter(|&i| densities.b_input[i])
        .map(|i| (i - 1) as u32)
        .chain(dense_aux(&densities.b_aux))
        .collect();
    let one_in_b = densities.b_input.first().copied().unwrap_or(false);
    (Selection::Only(a), Selection::Only(b), one_in_b)
}

/// A recorded partition as the engines prove it: the assignment (inputs,
/// then aux) and a, b, c (the input constraints appended) padded with zeros
/// to the circuit's domain; from the compiled matrices when only the
/// assignment was recorded, on the host, or with `on_device` by the engine
/// (`Abc::Deferred`).
pub fn synthesized(
    recorded: Recorded,
    circuit: &PreparedCircuit,
    on_device: bool,
) -> Result<Synthesized, Error> {
    let (inputs, constraints) = match &recorded {
        Recorded::Witness(w) => (w.inputs.len(), Some(w.num_constraints())),
        Recorded::Assignment { num_inputs, .. } => (*num_inputs, None),
    };
    if inputs != circuit.num_inputs || constraints.is_some_and(|m| m != circuit.num_constraints) {
        return Err(Error::KeyMismatch(format!(
            "the partition has {inputs} inputs and {constraints:?} constraints; {} has {} and {}",
            circuit.circuit_id, circuit.num_inputs, circuit.num_constraints
        )));
    }
    let Witness { inputs, aux, mut a, mut b, mut c, .. } = match recorded {
        Recorded::Witness(witness) => witness,
        Recorded::Assignment { values, .. } => {
            let evaluated =
                if on_device { groth16::defer(circuit, values) } else { groth16::evaluate(circuit, values) };
            return evaluated.map_err(|e| match e {
                KernelError::Unsatisfied(row) => {
                    Error::Synthesis(format!("the witness does not satisfy constraint {row}"))
                }
                other => Error::KeyMismatch(other.to_string()),
            });
        }
    };
    for values in [&mut a, &mut b, &mut c] {
        values.resize(circuit.domain_size, Fr::zero());
    }
    let mut assignment = inputs;
    assignment.extend_from_slice(&aux);
    Ok(Synthesized { abc: Abc::Host { a, b, c }, assignment, num_inputs: circuit.num_inputs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_follow_bellpersons_dense_layout() {
        let densities = Densities {
            a_aux: vec![true, false, true],
            b_input: vec![false, true, false],
            b_aux: vec![false, true, true],
        };
        let (a, b, one_in_b) = selections(&densities);
        // assignment[1..] = x1, x2, aux0, aux1, aux2
        assert_eq!(a, Selection::Only(vec![0, 1, 2, 4]));
        assert_eq!(b, Selection::Only(vec![0, 3, 4]));
        assert!(!one_in_b);
        // A's length is what the file's a query holds (every input, then dense aux).
        assert_eq!(1 + a.len(0), densities.a_query_len());
        // B's: the selected variables, plus ONE's point only when ONE is in B.
        assert_eq!(b.len(0) + usize::from(one_in_b), densities.b_query_len());
    }
}
