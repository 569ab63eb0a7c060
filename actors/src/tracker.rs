//! The Tracker: sole owner of job and partition state. Other actors report
//! progress to it by fire-and-forget messages; it answers status queries.
//! Nothing it does can stall a GPU worker, which never waits for it.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use serde::Serialize;

use crate::dispatcher::{Dispatcher, DropJob, Enqueue, EnqueuePartitions};
use crate::model::{JobId, JobSpec, NewJob, PartitionKey, Reservation, Stage, WorkerId};
use crate::store::{
    Committed, JobOutcome, JobRecord, JobStore, Persistence, StoreWrite, StoredJob,
};
use crate::telemetry;
use crate::worker_monitor::{SpanFinished, SpanStarted};

pub const MAILBOX_CAPACITY: usize = 4096;

pub struct Tracker {
    dispatcher: Addr<Dispatcher>,
    jobs: HashMap<JobId, JobState>,
    by_idempotency_key: HashMap<String, JobId>,
    next_seq: u64,
    /// Attempts a partition gets before its failure fails the job.
    max_attempts: u32,
    persistence: Persistence,
    /// Unfinished jobs above which SubmitJob refuses new ones (None: no limit).
    max_unfinished: Option<usize>,
    /// Jobs not yet finished, kept as jobs come and end so that the queue
    /// limit costs nothing per submission however many jobs are retained.
    unfinished: usize,
}

struct JobState {
    spec: std::sync::Arc<JobSpec>,
    partitions: Vec<PartitionState>,
    error: Option<String>,
    finished: Option<(Stage, Instant)>,
}

struct PartitionState {
    stage: Stage,
    /// When the partition entered each stage.
    entered: [Option<Instant>; Stage::COUNT],
    proof: Option<ProofRecord>,
    error: Option<String>,
    worker: Option<WorkerId>,
    gpu_phases: Vec<(&'static str, Duration)>,
    /// Attempts started so far (1 for the first).
    attempts: u32,
    /// Why the last failed attempt failed, when it was retried.
    retried_after: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProofRecord {
    pub proof: Vec<u8>,
    pub public_inputs: Vec<Vec<u8>>,
}

impl Tracker {
    pub fn new(dispatcher: Addr<Dispatcher>, max_attempts: u32) -> Self {
        Self {
            dispatcher,
            jobs: HashMap::new(),
            by_idempotency_key: HashMap::new(),
            next_seq: 0,
            max_attempts: max_attempts.max(1),
            persistence: Persistence::in_memory(),
            max_unfinished: None,
            unfinished: 0,
        }
    }

    /// Records jobs in a store and forgets finished ones after retention.
    pub fn with_persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// Fire-and-forget: the store commits it in its own time.
    fn record(&self, write: StoreWrite) {
        if let Some(store) = &self.persistence.store {
            drop(store.write(write));
        }
    }

    fn store(&self) -> Option<&dyn JobStore> {
        self.persistence.store.as_deref()
    }

    /// Forgets finished jobs past retention, here and in the store.
    fn sweep(&mut self) {
        let Some(retention) = self.persistence.retention else {
            return;
        };
        let expired: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, job)| job.finished.is_some_and(|(_, at)| at.elapsed() >= retention))
            .map(|(id, _)| id.clone())
            .collect();
        if expired.is_empty() {
            return;
        }
        for id in &expired {
            self.jobs.remove(id);
        }
        self.by_idempotency_key.retain(|_, id| self.jobs.contains_key(id));
        log::info!("retention: forgot {} finished jobs", expired.len());
        for id in expired {
            self.record(StoreWrite::Removed(id));
        }
    }

