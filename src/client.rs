//! The CLI's client side: submit a job and wait for its proofs; verify
//! proofs against the served verifying key, independently of the daemon's
//! own check.

use std::time::{Duration, Instant};

use ark_groth16::{Groth16, Proof, VerifyingKey};
use ark_serialize::CanonicalDeserialize;
use cuzk_kernels::{Bls12_381, Fr};
use serde_json::Value;

/// Why talking to the daemon did not give what was asked for.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon answered with an error status; `reason` is its own
    /// `{"error": …}` text (or the body, when it is not that shape).
    #[error("HTTP {status}: {reason}")]
    Refused {
        /// The HTTP status code.
        status: u16,
        /// The daemon's explanation, shown to the user.
        reason: String,
    },
    /// No answer: the daemon is unreachable, or the connection failed.
    #[error("{0}")]
    Transport(Box<ureq::Transport>),
    /// An answer whose body is not the JSON expected.
    #[error("{0}")]
    Body(std::io::Error),
    /// The submission was accepted without a job id.
    #[error("the daemon returned no job id")]
    NoJobId,
    /// The job failed or was cancelled.
    #[error("job {id} {status}: {reason}")]
    JobEnded {
        /// The job that ended, as the daemon named it.
        id: String,
        /// `failed` or `cancelled`.
        status: String,
        /// The job's `error` text, why it ended.
        reason: String,
    },
    /// The job had not ended when the wait's time was up.
    #[error("job {id} did not finish within {timeout:?}")]
    Timeout {
        /// The job still running, so the user can look it up later.
        id: String,
        /// How long the wait lasted (`Submission::timeout`).
        timeout: Duration,
    },
    /// A document the daemon served does not decode.
    #[error(transparent)]
    Document(#[from] DocumentError),
}

impl From<ureq::Error> for ClientError {
    /// An HTTP error as the daemon's own `{"error": …}` text.
    fn from(error: ureq::Error) -> Self {
        match error {
            ureq::Error::Status(status, response) => {
                let text = response.into_string().unwrap_or_default();
                let reason = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or(text);
                ClientError::Refused { status, reason }
            }
            ureq::Error::Transport(transport) => ClientError::Transport(Box::new(transport)),
        }
    }
}

/// Why a proofs document or a verifying key document cannot be checked:
/// a field missing, or one that does not decode.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// A proofs document without its `proofs` array.
    #[error("the document has no proofs array")]
    NoProofs,
    /// A proofs document without the circuit its key is served for.
    #[error("the document has no circuit_id")]
    NoCircuitId,
    /// An entry of `proofs` without its partition number.
    #[error("a proof has no partition")]
    NoPartition,
    /// An entry of `proofs` without its public inputs.
    #[error("partition {0} has no public_inputs")]
    NoPublicInputs(u64),
    /// A hex field (`what` names it) that is not a string.
    #[error("{what} is not a string")]
    NotText {
        /// Which field, for the message.
        what: String,
    },
    /// A hex field that is not hex.
    #[error("{what} is not hex: {source}")]
    NotHex {
        /// Which field, for the message.
        what: String,
        /// Where the hex decoder stopped.
        source: hex::FromHexError,
    },
    /// A hex field whose bytes are not the point or field element expected.
    #[error("{what} does not decode: {source}")]
    Undecodable {
        /// Which field, for the message.
        what: String,
        /// Why the bytes are no valid point or element.
        source: ark_serialize::SerializationError,
    },
    /// The verifier could not run on the inputs (their count does not match
    /// the key's).
    #[error("{0}")]
    Verifier(ark_relations::r1cs::SynthesisError),
}

/// A job to submit with `submit_and_wait`, and how to wait for it (`cuzk
/// submit` fills it from its flags).
pub struct Submission {
    /// The daemon's base URL (`http://host:port`), without a trailing slash.
    pub server: String,
    /// The job request, posted as is to `/v1/jobs`.
    pub body: Value,
    /// Sent as the `Idempotency-Key` header, so that a retried submission finds
    /// the first one's job instead of making a second.
    pub idempotency_key: Option<String>,
    /// Sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// How long to keep waiting, for room in a full queue and for the job to
    /// end, before giving up with `ClientError::Timeout`.
    pub timeout: Duration,
    /// Show a progress bar of partitions done on the terminal.
    pub progress: bool,
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build()
}

fn authorized(request: ureq::Request, token: Option<&str>) -> ureq::Request {
    match token {
        Some(token) => request.set("Authorization", &format!("Bearer {token}")),
        None => request,
    }
}

