//! A PoRep partition's assignment: the prefix of storage-proofs-porep's
//! `StackedCircuit::synthesize` recorded once (ONE, the replica id, comm_d
//! and comm_r as public inputs, comm_r_last and comm_c, comm_r's hash),
//! then every challenge on its own thread into its own buffers, joined in
//! challenge order. The challenges are independent: each reads only the
//! replica id's bits and the three roots' values, and allocates nothing the
//! next one reads, so the joined assignment is the sequential one.

use ark_bls12_381::Fr;
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

use super::assignment::AssignmentCs;
use super::bits::Bit;
use super::challenge::{self, Shared};
use super::vanilla::ChallengeProof;
use crate::record::Recorded;
use crate::Error;

/// A seal proof's public inputs, as `porep` builds them for the circuit.
pub type SealInputs<Tree> = PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    <Sha256Hasher as Hasher>::Domain,
>;

fn synthesis(e: SynthesisError) -> Error {
    Error::Synthesis(e.to_string())
}

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
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))
        .map_err(synthesis)?;
    let replica_id = public(&mut cs, public_inputs.replica_id.into())?;
    let replica_id_bits = reverse_bit_numbering(replica_id.to_bits_le(&mut cs).map_err(synthesis)?);
    let comm_d = public(&mut cs, tau.comm_d.into())?;
    public(&mut cs, tau.comm_r.into())?;
    let comm_r_last = AllocatedNum::alloc(&mut cs, || Ok(comm_r_last.into())).map_err(synthesis)?;
    let comm_c = AllocatedNum::alloc(&mut cs, || Ok(comm_c.into())).map_err(synthesis)?;
    // comm_r = H(comm_c || comm_r_last); the equality allocates nothing.
    <Tree::Hasher as Hasher>::Function::hash2_circuit(&mut cs, &comm_c, &comm_r_last)
        .map_err(synthesis)?;
    let shared = Shared {
        replica_id: replica_id_bits
            .iter()
            .map(Bit::from_boolean)
            .collect::<Result<_, _>>()
            .map_err(synthesis)?,
        comm_d,
        comm_c,
        comm_r_last,
    };

    let challenges = proofs
        .par_iter()
        .map(|proof| {
            let mut challenge_cs = AssignmentCs::default();
            challenge::synthesize::<Tree>(
                &mut challenge_cs,
                ChallengeProof::open(proof)?,
                &shared,
            )?;
            Ok(challenge_cs)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(join(cs, challenges))
}

/// `value` allocated, then made a public input (`AllocatedNum::inputize`).
fn public(cs: &mut AssignmentCs, value: Scalar) -> Result<AllocatedNum<Scalar>, Error> {
    let num = AllocatedNum::alloc(&mut *cs, || Ok(value)).map_err(synthesis)?;
    num.inputize(&mut *cs).map_err(synthesis)?;
    Ok(num)
}

/// The prefix's and the challenges' values in the sequential order: every
/// input, then every aux value; each challenge's buffers are released once
/// copied, so at most about two copies of the assignment exist at a time.
fn join(prefix: AssignmentCs, challenges: Vec<AssignmentCs>) -> Recorded {
    let num_inputs = prefix.inputs.len() + challenges.iter().map(|c| c.inputs.len()).sum::<usize>();
    let num_aux = prefix.aux.len() + challenges.iter().map(|c| c.aux.len()).sum::<usize>();
    let mut values: Vec<Fr> = Vec::with_capacity(num_inputs + num_aux);
    values.extend_from_slice(&prefix.inputs);
    for challenge in &challenges {
        values.extend_from_slice(&challenge.inputs);
    }
    values.extend_from_slice(&prefix.aux);
    for challenge in challenges {
        values.extend_from_slice(&challenge.aux);
    }
    Recorded::Assignment { values, num_inputs }
}
