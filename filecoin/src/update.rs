//! SnapDeals (empty-sector update) partitions from vanilla proofs: each
//! partition's circuit built exactly as filecoin-proofs'
//! `generate_empty_sector_update_proof_with_vanilla` builds it, run through the
//! recording constraint system, once `check` has verified every partition's
//! vanilla proof (filecoin-proofs' prover does not; an unverified proof would
//! only give an unsatisfied circuit, or a panic).

use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::constants::DefaultPieceDomain;
use filecoin_proofs::{with_shape, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{TreeRDomain, TreeRHasher};
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof, PublicInputs,
    PublicParams, SetupParams,
};

use crate::kinds::RegisteredProof;
use crate::record::{record, Evaluation, Recorded};
use crate::{vanilla, Error, ProofRequest};

/// A SnapDeals job, holding exactly the arguments of filecoin-proofs-api's
/// `generate_empty_sector_update_proof_with_vanilla`.
#[derive(Clone, Debug)]
pub struct UpdateRequest {
    /// The update proof and sector size; it selects the circuit.
    pub registered_proof: RegisteredUpdateProof,
    /// The sector key's replica commitment (a public input).
    pub comm_r_old: [u8; 32],
    /// The updated replica's commitment (a public input).
    pub comm_r_new: [u8; 32],
    /// The new data's commitment (a public input).
    pub comm_d_new: [u8; 32],
    /// One bincode-encoded `PartitionProof` per partition, in partition order,
    /// as filecoin-proofs-api's `generate_partition_proofs` returns them (the
    /// bytes of each `PartitionProofBytes`).
    pub vanilla_proofs: Vec<Vec<u8>>,
}

impl ProofRequest for UpdateRequest {
    fn registered_proof(&self) -> RegisteredProof {
        RegisteredProof::Update(self.registered_proof)
    }

    /// A V1 update proof; the commitments are field elements; one vanilla
    /// proof per partition, each deserializing for the registered proof with
    /// the partition's apex-leaf and challenge counts, every path with its
    /// tree's shape and every value a field element; each proof's roots hash
    /// with its comm_c to comm_r_old and comm_r_new; and each verifies
    /// (`EmptySectorUpdate::verify`) against the three commitments.
    fn check(&self) -> Result<(), Error> {
        with_shape!(self.sector_size(), check_inner, self)
    }

    /// The registered proof's update partitions (1 at 2 KiB, 16 at 32 GiB).
    fn partition_count(&self) -> Result<usize, Error> {
        if self.registered_proof.major_version() != 1 {
            return Err(Error::Invalid(format!(
                "{:?}: only V1 update proofs are supported",
                self.registered_proof
            )));
        }
        let config = SectorUpdateConfig::from_porep_config(&self.registered_proof.as_v1_config());
        Ok(usize::from(config.update_partitions))
    }

    /// Partition `k`'s circuit from its vanilla proof, which `check`
    /// verified.
    fn record_partition(&self, k: usize, evaluation: Evaluation) -> Result<Recorded, Error> {
        with_shape!(self.sector_size(), record_partition_inner, self, k, evaluation)
    }
}

/// A request decoded as filecoin-proofs decodes it before proving.
struct Decoded<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    /// The vanilla public parameters of the sector size.
    params: PublicParams,
    /// The public inputs, `k` the partition count as filecoin-proofs sets it
    /// (each partition's circuit is given its own index).
    pub_inputs: PublicInputs,
    /// The deserialized vanilla proofs, one per partition.
    proofs: Vec<PartitionProof<Tree>>,
}

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::Invalid(e.to_string())
}

