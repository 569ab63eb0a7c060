//! A submission turned into work: validating it (`submission.rs` types it;
//! `error.rs` says why it is not a job), and the memory one partition of
//! its shape reserves (`reservation.rs`). Both front ends, the
//! restore on start (`restore::start`) and a fleet node's claimer go
//! through `JobParser`, so a job resumed after a restart is exactly the job
//! that was accepted.
//!
//! A body is never read into one JSON tree (`crate::json_text` says why): its
//! canonical text is written in one streaming pass, the request's fields
//! read from that text, the inputs kept as text, and the few values a
//! family reads as a tree (its params, each partition's inputs) built only
//! after their tree's cost is checked against their text.

mod error;
mod reservation;
mod submission;

use error::inputs_label;
pub use error::{InvalidJob, SetupRefusal, SubmitError};
pub use reservation::{proving_reservation, reservation_for, ReservationRule};
pub use submission::{Circuit, FamilyInput, Input, Submission, SubmitRequest};

use std::path::PathBuf;
use std::sync::Arc;

use cuzk_actors::{Priority, Reservation};
use cuzk_filecoin::Kind;
use cuzk_kernels::circuits::{CircuitFamily, CircuitRegistry, CircuitShape};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::backend::{FamilyJob, PartitionWitness, ProofJob};
use crate::filecoin::{self, FilecoinInput, FilecoinJob};
use crate::json_text::{array_entries, canonical, tree_bytes, CanonicalError, JsonText};
use crate::keys::{KeyStore, SetupCost};

/// The most a family's params or one partition's inputs may cost as a JSON
/// tree, as a multiple of their text (long decimal or hex strings cost
/// about twice theirs; arrays of small numbers or objects, tens of times)...
pub const TREE_FACTOR: usize = 4;
/// ... plus this, so that small values pass whatever their shape (a
/// depth-16 Merkle tree's leaves as one-digit strings fit).
pub const TREE_SLACK_BYTES: usize = 8 << 20;

/// A submission that parsed: what the job keeps of it, the work it asks
/// for, and what each of its partitions reserves.
pub struct ParsedJob {
    /// The circuit's API name (`porep-c2`, a family's).
    pub circuit: String,
    /// The submission's idempotency key, if it names one.
    pub request_id: Option<String>,
    /// Milliseconds after submission by which the job should be done.
    pub deadline_ms: Option<u64>,
    /// The request as compact JSON: what the store records (whitespace and
    /// key order as the client sent them are not kept) and what restores it.
    pub canonical: String,
    /// SHA-256 of `canonical`: what a repeated idempotency key is compared by.
    pub digest: [u8; 32],
    /// The request's priority, or its kind's default.
    pub priority: Priority,
    /// Its kind's default: what a critical priority the caller may not ask
    /// for is lowered to (`Jobs::submit`).
    pub default_priority: Priority,
    /// Partitions: as asked for a family, from the input for Filecoin.
    pub partitions: u32,
    /// What the backend proves: the family's witnesses or the Filecoin inputs.
    pub work: ProofJob,
    /// Memory each partition holds in the budget while in flight.
    pub reservation: Reservation,
}

/// What a request is checked against: the circuits this daemon knows, where
/// Filecoin's parameter files are, its partition limit, and its backend's
/// reservation rule.
pub struct JobParser {
    /// The circuit families a job may name.
    pub registry: CircuitRegistry,
    /// Where Filecoin's parameter files are: a Filecoin job's file must be
    /// there, and its counts size the job.
    pub params_dir: PathBuf,
    /// `limits.max_partitions`: the most partitions a job may ask for.
    pub max_partitions: u32,
    /// The most bytes a job's canonical request may hold (`limits.max_input_bytes`):
    /// what the job keeps in memory and on disk until it finishes.
    pub max_input_bytes: usize,
    /// How a job's per-partition reservation is worked out for this backend.
    pub reservation: ReservationRule,
    /// What a shape's first job may cost (None: the backend sets nothing up).
    pub setups: Option<SetupLimits>,
}

