//! A submission, typed: the one form in which every front end hands a job to
//! the job seam. The HTTP front end's JSON body (`SubmitRequest`, its wire
//! form) is read into it by [`Submission::parse`]; the gRPC front end builds
//! it from Curio's protobuf (`grpc::curio`), with no JSON between. Its one
//! serialization, [`Submission::text`], is the canonical text a job stores,
//! and `parse` reads that text back. The checks that need the daemon (sizes,
//! partition bounds, a Filecoin input's fields, a family's params and
//! inputs) are made once for both, when the parent module turns the
//! submission into work.

use cuzk_actors::Priority;
use cuzk_filecoin::Kind;
use serde::Deserialize;

use super::InvalidJob;
use crate::filecoin::FilecoinInput;
use crate::json_text::{JsonObject, JsonText};

/// A proof job as a client asks for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Submission {
    /// What is proved.
    pub circuit: Circuit,
    /// None: the kind's default (`filecoin::default_priority`), else normal.
    pub priority: Option<Priority>,
    /// What it is proved from: a Filecoin kind's input, or a family's
    /// params, partitions and witness source.
    pub input: Input,
    /// Idempotency key (a front end's own key wins).
    pub request_id: Option<String>,
    /// Milliseconds after submission by which the job should be done.
    pub deadline_ms: Option<u64>,
}

/// A Filecoin kind, or a circuit family by the name it is registered under
/// (whether it is registered is checked when the job is made).
#[derive(Clone, Debug, PartialEq)]
pub enum Circuit {
    /// One of Filecoin's proof kinds.
    Filecoin(Kind),
    /// A registered arkworks family, by its registered name.
    Family(String),
}

/// A submission's input, of the circuit's sort.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A Filecoin kind's input (C1 output, vanilla proofs and their arguments).
    Filecoin(FilecoinInput),
    /// A family's params and inputs.
    Family(FamilyInput),
}

/// A registered family's job: the params that select its shape, its
/// partitions and where each partition's witness comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyInput {
    /// `{}` when the client gave none.
    pub params: JsonText,
    /// None: one.
    pub partitions: Option<u32>,
    /// Draw a random valid instance per partition.
    pub seed: Option<u64>,
    /// One object for every partition, or an array of one per partition.
    pub inputs: Option<JsonText>,
}

// `POST /v1/jobs`' body: the wire form `Submission::parse` reads. (Its doc
// comment is the OpenAPI schema's description.)
/// A proof job: a Filecoin kind with its `input`, or a registered family
/// with exactly one of `seed` and `inputs`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "partitions": 2, "seed": 7}))]
pub struct SubmitRequest {
    /// A Filecoin kind (`porep-c2`, docs/filecoin.md) or a registered
    /// circuit family (`GET /v1/circuits`).
    #[schema(examples("porep-c2", "mimc-chain", "poseidon-merkle"))]
    pub circuit: String,
    /// A Filecoin kind's input: the arguments filecoin-proofs-api takes.
    #[schema(value_type = Option<Object>)]
    pub input: Option<JsonText>,
    /// The family's params; they select the shape (default `{}`).
    #[serde(default, deserialize_with = "given")]
    #[schema(value_type = Object)]
    pub params: Option<JsonText>,
    /// 1 to `limits.max_partitions` (a Filecoin kind's follow from its input).
    #[serde(default, deserialize_with = "given")]
    #[schema(value_type = Option<u32>, default = 1)]
    pub partitions: Option<Option<u32>>,
    /// Default: normal; critical for winning-post, high for window-post.
    /// Critical for another kind needs the critical scope, else it is
    /// lowered to the kind's default.
    pub priority: Option<Priority>,
    /// Draw a random valid instance per partition.
    #[serde(default, deserialize_with = "given")]
    #[schema(value_type = Option<u64>)]
    pub seed: Option<Option<u64>>,
    /// Witness inputs: one object for every partition, or an array with one per partition.
    #[serde(default, deserialize_with = "given")]
    #[schema(value_type = Option<Value>)]
    pub inputs: Option<Option<JsonText>>,
    /// Idempotency key (the `Idempotency-Key` header wins).
    pub request_id: Option<String>,
    /// Milliseconds after submission by which the job should be done.
    pub deadline_ms: Option<u64>,
}

