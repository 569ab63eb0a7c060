//! WinningPoSt and WindowPoSt partitions from vanilla proofs: each partition's
//! circuit built exactly as filecoin-proofs' `generate_winning_post_with_vanilla`,
//! `generate_window_post_with_vanilla` and `generate_single_window_post_with_vanilla`
//! build it (same public inputs, same partitioning, the last WindowPoSt partition
//! padded with its last sector), run through the recording constraint system.
//! Every partition's vanilla proofs are verified at `check`, as
//! filecoin-proofs verifies them before it proves.

use std::collections::HashSet;

use filecoin_hashers::Hasher;
use filecoin_proofs::parameters::{window_post_setup_params, winning_post_setup_params};
use filecoin_proofs::{
    as_safe_commitment, single_partition_vanilla_proofs, with_shape, FallbackPoStSectorProof, PoStConfig,
    PoStType,
};
use filecoin_proofs_api::RegisteredPoStProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::kinds::RegisteredProof;
use crate::record::{record, Evaluation, Recorded};
use crate::{vanilla, Error, ProofRequest};

/// A PoSt job, holding exactly the arguments of filecoin-proofs-api's
/// `generate_*_post_with_vanilla` functions.
#[derive(Clone, Debug)]
pub struct PostRequest {
    /// Which PoSt and sector size; it selects the circuit and its parameters.
    pub registered_proof: RegisteredPoStProof,
    /// The chain randomness the challenges were drawn from (a public input).
    pub randomness: [u8; 32],
    /// The miner's prover id (a public input).
    pub prover_id: [u8; 32],
    /// One bincode-encoded `FallbackPoStSectorProof` per challenged sector, as
    /// `generate_single_vanilla_proof` returns them, in the order the verifier
    /// lists the sectors (ascending sector id).
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// `Some(p)`: `generate_single_window_post_with_vanilla` for partition `p`,
    /// and `vanilla_proofs` are that partition's sectors only; `None`: every
    /// partition of the whole sector set.
    pub partition_index: Option<usize>,
}

impl ProofRequest for PostRequest {
    fn registered_proof(&self) -> RegisteredProof {
        RegisteredProof::PoSt(self.registered_proof)
    }

    /// Randomness and prover id are field elements; every vanilla proof
    /// deserializes for the registered proof and holds one sector with its
    /// challenge count; no sector twice; the counts fit (WinningPoSt: its
    /// sector count, and no partition index; a single WindowPoSt partition:
    /// at most one partition's sectors); every inclusion path has its tree's
    /// shape and ends at the sector's comm_r_last, and every value is a field
    /// element; then every partition's vanilla proofs verify as
    /// filecoin-proofs verifies them before it proves.
    fn check(&self) -> Result<(), Error> {
        with_shape!(self.sector_size(), check_inner, self)
    }

    /// 1 for WinningPoSt and for a single WindowPoSt partition, else one per
    /// `sector_count` sectors of the registered proof (filecoin-proofs'
    /// `get_partitions_for_window_post`).
    fn partition_count(&self) -> Result<usize, Error> {
        if self.vanilla_proofs.is_empty() {
            return Err(Error::Invalid("no vanilla proofs".into()));
        }
        if self.is_winning() || self.partition_index.is_some() {
            return Ok(1);
        }
        let per_partition = self.registered_proof.as_v1_config().sector_count;
        Ok(self.vanilla_proofs.len().div_ceil(per_partition))
    }

    /// Its vanilla proofs are arranged and verified as filecoin-proofs does
    /// before proving (`single_partition_vanilla_proofs`), as `check` did.
    fn record_partition(&self, k: usize, evaluation: Evaluation) -> Result<Recorded, Error> {
        with_shape!(self.sector_size(), record_partition_inner, self, k, evaluation)
    }
}

impl PostRequest {
    fn is_winning(&self) -> bool {
        self.registered_proof.typ() == PoStType::Winning
    }
}

