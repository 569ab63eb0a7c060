//! A job request turned into work: parsing and validating a submission's
//! body, and the memory one partition of its shape reserves. The submit
//! handler (`http::jobs`) and the job store's restore (`store::rebuild`)
//! both go through `JobParser::parse`, so a job resumed after a restart is
//! exactly the job that was accepted.

use std::sync::Arc;

use cuzk_actors::{Priority, Reservation};
use cuzk_kernels::circuits::{CircuitRegistry, CircuitShape, WitnessSource};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::backend::ProofJob;

/// How many bytes one partition of a shape reserves (backend-specific).
pub type ReservationRule = Arc<dyn Fn(&CircuitShape) -> Reservation + Send + Sync>;

/// A proof job. Exactly one of `seed` and `inputs`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "partitions": 2, "seed": 7}))]
pub struct SubmitRequest {
    /// A registered circuit family (`GET /v1/circuits`).
    #[schema(examples("mimc-chain", "poseidon-merkle"))]
    pub circuit: String,
    /// The family's params; they select the shape.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub params: Value,
    /// 1 to `limits.max_partitions`.
    #[serde(default = "one")]
    #[schema(default = 1)]
    pub partitions: u32,
    #[serde(default)]
    pub priority: Priority,
    /// Draw a random valid instance per partition.
    pub seed: Option<u64>,
    /// Witness inputs: one object for every partition, or an array with one per partition.
    #[schema(value_type = Option<Value>)]
    pub inputs: Option<Value>,
    /// Idempotency key (the `Idempotency-Key` header wins).
    pub request_id: Option<String>,
    /// Milliseconds after submission by which the job should be done.
    pub deadline_ms: Option<u64>,
}

fn empty_object() -> Value {
    json!({})
}

fn one() -> u32 {
    1
}

/// Why a body is not a job. The HTTP layer answers the kinds with
/// different status codes (400 and 422); the store records either as the
/// reason a stored job cannot resume.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The body is not JSON at all.
    #[error("invalid JSON: {0}")]
    NotJson(serde_json::Error),
    /// JSON, but not a job this daemon can run; the text says why.
    #[error("{0}")]
    Invalid(String),
}

/// A request that parsed: as the client sent it, the work it asks for, and
/// what each of its partitions reserves.
pub struct ParsedJob {
    pub request: SubmitRequest,
    pub work: ProofJob,
    pub reservation: Reservation,
}

/// What a request is checked against: the circuits this daemon knows, its
/// partition limit, and its backend's reservation rule.
pub struct JobParser {
    pub registry: CircuitRegistry,
    pub max_partitions: u32,
    pub reservation: ReservationRule,
}

impl JobParser {
    /// Parses and validates a submission body; witness inputs are checked
    /// against the circuit here, so a bad one never reaches a worker.
    pub fn parse(&self, body: &[u8]) -> Result<ParsedJob, SubmitError> {
        let invalid = |message: String| SubmitError::Invalid(message);
        let value: Value = serde_json::from_slice(body).map_err(SubmitError::NotJson)?;
        if !value.is_object() {
            return Err(invalid("the body must be a JSON object".into()));
        }
        let request: SubmitRequest = serde_json::from_value(value)
            .map_err(|e| invalid(format!("invalid job: {e}")))?;
        let family = self
            .registry
            .get(&request.circuit)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.registry.families().map(|f| f.name()).collect();
                invalid(format!(
                    "unknown circuit {:?}; known circuits: {}",
                    request.circuit,
                    known.join(", ")
                ))
            })?;
        if request.partitions == 0 || request.partitions > self.max_partitions {
            return Err(invalid(format!(
                "partitions must be between 1 and {}, got {}",
                self.max_partitions, request.partitions
            )));
        }
        let shape = family
            .shape(&request.params)
            .map_err(|e| invalid(format!("invalid params for {}: {e}", request.circuit)))?;
        let witnesses = witnesses(&request)?;
        for (partition, source) in witnesses.iter().enumerate() {
            if matches!(source, WitnessSource::Inputs(_)) {
                family
                    .instance(&shape, source)
                    .map_err(|e| invalid(format!("inputs for partition {partition}: {e}")))?;
            }
        }
        Ok(ParsedJob {
            reservation: (self.reservation)(&shape),
            request,
            work: ProofJob {
                family,
                shape,
                witnesses,
            },
        })
    }
}

