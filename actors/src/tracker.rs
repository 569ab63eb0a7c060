//! The Tracker: sole owner of job and partition state. Other actors report
//! progress to it by fire-and-forget messages; it answers status queries.
//! Nothing it does can stall a GPU worker, which never waits for it.
//!
//! This file is the state machine: jobs accepted, partitions moved forward,
//! retried, failed, cancelled, jobs settled and swept after retention.
//! `tracker/intake.rs` accepts jobs, `tracker/restore.rs` rebuilds them
//! from the store on start, `tracker/fleet.rs` takes claimed partitions on a
//! fleet node, `tracker/views.rs` answers the daemon's queries.

mod fleet;
mod intake;
mod restore;
mod views;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;

use crate::backend::Backend;
use crate::error::ErrorKind;
use crate::messages::{
    CancelJob, CircuitLoad, DropJob, EndCommitted, Enqueue, JobStatus, PartitionFailed, PartitionProved,
    Progress, SpanReport,
};
use crate::model::{JobId, JobSpec, PartitionKey, ProofRecord, Stage, Tenant, WorkerId, STAGES};
use crate::store::{FleetLoad, JobOutcome, JobStore, Persistence, StoreWrite};
use crate::telemetry;
use crate::time::unix_ms;

/// Bound of the tracker's mailbox: every stage's reports and every API question
/// about jobs pass through it.
pub const MAILBOX_CAPACITY: usize = 4096;

/// How long a partition that could not start yet (`ErrorKind::NotReady`)
/// waits before it is queued again.
const NOT_READY_PAUSE: Duration = Duration::from_millis(500);

/// SHA-256 of a job's recorded request.
type BodyDigest = [u8; 32];

/// The actor that owns every job's and partition's state: it accepts jobs,
/// moves partitions through the stages as reports arrive, retries or fails
/// them, and answers the daemon's questions.
pub struct Tracker {
    /// The dispatcher: partitions to queue (new, restored, retried).
    enqueue: Recipient<Enqueue>,
    /// The dispatcher: jobs that failed or were cancelled.
    drop_job: Recipient<DropJob>,
    /// Told of each job taken on, before it is queued
    /// (`Backend::accepted`): a queued job counts as a user of the work it
    /// will share (a circuit's setup) before its partitions ask for it.
    backend: Arc<dyn Backend>,
    jobs: HashMap<JobId, JobState>,
    /// Each tenant's idempotency keys: the job and the digest of the body
    /// that created it. A repeat with another body is a conflict, not the
    /// same job; another tenant's key is another key.
    by_idempotency_key: HashMap<(Tenant, String), (JobId, BodyDigest)>,
    next_seq: u64,
    /// Attempts a partition gets before its failure fails the job.
    max_attempts: u32,
    persistence: Persistence,
    /// Unfinished jobs above which SubmitJob refuses new ones (None: no limit).
    max_unfinished: Option<usize>,
    /// Jobs by status and partitions by stage, kept as they change so that
    /// `/v1/status` costs the same however many jobs are retained.
    tally: Tally,
    /// Jobs not yet finished, kept as jobs come and end so that the queue
    /// limit costs nothing per submission however many jobs are retained.
    unfinished: usize,
    /// The same per tenant, for the tenants' own queue limits; a tenant
    /// with none unfinished has no entry.
    unfinished_by_tenant: HashMap<Tenant, usize>,
    /// Callers waiting for unfinished jobs to end (`WatchJob`).
    watchers: views::Watchers,
    /// This tracker, told when the store has committed a done job's end
    /// (set when it starts).
    me: Option<Recipient<EndCommitted>>,
}

struct JobState {
    spec: Arc<JobSpec>,
    /// Whose job it is: only this tenant (or an admin) sees it.
    tenant: Tenant,
    partitions: Vec<PartitionState>,
    error: Option<String>,
    finished: Option<(Stage, Instant)>,
    /// Done, but its end not yet committed to the store: until it is, the
    /// job shows as running, serves no proofs and keeps its watchers
    /// waiting, so that no client sees "done" that a crash would undo (a
    /// kill -9 between the two proves it again; tests/crash.sh caught it).
    end_pending: bool,
}

