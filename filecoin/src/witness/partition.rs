//! A PoRep partition's assignment: the prefix of storage-proofs-porep's
//! `StackedCircuit::synthesize` recorded once (ONE, the replica id, comm_d
//! and comm_r as public inputs, comm_r_last and comm_c, comm_r's hash),
//! then every challenge on its own thread, in challenge order: the first
//! into its own buffers, which tell how many values each challenge
//! allocates, the others straight into their windows of the partition's
//! assignment. The challenges are independent: each reads only the
//! replica id's bits (the roots appear only in constraints) and allocates
//! nothing the next one reads, so the joined assignment is the sequential
//! one.

use ark_bls12_381::Fr;
use ark_ff::Zero;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{HashFunction, Hasher};
use rayon::prelude::*;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::util::reverse_bit_numbering;
use storage_proofs_porep::stacked::{Proof as VanillaProof, PublicInputs};

use super::bits::Bit;
use super::challenge;
use super::vanilla::ChallengeProof;
use crate::assignment::{synthesis, AssignmentCs, Aux};
use crate::record::Recorded;
use crate::Error;

/// A seal proof's public inputs, as `porep` builds them for the circuit.
pub type SealInputs<Tree> =
    PublicInputs<<<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain, <Sha256Hasher as Hasher>::Domain>;

/// The assignment of the partition whose challenges' vanilla proofs are
/// `proofs`: equal, value for value, to what the reference circuit
/// (`StackedCompound::circuit` of the same inputs) records in assignment
/// mode, ONE and the inputs first, then the aux values.
pub fn record_partition<Tree: 'static + MerkleTreeTrait>(
    public_inputs: &SealInputs<Tree>,
    proofs: &[VanillaProof<Tree, Sha256Hasher>],
) -> Result<Recorded, Error> {
    // `StackedCompound::circuit`'s checks, with its words.
    let first = proofs
        .first()
        .ok_or_else(|| Error::Filecoin("Cannot create a circuit with no vanilla proofs".into()))?;
    let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
    if proofs.iter().any(|p| p.comm_r_last() != comm_r_last) {
        return Err(Error::Filecoin("inconsistent comm_r_lasts".into()));
    }
    if proofs.iter().any(|p| p.comm_c() != comm_c) {
        return Err(Error::Filecoin("inconsistent comm_cs".into()));
    }
    let tau = public_inputs
        .tau
        .as_ref()
        .ok_or_else(|| Error::Synthesis(SynthesisError::AssignmentMissing.to_string()))?;

    // The prefix of `StackedCircuit::synthesize`, as the recording system
    // sees it: ONE first.
    let mut cs = AssignmentCs::default();
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE)).map_err(synthesis)?;
    let replica_id = public(&mut cs, public_inputs.replica_id.into())?;
    let replica_id_bits = reverse_bit_numbering(replica_id.to_bits_le(&mut cs).map_err(synthesis)?);
    public(&mut cs, tau.comm_d.into())?;
    public(&mut cs, tau.comm_r.into())?;
    let comm_r_last = AllocatedNum::alloc(&mut cs, || Ok(comm_r_last.into())).map_err(synthesis)?;
    let comm_c = AllocatedNum::alloc(&mut cs, || Ok(comm_c.into())).map_err(synthesis)?;
    // comm_r = H(comm_c || comm_r_last); the equality allocates nothing.
    <Tree::Hasher as Hasher>::Function::hash2_circuit(&mut cs, &comm_c, &comm_r_last).map_err(synthesis)?;
    let replica_id: Vec<Bit> =
        replica_id_bits.iter().map(Bit::from_boolean).collect::<Result<_, _>>().map_err(synthesis)?;

    // The first challenge into its own buffers: its counts size every
    // other challenge's window (all challenges are the same circuit), so
    // those write their values where they end up.
    let first = record_challenge(first, &replica_id, Aux::default())?;
    let (challenge_inputs, challenge_aux) = (first.inputs.len(), first.aux.len());
    let num_inputs = cs.inputs.len() + proofs.len() * challenge_inputs;
    let head = num_inputs + cs.aux.len() + challenge_aux;
    let total = head + (proofs.len() - 1) * challenge_aux;
    let mut values = Vec::with_capacity(total);
    // Zeros, written on every core (the page faults of a fresh assignment
    // are much of its cost), then overwritten.
    values.par_extend(rayon::iter::repeat_n(Fr::zero(), total));
    let (head_slots, windows) = values.split_at_mut(head);
    let others = windows
        .par_chunks_mut(challenge_aux.max(1))
        .zip(proofs[1..].par_iter())
        .map(|(window, proof)| record_challenge(proof, &replica_id, Aux::window(window)))
        .collect::<Result<Vec<_>, Error>>()?;
    let mut inputs = Vec::with_capacity(num_inputs);
    inputs.extend_from_slice(&cs.inputs);
    inputs.extend_from_slice(&first.inputs);
    for (k, other) in others.into_iter().enumerate() {
        if other.inputs.len() != challenge_inputs || other.aux.len() != challenge_aux {
            return Err(Error::Synthesis(format!(
                "challenge {} allocated {} inputs and {} aux values, challenge 0 {} and {}",
                k + 1,
                other.inputs.len(),
                other.aux.len(),
                challenge_inputs,
                challenge_aux
            )));
        }
        inputs.extend_from_slice(&other.inputs);
    }
    let (input_slots, aux_slots) = head_slots.split_at_mut(num_inputs);
    input_slots.copy_from_slice(&inputs);
    let (prefix_slots, first_slots) = aux_slots.split_at_mut(cs.aux.len());
    prefix_slots.copy_from_slice(cs.aux.values());
    first_slots.copy_from_slice(first.aux.values());
    Ok(Recorded::Assignment { values, num_inputs })
}

/// `value` allocated, then made a public input (`AllocatedNum::inputize`).
fn public(cs: &mut AssignmentCs, value: Scalar) -> Result<AllocatedNum<Scalar>, Error> {
    let num = AllocatedNum::alloc(&mut *cs, || Ok(value)).map_err(synthesis)?;
    num.inputize(&mut *cs).map_err(synthesis)?;
    Ok(num)
}

/// Challenge `proof`'s inputs, and its aux values into `aux`.
fn record_challenge<'a, Tree: MerkleTreeTrait>(
    proof: &VanillaProof<Tree, Sha256Hasher>,
    replica_id: &[Bit],
    aux: Aux<'a>,
) -> Result<AssignmentCs<'a>, Error> {
    let mut cs = AssignmentCs { inputs: Vec::new(), aux };
    challenge::synthesize::<Tree>(&mut cs, ChallengeProof::open(proof)?, replica_id)?;
    Ok(cs)
}
