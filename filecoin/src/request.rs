//! The one interface every Filecoin kind is proved through: a request holding
//! exactly the arguments of filecoin-proofs-api's prover call, checked before
//! any partition runs, then built and recorded one circuit partition at a time
//! as filecoin-proofs builds it. PoRep (`porep::PorepRequest`), the PoSts
//! (`post::PostRequest`) and SnapDeals (`update::UpdateRequest`) implement
//! it, so the daemon holds any of them as one `Box<dyn ProofRequest>`.

use crate::kinds::RegisteredProof;
use crate::record::{Evaluation, Recorded};
use crate::{Error, Kind};

/// A proving request of one of the four kinds.
pub trait ProofRequest: Send + Sync {
    /// The registered proof: which circuit, public parameters and
    /// parameter file.
    fn registered_proof(&self) -> RegisteredProof;

    /// Cheap checks before any partition runs (the counts, the encodings,
    /// the commitments the proofs open to); `Error::Invalid` names what is
    /// wrong, for the client.
    fn check(&self) -> Result<(), Error>;

    /// Circuit partitions this request proves, one Groth16 proof each.
    fn partition_count(&self) -> Result<usize, Error>;

    /// Partition `k`'s circuit, built as filecoin-proofs builds it,
    /// synthesized and recorded as `evaluation` needs.
    fn record_partition(&self, k: usize, evaluation: Evaluation) -> Result<Recorded, Error>;

    /// The kind (which `.params` file) and the sector size.
    fn kind_and_sector_size(&self) -> (Kind, u64) {
        self.registered_proof().kind_and_sector_size()
    }

    /// The sector size, which selects the merkle tree shape.
    fn sector_size(&self) -> u64 {
        self.kind_and_sector_size().1
    }

    /// filecoin-proofs' cache identifier of the circuit: the name of its
    /// parameter files, and the daemon's circuit id for the job.
    fn cache_id(&self) -> Result<String, Error> {
        self.registered_proof().circuit_identifier()
    }
}