/// Counts of the retained jobs by status and of their partitions by stage.
/// A job leaves the counts before it changes and enters them again after,
/// so each change costs its own partitions, not every job's.
/// Partitions another node holds are not counted.
#[derive(Default)]
struct Tally {
    jobs: [usize; JobStatus::ALL.len()],
    partitions: [usize; Stage::COUNT],
    /// Unfinished jobs by circuit, queued and running (`GetCircuitLoad`:
    /// gRPC's queues per kind); a circuit leaves the map with its last one,
    /// so it holds the kinds in use, not every kind ever seen.
    circuits: HashMap<String, CircuitLoad>,
    /// A fleet node's copy of the counts its claimer sizes claims by.
    load: Option<Arc<FleetLoad>>,
}

impl Tally {
    fn add(&mut self, job: &JobState) {
        self.jobs[job.status() as usize] += 1;
        for p in job.local() {
            self.partitions[p.stage as usize] += 1;
        }
        if let Some(count) = Self::unfinished(job) {
            let load = self.circuits.entry(job.spec.circuit.clone()).or_default();
            *count(load) += 1;
        }
        self.publish();
    }

    fn remove(&mut self, job: &JobState) {
        self.jobs[job.status() as usize] -= 1;
        for p in job.local() {
            self.partitions[p.stage as usize] -= 1;
        }
        if let Some(count) = Self::unfinished(job) {
            if let Some(load) = self.circuits.get_mut(&job.spec.circuit) {
                *count(load) -= 1;
                if *load == CircuitLoad::default() {
                    self.circuits.remove(&job.spec.circuit);
                }
            }
        }
        self.publish();
    }

    /// The count an unfinished job is in, by its status; None once it ended.
    fn unfinished(job: &JobState) -> Option<fn(&mut CircuitLoad) -> &mut usize> {
        match job.status() {
            JobStatus::Queued => Some(|load| &mut load.queued),
            JobStatus::Running => Some(|load| &mut load.running),
            _ => None,
        }
    }

    fn publish(&self) {
        if let Some(load) = &self.load {
            let count = |live: fn(&Stage) -> bool| -> usize {
                STAGES.iter().filter(|s| live(s)).map(|s| self.partitions[*s as usize]).sum()
            };
            load.waiting.store(count(|s| *s <= Stage::WaitingBudget), Ordering::Relaxed);
            load.held.store(count(|s| !s.is_terminal()), Ordering::Relaxed);
        }
    }
}

impl JobState {
    /// The partitions this node runs: all of them, except on a fleet node,
    /// where a job's other partitions are other nodes' business.
    fn local(&self) -> impl Iterator<Item = &PartitionState> {
        self.partitions.iter().filter(|p| !p.elsewhere)
    }
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
    /// Fleet: another node holds it, or none does yet; this one neither runs
    /// nor records it, and ignores any late report of work it gave up.
    elsewhere: bool,
}

impl PartitionState {
    /// A partition on its first attempt, queued at `at`.
    fn queued(at: Instant) -> Self {
        let mut entered = [None; Stage::COUNT];
        entered[Stage::Queued as usize] = Some(at);
        Self {
            stage: Stage::Queued,
            entered,
            proof: None,
            error: None,
            worker: None,
            gpu_phases: Vec::new(),
            attempts: 1,
            retried_after: None,
            elsewhere: false,
        }
    }
}

