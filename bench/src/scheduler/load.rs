//! The HTTP load on the daemon: a feeder that keeps its queue full, an
//! optional stream of status queries, and the reads and cancellations after
//! the run. It goes through the daemon's public API, as a client would.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The latest count of partitions waiting for synthesis, published by the
/// sampler to the thread that submits jobs.
#[derive(Default)]
pub(super) struct QueueGauge {
    /// Partitions waiting for synthesis at the last sample.
    pub(super) waiting_synthesis: AtomicU64,
    /// Samples taken so far, so that the feeder acts once per sample.
    pub(super) samples: AtomicU64,
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build()
}

/// Submits jobs whenever the last queue sample shows fewer than `low_water`
/// partitions waiting for synthesis, at most once per sample so that jobs
/// in the mail are not counted twice. Returns the ids of all jobs.
pub(super) fn keep_queue_full(
    url: &str,
    mut body: Value,
    partitions_per_job: usize,
    low_water: usize,
    gauge: &QueueGauge,
    stop: &AtomicBool,
) -> Result<Vec<String>, String> {
    let agent = agent();
    let mut ids = Vec::new();
    let mut seen_sample = u64::MAX;
    while !stop.load(Ordering::Acquire) {
        let sample = gauge.samples.load(Ordering::Acquire);
        if sample != seen_sample {
            seen_sample = sample;
            let waiting = gauge.waiting_synthesis.load(Ordering::Acquire) as usize;
            for _ in 0..low_water.saturating_sub(waiting).div_ceil(partitions_per_job) {
                body["seed"] = json!(ids.len());
                let job: Value = agent
                    .post(&format!("{url}/v1/jobs"))
                    .send_json(&body)
                    .map_err(|e| format!("submitting a job: {e}"))?
                    .into_json()
                    .map_err(|e| format!("submitting a job: {e}"))?;
                ids.push(job["id"].as_str().ok_or("the daemon answered no job id")?.to_string());
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(ids)
}

/// GET /v1/status at `rps`, paced on a fixed schedule (a late request does
/// not shift the ones after it). Returns the requests answered per second.
pub(super) fn query_status(url: &str, rps: f64, stop: &AtomicBool) -> f64 {
    let agent = agent();
    let period = Duration::from_secs_f64(1.0 / rps);
    let started = Instant::now();
    let mut next = started;
    let mut answered = 0u64;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > 10 * period {
            // Too far behind to catch up without a burst: start afresh.
            next = now;
        }
        next += period;
        if let Ok(response) = agent.get(&format!("{url}/v1/status")).call() {
            if response.into_string().is_ok() {
                answered += 1;
            }
        }
    }
    answered as f64 / started.elapsed().as_secs_f64()
}

/// Mean seconds of the synthesis stage over every partition synthesized.
pub(super) fn mean_synthesis_seconds(url: &str, job_ids: &[String]) -> Result<f64, String> {
    let agent = agent();
    let mut total_ms = 0.0;
    let mut partitions = 0usize;
    for id in job_ids {
        let job: Value = agent
            .get(&format!("{url}/v1/jobs/{id}"))
            .call()
            .map_err(|e| format!("fetching job {id}: {e}"))?
            .into_json()
            .map_err(|e| format!("reading job {id}: {e}"))?;
        for partition in job["partitions"].as_array().into_iter().flatten() {
            if let Some(ms) = partition["timings_ms"]["synthesis"].as_f64() {
                total_ms += ms;
                partitions += 1;
            }
        }
    }
    match partitions {
        0 => Err("no partition finished synthesis; is the run too short?".into()),
        n => Ok(total_ms / 1e3 / n as f64),
    }
}

/// Cancels what is still queued so that the daemon winds down quickly.
pub(super) fn cancel_jobs(url: &str, job_ids: &[String]) {
    let agent = agent();
    for id in job_ids {
        // 409 (already finished) is expected for most of them.
        let _ = agent.post(&format!("{url}/v1/jobs/{id}/cancel")).call();
    }
}