    /// Rebuilds a job from the store: proved partitions keep their proofs,
    /// an unfinished job gets only its missing partitions queued.
    fn restore(&mut self, restored: RestoredJob) {
        let (stored, work, reservation) = match restored {
            // Never dispatched again, so it needs no work.
            RestoredJob::Finished(stored) => {
                (stored, Arc::new(()) as Arc<dyn Any + Send + Sync>, Reservation::default())
            }
            RestoredJob::Unfinished { stored, work, reservation } => (stored, work, reservation),
        };
        let StoredJob { record, mut proofs, failures, outcome } = stored;
        let submitted_wall = SystemTime::UNIX_EPOCH + Duration::from_millis(record.submitted_unix_ms);
        let submitted = instant_at(submitted_wall);
        let spec = Arc::new(JobSpec {
            id: record.id.clone(),
            seq: record.seq,
            priority: record.priority,
            partitions: record.partitions,
            circuit: record.circuit,
            circuit_id: record.circuit_id,
            reservation,
            work,
            submitted,
            submitted_wall,
            deadline: record.deadline_ms.map(|ms| submitted + Duration::from_millis(ms)),
            abandoned: Default::default(),
        });
        self.next_seq = self.next_seq.max(record.seq + 1);
        let finished = outcome.as_ref().map(|o| {
            let at = instant_at(SystemTime::UNIX_EPOCH + Duration::from_millis(o.finished_unix_ms));
            (o.stage, at)
        });
        let now = Instant::now();
        let partitions = (0..record.partitions)
            .map(|index| {
                let mut entered = [None; Stage::COUNT];
                entered[Stage::Queued as usize] = Some(submitted);
                let proof = proofs.remove(&index);
                let error = failures.get(&index).cloned();
                let stage = match (&proof, &error, &finished) {
                    (Some(_), _, _) => Stage::Done,
                    (None, Some(_), _) => Stage::Failed,
                    (None, None, Some((stage, _))) => *stage,
                    (None, None, None) => Stage::Queued,
                };
                if stage != Stage::Queued {
                    entered[stage as usize] = Some(finished.map_or(now, |(_, at)| at));
                }
                PartitionState {
                    stage,
                    entered,
                    proof,
                    error,
                    worker: None,
                    gpu_phases: Vec::new(),
                    attempts: 1,
                    retried_after: None,
                }
            })
            .collect::<Vec<_>>();
        let missing: Vec<u32> = partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.stage == Stage::Queued)
            .map(|(index, _)| index as u32)
            .collect();
        if let Some(key) = record.idempotency_key {
            self.by_idempotency_key.insert(key, record.id.clone());
        }
        self.jobs.insert(
            record.id.clone(),
            JobState {
                spec: spec.clone(),
                partitions,
                error: outcome.and_then(|o| o.error),
                finished,
            },
        );
        if finished.is_some() {
            return;
        }
        self.unfinished += 1;
        // Killed between recording a partition's failure and the job's end.
        if let Some((index, error)) = failures.into_iter().next() {
            let error = format!("partition {index}: {error}");
            self.settle(&record.id, Some((Stage::Failed, error)));
        } else if missing.is_empty() {
            self.settle(&record.id, None);
        } else {
            self.dispatcher.do_send(EnqueuePartitions { job: spec, partitions: missing });
        }
    }

    fn partition_mut(&mut self, key: &PartitionKey) -> Option<&mut PartitionState> {
        self.jobs.get_mut(&key.job)?.partitions.get_mut(key.index as usize)
    }

    /// Moves a partition forward; stale or out-of-order reports are ignored.
    fn advance(&mut self, key: &PartitionKey, stage: Stage, at: Instant) -> bool {
        let Some(partition) = self.partition_mut(key) else {
            return false;
        };
        if partition.stage.is_terminal() || stage < partition.stage {
            return false;
        }
        partition.stage = stage;
        partition.entered[stage as usize].get_or_insert(at);
        true
    }

    /// Ends a job when all its partitions are done, or fails or cancels it.
    fn settle(&mut self, id: &JobId, outcome: Option<(Stage, String)>) {
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        if job.finished.is_some() {
            return;
        }
        let now = Instant::now();
        let final_stage = match outcome {
            Some((stage, error)) => {
                job.spec.abandon();
                job.error = Some(error);
                for (index, p) in job.partitions.iter_mut().enumerate() {
                    if !p.stage.is_terminal() {
                        p.stage = stage;
                        p.entered[stage as usize] = Some(now);
                        emit_partition(id, index, p, stage);
                    }
                }
                self.dispatcher.do_send(DropJob { job: id.clone() });
                stage
            }
            None if job.partitions.iter().all(|p| p.stage == Stage::Done) => Stage::Done,
            None => return,
        };
        job.finished = Some((final_stage, now));
        self.unfinished -= 1;
        let outcome = JobOutcome {
            stage: final_stage,
            error: job.error.clone(),
            finished_unix_ms: unix_ms(SystemTime::now()),
        };
        if job.spec.deadline.is_some_and(|deadline| now > deadline) {
            telemetry::DeadlineMissed { job: &id.0, priority: job.spec.priority, outcome: final_stage }.emit();
        }
        telemetry::JobFinished {
            job: &id.0,
            outcome: final_stage,
            elapsed: now - job.spec.submitted,
            error: job.error.as_deref(),
        }
        .emit();
        self.record(StoreWrite::Finished { job: id.clone(), outcome });
    }
}