impl Tracker {
    /// A tracker with no jobs, which queues partitions at the dispatcher, tells
    /// the backend of each job taken on, and gives a partition `max_attempts`
    /// attempts. It keeps jobs in memory only until `with_persistence` says
    /// otherwise.
    pub fn new(
        enqueue: Recipient<Enqueue>,
        drop_job: Recipient<DropJob>,
        backend: Arc<dyn Backend>,
        max_attempts: u32,
    ) -> Self {
        Self {
            enqueue,
            drop_job,
            backend,
            jobs: HashMap::new(),
            by_idempotency_key: HashMap::new(),
            next_seq: 0,
            max_attempts: max_attempts.max(1),
            persistence: Persistence::in_memory(),
            max_unfinished: None,
            unfinished: 0,
            unfinished_by_tenant: HashMap::new(),
            tally: Tally::default(),
            watchers: views::Watchers::default(),
            me: None,
        }
    }

    /// Records jobs in a store and forgets finished ones after retention.
    pub fn with_persistence(mut self, persistence: Persistence) -> Self {
        self.tally.load = persistence.fleet.clone();
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
            if let Some(job) = self.jobs.remove(id) {
                self.tally.remove(&job);
            }
        }
        self.by_idempotency_key.retain(|_, (id, _)| self.jobs.contains_key(id));
        log::info!("retention: forgot {} finished jobs", expired.len());
        for id in expired {
            self.record(StoreWrite::Removed(id));
        }
    }

    /// Takes a job in, accepted or restored; an unfinished one counts
    /// against the queue limit until it settles.
    fn insert_job(&mut self, job: JobState, idempotency_key: Option<(String, BodyDigest)>) {
        let id = job.spec.id.clone();
        if let Some((key, body)) = idempotency_key {
            self.by_idempotency_key.insert((job.tenant.clone(), key), (id.clone(), body));
        }
        if job.finished.is_none() {
            self.unfinished += 1;
            *self.unfinished_by_tenant.entry(job.tenant.clone()).or_default() += 1;
        }
        self.tally.add(&job);
        self.jobs.insert(id, job);
    }

    fn partition_mut(&mut self, key: &PartitionKey) -> Option<&mut PartitionState> {
        self.jobs.get_mut(&key.job)?.partitions.get_mut(key.index as usize)
    }

    /// Moves a partition forward; stale or out-of-order reports are ignored.
    fn advance(&mut self, key: &PartitionKey, stage: Stage, at: Instant) -> bool {
        let Some(job) = self.jobs.get_mut(&key.job) else {
            return false;
        };
        let Some(current) = job.partitions.get(key.index as usize).filter(|p| !p.elsewhere).map(|p| p.stage)
        else {
            return false;
        };
        if current.is_terminal() || stage < current {
            return false;
        }
        self.tally.remove(job);
        let partition = &mut job.partitions[key.index as usize];
        partition.stage = stage;
        partition.entered[stage as usize].get_or_insert(at);
        self.tally.add(job);
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
        if outcome.is_none() && !job.local().all(|p| p.stage == Stage::Done) {
            return;
        }
        self.tally.remove(job);
        let final_stage = match outcome {
            Some((stage, error)) => {
                job.spec.abandon();
                job.error = Some(error);
                for (index, p) in job.partitions.iter_mut().enumerate() {
                    if !p.stage.is_terminal() && !p.elsewhere {
                        p.stage = stage;
                        p.entered[stage as usize] = Some(now);
                        emit_partition(id, index, p, stage);
                    }
                }
                self.drop_job.do_send(DropJob { job: id.clone() });
                stage
            }
            None => Stage::Done,
        };
        job.finished = Some((final_stage, now));
        job.spec = Arc::new(job.spec.without_work());
        let stored = self.persistence.store.is_some() && self.persistence.fleet.is_none();
        job.end_pending = final_stage == Stage::Done && stored && self.me.is_some();
        let pending = job.end_pending;
        self.tally.add(job);
        if !job.end_pending {
            self.watchers.ended(id, job.status());
        }
        self.unfinished -= 1;
        if let Some(count) = self.unfinished_by_tenant.get_mut(&job.tenant) {
            *count -= 1;
            if *count == 0 {
                self.unfinished_by_tenant.remove(&job.tenant);
            }
        }
        if self.persistence.fleet.is_some() {
            // What this node held of the job is over; the job's own end is
            // recorded in the database with its last partition (or its
            // failure or cancellation), by whichever node that is.
            self.forget(id);
            return;
        }
        let outcome = JobOutcome {
            stage: final_stage,
            error: job.error.clone(),
            finished_unix_ms: unix_ms(SystemTime::now()),
        };
        if job.spec.submitted.deadline.is_some_and(|deadline| now > deadline) {
            telemetry::DeadlineMissed { job: &id.0, priority: job.spec.priority, outcome: final_stage }
                .emit();
        }
        telemetry::JobFinished {
            job: &id.0,
            outcome: final_stage,
            elapsed: now - job.spec.submitted.at,
            error: job.error.as_deref(),
        }
        .emit();
        let Some(store) = self.store() else { return };
        let committed = store.write(StoreWrite::Finished { job: id.clone(), outcome });
        if let Some(me) = self.me.clone().filter(|_| pending) {
            let id = id.clone();
            // A failed commit is the store's incident (health, /readyz);
            // the job still ends here rather than hang its watchers.
            actix::spawn(async move {
                let _ = committed.await;
                me.do_send(EndCommitted(id));
            });
        }
    }

    /// Queues a failed partition again if it has attempts left; true if so.
    fn retry(&mut self, key: &PartitionKey, error: &str) -> bool {
        let max_attempts = self.max_attempts;
        let Some(job) = self.jobs.get_mut(&key.job).filter(|j| j.finished.is_none()) else {
            return false;
        };
        let Some(p) = job.partitions.get(key.index as usize) else {
            return false;
        };
        if p.stage.is_terminal() || p.elsewhere || p.attempts >= max_attempts {
            return false;
        }
        self.tally.remove(job);
        let p = &mut job.partitions[key.index as usize];
        telemetry::PartitionRetried {
            partition: &key.to_string(),
            stage: p.stage,
            attempt: p.attempts,
            error,
        }
        .emit();
        *p = PartitionState {
            attempts: p.attempts + 1,
            retried_after: Some(error.to_string()),
            ..PartitionState::queued(Instant::now())
        };
        self.tally.add(job);
        self.enqueue.do_send(Enqueue { job: job.spec.clone(), partitions: vec![key.index] });
        true
    }
}