/// A request decoded as filecoin-proofs decodes it before proving.
struct Decoded<Tree: MerkleTreeTrait> {
    /// The registered proof's configuration (challenge and sector counts).
    config: PoStConfig,
    /// The vanilla public parameters the compound proof is set up with.
    vanilla_params: fallback::PublicParams,
    /// The public inputs over every sector of the request, `k` as the
    /// filecoin-proofs function sets it (the partition of a single-partition
    /// request, else none).
    pub_inputs: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    /// The deserialized vanilla proofs, in the request's order.
    proofs: Vec<FallbackPoStSectorProof<Tree>>,
    /// How many partitions the compound proof has.
    partitions: usize,
}

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::Invalid(e.to_string())
}

fn decode<Tree: 'static + MerkleTreeTrait>(req: &PostRequest) -> Result<Decoded<Tree>, Error> {
    let config = req.registered_proof.as_v1_config();
    let winning = req.is_winning();
    if let (true, Some(p)) = (winning, req.partition_index) {
        return Err(Error::Invalid(format!(
            "partition_index {p} given for {:?}: only WindowPoSt has partitions",
            req.registered_proof
        )));
    }
    let partitions = req.partition_count()?;
    if winning && req.vanilla_proofs.len() != config.sector_count {
        return Err(Error::Invalid(format!(
            "{:?} takes {} vanilla proof(s), got {}",
            req.registered_proof,
            config.sector_count,
            req.vanilla_proofs.len()
        )));
    }
    if let Some(p) = req.partition_index {
        if req.vanilla_proofs.len() > config.sector_count {
            return Err(Error::Invalid(format!(
                "partition {p}: a {:?} partition holds at most {} sectors, got {} vanilla proofs",
                req.registered_proof,
                config.sector_count,
                req.vanilla_proofs.len()
            )));
        }
    }

    let randomness = as_safe_commitment(&req.randomness, "randomness").map_err(invalid)?;
    let prover_id = as_safe_commitment(&req.prover_id, "prover_id").map_err(invalid)?;
    let proofs: Vec<FallbackPoStSectorProof<Tree>> =
        vanilla::deserialize(&req.vanilla_proofs, format!("{:?} sector proof", req.registered_proof))?;

    let mut seen = HashSet::new();
    for (i, proof) in proofs.iter().enumerate() {
        let sectors = &proof.vanilla_proof.sectors;
        let challenges = sectors.first().map_or(0, |s| s.inclusion_proofs.len());
        if sectors.len() != 1 || challenges != config.challenge_count {
            return Err(Error::Invalid(format!(
                "vanilla proof {i} (sector {}) holds {} sector proofs with {challenges} challenges; \
                 a {:?} vanilla proof holds 1 with {}",
                u64::from(proof.sector_id),
                sectors.len(),
                req.registered_proof,
                config.challenge_count
            )));
        }
        if !seen.insert(proof.sector_id) {
            return Err(Error::Invalid(format!(
                "sector {} has more than one vanilla proof",
                u64::from(proof.sector_id)
            )));
        }
    }
    let vanilla_params = if winning {
        winning_post_setup_params(&config).map_err(filecoin)?
    } else {
        window_post_setup_params(&config)
    };
    let setup = compound_proof::SetupParams {
        vanilla_params,
        // filecoin-proofs leaves a single partition unnamed.
        partitions: (partitions > 1).then_some(partitions),
        priority: config.priority,
    };
    let pp = <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::setup(&setup)
    .map_err(filecoin)?;
    let pub_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: proofs.iter().map(|p| PublicSector { id: p.sector_id, comm_r: p.comm_r }).collect(),
        k: req.partition_index,
    };
    Ok(Decoded {
        config,
        vanilla_params: pp.vanilla_params,
        pub_inputs,
        proofs,
        partitions: pp.partitions.unwrap_or(1),
    })
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}