/// The monotonic instant of a wall-clock time in the past (now if the clock
/// cannot go back that far).
fn instant_at(wall: SystemTime) -> Instant {
    let now = Instant::now();
    let age = SystemTime::now().duration_since(wall).unwrap_or_default();
    now.checked_sub(age).unwrap_or(now)
}

fn emit_partition(job: &JobId, index: usize, p: &PartitionState, outcome: Stage) {
    let name = format!("{job}/{index}");
    telemetry::PartitionFinished {
        partition: &name,
        outcome,
        stages: &stage_durations(p),
    }
    .emit();
}

/// (timing name, duration) between consecutive stage entries.
fn stage_durations(p: &PartitionState) -> Vec<(&'static str, Duration)> {
    const SPANS: [(&str, Stage, Stage); 6] = [
        ("queue_wait", Stage::Queued, Stage::Synthesizing),
        ("synthesis", Stage::Synthesizing, Stage::WaitingGpu),
        ("gpu_wait", Stage::WaitingGpu, Stage::Proving),
        ("gpu", Stage::Proving, Stage::WaitingFinalizer),
        ("finalize_wait", Stage::WaitingFinalizer, Stage::Finalizing),
        ("finalize", Stage::Finalizing, Stage::Done),
    ];
    SPANS
        .iter()
        .filter_map(|(name, from, to)| {
            let start = p.entered[*from as usize]?;
            let end = p.entered[*to as usize]?;
            Some((*name, end.saturating_duration_since(start)))
        })
        .collect()
}

impl Actor for Tracker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.persistence.retention.is_some() {
            ctx.run_interval(self.persistence.sweep_interval, |tracker, _| tracker.sweep());
        }
    }
}

// ---- messages -------------------------------------------------------------

/// Accepts a job (or returns the existing one for a repeated idempotency key).
#[derive(Message)]
#[rtype(result = "SubmitOutcome")]
pub struct SubmitJob(pub NewJob);

#[derive(Debug)]
pub struct SubmitOutcome {
    pub id: JobId,
    /// False when an idempotency key matched an existing job.
    pub created: bool,
    pub status: JobStatus,
    /// With a store: resolves once the new job is durable. Awaited by the
    /// caller, never by the tracker.
    pub durable: Option<Committed>,
    /// Set when the job was refused because too many jobs are unfinished;
    /// nothing was queued.
    pub queue_full: Option<QueueFull>,
}

/// Jobs read back from the store on start, in submission order. Must reach
/// the tracker before any new submission.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RestoreJobs(pub Vec<RestoredJob>);

pub enum RestoredJob {
    Finished(StoredJob),
    /// Its work rebuilt from the recorded request.
    Unfinished {
        stored: StoredJob,
        work: Arc<dyn Any + Send + Sync>,
        reservation: Reservation,
    },
}

/// Partitions past the queue and not yet finished: what a graceful
/// shutdown waits for.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct CountRunningPartitions;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull {
    pub unfinished: usize,
    pub limit: usize,
}

/// Sets how many unfinished (queued or running) jobs SubmitJob accepts.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetMaxUnfinished(pub Option<usize>);