impl Tracker {
    /// A partition that could not start yet: back to queued now (its
    /// attempts unchanged), to the dispatcher after a pause, unless the job
    /// ended meanwhile.
    fn queue_later(&mut self, key: PartitionKey, ctx: &mut Context<Self>) {
        let Some(job) = self.jobs.get_mut(&key.job).filter(|j| j.finished.is_none()) else {
            return;
        };
        if job.partitions.get(key.index as usize).is_none_or(|p| p.stage.is_terminal() || p.elsewhere) {
            return;
        }
        self.tally.remove(job);
        let p = &mut job.partitions[key.index as usize];
        *p = PartitionState {
            attempts: p.attempts,
            retried_after: p.retried_after.take(),
            ..PartitionState::queued(Instant::now())
        };
        self.tally.add(job);
        ctx.run_later(NOT_READY_PAUSE, move |tracker, _| {
            if let Some(job) = tracker.jobs.get(&key.job).filter(|j| j.finished.is_none()) {
                tracker.enqueue.do_send(Enqueue { job: job.spec.clone(), partitions: vec![key.index] });
            }
        });
    }
}

fn emit_partition(job: &JobId, index: usize, p: &PartitionState, outcome: Stage) {
    let name = format!("{job}/{index}");
    telemetry::PartitionFinished { partition: &name, outcome, stages: &stage_durations(p) }.emit();
}