/// One witness source per partition, from the request's seed or inputs.
fn witnesses(request: &SubmitRequest) -> Result<Vec<WitnessSource>, SubmitError> {
    match (&request.seed, &request.inputs) {
        (Some(seed), None) => Ok((0..request.partitions)
            .map(|p| WitnessSource::Seed(partition_seed(*seed, p)))
            .collect()),
        (None, Some(Value::Array(per_partition))) => {
            if per_partition.len() != request.partitions as usize {
                return Err(SubmitError::Invalid(format!(
                    "inputs has {} entries but the job has {} partitions",
                    per_partition.len(),
                    request.partitions
                )));
            }
            Ok(per_partition
                .iter()
                .cloned()
                .map(WitnessSource::Inputs)
                .collect())
        }
        (None, Some(inputs)) => Ok(vec![
            WitnessSource::Inputs(inputs.clone());
            request.partitions as usize
        ]),
        (Some(_), Some(_)) => Err(SubmitError::Invalid(
            "give either seed or inputs, not both".into(),
        )),
        (None, None) => Err(SubmitError::Invalid(
            "one of seed or inputs is required".into(),
        )),
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

/// Memory one partition of `shape` holds on the host, from its NTT domain n
/// (32-byte field elements): a, b and c (3n, released after prove_start),
/// then the assignment, H, the MSM scalars and the signed-digit table
/// arkworks' MSM builds (one 8-byte digit per scalar per window, with
/// windows of ln(n)+2 bits), plus a fixed allowance for MSM buckets and
/// thread-local buffers. `tests/reservation_peak.rs` measures a partition's
/// real peak against it.
pub fn reservation_for(shape: &CircuitShape) -> Reservation {
    const ELEMENT: u64 = 32;
    const BUCKETS_AND_BUFFERS: u64 = 1 << 20;
    let n = shape.estimated_constraints.next_power_of_two() as u64;
    let window_bits = u64::from(n.ilog2()) * 69 / 100 + 2;
    let windows = 255u64.div_ceil(window_bits) + 1;
    let digit_table = n * windows * 8;
    Reservation {
        abc_bytes: 3 * n * ELEMENT,
        retained_bytes: 5 * n * ELEMENT + digit_table + BUCKETS_AND_BUFFERS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser() -> JobParser {
        JobParser {
            registry: CircuitRegistry::builtin(),
            max_partitions: 4,
            reservation: Arc::new(reservation_for),
        }
    }

    #[test]
    fn a_seeded_job_gets_one_distinct_seed_per_partition_and_its_shape_reservation() {
        let body = br#"{"circuit":"mimc-chain","params":{"log2_constraints":4},"partitions":3,"seed":7}"#;
        let parsed = parser().parse(body).expect("a valid job");
        let seeds: Vec<u64> = parsed
            .work
            .witnesses
            .iter()
            .map(|w| match w {
                WitnessSource::Seed(seed) => *seed,
                WitnessSource::Inputs(_) => panic!("a seeded job has no inputs"),
            })
            .collect();
        assert_eq!(seeds.len(), 3);
        assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2] && seeds[0] != seeds[2]);
        assert_eq!(parsed.reservation, reservation_for(&parsed.work.shape));
        assert_eq!(parsed.request.circuit, "mimc-chain");
    }

    #[test]
    fn a_body_that_is_not_json_differs_in_kind_from_an_invalid_job() {
        assert!(matches!(parser().parse(b"{"), Err(SubmitError::NotJson(_))));
        for (body, reason) in [
            (&b"[1]"[..], "the body must be a JSON object"),
            (br#"{"circuit":"mimc-chain","partitions":5,"seed":1}"#, "between 1 and 4"),
            (br#"{"circuit":"nope","seed":1}"#, "unknown circuit"),
            (br#"{"circuit":"mimc-chain","params":{"log2_constraints":4}}"#, "one of seed or inputs"),
        ] {
            match parser().parse(body) {
                Err(SubmitError::Invalid(text)) => assert!(text.contains(reason), "{text}"),
                Err(other) => panic!("{reason}: wrong kind {other:?}"),
                Ok(_) => panic!("{reason}: accepted"),
            }
        }
    }
}