/// A shape without a key is set up by its first job: the setup must fit the
/// memory budget and its key file the key directory's free space, or the
/// job is refused with both figures (422) before anything starts.
pub struct SetupLimits {
    /// The key store, which says whether a shape has its key already.
    pub keys: Arc<KeyStore>,
    /// The memory budget a setup must fit in.
    pub budget_bytes: u64,
}

impl SetupLimits {
    fn check(&self, shape: &CircuitShape) -> Result<(), InvalidJob> {
        if self.keys.has_key(&shape.circuit_id) {
            return Ok(());
        }
        let cost = SetupCost::of(shape);
        let refuse =
            |cost: SetupRefusal| InvalidJob::SetupTooCostly { circuit_id: shape.circuit_id.clone(), cost };
        if cost.memory_bytes > self.budget_bytes {
            return Err(refuse(SetupRefusal::Memory {
                memory_bytes: cost.memory_bytes,
                constraints: shape.estimated_constraints,
                budget_bytes: self.budget_bytes,
            }));
        }
        let free = crate::store::free_bytes(self.keys.key_dir()).unwrap_or(u64::MAX);
        if cost.key_file_bytes > free {
            return Err(refuse(SetupRefusal::Disk {
                key_file_bytes: cost.key_file_bytes,
                key_dir: self.keys.key_dir().to_path_buf(),
                free_bytes: free,
            }));
        }
        Ok(())
    }
}

impl JobParser {
    /// Parses and validates a submission body; witness inputs are checked
    /// against the circuit here, so a bad one never reaches a worker.
    pub fn parse(&self, body: &[u8]) -> Result<ParsedJob, SubmitError> {
        let canonical = canonical(body, self.max_input_bytes).map_err(|error| match error {
            CanonicalError::NotJson(error) => SubmitError::NotJson(error),
            CanonicalError::TooLarge => InvalidJob::TooLarge { limit: self.max_input_bytes }.into(),
        })?;
        let submission = Submission::parse(&canonical)?;
        Ok(self.work(submission, canonical)?)
    }

    /// Validates a submission a front end built typed; its text (what the
    /// job stores) is held to the same limit as a body's.
    pub fn typed(&self, submission: Submission) -> Result<ParsedJob, InvalidJob> {
        let text = submission.text();
        if text.len() > self.max_input_bytes {
            return Err(InvalidJob::TooLarge { limit: self.max_input_bytes });
        }
        self.work(submission, text)
    }

    /// The work `submission` asks for, checked; `canonical` is its text.
    fn work(&self, submission: Submission, canonical: String) -> Result<ParsedJob, InvalidJob> {
        let Submission { circuit, priority, input, request_id, deadline_ms } = submission;
        let name = circuit.name().to_string();
        let (work, partitions, default_priority) = match (circuit, input) {
            (Circuit::Filecoin(kind), Input::Filecoin(input)) => {
                let (work, partitions) = self.filecoin_work(kind, &input)?;
                (work, partitions, filecoin::default_priority(kind))
            }
            (Circuit::Family(name), Input::Family(input)) => {
                let (work, partitions) = self.family_work(name, input)?;
                (work, partitions, Priority::Normal)
            }
            // A front end that built a submission of mixed sorts: refused
            // as a body with those fields would be.
            (Circuit::Filecoin(kind), Input::Family(_)) => return Err(InvalidJob::NoInput(kind)),
            (Circuit::Family(name), Input::Filecoin(_)) => return Err(InvalidJob::InputForFamily(name)),
        };
        Ok(ParsedJob {
            digest: Sha256::digest(canonical.as_bytes()).into(),
            canonical,
            reservation: (self.reservation)(&work),
            priority: priority.unwrap_or(default_priority),
            default_priority,
            partitions,
            circuit: name,
            request_id,
            deadline_ms,
            work,
        })
    }

    fn check_partitions(&self, partitions: u32) -> Result<(), InvalidJob> {
        if partitions == 0 || partitions > self.max_partitions {
            return Err(InvalidJob::Partitions { got: partitions, max: self.max_partitions });
        }
        Ok(())
    }

