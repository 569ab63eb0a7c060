//! One challenge's vanilla proof opened into what its circuit allocates:
//! the values the reference circuit's private `Proof` (storage-proofs-porep
//! `stacked/circuit/params.rs`) takes from it in its `From` conversion.
//!
//! Two of those values sit in fields the vanilla types keep crate-private:
//! a column proof's Merkle proof (`ColumnProof::inclusion_proof`) and a
//! labeling proof's node (`LabelingProof::node`). Both types are serde
//! types, so they are read back through their own serialization into
//! structs with the same fields in the same order (bincode is positional);
//! a drifted layout fails to decode, and the witness equality test
//! (`filecoin/tests/proofs/witness.rs`) would catch any wrong value.

use blstrs::Scalar;
use filecoin_hashers::Hasher;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{Column, ColumnProof, Proof as VanillaProof};

use crate::Error;

/// A Merkle path as the circuits take it: per level the siblings and the
/// position among them (`MerkleProofTrait::as_options`).
pub type PathOptions = Vec<(Vec<Option<Scalar>>, Option<usize>)>;

/// A parent's column: its value in every layer and the path of its hash
/// in tree C.
pub struct ColumnOpening {
    /// Layer 1 first.
    pub rows: Vec<Scalar>,
    /// Tree C's path from the column's hash.
    pub path: PathOptions,
}

/// What one challenge's circuit allocates from its vanilla proof.
pub struct ChallengeProof {
    /// The challenged node of the sector's data (tree D's leaf).
    pub data_leaf: Scalar,
    /// Tree D's (SHA-256, binary) path from that leaf.
    pub comm_d_path: PathOptions,
    /// The challenged node's index.
    pub challenge: u64,
    /// Tree R's path from the encoded node.
    pub comm_r_last_path: PathOptions,
    /// Tree C's path from the challenged column's hash.
    pub comm_c_path: PathOptions,
    /// The DRG parents' columns.
    pub drg_parents: Vec<ColumnOpening>,
    /// The expander parents' columns.
    pub exp_parents: Vec<ColumnOpening>,
}

/// `storage_proofs_porep::stacked::ColumnProof`'s fields, in its order.
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: DeserializeOwned"))]
struct ColumnProofFields<P: MerkleProofTrait> {
    column: Column<P::Hasher>,
    inclusion_proof: P,
}

/// `storage_proofs_porep::stacked::LabelingProof`'s serialized fields, in
/// its order (its marker field is skipped by serde).
#[derive(Deserialize)]
struct LabelingProofFields<D> {
    #[allow(dead_code)] // Read to reach the node; the circuit does not use it.
    parents: Vec<D>,
    #[allow(dead_code)] // As above.
    layer_index: u32,
    node: u64,
}

/// `value` read back as the struct with the same serialized fields.
fn reread<T: Serialize, U: DeserializeOwned>(value: &T, what: &str) -> Result<U, Error> {
    let unreadable = |e: bincode::Error| Error::Synthesis(format!("reading a vanilla {what}: {e}"));
    bincode::deserialize(&bincode::serialize(value).map_err(unreadable)?).map_err(unreadable)
}

fn column<P: MerkleProofTrait>(proof: &ColumnProof<P>) -> Result<ColumnOpening, Error> {
    let fields: ColumnProofFields<P> = reread(proof, "column proof")?;
    Ok(ColumnOpening {
        rows: fields.column.rows().iter().map(|&row| row.into()).collect(),
        path: fields.inclusion_proof.as_options(),
    })
}

impl ChallengeProof {
    /// The values of `proof`, as the reference's `Proof::from` takes them.
    pub fn open<Tree: MerkleTreeTrait, G: Hasher>(
        proof: &VanillaProof<Tree, G>,
    ) -> Result<ChallengeProof, Error> {
        let columns = &proof.replica_column_proofs;
        let first_label = proof
            .labeling_proofs
            .first()
            .ok_or_else(|| Error::Invalid("a PoRep vanilla proof without labeling proofs".into()))?;
        let labeling: LabelingProofFields<<Tree::Hasher as Hasher>::Domain> =
            reread(first_label, "labeling proof")?;
        Ok(ChallengeProof {
            data_leaf: proof.comm_d_proofs.leaf().into(),
            comm_d_path: proof.comm_d_proofs.as_options(),
            challenge: labeling.node,
            comm_r_last_path: proof.comm_r_last_proof.as_options(),
            comm_c_path: column(&columns.c_x)?.path,
            drg_parents: columns.drg_parents.iter().map(column).collect::<Result<_, _>>()?,
            exp_parents: columns.exp_parents.iter().map(column).collect::<Result<_, _>>()?,
        })
    }
}