/// A partition entered a stage (fire-and-forget).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Progress {
    pub key: PartitionKey,
    pub stage: Stage,
    pub at: Instant,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionProved {
    pub key: PartitionKey,
    pub proof: ProofRecord,
    pub at: Instant,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct PartitionFailed {
    pub key: PartitionKey,
    pub error: String,
    /// Another attempt could succeed: the partition is queued again while
    /// it has attempts left.
    pub retry: bool,
}

/// Cancels a job: queued partitions are dropped, running ones stop at their
/// next stage boundary. Answers the job's status after the call.
#[derive(Message)]
#[rtype(result = "Option<JobStatus>")]
pub struct CancelJob(pub JobId);

#[derive(Message)]
#[rtype(result = "Option<JobView>")]
pub struct GetJob(pub JobId);

#[derive(Message)]
#[rtype(result = "Result<ProofsView, ProofsError>")]
pub struct GetProofs(pub JobId);

#[derive(Message)]
#[rtype(result = "TrackerStatus")]
pub struct GetTrackerStatus;

// ---- views ----------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

#[derive(Debug, Serialize)]
pub struct JobView {
    pub id: JobId,
    pub status: JobStatus,
    pub circuit: String,
    pub circuit_id: String,
    pub priority: crate::Priority,
    pub submitted_at_ms: u64,
    /// Present when the job has a deadline: whether it was (or is already) missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_missed: Option<bool>,
    pub partitions: Vec<PartitionView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub timings_ms: BTreeMap<&'static str, f64>,
}

#[derive(Debug, Serialize)]
pub struct PartitionView {
    pub index: u32,
    pub stage: Stage,
    pub timings_ms: BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_phases_ms: BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub attempts: u32,
    /// The error of the last failed attempt, when the partition was retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried_after: Option<String>,
}

#[derive(Debug)]
pub struct ProofsView {
    pub circuit_id: String,
    pub proofs: Vec<(u32, ProofRecord)>,
}

#[derive(Debug, PartialEq)]
pub enum ProofsError {
    NotFound,
    NotReady(JobStatus),
}

#[derive(Debug, Serialize)]
pub struct TrackerStatus {
    pub jobs: BTreeMap<&'static str, usize>,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }
}

impl JobState {
    fn status(&self) -> JobStatus {
        match self.finished {
            Some((Stage::Done, _)) => JobStatus::Done,
            Some((Stage::Cancelled, _)) => JobStatus::Cancelled,
            Some(_) => JobStatus::Failed,
            None if self.partitions.iter().all(|p| p.stage == Stage::Queued) => JobStatus::Queued,
            None => JobStatus::Running,
        }
    }

    fn view(&self) -> JobView {
        let partitions: Vec<PartitionView> = self
            .partitions
            .iter()
            .enumerate()
            .map(|(index, p)| PartitionView {
                index: index as u32,
                stage: p.stage,
                timings_ms: partition_timings(p),
                worker: p.worker.map(|w| w.to_string()),
                gpu_phases_ms: p
                    .gpu_phases
                    .iter()
                    .map(|(name, d)| (*name, ms(*d)))
                    .collect(),
                error: p.error.clone(),
                attempts: p.attempts,
                retried_after: p.retried_after.clone(),
            })
            .collect();
        let mut timings_ms = BTreeMap::new();
        let end = self.finished.map(|(_, at)| at).unwrap_or_else(Instant::now);
        timings_ms.insert("total", ms(end - self.spec.submitted));
        for view in &partitions {
            for (name, value) in &view.timings_ms {
                if *name != "total" {
                    *timings_ms.entry(*name).or_insert(0.0) += value;
                }
            }
        }
        JobView {
            id: self.spec.id.clone(),
            status: self.status(),
            circuit: self.spec.circuit.clone(),
            circuit_id: self.spec.circuit_id.clone(),
            priority: self.spec.priority,
            submitted_at_ms: unix_ms(self.spec.submitted_wall),
            deadline_missed: self.spec.deadline.map(|deadline| end > deadline),
            partitions,
            error: self.error.clone(),
            timings_ms,
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

// ---- handlers -------------------------------------------------------------

impl Handler<SubmitJob> for Tracker {
    type Result = MessageResult<SubmitJob>;

    fn handle(&mut self, SubmitJob(job): SubmitJob, _: &mut Context<Self>) -> Self::Result {
        if let Some(existing) = job
            .idempotency_key
            .as_ref()
            .and_then(|k| self.by_idempotency_key.get(k))
        {
            let status = self.jobs[existing].status();
            // The original may still be on its way to disk: a repeat is
            // answered only once it is there too.
            let durable = self.store().map(|store| store.write(StoreWrite::Barrier));
            return MessageResult(SubmitOutcome {
                id: existing.clone(),
                created: false,
                status,
                durable,
                queue_full: None,
            });
        }
        if let Some(limit) = self.max_unfinished {
            let unfinished = self.unfinished;
            if unfinished >= limit {
                return MessageResult(SubmitOutcome {
                    id: job.id,
                    created: false,
                    status: JobStatus::Queued,
                    durable: None,
                    queue_full: Some(QueueFull { unfinished, limit }),
                });
            }
        }
        let now = Instant::now();
        let spec = std::sync::Arc::new(JobSpec {
            id: job.id.clone(),
            seq: self.next_seq,
            priority: job.priority,
            partitions: job.partitions,
            circuit: job.circuit,
            circuit_id: job.circuit_id,
            reservation: job.reservation,
            work: job.work,
            submitted: now,
            submitted_wall: SystemTime::now(),
            deadline: job.deadline.map(|d| now + d),
            abandoned: Default::default(),
        });
        self.next_seq += 1;
        let mut entered = [None; Stage::COUNT];
        entered[Stage::Queued as usize] = Some(now);
        let partitions = (0..job.partitions)
            .map(|_| PartitionState {
                stage: Stage::Queued,
                entered,
                proof: None,
                error: None,
                worker: None,
                gpu_phases: Vec::new(),
                attempts: 1,
                retried_after: None,
            })
            .collect();
        telemetry::JobSubmitted {
            job: &job.id.0,
            circuit_id: &spec.circuit_id,
            partitions: spec.partitions,
            priority: spec.priority,
        }
        .emit();
        let durable = match (self.store(), job.request) {
            (Some(store), Some(request)) => Some(store.write(StoreWrite::Accepted(JobRecord {
                id: job.id.clone(),
                seq: spec.seq,
                priority: spec.priority,
                partitions: spec.partitions,
                circuit: spec.circuit.clone(),
                circuit_id: spec.circuit_id.clone(),
                idempotency_key: job.idempotency_key.clone(),
                submitted_unix_ms: unix_ms(spec.submitted_wall),
                deadline_ms: job.deadline.map(|d| d.as_millis() as u64),
                request,
            }))),
            _ => None,
        };
        if let Some(key) = job.idempotency_key {
            self.by_idempotency_key.insert(key, job.id.clone());
        }
        self.jobs.insert(
            job.id.clone(),
            JobState {
                spec: spec.clone(),
                partitions,
                error: None,
                finished: None,
            },
        );
        self.unfinished += 1;
        self.dispatcher.do_send(Enqueue { job: spec });
        MessageResult(SubmitOutcome {
            id: job.id,
            created: true,
            status: JobStatus::Queued,
            durable,
            queue_full: None,
        })
    }
}

impl Handler<SetMaxUnfinished> for Tracker {
    type Result = ();

    fn handle(&mut self, SetMaxUnfinished(limit): SetMaxUnfinished, _: &mut Context<Self>) {
        self.max_unfinished = limit;
    }
}

impl Handler<Progress> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: Progress, _: &mut Context<Self>) {
        self.advance(&msg.key, msg.stage, msg.at);
    }
}

impl Handler<SpanStarted> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: SpanStarted, _: &mut Context<Self>) {
        if self.advance(&msg.key, Stage::Proving, msg.at) {
            if let Some(p) = self.partition_mut(&msg.key) {
                p.worker = Some(msg.worker);
            }
        }
    }
}