    /// A Filecoin kind's job, sized by its parameter file.
    fn filecoin_work(&self, kind: Kind, input: &FilecoinInput) -> Result<(ProofJob, u32), InvalidJob> {
        let job = FilecoinJob::from_input(kind, input, &self.params_dir)?;
        let partitions = job.partitions;
        self.check_partitions(partitions)?;
        Ok((ProofJob::Filecoin(job), partitions))
    }

    /// A registered family's job: the shape its params select, a witness
    /// per partition, client inputs checked against the circuit.
    fn family_work(&self, circuit: String, input: FamilyInput) -> Result<(ProofJob, u32), InvalidJob> {
        let partitions = input.partitions.unwrap_or(1);
        // Before anything is allocated per partition.
        self.check_partitions(partitions)?;
        let family = self.registry.get(&circuit).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.registry.families().map(|f| f.name()).collect();
            InvalidJob::UnknownCircuit { circuit: circuit.clone(), families: known.join(", ") }
        })?;
        let params = tree(input.params.as_str(), || "params".into())?;
        let shape = family.shape(&params).map_err(|source| InvalidJob::Params { circuit, source })?;
        if let Some(limits) = &self.setups {
            limits.check(&shape)?;
        }
        let witnesses = witnesses(family.as_ref(), &shape, input.seed, input.inputs, partitions)?;
        let work = ProofJob::Family(FamilyJob { family, shape, witnesses });
        Ok((work, partitions))
    }
}

/// `text` as a JSON tree, once its estimated cost is within
/// [`TREE_FACTOR`] times the text plus [`TREE_SLACK_BYTES`]; `what` names
/// it in the refusal.
fn tree(text: &str, what: impl FnOnce() -> String) -> Result<Value, InvalidJob> {
    // `text` is canonical JSON: neither pass can fail.
    let tree_bytes = tree_bytes(text).expect("canonical JSON");
    if tree_bytes > TREE_FACTOR * text.len() + TREE_SLACK_BYTES {
        return Err(InvalidJob::TreeTooLarge { what: what(), tree_bytes, text_bytes: text.len() });
    }
    Ok(serde_json::from_str(text).expect("canonical JSON"))
}

/// One witness per partition, from the request's seed or inputs. Inputs
/// are checked once per object the client sent, one tree at a time, and each partition keeps its entry's canonical text
/// (partitions given the same object share one copy).
fn witnesses(
    family: &dyn CircuitFamily,
    shape: &CircuitShape,
    seed: Option<u64>,
    inputs: Option<JsonText>,
    partitions: u32,
) -> Result<Vec<PartitionWitness>, InvalidJob> {
    let checked = |inputs: JsonText, partition: Option<usize>| -> Result<PartitionWitness, InvalidJob> {
        let tree = tree(inputs.as_str(), || inputs_label(partition))?;
        family.check_inputs(shape, &tree).map_err(|source| InvalidJob::Inputs { partition, source })?;
        drop(tree);
        Ok(PartitionWitness::Inputs(Arc::from(String::from(inputs))))
    };
    match (seed, inputs) {
        (Some(seed), None) => {
            Ok((0..partitions).map(|p| PartitionWitness::Seed(partition_seed(seed, p))).collect())
        }
        (None, Some(inputs)) => {
            // Canonical JSON: the pass cannot fail.
            match array_entries(inputs.as_str(), partitions as usize).expect("canonical JSON") {
                Some((per_partition, given)) => {
                    drop(inputs);
                    if given != partitions as usize {
                        return Err(InvalidJob::InputsCount { given, partitions });
                    }
                    per_partition
                        .into_iter()
                        .enumerate()
                        .map(|(partition, inputs)| checked(inputs, Some(partition)))
                        .collect()
                }
                None => Ok(vec![checked(inputs, None)?; partitions as usize]),
            }
        }
        (Some(_), Some(_)) => Err(InvalidJob::SeedAndInputs),
        (None, None) => Err(InvalidJob::NoWitness),
    }
}

