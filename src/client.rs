//! The CLI's client side: submit a job and wait for its proofs; verify
//! proofs against the served verifying key, independently of the daemon's
//! own check.

use std::time::{Duration, Instant};

use ark_groth16::{Groth16, Proof, VerifyingKey};
use ark_serialize::CanonicalDeserialize;
use cuzk_kernels::{Bls12_381, Fr};
use serde_json::Value;

pub struct Submission {
    pub server: String,
    pub body: Value,
    pub idempotency_key: Option<String>,
    /// Sent as `Authorization: Bearer`.
    pub token: Option<String>,
    pub timeout: Duration,
    pub progress: bool,
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

/// Turns an HTTP error into the daemon's own `{"error": ...}` text.
fn describe(err: ureq::Error) -> String {
    match err {
        ureq::Error::Status(code, response) => {
            let text = response.into_string().unwrap_or_default();
            let reason = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or(text);
            format!("HTTP {code}: {reason}")
        }
        other => other.to_string(),
    }
}

fn authorized(request: ureq::Request, token: Option<&str>) -> ureq::Request {
    match token {
        Some(token) => request.set("Authorization", &format!("Bearer {token}")),
        None => request,
    }
}

pub fn get_json(agent: &ureq::Agent, url: &str, token: Option<&str>) -> Result<Value, String> {
    authorized(agent.get(url), token)
        .call()
        .map_err(describe)?
        .into_json()
        .map_err(|e| e.to_string())
}

/// Submits, waits for the job to end, and returns its proofs document.
pub fn submit_and_wait(sub: &Submission) -> Result<Value, String> {
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
                let wait = response
                    .header("Retry-After")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(5);
                eprintln!("the daemon's queue is full; retrying in {wait} s");
                std::thread::sleep(Duration::from_secs(wait));
            }
            result => break result.map_err(describe)?.into_json().map_err(|e| e.to_string())?,
        }
    };
    let id = accepted["id"]
        .as_str()
        .ok_or("the daemon returned no job id")?
        .to_string();
    let partitions = sub.body["partitions"].as_u64().unwrap_or(1);
    let bar = if sub.progress {
        indicatif::ProgressBar::new(partitions)
    } else {
        indicatif::ProgressBar::hidden()
    };
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
                return Err(format!(
                    "job {id} {status}: {}",
                    job["error"].as_str().unwrap_or("no reason given")
                ));
            }
            _ if Instant::now() > deadline => {
                bar.abandon();
                return Err(format!("job {id} did not finish within {:?}", sub.timeout));
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    bar.finish();
    get_json(&agent, &format!("{}/v1/jobs/{id}/proofs", sub.server), token)
}

fn from_hex<T: CanonicalDeserialize>(what: &str, text: &Value) -> Result<T, String> {
    let text = text
        .as_str()
        .ok_or_else(|| format!("{what} is not a string"))?;
    let bytes = hex::decode(text).map_err(|e| format!("{what} is not hex: {e}"))?;
    T::deserialize_compressed(&bytes[..]).map_err(|e| format!("{what} does not decode: {e}"))
}

pub fn fetch_vk(
    server: &str,
    circuit_id: &str,
    token: Option<&str>,
) -> Result<VerifyingKey<Bls12_381>, String> {
    let doc = get_json(&agent(), &format!("{server}/v1/circuits/{circuit_id}/vk"), token)?;
    from_hex("vk", &doc["vk"])
}

/// Checks every proof of a proofs document; returns (partition, valid).
pub fn verify_proofs(
    vk: &VerifyingKey<Bls12_381>,
    doc: &Value,
) -> Result<Vec<(u64, bool)>, String> {
    let pvk = ark_groth16::prepare_verifying_key(vk);
    let proofs = doc["proofs"]
        .as_array()
        .ok_or("the document has no proofs array")?;
    proofs
        .iter()
        .map(|entry| {
            let partition = entry["partition"]
                .as_u64()
                .ok_or("a proof has no partition")?;
            let proof: Proof<Bls12_381> =
                from_hex(&format!("partition {partition} proof"), &entry["proof"])?;
            let inputs = entry["public_inputs"]
                .as_array()
                .ok_or_else(|| format!("partition {partition} has no public_inputs"))?
                .iter()
                .map(|v| from_hex::<Fr>(&format!("partition {partition} public input"), v))
                .collect::<Result<Vec<_>, _>>()?;
            let valid = Groth16::<Bls12_381>::verify_proof(&pvk, &proof, &inputs)
                .map_err(|e| e.to_string())?;
            Ok((partition, valid))
        })
        .collect()
}