impl Handler<SpanFinished> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: SpanFinished, _: &mut Context<Self>) {
        // The worker reported WaitingFinalizer already; keep the phases.
        if let Some(p) = self.partition_mut(&msg.key).filter(|_| msg.ok) {
            p.gpu_phases = msg.phases;
        }
    }
}

impl Handler<PartitionProved> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: PartitionProved, _: &mut Context<Self>) {
        if !self.advance(&msg.key, Stage::Done, msg.at) {
            return;
        }
        let job = &mut self
            .jobs
            .get_mut(&msg.key.job)
            .expect("advance found the job");
        let p = &mut job.partitions[msg.key.index as usize];
        p.proof = Some(msg.proof.clone());
        emit_partition(&msg.key.job, msg.key.index as usize, p, Stage::Done);
        self.record(StoreWrite::PartitionProved {
            job: msg.key.job.clone(),
            index: msg.key.index,
            proof: msg.proof,
        });
        self.settle(&msg.key.job, None);
    }
}

impl Tracker {
    /// Queues a failed partition again if it has attempts left; true if so.
    fn retry(&mut self, key: &PartitionKey, error: &str) -> bool {
        let max_attempts = self.max_attempts;
        let Some(job) = self.jobs.get_mut(&key.job).filter(|j| j.finished.is_none()) else {
            return false;
        };
        let Some(p) = job.partitions.get_mut(key.index as usize) else {
            return false;
        };
        if p.stage.is_terminal() || p.attempts >= max_attempts {
            return false;
        }
        telemetry::PartitionRetried {
            partition: &key.to_string(),
            stage: p.stage,
            attempt: p.attempts,
            error,
        }
        .emit();
        p.attempts += 1;
        p.retried_after = Some(error.to_string());
        p.stage = Stage::Queued;
        p.entered = [None; Stage::COUNT];
        p.entered[Stage::Queued as usize] = Some(Instant::now());
        p.worker = None;
        p.gpu_phases.clear();
        self.dispatcher.do_send(EnqueuePartitions {
            job: job.spec.clone(),
            partitions: vec![key.index],
        });
        true
    }
}