fn check_inner<Tree: 'static + MerkleTreeTrait>(req: &PostRequest) -> Result<(), Error> {
    let d = decode::<Tree>(req)?;
    let leaves = vanilla::nodes::<Tree::Hasher>(req.sector_size());
    for (i, proof) in d.proofs.iter().enumerate() {
        let what = format!("vanilla proof {i} (sector {})", u64::from(proof.sector_id));
        vanilla::domain(format_args!("{what}: comm_r"), &proof.comm_r)?;
        // `decode` saw exactly one sector proof in each.
        let sector = &proof.vanilla_proof.sectors[0];
        vanilla::domain(format_args!("{what}: comm_c"), &sector.comm_c)?;
        vanilla::domain(format_args!("{what}: comm_r_last"), &sector.comm_r_last)?;
        for (n, inclusion) in sector.inclusion_proofs.iter().enumerate() {
            vanilla::merkle_proof(format_args!("{what}, challenge {n}"), inclusion, leaves)?;
            // The circuit opens every path to the comm_r_last it hashes with
            // comm_c into comm_r; the vanilla verification compares the
            // paths' roots with each other only.
            if inclusion.root() != sector.comm_r_last {
                return Err(Error::Invalid(format!(
                    "{what}, challenge {n}: the path's root is not the sector proof's comm_r_last"
                )));
            }
        }
    }
    for k in 0..d.partitions {
        partition_proof(req, &d, k)?;
    }
    Ok(())
}

/// Partition `k`'s vanilla proof as filecoin-proofs hands it to the circuit,
/// verified as filecoin-proofs verifies it before proving
/// (`single_partition_vanilla_proofs`); a WinningPoSt partition's every
/// challenge is verified, where filecoin-proofs verifies only the first.
fn partition_proof<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest,
    d: &Decoded<Tree>,
    k: usize,
) -> Result<fallback::Proof<Tree::Proof>, Error> {
    // What filecoin-proofs hands `single_partition_vanilla_proofs`: for the
    // whole WindowPoSt (`partition_vanilla_proofs`), partition k's chunk of
    // sectors; otherwise every sector, under the request's partition index
    // (WinningPoSt: partition 0).
    let partition_inputs = match (req.is_winning(), req.partition_index) {
        (false, None) => fallback::PublicInputs {
            sectors: d
                .pub_inputs
                .sectors
                .chunks(d.vanilla_params.sector_count)
                .nth(k)
                .expect("k is below the partition count")
                .to_vec(),
            k: Some(k),
            ..d.pub_inputs.clone()
        },
        (_, index) => fallback::PublicInputs { k: Some(index.unwrap_or(k)), ..d.pub_inputs.clone() },
    };
    let what = format!("partition {k}'s vanilla proof");
    let proof = vanilla::reference(&what, || {
        single_partition_vanilla_proofs(&d.config, &d.vanilla_params, &partition_inputs, &d.proofs)
    })?
    .map_err(|e| Error::Invalid(format!("partition {k}: {e:#}")))?;
    if req.is_winning() {
        // filecoin-proofs unrolls the sector's challenges into one-challenge
        // "sectors" and verifies them against the one public sector, which
        // reaches the first only; the verifier lists the sector once per
        // challenge, and so does this.
        let every_challenge = fallback::PublicInputs {
            sectors: vec![partition_inputs.sectors[0].clone(); proof.sectors.len()],
            ..partition_inputs
        };
        let verified = vanilla::reference(&what, || {
            FallbackPoSt::<Tree>::verify(&d.vanilla_params, &every_challenge, &proof)
        })?
        .map_err(|e| Error::Invalid(format!("partition {k}: {e:#}")))?;
        if !verified {
            return Err(Error::Invalid(format!(
                "partition {k}: the vanilla proof's challenges do not all verify"
            )));
        }
    }
    Ok(proof)
}

fn record_partition_inner<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest,
    k: usize,
    evaluation: Evaluation,
) -> Result<Recorded, Error> {
    let d = decode::<Tree>(req)?;
    if k >= d.partitions {
        return Err(Error::Invalid(format!(
            "partition {k} of a {}-partition {:?} request",
            d.partitions, req.registered_proof
        )));
    }
    let vanilla = partition_proof(req, &d, k)?;
    // `prove_with_vanilla` numbers the partitions it is given from 0, so a
    // single WindowPoSt partition is circuit partition 0 of its own sectors.
    let circuit = <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::circuit(&d.pub_inputs, Default::default(), &vanilla, &d.vanilla_params, Some(k))
    .map_err(filecoin)?;
    record(circuit, evaluation)
}
