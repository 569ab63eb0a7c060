//! The tracker's answers to the daemon: a job's status and view (stages,
//! timings, GPU phases per partition), its proofs, the job counts of
//! `/v1/status`, and the partitions a graceful shutdown waits for.

use std::collections::BTreeMap;
use std::time::Instant;

use actix::prelude::*;

use super::{stage_durations, JobState, PartitionState, Tracker};
use crate::messages::{
    CountRunningPartitions, GetJob, GetProofs, GetTrackerStatus, JobStatus, JobView,
    PartitionView, ProofsError, ProofsView, TrackerStatus,
};
use crate::model::{Stage, STAGES};
use crate::time::{ms, unix_ms};

impl JobState {
    pub(super) fn status(&self) -> JobStatus {
        match self.finished {
            Some((Stage::Done, _)) => JobStatus::Done,
            Some((Stage::Cancelled, _)) => JobStatus::Cancelled,
            Some(_) => JobStatus::Failed,
            None if self.local().all(|p| p.stage == Stage::Queued) => JobStatus::Queued,
            None => JobStatus::Running,
        }
    }

    fn view(&self) -> JobView {
        let partitions: Vec<PartitionView> = self
            .partitions
            .iter()
            .enumerate()
            .map(|(index, p)| p.view(index as u32))
            .collect();
        let mut timings_ms = BTreeMap::new();
        let end = self.finished.map(|(_, at)| at).unwrap_or_else(Instant::now);
        timings_ms.insert("total", ms(end - self.spec.submitted.at));
        for view in &partitions {
            for (name, value) in &view.timings_ms {
                if *name != "total" {
                    *timings_ms.entry(*name).or_insert(0.0) += value;
                }
            }
        }
        JobView {
            id: self.spec.id.clone(),
            tenant: self.tenant.clone(),
            status: self.status(),
            circuit: self.spec.circuit.clone(),
            circuit_id: self.spec.circuit_id.clone(),
            priority: self.spec.priority,
            submitted_at_ms: unix_ms(self.spec.submitted.wall),
            deadline_missed: self.spec.submitted.deadline.map(|deadline| end > deadline),
            partitions,
            error: self.error.clone(),
            timings_ms,
        }
    }
}

impl PartitionState {
    pub(super) fn view(&self, index: u32) -> PartitionView {
        PartitionView {
            index,
            stage: self.stage,
            timings_ms: partition_timings(self),
            worker: self.worker.map(|w| w.to_string()),
            node: None,
            gpu_phases_ms: self.gpu_phases.iter().map(|(name, d)| (*name, ms(*d))).collect(),
            error: self.error.clone(),
            attempts: self.attempts,
            retried_after: self.retried_after.clone(),
        }
    }
}

fn partition_timings(p: &PartitionState) -> BTreeMap<&'static str, f64> {
    let mut timings: BTreeMap<_, _> = stage_durations(p)
        .into_iter()
        .map(|(name, d)| (name, ms(d)))
        .collect();
    if let Some(queued) = p.entered[Stage::Queued as usize] {
        let end = [Stage::Done, Stage::Failed, Stage::Cancelled]
            .iter()
            .find_map(|s| p.entered[*s as usize])
            .unwrap_or_else(Instant::now);
        timings.insert("total", ms(end.saturating_duration_since(queued)));
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
        let job = self
            .jobs
            .get(&id)
            .filter(|job| scope.sees(&job.tenant))
            .ok_or(ProofsError::NotFound)?;
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

impl Handler<GetTrackerStatus> for Tracker {
    type Result = MessageResult<GetTrackerStatus>;

    fn handle(&mut self, _: GetTrackerStatus, _: &mut Context<Self>) -> Self::Result {
        let jobs = JobStatus::ALL
            .iter()
            .map(|s| (s.as_str(), self.tally.jobs[*s as usize]))
            .collect();
        let partitions = STAGES
            .iter()
            .filter(|stage| !stage.is_terminal())
            .map(|s| (s.as_str(), self.tally.partitions[*s as usize]))
            .collect();
        MessageResult(TrackerStatus { jobs, partitions })
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