impl Handler<PartitionFailed> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: PartitionFailed, _: &mut Context<Self>) {
        if msg.retry && self.retry(&msg.key, &msg.error) {
            return;
        }
        let at = Instant::now();
        if !self.advance(&msg.key, Stage::Failed, at) {
            return;
        }
        let job = self
            .jobs
            .get_mut(&msg.key.job)
            .expect("advance found the job");
        let p = &mut job.partitions[msg.key.index as usize];
        let error = match p.attempts {
            1 => msg.error,
            n => format!("{} (attempt {n} of {n})", msg.error),
        };
        p.error = Some(error.clone());
        emit_partition(&msg.key.job, msg.key.index as usize, p, Stage::Failed);
        self.record(StoreWrite::PartitionFailed {
            job: msg.key.job.clone(),
            index: msg.key.index,
            error: error.clone(),
        });
        self.settle(
            &msg.key.job,
            Some((Stage::Failed, format!("partition {}: {error}", msg.key.index))),
        );
    }
}

impl Handler<CancelJob> for Tracker {
    type Result = Option<JobStatus>;

    fn handle(&mut self, CancelJob(id): CancelJob, _: &mut Context<Self>) -> Self::Result {
        self.jobs.get(&id)?;
        self.settle(&id, Some((Stage::Cancelled, "cancelled by request".into())));
        self.jobs.get(&id).map(JobState::status)
    }
}

impl Handler<GetJob> for Tracker {
    type Result = Option<JobView>;

    fn handle(&mut self, GetJob(id): GetJob, _: &mut Context<Self>) -> Self::Result {
        self.jobs.get(&id).map(JobState::view)
    }
}

impl Handler<GetProofs> for Tracker {
    type Result = Result<ProofsView, ProofsError>;

    fn handle(&mut self, GetProofs(id): GetProofs, _: &mut Context<Self>) -> Self::Result {
        let job = self.jobs.get(&id).ok_or(ProofsError::NotFound)?;
        let status = job.status();
        if status != JobStatus::Done {
            return Err(ProofsError::NotReady(status));
        }
        Ok(ProofsView {
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
        let mut jobs: BTreeMap<&'static str, usize> =
            ["queued", "running", "done", "failed", "cancelled"]
                .into_iter()
                .map(|s| (s, 0))
                .collect();
        for job in self.jobs.values() {
            *jobs.entry(job.status().as_str()).or_default() += 1;
        }
        MessageResult(TrackerStatus { jobs })
    }
}

impl Handler<RestoreJobs> for Tracker {
    type Result = ();

    fn handle(&mut self, RestoreJobs(jobs): RestoreJobs, _: &mut Context<Self>) {
        for job in jobs {
            self.restore(job);
        }
    }
}

impl Handler<CountRunningPartitions> for Tracker {
    type Result = usize;

    fn handle(&mut self, _: CountRunningPartitions, _: &mut Context<Self>) -> usize {
        self.jobs
            .values()
            .filter(|job| job.finished.is_none())
            .flat_map(|job| &job.partitions)
            .filter(|p| p.stage != Stage::Queued && !p.stage.is_terminal())
            .count()
    }
}