/// GETs `url` (with `token` as a bearer token, if any) and returns its JSON
/// body; an error status comes back as `ClientError::Refused`.
pub fn get_json(agent: &ureq::Agent, url: &str, token: Option<&str>) -> Result<Value, ClientError> {
    authorized(agent.get(url), token).call()?.into_json().map_err(ClientError::Body)
}

/// Submits, waits for the job to end, and returns its proofs document.
pub fn submit_and_wait(sub: &Submission) -> Result<Value, ClientError> {
    let agent = agent();
    let token = sub.token.as_deref();
    let deadline = Instant::now() + sub.timeout;
    let accepted: Value = loop {
        let mut request = authorized(agent.post(&format!("{}/v1/jobs", sub.server)), token);
        if let Some(key) = &sub.idempotency_key {
            request = request.set("Idempotency-Key", key);
        }
        match request.send_json(&sub.body) {
            // A full queue: wait as long as the daemon asks, then try again.
            Err(ureq::Error::Status(429, response)) if Instant::now() < deadline => {
                let wait = response.header("Retry-After").and_then(|s| s.parse().ok()).unwrap_or(5);
                eprintln!("the daemon's queue is full; retrying in {wait} s");
                std::thread::sleep(Duration::from_secs(wait));
            }
            result => break result?.into_json().map_err(ClientError::Body)?,
        }
    };
    let id = accepted["id"].as_str().ok_or(ClientError::NoJobId)?.to_string();
    let partitions = sub.body["partitions"].as_u64().unwrap_or(1);
    let bar =
        if sub.progress { indicatif::ProgressBar::new(partitions) } else { indicatif::ProgressBar::hidden() };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} job {msg} [{bar:30}] {pos}/{len} partitions {elapsed}",
        )
        .expect("valid template"),
    );
    bar.set_message(id.clone());
    loop {
        let job = get_json(&agent, &format!("{}/v1/jobs/{id}", sub.server), token)?;
        let done = job["partitions"]
            .as_array()
            .map(|ps| ps.iter().filter(|p| p["stage"] == "done").count() as u64)
            .unwrap_or(0);
        bar.set_position(done);
        match job["status"].as_str() {
            Some("done") => break,
            Some(status @ ("failed" | "cancelled")) => {
                bar.abandon();
                return Err(ClientError::JobEnded {
                    id,
                    status: status.to_string(),
                    reason: job["error"].as_str().unwrap_or("no reason given").to_string(),
                });
            }
            _ if Instant::now() > deadline => {
                bar.abandon();
                return Err(ClientError::Timeout { id, timeout: sub.timeout });
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    bar.finish();
    get_json(&agent, &format!("{}/v1/jobs/{id}/proofs", sub.server), token)
}

fn from_hex<T: CanonicalDeserialize>(what: &str, text: &Value) -> Result<T, DocumentError> {
    let text = text.as_str().ok_or_else(|| DocumentError::NotText { what: what.to_string() })?;
    let bytes =
        hex::decode(text).map_err(|source| DocumentError::NotHex { what: what.to_string(), source })?;
    T::deserialize_compressed(&bytes[..])
        .map_err(|source| DocumentError::Undecodable { what: what.to_string(), source })
}

/// Fetches the verifying key the daemon serves for `circuit_id`, so proofs can
/// be checked here without trusting the daemon's own check.
pub fn fetch_vk(
    server: &str,
    circuit_id: &str,
    token: Option<&str>,
) -> Result<VerifyingKey<Bls12_381>, ClientError> {
    let doc = get_json(&agent(), &format!("{server}/v1/circuits/{circuit_id}/vk"), token)?;
    Ok(from_hex("vk", &doc["vk"])?)
}

/// Checks every proof of a proofs document; returns (partition, valid).
pub fn verify_proofs(vk: &VerifyingKey<Bls12_381>, doc: &Value) -> Result<Vec<(u64, bool)>, DocumentError> {
    let pvk = ark_groth16::prepare_verifying_key(vk);
    let proofs = doc["proofs"].as_array().ok_or(DocumentError::NoProofs)?;
    proofs
        .iter()
        .map(|entry| {
            let partition = entry["partition"].as_u64().ok_or(DocumentError::NoPartition)?;
            let proof: Proof<Bls12_381> = from_hex(&format!("partition {partition} proof"), &entry["proof"])?;
            let inputs = entry["public_inputs"]
                .as_array()
                .ok_or(DocumentError::NoPublicInputs(partition))?
                .iter()
                .map(|v| from_hex::<Fr>(&format!("partition {partition} public input"), v))
                .collect::<Result<Vec<_>, _>>()?;
            let valid =
                Groth16::<Bls12_381>::verify_proof(&pvk, &proof, &inputs).map_err(DocumentError::Verifier)?;
            Ok((partition, valid))
        })
        .collect()
}