fn decode<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    req: &UpdateRequest,
) -> Result<Decoded<Tree>, Error> {
    let partitions = req.partition_count()?;
    // `try_from_bytes` takes any 32 bytes; filecoin-proofs turns them into
    // field elements later, with `expect`.
    for (name, value) in
        [("comm_r_old", &req.comm_r_old), ("comm_r_new", &req.comm_r_new), ("comm_d_new", &req.comm_d_new)]
    {
        vanilla::field_element(name, value)?;
    }
    let comm_r_old =
        TreeRDomain::try_from_bytes(&req.comm_r_old).map_err(|e| invalid(format!("comm_r_old: {e}")))?;
    let comm_r_new =
        TreeRDomain::try_from_bytes(&req.comm_r_new).map_err(|e| invalid(format!("comm_r_new: {e}")))?;
    let comm_d_new = DefaultPieceDomain::try_from_bytes(&req.comm_d_new)
        .map_err(|e| invalid(format!("comm_d_new: {e}")))?;
    if req.vanilla_proofs.len() != partitions {
        return Err(Error::Invalid(format!(
            "{:?} takes {partitions} vanilla proof(s), one per partition, got {}",
            req.registered_proof,
            req.vanilla_proofs.len()
        )));
    }
    let proofs: Vec<PartitionProof<Tree>> =
        vanilla::deserialize(&req.vanilla_proofs, format!("{:?} partition proof", req.registered_proof))?;
    let config = SectorUpdateConfig::from_porep_config(&req.registered_proof.as_v1_config());
    let setup = compound_proof::SetupParams {
        vanilla_params: SetupParams { sector_bytes: req.sector_size() },
        partitions: Some(partitions),
        priority: false,
    };
    let pp = <EmptySectorUpdateCompound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::setup(&setup)
    .map_err(|e| Error::Filecoin(format!("{e:#}")))?;
    Ok(Decoded {
        params: pp.vanilla_params,
        pub_inputs: PublicInputs { k: partitions, comm_r_old, comm_d_new, comm_r_new, h: config.h },
        proofs,
    })
}

fn check_inner<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    req: &UpdateRequest,
) -> Result<(), Error> {
    let d = decode::<Tree>(req)?;
    let leaves = vanilla::nodes::<TreeRHasher>(req.sector_size());
    for (i, proof) in d.proofs.iter().enumerate() {
        let (apex, challenges) = (proof.apex_leafs.len(), proof.challenge_proofs.len());
        if apex != d.params.apex_leaf_count || challenges != d.params.challenge_count {
            return Err(Error::Invalid(format!(
                "vanilla proof {i} has {apex} apex leafs and {challenges} challenges; \
                 a {:?} partition has {} and {}",
                req.registered_proof, d.params.apex_leaf_count, d.params.challenge_count
            )));
        }
        vanilla::domain(format_args!("vanilla proof {i}: comm_c"), &proof.comm_c)?;
        for (n, leaf) in proof.apex_leafs.iter().enumerate() {
            vanilla::domain(format_args!("vanilla proof {i}: apex leaf {n}"), leaf)?;
        }
        for (n, challenge) in proof.challenge_proofs.iter().enumerate() {
            let what = |tree| format!("vanilla proof {i}, challenge {n}: {tree}");
            vanilla::merkle_proof(what("proof_r_old"), &challenge.proof_r_old, leaves)?;
            vanilla::merkle_proof(what("proof_d_new"), &challenge.proof_d_new, leaves)?;
            vanilla::merkle_proof(what("proof_r_new"), &challenge.proof_r_new, leaves)?;
        }
        // comm_r = H(comm_c || root of tree R), for the old and the new replica.
        let first = &proof.challenge_proofs[0];
        let opens = |root: TreeRDomain| <TreeRHasher as Hasher>::Function::hash2(&proof.comm_c, &root);
        if opens(first.proof_r_old.root()) != d.pub_inputs.comm_r_old {
            return Err(Error::Invalid(format!("vanilla proof {i} is not for this comm_r_old")));
        }
        if opens(first.proof_r_new.root()) != d.pub_inputs.comm_r_new {
            return Err(Error::Invalid(format!("vanilla proof {i} is not for this comm_r_new")));
        }
        let partition_inputs = PublicInputs { k: i, ..d.pub_inputs };
        let verified = vanilla::reference(format_args!("vanilla proof {i}"), || {
            EmptySectorUpdate::<Tree>::verify(&d.params, &partition_inputs, proof)
        })?
        .map_err(|e| Error::Invalid(format!("partition {i}: {e:#}")))?;
        if !verified {
            return Err(Error::Invalid(format!(
                "partition {i}: the vanilla proof does not verify against comm_r_old, comm_r_new and comm_d_new"
            )));
        }
    }
    Ok(())
}

fn record_partition_inner<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    req: &UpdateRequest,
    k: usize,
    evaluation: Evaluation,
) -> Result<Recorded, Error> {
    let d = decode::<Tree>(req)?;
    let proof = d.proofs.get(k).ok_or_else(|| {
        Error::Invalid(format!(
            "partition {k} of a {}-partition {:?} request",
            d.proofs.len(),
            req.registered_proof
        ))
    })?;
    let circuit = <EmptySectorUpdateCompound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::circuit(&d.pub_inputs, (), proof, &d.params, Some(k))
    .map_err(|e| Error::Filecoin(format!("{e:#}")))?;
    record(circuit, evaluation)
}