/// A family's field as the body gives it: None when the body leaves it
/// out, Some when it names it, even as null or `{}`, so that a Filecoin
/// kind's body naming one is refused rather than read as its absence.
fn given<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

impl Circuit {
    /// The name the API gives it: a kind's (`porep-c2`) or the family's.
    pub fn name(&self) -> &str {
        match self {
            Circuit::Filecoin(kind) => kind.api_name(),
            Circuit::Family(name) => name,
        }
    }
}

impl Submission {
    /// Reads a submission from its canonical JSON text (a body's, or a
    /// stored job's): the fields that belong to the other sort of circuit
    /// are refused, and a Filecoin kind's input is read into its type.
    pub fn parse(canonical: &str) -> Result<Self, InvalidJob> {
        if !canonical.starts_with('{') {
            return Err(InvalidJob::NotAnObject);
        }
        let request: SubmitRequest = serde_json::from_str(canonical).map_err(InvalidJob::Fields)?;
        let SubmitRequest {
            circuit,
            input,
            params,
            partitions,
            priority,
            seed,
            inputs,
            request_id,
            deadline_ms,
        } = request;
        let (circuit, input) = match Kind::from_api_name(&circuit) {
            Some(kind) => {
                // Named at all, null and `{}` included: a client that sends
                // them believes they mean something here.
                let family_only = [
                    ("params", params.is_some()),
                    ("partitions", partitions.is_some()),
                    ("seed", seed.is_some()),
                    ("inputs", inputs.is_some()),
                ];
                if let Some(&(field, _)) = family_only.iter().find(|(_, given)| *given) {
                    return Err(InvalidJob::FamilyField { kind, field });
                }
                let input = input.ok_or(InvalidJob::NoInput(kind))?;
                (Circuit::Filecoin(kind), Input::Filecoin(FilecoinInput::decode(kind, input.as_str())?))
            }
            None if input.is_some() => return Err(InvalidJob::InputForFamily(circuit)),
            None => {
                let family = FamilyInput {
                    params: params.unwrap_or_else(JsonText::empty_object),
                    partitions: partitions.flatten(),
                    seed: seed.flatten(),
                    inputs: inputs.flatten(),
                };
                (Circuit::Family(circuit), Input::Family(family))
            }
        };
        Ok(Submission { circuit, priority, input, request_id, deadline_ms })
    }

