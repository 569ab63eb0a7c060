//! Why a submission is not a job: a body that is not JSON (`SubmitError`),
//! a request this daemon cannot run (`InvalidJob`, each naming what to
//! change), and a first job whose key setup would not fit (`SetupRefusal`).

use std::path::PathBuf;

use cuzk_filecoin::Kind;
use cuzk_kernels::circuits;

use super::{TREE_FACTOR, TREE_SLACK_BYTES};
use crate::filecoin;

/// Why a body is not a job. The HTTP layer answers the kinds with
/// different status codes (400 and 422); the store records either as the
/// reason a stored job cannot resume.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The body is not JSON at all.
    #[error("invalid JSON: {0}")]
    NotJson(serde_json::Error),
    /// JSON, but not a job this daemon can run.
    #[error(transparent)]
    Invalid(#[from] InvalidJob),
}

/// Why a JSON body is not a job this daemon can run; the text names the
/// problem for the client.
#[derive(Debug, thiserror::Error)]
pub enum InvalidJob {
    /// An array, a string, a number.
    #[error("the body must be a JSON object")]
    NotAnObject,
    /// Over `limits.max_input_bytes`.
    #[error("the request is over limits.max_input_bytes ({limit} bytes) as compact JSON")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// A value read as a tree (a family's params, a partition's inputs)
    /// whose tree would cost too much for its text: arrays of small numbers
    /// or objects where the family expects long strings.
    #[error(
        "{what} would take an estimated {tree_bytes} bytes as a JSON tree for its {text_bytes} bytes of text (at most {TREE_FACTOR} times its text plus {TREE_SLACK_BYTES} bytes are read); check its shape against GET /v1/circuits"
    )]
    TreeTooLarge {
        /// `params`, `inputs` or `inputs for partition N`.
        what: String,
        /// The tree's estimate.
        tree_bytes: usize,
        /// Its canonical text.
        text_bytes: usize,
    },
    /// The body's fields are not `SubmitRequest`'s (serde's reason).
    #[error("invalid job: {0}")]
    Fields(serde_json::Error),
    /// Too many partitions for this daemon, or none.
    #[error("partitions must be between 1 and {max}, got {got}")]
    Partitions {
        /// As asked, or as the Filecoin input implies.
        got: u32,
        /// `limits.max_partitions`.
        max: u32,
    },
    /// A family's field in a Filecoin job.
    #[error("{} takes its work from input; {field} is not allowed", kind.api_name())]
    FamilyField {
        /// The job's kind.
        kind: Kind,
        /// The field given.
        field: &'static str,
    },
    /// A Filecoin job without its input.
    #[error("{} needs an input object", .0.api_name())]
    NoInput(Kind),
    /// The Filecoin input does not decode, or cuzk-filecoin refuses it.
    #[error(transparent)]
    Filecoin(#[from] filecoin::InputError),
    /// `input` in a family's job.
    #[error("{0} is a circuit family: give seed or inputs, not input")]
    InputForFamily(String),
    /// Neither a Filecoin kind nor a registered family.
    #[error(
        "unknown circuit {circuit:?}; known circuits: {families}, and the Filecoin kinds {}",
        filecoin_kinds()
    )]
    UnknownCircuit {
        /// What the client named.
        circuit: String,
        /// The registry's families, comma-separated.
        families: String,
    },
    /// The family refuses the params.
    #[error("invalid params for {circuit}: {source}")]
    Params {
        /// The family.
        circuit: String,
        /// The family's reason.
        source: circuits::InputError,
    },
    /// The shape's first job would set up a key this daemon cannot afford.
    #[error("{circuit_id} has no key yet and setting it up {cost}; choose smaller params")]
    SetupTooCostly {
        /// The shape.
        circuit_id: String,
        /// What does not fit.
        cost: SetupRefusal,
    },
    /// One witness input per partition, but not as many as partitions.
    #[error("inputs has {given} entries but the job has {partitions} partitions")]
    InputsCount {
        /// Entries in the client's array.
        given: usize,
        /// The job's partitions.
        partitions: u32,
    },
    /// The family refuses a witness input.
    #[error("{}: {source}", inputs_label(*.partition))]
    Inputs {
        /// The partition whose entry it is, when the client sent one per
        /// partition.
        partition: Option<usize>,
        /// The family's reason.
        source: circuits::InputError,
    },
    /// A family's job with both witness sources.
    #[error("give either seed or inputs, not both")]
    SeedAndInputs,
    /// A family's job with no witness source.
    #[error("one of seed or inputs is required")]
    NoWitness,
}

/// What a key setup would exceed.
#[derive(Debug, thiserror::Error)]
pub enum SetupRefusal {
    /// The setup's memory exceeds the daemon's budget.
    #[error(
        "needs an estimated {:.1} GiB of memory ({constraints} constraints), over this daemon's budget of {:.1} GiB",
        gib(*.memory_bytes),
        gib(*.budget_bytes)
    )]
    Memory {
        /// The setup's estimated peak.
        memory_bytes: u64,
        /// The shape's estimated constraints.
        constraints: usize,
        /// The daemon's memory budget.
        budget_bytes: u64,
    },
    /// The key file would not fit the key directory's disk.
    #[error(
        "writes an estimated {:.1} GiB key file; {} has {:.1} GiB free",
        gib(*.key_file_bytes),
        .key_dir.display(),
        gib(*.free_bytes)
    )]
    Disk {
        /// The key file's estimated size.
        key_file_bytes: u64,
        /// Where it would be written.
        key_dir: PathBuf,
        /// The space left there.
        free_bytes: u64,
    },
}

/// Bytes in GiB, for the setup refusals' figures.
fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// `inputs`, or which partition's, as a refusal names them.
pub(super) fn inputs_label(partition: Option<usize>) -> String {
    match partition {
        Some(partition) => format!("inputs for partition {partition}"),
        None => "inputs".into(),
    }
}

/// The Filecoin kinds' API names, for the unknown-circuit reason.
fn filecoin_kinds() -> String {
    Kind::ALL.map(Kind::api_name).join(", ")
}