/// A seed per partition, so that partitions of one job (and jobs with nearby
/// seeds) get unrelated instances.
fn partition_seed(seed: u64, partition: u32) -> u64 {
    // splitmix64 finalizer over the pair.
    let mut z = seed ^ (u64::from(partition)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use cuzk_filecoin::record::Evaluation;

    use super::*;

    fn parser() -> JobParser {
        JobParser {
            registry: CircuitRegistry::builtin(),
            params_dir: PathBuf::from("/nonexistent"),
            max_partitions: 4,
            max_input_bytes: 1 << 20,
            reservation: proving_reservation(Evaluation::default(), false),
            setups: None,
        }
    }

    #[test]
    fn engines_that_evaluate_on_their_device_reserve_no_host_abc() {
        let body = br#"{"circuit":"mimc-chain","params":{"log2_constraints":4},"seed":7}"#;
        let parsed = parser().parse(body).unwrap();
        let shape = reservation_for(match &parsed.work {
            ProofJob::Family(work) => &work.shape,
            ProofJob::Filecoin(_) => panic!("mimc-chain is a family"),
        });
        assert!(shape.abc_bytes > 0);
        let on_device = proving_reservation(Evaluation::Compiled, true)(&parsed.work);
        assert_eq!(on_device.abc_bytes, 0);
        assert_eq!(on_device.retained_bytes, shape.retained_bytes);
        assert_eq!(proving_reservation(Evaluation::Compiled, false)(&parsed.work), shape);
        assert_eq!(reservation::on_engines(shape, false), shape);
    }

    #[test]
    fn a_seeded_job_gets_one_distinct_seed_per_partition_and_its_shape_reservation() {
        let body = br#"{"circuit":"mimc-chain","params":{"log2_constraints":4},"partitions":3,"seed":7}"#;
        let parsed = parser().parse(body).expect("a valid job");
        let ProofJob::Family(work) = &parsed.work else {
            panic!("mimc-chain is a family");
        };
        let seeds: Vec<u64> = work
            .witnesses
            .iter()
            .map(|w| match w {
                PartitionWitness::Seed(seed) => *seed,
                PartitionWitness::Inputs(_) => panic!("a seeded job has no inputs"),
            })
            .collect();
        assert_eq!(seeds.len(), 3);
        assert_eq!(parsed.partitions, 3);
        assert_eq!(parsed.priority, Priority::Normal);
        assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2] && seeds[0] != seeds[2]);
        assert_eq!(parsed.reservation, reservation_for(&work.shape));
        assert_eq!(parsed.circuit, "mimc-chain");
    }

    #[test]
    fn a_body_that_is_not_json_differs_in_kind_from_an_invalid_job() {
        assert!(matches!(parser().parse(b"{"), Err(SubmitError::NotJson(_))));
        for (body, reason) in [
            (&b"[1]"[..], "the body must be a JSON object"),
            (br#"{"circuit":"mimc-chain","partitions":5,"seed":1}"#, "between 1 and 4"),
            (br#"{"circuit":"nope","seed":1}"#, "unknown circuit"),
            (br#"{"circuit":"mimc-chain","params":{"log2_constraints":4}}"#, "one of seed or inputs"),
            (br#"{"circuit":"mimc-chain","partitions":4000000000,"seed":1}"#, "between 1 and 4"),
            (br#"{"circuit":"mimc-chain","seed":1,"input":{}}"#, "not input"),
            (br#"{"circuit":"porep-c2"}"#, "needs an input object"),
            (br#"{"circuit":"porep-c2","seed":1,"input":{}}"#, "seed is not allowed"),
            (
                br#"{"circuit":"porep-c2","input":{"prover_id":"00","sector_id":1,"c1":{}}}"#,
                "prover_id must be 32 bytes",
            ),
            (br#"{"circuit":"porep-c2","input":{"prover_id":"zz","sector_id":1}}"#, "prover_id is not hex"),
            (br#"{"circuit":"porep-c2","input":{"sector_id":1}}"#, "missing field `prover_id`"),
        ] {
            match parser().parse(body) {
                Err(SubmitError::Invalid(invalid)) => {
                    let text = invalid.to_string();
                    assert!(text.contains(reason), "{text}");
                }
                Err(other) => panic!("{reason}: wrong kind {other:?}"),
                Ok(_) => panic!("{reason}: accepted"),
            }
        }
    }

    /// The stored text is what a `Value` of the body wrote (the records and
    /// idempotency digests of earlier versions match), and each partition
    /// keeps its own entry's text.
    #[test]
    fn the_canonical_text_and_the_witnesses_are_the_bodys_compact_json() {
        let body = br#" { "seed" : null, "partitions": 2, "circuit" : "mimc-chain",
            "inputs" : [ {"x": "5"}, { "x" : "7" } ], "params" : { "log2_constraints" : 4 } } "#;
        let parsed = parser().parse(body).expect("a valid job");
        let tree: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(parsed.canonical, tree.to_string());
        let ProofJob::Family(work) = &parsed.work else { panic!("mimc-chain is a family") };
        let texts: Vec<String> = work
            .witnesses
            .iter()
            .map(|w| match w {
                PartitionWitness::Inputs(text) => text.to_string(),
                PartitionWitness::Seed(_) => panic!("inputs were given"),
            })
            .collect();
        assert_eq!(texts, [r#"{"x":"5"}"#, r#"{"x":"7"}"#]);
    }

    /// Inputs whose tree would cost tens of times their text are refused
    /// from a streaming estimate, before any tree is built.
    #[test]
    fn inputs_whose_tree_would_be_too_large_are_refused() {
        let objects = vec![r#"{"a":0}"#; 400_000].join(",");
        let body = format!(
            r#"{{"circuit":"mimc-chain","params":{{"log2_constraints":4}},"inputs":{{"x":[{objects}]}}}}"#
        );
        let large = JobParser { max_input_bytes: 16 << 20, ..parser() };
        let refused = large.parse(body.as_bytes()).err().expect("refused");
        match refused {
            SubmitError::Invalid(InvalidJob::TreeTooLarge { what, tree_bytes, text_bytes }) => {
                assert_eq!(what, "inputs");
                assert!(
                    tree_bytes > TREE_FACTOR * text_bytes + TREE_SLACK_BYTES,
                    "{tree_bytes} {text_bytes}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Over max_input_bytes as compact JSON: the streaming pass stops.
        let refused = parser().parse(format!("{{\"circuit\":\"{}\"}}", "x".repeat(2 << 20)).as_bytes()).err();
        assert!(
            matches!(refused, Some(SubmitError::Invalid(InvalidJob::TooLarge { limit: 1048576 }))),
            "{refused:?}"
        );
    }

    /// A Filecoin input's refusal keeps its type to the edge: the HTTP
    /// layer and the store see which field, not only a text.
    #[test]
    fn a_filecoin_refusal_arrives_typed() {
        let body = br#"{"circuit":"winning-post","input":{"registered_proof":"StackedDrgWinning2KiBV1","randomness":"00","prover_id":"00","vanilla_proofs":[]}}"#;
        let refused = parser().parse(body).err().expect("a 1-byte randomness is refused");
        assert!(
            matches!(
                refused,
                SubmitError::Invalid(InvalidJob::Filecoin(filecoin::InputError::Not32Bytes {
                    field: "randomness",
                    len: 1
                }))
            ),
            "{refused:?}"
        );
        // A kind's default priority follows from what lateness costs it.
        let body = br#"{"circuit":"mimc-chain","params":{"log2_constraints":4},"seed":1,"priority":"low"}"#;
        assert_eq!(parser().parse(body).unwrap().priority, Priority::Low);
        assert_eq!(filecoin::default_priority(Kind::WinningPost), Priority::Critical);
        assert_eq!(filecoin::default_priority(Kind::WindowPost), Priority::High);
        assert_eq!(filecoin::default_priority(Kind::Porep), Priority::Normal);
    }
}