/// (timing name, duration) between consecutive stage entries.
fn stage_durations(p: &PartitionState) -> Vec<(&'static str, Duration)> {
    telemetry::STAGE_SPANS
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
        self.me = Some(ctx.address().recipient());
        if self.persistence.retention.is_some() {
            ctx.run_interval(self.persistence.sweep_interval, |tracker, _| tracker.sweep());
        }
    }
}

impl Handler<Progress> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: Progress, _: &mut Context<Self>) {
        self.advance(&msg.key, msg.stage, msg.at);
    }
}

impl Handler<SpanReport> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: SpanReport, _: &mut Context<Self>) {
        match msg {
            SpanReport::Started(span) => {
                if self.advance(&span.key, Stage::Proving, span.at) {
                    if let Some(p) = self.partition_mut(&span.key) {
                        p.worker = Some(span.worker);
                    }
                }
            }
            // The worker reported WaitingFinalizer already; keep the phases.
            SpanReport::Finished(span) => {
                if let Some(p) = self.partition_mut(&span.key).filter(|_| span.ok) {
                    p.gpu_phases = span.phases;
                }
            }
        }
    }
}

impl Handler<PartitionProved> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: PartitionProved, _: &mut Context<Self>) {
        if !self.advance(&msg.key, Stage::Done, msg.at) {
            return;
        }
        let job = &mut self.jobs.get_mut(&msg.key.job).expect("advance found the job");
        let p = &mut job.partitions[msg.key.index as usize];
        p.proof = Some(msg.proof.clone());
        emit_partition(&msg.key.job, msg.key.index as usize, p, Stage::Done);
        let detail = self.persistence.fleet.as_ref().map(|_| p.detail());
        self.record(StoreWrite::PartitionProved {
            job: msg.key.job.clone(),
            index: msg.key.index,
            proof: msg.proof,
            detail,
        });
        self.settle(&msg.key.job, None);
    }
}

impl Handler<EndCommitted> for Tracker {
    type Result = ();

    fn handle(&mut self, EndCommitted(id): EndCommitted, _: &mut Context<Self>) {
        let Some(job) = self.jobs.get_mut(&id).filter(|job| job.end_pending) else { return };
        self.tally.remove(job);
        job.end_pending = false;
        self.tally.add(job);
        self.watchers.ended(&id, job.status());
    }
}

impl Handler<PartitionFailed> for Tracker {
    type Result = ();

    fn handle(&mut self, msg: PartitionFailed, ctx: &mut Context<Self>) {
        let error = msg.error.to_string();
        if msg.error.kind() == ErrorKind::NotReady {
            self.queue_later(msg.key, ctx);
            return;
        }
        if msg.error.is_retryable() && self.retry(&msg.key, &error) {
            return;
        }
        if !self.advance(&msg.key, Stage::Failed, Instant::now()) {
            return;
        }
        let job = self.jobs.get_mut(&msg.key.job).expect("advance found the job");
        let p = &mut job.partitions[msg.key.index as usize];
        let error = match p.attempts {
            1 => error,
            n => format!("{error} (attempt {n} of {n})"),
        };
        p.error = Some(error.clone());
        emit_partition(&msg.key.job, msg.key.index as usize, p, Stage::Failed);
        self.record(StoreWrite::PartitionFailed {
            job: msg.key.job.clone(),
            index: msg.key.index,
            error: error.clone(),
        });
        self.settle(&msg.key.job, Some((Stage::Failed, format!("partition {}: {error}", msg.key.index))));
    }
}

impl Handler<CancelJob> for Tracker {
    type Result = Option<JobStatus>;

    fn handle(&mut self, CancelJob(id, scope): CancelJob, _: &mut Context<Self>) -> Self::Result {
        self.jobs.get(&id).filter(|job| scope.sees(&job.tenant))?;
        self.settle(&id, Some((Stage::Cancelled, "cancelled by request".into())));
        self.jobs.get(&id).map(JobState::status)
    }
}
