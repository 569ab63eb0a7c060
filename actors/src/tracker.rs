//! The Tracker: sole owner of job and partition state. Other actors report
//! progress to it by fire-and-forget messages; it answers status queries.
//! Nothing it does can stall a GPU worker, which never waits for it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use serde::Serialize;

use crate::dispatcher::{Dispatcher, DropJob, Enqueue};
use crate::model::{JobId, JobSpec, NewJob, PartitionKey, Stage, WorkerId};
use crate::telemetry;

pub const MAILBOX_CAPACITY: usize = 4096;

/// How many finished spans each worker keeps for `/v1/status`.
const SPANS_PER_WORKER: usize = 64;

pub struct Tracker {
    dispatcher: Addr<Dispatcher>,
    jobs: HashMap<JobId, JobState>,
    by_idempotency_key: HashMap<String, JobId>,
    next_seq: u64,
    workers: BTreeMap<WorkerId, WorkerState>,
    span_subscribers: Vec<Recipient<SpanFinished>>,
    /// Unfinished jobs above which SubmitJob refuses new ones (None: no limit).
    max_unfinished: Option<usize>,
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
}

#[derive(Clone, Debug)]
pub struct ProofRecord {
    pub proof: Vec<u8>,
    pub public_inputs: Vec<Vec<u8>>,
}

struct WorkerState {
    current: Option<(PartitionKey, Instant)>,
    idle_since: Instant,
    spans: VecDeque<SpanRecord>,
}

impl Tracker {
    pub fn new(dispatcher: Addr<Dispatcher>, workers: impl IntoIterator<Item = WorkerId>) -> Self {
        let now = Instant::now();
        Self {
            dispatcher,
            jobs: HashMap::new(),
            by_idempotency_key: HashMap::new(),
            next_seq: 0,
            workers: workers
                .into_iter()
                .map(|id| {
                    (
                        id,
                        WorkerState {
                            current: None,
                            idle_since: now,
                            spans: VecDeque::new(),
                        },
                    )
                })
                .collect(),
            span_subscribers: Vec::new(),
            max_unfinished: None,
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
    }
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
}

// ---- messages -------------------------------------------------------------

/// Accepts a job (or returns the existing one for a repeated idempotency key).
#[derive(Message)]
#[rtype(result = "SubmitOutcome")]
pub struct SubmitJob(pub NewJob);

#[derive(Debug, Clone)]
pub struct SubmitOutcome {
    pub id: JobId,
    /// False when an idempotency key matched an existing job.
    pub created: bool,
    pub status: JobStatus,
    /// Set when the job was refused because too many jobs are unfinished;
    /// nothing was queued.
    pub queue_full: Option<QueueFull>,
}

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

/// A GPU worker started a partition (fire-and-forget).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SpanStarted {
    pub worker: WorkerId,
    pub key: PartitionKey,
    pub at: Instant,
}

/// A GPU worker finished a partition, successfully or not (fire-and-forget).
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub struct SpanFinished {
    pub worker: WorkerId,
    pub key: PartitionKey,
    pub start: Instant,
    pub end: Instant,
    pub phases: Vec<(&'static str, Duration)>,
    pub ok: bool,
}

/// Forwards a copy of every finished span to `0` (benchmarks, timelines).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SubscribeSpans(pub Recipient<SpanFinished>);

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
    pub workers: Vec<WorkerView>,
}

#[derive(Debug, Serialize)]
pub struct WorkerView {
    pub id: String,
    pub device: usize,
    pub worker: usize,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Milliseconds in the current state.
    pub for_ms: f64,
    pub recent: Vec<SpanView>,
}

/// A finished span as the tracker keeps it; viewed relative to the time of
/// the query.
struct SpanRecord {
    partition: String,
    start: Instant,
    busy: Duration,
    ok: bool,
}

impl SpanRecord {
    fn view(&self) -> SpanView {
        SpanView {
            partition: self.partition.clone(),
            started_ms_ago: ms(self.start.elapsed()),
            busy_ms: ms(self.busy),
            ok: self.ok,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SpanView {
    pub partition: String,
    pub started_ms_ago: f64,
    pub busy_ms: f64,
    pub ok: bool,
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
            return MessageResult(SubmitOutcome {
                id: existing.clone(),
                created: false,
                status,
                queue_full: None,
            });
        }
        if let Some(limit) = self.max_unfinished {
            let unfinished = self.jobs.values().filter(|j| j.finished.is_none()).count();
            if unfinished >= limit {
                return MessageResult(SubmitOutcome {
                    id: job.id,
                    created: false,
                    status: JobStatus::Queued,
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
            })
            .collect();
        telemetry::JobSubmitted {
            job: &job.id.0,
            circuit_id: &spec.circuit_id,
            partitions: spec.partitions,
            priority: spec.priority,
        }
        .emit();
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
        self.dispatcher.do_send(Enqueue { job: spec });
        MessageResult(SubmitOutcome {
            id: job.id,
            created: true,
            status: JobStatus::Queued,
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
        if let Some(worker) = self.workers.get_mut(&msg.worker) {
            worker.current = Some((msg.key.clone(), msg.at));
        }
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
        for subscriber in &self.span_subscribers {
            subscriber.do_send(msg.clone());
        }
        if let Some(worker) = self.workers.get_mut(&msg.worker) {
            if worker
                .current
                .as_ref()
                .is_some_and(|(key, _)| *key == msg.key)
            {
                worker.current = None;
                worker.idle_since = msg.end;
            }
            if worker.spans.len() == SPANS_PER_WORKER {
                worker.spans.pop_front();
            }
            worker.spans.push_back(SpanRecord {
                partition: msg.key.to_string(),
                start: msg.start,
                busy: msg.end - msg.start,
                ok: msg.ok,
            });
        }
        if msg.ok && self.advance(&msg.key, Stage::WaitingFinalizer, msg.end) {
            if let Some(p) = self.partition_mut(&msg.key) {
                p.gpu_phases = msg.phases;
            }
        }
    }
}

impl Handler<SubscribeSpans> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: SubscribeSpans, _: &mut Context<Self>) {
        self.span_subscribers.push(msg.0);
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
        p.proof = Some(msg.proof);
        emit_partition(&msg.key.job, msg.key.index as usize, p, Stage::Done);
        self.settle(&msg.key.job, None);
    }
}

impl Handler<PartitionFailed> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: PartitionFailed, _: &mut Context<Self>) {
        let at = Instant::now();
        if !self.advance(&msg.key, Stage::Failed, at) {
            return;
        }
        let job = self
            .jobs
            .get_mut(&msg.key.job)
            .expect("advance found the job");
        let p = &mut job.partitions[msg.key.index as usize];
        p.error = Some(msg.error.clone());
        emit_partition(&msg.key.job, msg.key.index as usize, p, Stage::Failed);
        self.settle(
            &msg.key.job,
            Some((
                Stage::Failed,
                format!("partition {}: {}", msg.key.index, msg.error),
            )),
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
        let workers = self
            .workers
            .iter()
            .map(|(id, w)| {
                let (state, partition, since) = match &w.current {
                    Some((key, since)) => ("proving", Some(key.to_string()), *since),
                    None => ("idle", None, w.idle_since),
                };
                WorkerView {
                    id: id.to_string(),
                    device: id.device,
                    worker: id.worker,
                    state,
                    partition,
                    for_ms: ms(since.elapsed()),
                    recent: w.spans.iter().rev().take(8).map(SpanRecord::view).collect(),
                }
            })
            .collect();
        MessageResult(TrackerStatus { jobs, workers })
    }
}
