//! GetStatus and GetMetrics, from the daemon's own state: the job seam's
//! answers (fleet-wide on a fleet node), the devices, the parameter files
//! and the metrics text `/metrics` serves. Nothing is run outside
//! the process per call (the original daemon ran nvidia-smi).

use std::sync::atomic::Ordering;

use cuzk_actors::messages::JobStatus;
use cuzk_actors::{JobId, TenantScope};
use tonic::Status;

use super::curio;
use super::error::jobs_status;
use super::proto::srs_status::Tier;
use super::proto::{GetMetricsResponse, GetStatusResponse, GpuStatus, QueueStatus, SrsStatus};
use super::state::GrpcState;
use crate::tenants::Caller;

/// The devices and what each proves now, the keys loaded, the unfinished
/// jobs per kind, the jobs kept by outcome (failed ones with the requests
/// answered FAILED before they became a job), the uptime and the host memory
/// budget. A device's current job id is shown to admins only, as in
/// `/v1/workers`; its kind to everyone.
pub async fn status(state: &GrpcState, caller: &Caller) -> Result<GetStatusResponse, Status> {
    let node = state.jobs.status().await.map_err(jobs_status)?;
    let loads = state.jobs.circuit_load().await.map_err(jobs_status)?;
    let mut gpus = Vec::new();
    for (ordinal, name) in state.system.backend.devices().into_iter().enumerate() {
        let busy = node.system.workers.iter().find(|w| w.device == ordinal && w.job.is_some());
        let mut gpu = GpuStatus { ordinal: ordinal as u32, name, ..Default::default() };
        if let Some(job) = busy.and_then(|w| w.job.clone()) {
            // A job may end between the two answers: then the device is idle.
            if let Ok(view) = state.jobs.view(&JobId(job.clone()), &TenantScope::All).await {
                gpu.current_proof_kind = curio::status_name(&view.circuit).to_string();
                if caller.admin {
                    gpu.current_job_id = job;
                }
            }
        }
        gpus.push(gpu);
    }
    let loaded_srs = state
        .params
        .loaded()
        .into_iter()
        .map(|(circuit_id, bytes)| SrsStatus {
            circuit_id,
            tier: Tier::Hot as i32,
            size_bytes: bytes,
            ref_count: 0,
        })
        .collect();
    let queues = loads
        .into_iter()
        .map(|(circuit, load)| QueueStatus {
            proof_kind: curio::status_name(&circuit).to_string(),
            pending: count(load.queued),
            in_progress: count(load.running),
        })
        .collect();
    let jobs = |status: JobStatus| node.system.tracker.jobs.get(status.as_str()).copied().unwrap_or(0) as u64;
    let budget = &node.system.budget;
    Ok(GetStatusResponse {
        gpus,
        loaded_srs,
        queues,
        total_proofs_completed: jobs(JobStatus::Done),
        // Failed jobs, and FAILED answers to requests that never became
        // a job (this node's, since its start).
        total_proofs_failed: jobs(JobStatus::Failed) + state.failed_without_job.load(Ordering::Relaxed),
        uptime_seconds: state.started.elapsed().as_secs(),
        pinned_memory_bytes: budget.used_bytes + budget.resident_bytes,
        pinned_memory_limit_bytes: budget.limit_bytes,
    })
}

/// The daemon's Prometheus text: `/metrics`' own, rendered once for every
/// caller of either waiting.
pub async fn metrics(state: &GrpcState) -> GetMetricsResponse {
    let text = state.metrics.text().await;
    GetMetricsResponse { prometheus_text: String::from_utf8_lossy(&text).into_owned() }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