    /// The canonical JSON text `parse` reads this submission from: compact,
    /// keys sorted, fields without a value (and a family's empty params)
    /// left out. A body a client sent is stored as its own canonical text,
    /// which differs from this only where it spelled out a null or the
    /// default params.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        JsonObject::write(&mut out, |job| {
            job.member("circuit", self.circuit.name());
            job.member_if("deadline_ms", self.deadline_ms.as_ref());
            match &self.input {
                Input::Filecoin(input) => job.object("input", |fields| input.write(fields)),
                Input::Family(family) => {
                    if let Some(inputs) = &family.inputs {
                        job.text("inputs", inputs);
                    }
                    if family.params != JsonText::empty_object() {
                        job.text("params", &family.params);
                    }
                    job.member_if("partitions", family.partitions.as_ref());
                }
            }
            job.member_if("priority", self.priority.as_ref());
            job.member_if("request_id", self.request_id.as_ref());
            if let Input::Family(FamilyInput { seed: Some(seed), .. }) = &self.input {
                job.member("seed", seed);
            }
        });
        String::from_utf8(out).expect("JSON is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filecoin::{PorepInput, PostInput, RegisteredProof};
    use crate::json_text::canonical;
    use cuzk_filecoin::api::RegisteredPoStProof;

    /// Written, read back, written again: the same submission and the same
    /// text, and that text is canonical (what the canonical pass makes of it).
    fn round_trip(submission: &Submission) -> String {
        let text = submission.text();
        assert_eq!(canonical(text.as_bytes(), usize::MAX).unwrap(), text, "not canonical");
        let read = Submission::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(&read, submission, "{text}");
        text
    }

    #[test]
    fn a_typed_submission_is_its_text_and_back() {
        let porep = Submission {
            circuit: Circuit::Filecoin(Kind::Porep),
            priority: None,
            input: Input::Filecoin(FilecoinInput::Porep(PorepInput {
                c1: None,
                c1_base64: Some("eyJhIjoxfQ==".into()),
                prover_id: "e807".into(),
                sector_id: 7,
            })),
            request_id: None,
            deadline_ms: None,
        };
        // The JSON body the gRPC front end wrote before it built submissions
        // typed: a Curio job's stored text and its idempotency digest match.
        assert_eq!(
            round_trip(&porep),
            r#"{"circuit":"porep-c2","input":{"c1_base64":"eyJhIjoxfQ==","prover_id":"e807","sector_id":7}}"#
        );
        let window = Submission {
            circuit: Circuit::Filecoin(Kind::WindowPost),
            priority: Some(Priority::High),
            input: Input::Filecoin(FilecoinInput::Post(PostInput {
                registered_proof: RegisteredProof::of(RegisteredPoStProof::StackedDrgWindow2KiBV1_2),
                randomness: "ab".into(),
                prover_id: "e807".into(),
                vanilla_proofs: vec!["0102".into(), "03".into()],
                partition_index: Some(1),
            })),
            request_id: Some("r \"1\"".into()),
            deadline_ms: Some(60_000),
        };
        assert_eq!(
            round_trip(&window),
            r#"{"circuit":"window-post","deadline_ms":60000,"input":{"partition_index":1,"prover_id":"e807","randomness":"ab","registered_proof":"StackedDrgWindow2KiBV1_2","vanilla_proofs":["0102","03"]},"priority":"high","request_id":"r \"1\""}"#
        );
        let family = Submission::parse(
            r#"{"circuit":"mimc-chain","inputs":[{"x":"5"},{"x":"7"}],"params":{"log2_constraints":4},"partitions":2,"seed":1}"#,
        )
        .unwrap();
        round_trip(&family);
        let seeded = Submission::parse(r#"{"circuit":"mimc-chain","seed":3}"#).unwrap();
        assert_eq!(round_trip(&seeded), r#"{"circuit":"mimc-chain","seed":3}"#);
    }

    /// Fields of the other sort of circuit are refused before a Filecoin
    /// input is read, in the order the parser has always checked them.
    #[test]
    fn fields_of_the_other_sort_are_refused() {
        let refused = |text: &str| Submission::parse(text).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            refused(r#"{"circuit":"porep-c2","params":{"a":1},"input":{}}"#),
            "porep-c2 takes its work from input; params is not allowed"
        );
        // Named at all is given: `{}` and null too.
        for (field, value) in [
            ("params", "{}"),
            ("params", "null"),
            ("seed", "null"),
            ("partitions", "null"),
            ("inputs", "null"),
        ] {
            assert_eq!(
                refused(&format!(r#"{{"circuit":"porep-c2","{field}":{value},"input":{{}}}}"#)),
                format!("porep-c2 takes its work from input; {field} is not allowed"),
                "{field}: {value}"
            );
        }
        // A family's null is its absence, as it has always been.
        let family = Submission::parse(r#"{"circuit":"mimc-chain","inputs":null,"seed":3}"#).unwrap();
        assert_eq!(family.text(), r#"{"circuit":"mimc-chain","seed":3}"#);
        assert_eq!(refused(r#"{"circuit":"winning-post"}"#), "winning-post needs an input object");
        assert_eq!(
            refused(r#"{"circuit":"mimc-chain","input":{}}"#),
            "mimc-chain is a circuit family: give seed or inputs, not input"
        );
        assert!(
            refused(r#"{"circuit":"snap-prove","input":{}}"#).contains("missing field `registered_proof`")
        );
        assert!(matches!(Submission::parse("[]"), Err(InvalidJob::NotAnObject)));
    }
}
