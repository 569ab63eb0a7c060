//! The tracker's answers to the daemon: a job's status and view (stages,
//! timings, GPU phases per partition), its proofs, its end to those who
//! watch it, the job counts of `/v1/status`, the unfinished jobs per
//! circuit (gRPC's `GetStatus`), and the partitions a graceful shutdown
//! waits for.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::{stage_durations, JobState, PartitionState, Tracker};
use crate::messages::{
    CircuitLoad, CountRunningPartitions, GetCircuitLoad, GetJob, GetProofs, GetTrackerStatus, JobEnding,
    JobStatus, JobView, PartitionView, ProofsError, ProofsView, TrackerStatus, WatchJob,
};
use crate::model::{JobId, Stage, STAGES};
use crate::store::PartitionDetail;
use crate::time::{ms, unix_ms};

impl JobState {
    pub(super) fn status(&self) -> JobStatus {
        match self.finished {
            Some(_) if self.end_pending => JobStatus::Running,
            Some((Stage::Done, _)) => JobStatus::Done,
            Some((Stage::Cancelled, _)) => JobStatus::Cancelled,
            Some(_) => JobStatus::Failed,
            None if self.local().all(|p| p.stage == Stage::Queued) => JobStatus::Queued,
            None => JobStatus::Running,
        }
    }

    fn view(&self) -> JobView {
        let partitions: Vec<PartitionView> =
            self.partitions.iter().enumerate().map(|(index, p)| p.view(index as u32)).collect();
        let end = self.finished.map(|(_, at)| at).unwrap_or_else(Instant::now);
        JobView {
            id: self.spec.id.clone(),
            tenant: self.tenant.clone(),
            status: self.status(),
            circuit: self.spec.circuit.clone(),
            circuit_id: self.spec.circuit_id.clone(),
            priority: self.spec.priority,
            submitted_at_ms: unix_ms(self.spec.submitted.wall),
            deadline_missed: self.spec.submitted.deadline.map(|deadline| end > deadline),
            timings_ms: JobView::timings(ms(end - self.spec.submitted.at), &partitions),
            partitions,
            error: self.error.clone(),
        }
    }
}

impl PartitionState {
    fn view(&self, index: u32) -> PartitionView {
        PartitionView {
            index,
            stage: self.stage,
            node: None,
            error: self.error.clone(),
            detail: self.detail(),
        }
    }

    /// What this node saw of the partition: what a fleet node stores with
    /// its proof for the other nodes to show.
    pub(super) fn detail(&self) -> PartitionDetail {
        PartitionDetail {
            timings_ms: partition_timings(self),
            worker: self.worker.map(|w| w.to_string()),
            gpu_phases_ms: self.gpu_phases.iter().map(|(name, d)| (name.to_string(), ms(*d))).collect(),
            attempts: self.attempts,
            retried_after: self.retried_after.clone(),
        }
    }
}

fn partition_timings(p: &PartitionState) -> BTreeMap<String, f64> {
    let mut timings: BTreeMap<_, _> =
        stage_durations(p).into_iter().map(|(name, d)| (name.to_string(), ms(d))).collect();
    if let Some(queued) = p.entered[Stage::Queued as usize] {
        let end = [Stage::Done, Stage::Failed, Stage::Cancelled]
            .iter()
            .find_map(|s| p.entered[*s as usize])
            .unwrap_or_else(Instant::now);
        timings.insert("total".to_string(), ms(end.saturating_duration_since(queued)));
    }
    timings
}

impl Handler<GetJob> for Tracker {
    type Result = Option<JobView>;

    fn handle(&mut self, GetJob(id, scope): GetJob, _: &mut Context<Self>) -> Self::Result {
        self.jobs.get(&id).filter(|job| scope.sees(&job.tenant)).map(JobState::view)
    }
}

impl Handler<GetProofs> for Tracker {
    type Result = Result<ProofsView, ProofsError>;

    fn handle(&mut self, GetProofs(id, scope): GetProofs, _: &mut Context<Self>) -> Self::Result {
        let job = self.jobs.get(&id).filter(|job| scope.sees(&job.tenant)).ok_or(ProofsError::NotFound)?;
        let status = job.status();
        if status != JobStatus::Done {
            return Err(ProofsError::NotReady(status));
        }
        Ok(ProofsView {
            circuit: job.spec.circuit.clone(),
            circuit_id: job.spec.circuit_id.clone(),
            proofs: job
                .partitions
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.proof.clone().map(|proof| (i as u32, proof)))
                .collect(),
        })
    }
}

impl Handler<WatchJob> for Tracker {
    type Result = Option<JobEnding>;

    fn handle(&mut self, WatchJob(id, scope): WatchJob, _: &mut Context<Self>) -> Self::Result {
        let job = self.jobs.get(&id).filter(|job| scope.sees(&job.tenant))?;
        let (end, ending) = JobEnding::channel();
        match job.finished {
            Some(_) if !job.end_pending => drop(end.send(job.status())),
            _ => self.watchers.add(id, end),
        }
        Some(ending)
    }
}

/// Who waits for which unfinished job to end (`WatchJob`).
#[derive(Default)]
pub(super) struct Watchers(HashMap<JobId, Vec<oneshot::Sender<JobStatus>>>);

impl Watchers {
    fn add(&mut self, job: JobId, end: oneshot::Sender<JobStatus>) {
        let watchers = self.0.entry(job).or_default();
        // Watchers that gave up (their caller's timeout passed) go here, so
        // a job watched again and again keeps only the live ones.
        watchers.retain(|watcher| !watcher.is_closed());
        watchers.push(end);
    }

    /// Tells the job's watchers that it ended with `status`.
    pub(super) fn ended(&mut self, job: &JobId, status: JobStatus) {
        for watcher in self.0.remove(job).into_iter().flatten() {
            let _ = watcher.send(status);
        }
    }
}

impl Handler<GetTrackerStatus> for Tracker {
    type Result = MessageResult<GetTrackerStatus>;

    fn handle(&mut self, _: GetTrackerStatus, _: &mut Context<Self>) -> Self::Result {
        let jobs = JobStatus::ALL.iter().map(|s| (s.as_str(), self.tally.jobs[*s as usize])).collect();
        let partitions = STAGES
            .iter()
            .filter(|stage| !stage.is_terminal())
            .map(|s| (s.as_str(), self.tally.partitions[*s as usize]))
            .collect();
        MessageResult(TrackerStatus { jobs, partitions })
    }
}

impl Handler<GetCircuitLoad> for Tracker {
    type Result = MessageResult<GetCircuitLoad>;

    fn handle(&mut self, _: GetCircuitLoad, _: &mut Context<Self>) -> Self::Result {
        let load: BTreeMap<String, CircuitLoad> =
            self.tally.circuits.iter().map(|(circuit, load)| (circuit.clone(), *load)).collect();
        MessageResult(load)
    }
}

impl Handler<CountRunningPartitions> for Tracker {
    type Result = usize;

    fn handle(&mut self, _: CountRunningPartitions, _: &mut Context<Self>) -> usize {
        STAGES
            .iter()
            .filter(|stage| **stage != Stage::Queued && !stage.is_terminal())
            .map(|s| self.tally.partitions[*s as usize])
            .sum()
    }
}
