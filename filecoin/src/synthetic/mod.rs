//! Real-shape Filecoin inputs without sealing: a commit-phase-1 output (C1)
//! for any registered sector size, 32 GiB and 64 GiB included, generated in
//! seconds, that every check of a sealed sector's accepts; PoSt vanilla
//! proofs of as many such sectors as a partition holds; SnapDeals vanilla
//! proofs of such a sector's update.
//!
//! Pre-commit 1 of a 32 GiB sector takes hours and hundreds of GB; a C1 opens
//! only 180 of its 2^30 nodes. The generator builds exactly what those
//! openings see, with storage-proofs' own functions for everything a
//! verifier or the circuit recomputes (replica id, challenges, parent graph,
//! labels, column hashes, tree hashes), and ends with the check filecoin-proofs'
//! own commit phase 1 makes on its output (`StackedDrg::verify_all_partitions`).
//!
//! | module | what |
//! | --- | --- |
//! | `blocks` | whole trees cheap to hash (tree D; SnapDeals' trees): repeated blocks |
//! | `columns` | SDR labels of the challenged nodes, random labels of their parents |
//! | `tree` | sparse trees C and R: only the opened paths, one root each |
//! | `porep` | the C1 output assembled from them |
//! | `post` | WinningPoSt and WindowPoSt vanilla proofs over sparse trees R |
//! | `update` | SnapDeals vanilla proofs over block trees |

pub mod blocks;
pub mod columns;
pub mod porep;
pub mod post;
pub mod tree;
pub mod update;

pub use porep::{generate_c1, SealInputs};
pub use post::{generate_post, GeneratedPost, PostInputs};
pub use update::{generate_update, GeneratedUpdate, UpdateInputs};

/// Why a synthetic input could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registered proof's challenges cannot be drawn before its trees
    /// exist, or it is not a version the generator knows.
    #[error("{proof}: {reason}")]
    Unsupported {
        /// The registered proof asked for, by name.
        proof: String,
        /// Why it cannot be generated.
        reason: &'static str,
    },
    /// The address space for a layer's labels could not be reserved.
    #[error("reserving a {bytes}-byte layer buffer: {source}")]
    LayerBuffer {
        /// The buffer's size: the sector's.
        bytes: usize,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// filecoin-proofs or storage-proofs refused a step.
    #[error("filecoin-proofs: {0}")]
    Filecoin(String),
    /// The pieces built do not fit together (a bug here).
    #[error("inconsistent synthetic sector: {0}")]
    Inconsistent(&'static str),
    /// The output fails the check filecoin-proofs' commit phase 1 makes on
    /// its own output (a bug here).
    #[error("the generated C1 output does not verify: {0}")]
    SelfCheck(#[source] crate::Error),
}

fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}
