//! The Dispatcher: priority queues of partitions waiting for synthesis and
//! for a GPU worker. It reserves budget before synthesis, keeps at most one
//! partition per synthesis thread in flight, and keeps each GPU worker's next
//! partition already in its mailbox (lookahead) so a worker that finishes
//! starts the next one without a round trip. Critical partitions go first to
//! the critical lane's workers, which take nothing else, so one never waits
//! behind the bulk partitions the general workers hold.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;

use crate::backend::Payload;
use crate::error::StageError;
use crate::messages::{
    BudgetDecision, DropJob, Enqueue, GetQueueStatus, HandedOver, HoldQueued, IdleCauseChanged, IdleCauses,
    PartitionFailed, Progress, ProvePartition, QueueStatus, Release, Reserve, SynthesisDone, Synthesize,
    WorkerDone,
};
use crate::model::{IdleCause, JobSpec, Lane, PartitionKey, Priority, QueueOrder, Stage, WorkerId};
use crate::pacer::{Admission, Pacer, PacerConfig};
use crate::telemetry;

/// Bound of the dispatcher's mailbox: every queued partition, budget decision
/// and stage completion passes through it.
pub const MAILBOX_CAPACITY: usize = 4096;

/// Synthesis slots beyond `synthesis_threads` that only critical partitions
/// take, so that a WinningPoSt never waits for a bulk partition's synthesis
/// (about 10 s at 32 GiB) to end; the pool has as many more threads. A
/// critical partition takes one only while fewer critical partitions than
/// this are being synthesized: critical work waits for critical work ahead
/// of it, in queue order, as any work does.
pub const CRITICAL_SYNTHESIS_SLOTS: usize = 1;

/// The actors the dispatcher talks to, wired by `system.rs`.
pub struct Peers {
    /// The tracker: partitions entering WaitingBudget.
    pub progress: Recipient<Progress>,
    /// The tracker: attempts that failed here (budget refused, synthesis).
    pub failed: Recipient<PartitionFailed>,
    /// The monitor: each hand-off to a worker, before the worker has it.
    pub handed_over: Recipient<HandedOver>,
    /// The monitor: what an idle worker now waits for.
    pub idle_cause: Recipient<IdleCauseChanged>,
    /// The budget: reservations before synthesis.
    pub reserve: Recipient<Reserve>,
    /// The budget: bytes of partitions dropped or failed here.
    pub release: Recipient<Release>,
    /// The synthesis pool.
    pub synthesis: Recipient<Synthesize>,
}

/// The actor that queues partitions, starts their synthesis within the budget
/// and the pacer's rate, and hands synthesized ones to GPU workers.
pub struct Dispatcher {
    /// Everyone it reports to or hands work to, but the GPU workers.
    peers: Peers,
    synthesis_threads: usize,
    workers: Vec<WorkerSlot>,
    /// Partitions a worker may hold: the one it runs plus lookahead.
    per_worker: usize,
    /// Waiting for a synthesis slot.
    pending: BTreeMap<QueueOrder, Arc<JobSpec>>,
    /// Reserving budget (`None`) or being synthesized since the instant.
    in_synthesis: HashMap<PartitionKey, (Arc<JobSpec>, Option<Instant>)>,
    reserving: usize,
    /// Synthesized, waiting for a GPU worker.
    ready: BTreeMap<QueueOrder, (Arc<JobSpec>, Payload)>,
    pacer: Pacer,
    /// A pump is scheduled for when the pacer allows the next release.
    wake_scheduled: bool,
    /// The pacer held the head of the synthesis queue in the last pump.
    paced: bool,
    /// The idle causes last reported to the monitor.
    idle_causes: IdleCauses,
    /// Shutting down: queued partitions stay queued (they resume after a
    /// restart); those already started go on.
    holding_queued: bool,
}

/// A GPU worker as the dispatcher knows it.
pub struct WorkerSlot {
    id: WorkerId,
    /// Which partitions it may be given.
    lane: Lane,
    /// Its mailbox.
    addr: Recipient<ProvePartition>,
    /// Partitions handed to it and not yet done.
    assigned: usize,
}

impl WorkerSlot {
    /// A worker with nothing handed to it yet.
    pub fn new(id: WorkerId, lane: Lane, addr: Recipient<ProvePartition>) -> Self {
        Self { id, lane, addr, assigned: 0 }
    }
}

impl Dispatcher {
    /// `workers`: every GPU worker, in slot order.
    pub fn new(
        peers: Peers,
        workers: Vec<WorkerSlot>,
        synthesis_threads: usize,
        lookahead: usize,
        pacer: PacerConfig,
    ) -> Self {
        // The pacer paces bulk work to the general workers' throughput: the
        // critical lane takes no bulk partition, so counting its workers
        // would divide the GPU time per partition by workers that never
        // take one, and synthesis would outrun the GPUs (see `WorkerDone`).
        let general = workers.iter().filter(|w| w.lane == Lane::General).count();
        let synthesis_threads = synthesis_threads.max(1);
        let pacer = Pacer::new(pacer, general, synthesis_threads);
        Self {
            peers,
            synthesis_threads,
            workers,
            per_worker: 1 + lookahead,
            pending: BTreeMap::new(),
            in_synthesis: HashMap::new(),
            reserving: 0,
            ready: BTreeMap::new(),
            pacer,
            wake_scheduled: false,
            paced: false,
            idle_causes: IdleCauses::NO_WORK,
            holding_queued: false,
        }
    }

    /// Partitions reserving, synthesizing, synthesized or at a worker.
    fn in_pipeline(&self) -> usize {
        self.in_synthesis.len() + self.ready.len() + self.workers.iter().map(|w| w.assigned).sum::<usize>()
    }

    /// Partitions being synthesized. Those still waiting for budget are not
    /// counted: while memory is short they make no progress, and counting
    /// them would make the pacer expect partitions that are not coming.
    fn synthesizing(&self) -> usize {
        self.in_synthesis.len() - self.reserving
    }

    /// Whether a partition of priority `head` has a synthesis slot now: one
    /// of the `synthesis_threads`, or, for a critical one while no more than
    /// `CRITICAL_SYNTHESIS_SLOTS - 1` others are being synthesized, one of
    /// the slots beyond them.
    fn has_synthesis_slot(&self, head: Priority) -> bool {
        let taken = self.in_synthesis.len();
        if taken < self.synthesis_threads {
            return true;
        }
        let critical = |(job, _): &&(Arc<JobSpec>, Option<Instant>)| job.priority == Priority::Critical;
        head == Priority::Critical
            && taken < self.synthesis_threads + CRITICAL_SYNTHESIS_SLOTS
            && self.in_synthesis.values().filter(critical).count() < CRITICAL_SYNTHESIS_SLOTS
    }

    /// Whether the head of the synthesis queue may start now. Critical work
    /// is never held back.
    fn may_release(&mut self, head: Priority, ctx: &mut Context<Self>) -> bool {
        if head == Priority::Critical {
            return true;
        }
        // One partition waits for memory at a time: otherwise every release
        // made while the budget is full is granted in one burst when memory
        // comes back, and the pacer no longer sets the pace.
        if self.reserving > 0 {
            return false;
        }
        // Bulk partitions at the general workers: the lane's critical ones
        // are outside the pipeline the pacer fills.
        let at_workers: usize =
            self.workers.iter().filter(|w| w.lane == Lane::General).map(|w| w.assigned).sum();
        let (buffer, synthesizing) = (self.ready.len(), self.synthesizing());
        match self.pacer.admit(Instant::now(), buffer, synthesizing, at_workers + self.reserving) {
            Admission::Now => true,
            Admission::Hold => {
                self.paced = true;
                false
            }
            Admission::At(at) => {
                self.paced = true;
                if !self.wake_scheduled {
                    self.wake_scheduled = true;
                    let delay = at.saturating_duration_since(Instant::now()).max(Duration::from_micros(50));
                    ctx.run_later(delay, |dispatcher, ctx| {
                        dispatcher.wake_scheduled = false;
                        dispatcher.pump(ctx);
                    });
                }
                false
            }
        }
    }

    fn pump(&mut self, ctx: &mut Context<Self>) {
        self.paced = false;
        while !self.holding_queued {
            let Some((order, _)) = self.pending.first_key_value() else {
                break;
            };
            let head = order.0 .0;
            if !self.has_synthesis_slot(head) {
                break;
            }
            if !self.may_release(head, ctx) {
                break;
            }
            let (order, job) = self.pending.pop_first().expect("checked non-empty");
            self.pacer.released(Instant::now());
            let key = job.key(order.2);
            self.peers.progress.do_send(Progress {
                key: key.clone(),
                stage: Stage::WaitingBudget,
                at: Instant::now(),
            });
            self.peers.reserve.do_send(Reserve {
                key: key.clone(),
                order,
                bytes: job.reservation.total(),
                reply: ctx.address().recipient(),
            });
            self.in_synthesis.insert(key, (job, None));
            self.reserving += 1;
        }
        self.assign();
        let causes = IdleCauses { general: self.idle_cause(), critical: self.critical_idle_cause() };
        if causes != self.idle_causes {
            self.idle_causes = causes;
            self.peers.idle_cause.do_send(IdleCauseChanged { causes, at: Instant::now() });
        }
        if self.pending.is_empty() && self.in_pipeline() == 0 {
            self.pacer.pipeline_empty();
        }
        self.publish_depths();
    }

    /// Publishes the queue depths and the partitions in progress.
    fn publish_depths(&self) {
        telemetry::QueueDepths {
            synthesis: self.pending.len(),
            budget: self.reserving,
            gpu: self.ready.len(),
            synthesizing: self.synthesizing(),
            proving: self.workers.iter().map(|w| w.assigned.min(1)).sum(),
        }
        .emit();
    }

    /// Hands synthesized partitions to workers with room, in queue order. A
    /// partition with no worker for it (a bulk one while only the critical
    /// lane has room) is passed over, so later ones still go; the walk is
    /// over the GPU buffer, which the pacer keeps short.
    fn assign(&mut self) {
        let mut next = self.ready.keys().next().copied();
        while let Some(order) = next {
            if self.workers.iter().all(|w| w.assigned >= self.per_worker) {
                break;
            }
            next =
                self.ready.range((Bound::Excluded(order), Bound::Unbounded)).next().map(|(order, _)| *order);
            let Some(slot) = self.slot_for(order.0 .0) else {
                continue;
            };
            let (job, payload) = self.ready.remove(&order).expect("a key of ready");
            let slot = &mut self.workers[slot];
            slot.assigned += 1;
            let handed_at = Instant::now();
            // The monitor hears first, so it never sees a span start for a
            // partition it does not know was handed over.
            self.peers.handed_over.do_send(HandedOver { worker: slot.id, at: handed_at });
            slot.addr.do_send(ProvePartition { job, index: order.2, input: payload, handed_at });
        }
    }

    /// The worker a partition of `priority` goes to, if one has room: a
    /// critical one to the critical lane first, then to a general worker;
    /// any other to a general worker only. Within a lane, the least-loaded
    /// worker, and among those the one on the least-loaded device, so that
    /// devices fill evenly.
    fn slot_for(&self, priority: Priority) -> Option<usize> {
        let mut device_load = HashMap::<usize, usize>::new();
        for w in &self.workers {
            *device_load.entry(w.id.device).or_default() += w.assigned;
        }
        let lanes: &[Lane] =
            if priority == Priority::Critical { &[Lane::Critical, Lane::General] } else { &[Lane::General] };
        lanes.iter().find_map(|&lane| {
            self.workers
                .iter()
                .enumerate()
                .filter(|(_, w)| w.lane == lane && w.assigned < self.per_worker)
                .min_by_key(|(_, w)| (w.assigned, device_load[&w.id.device]))
                .map(|(slot, _)| slot)
        })
    }

    /// What a critical-lane worker with nothing in its mailbox waits for:
    /// the general rule over critical work alone (never paced: the pacer
    /// holds no critical partition, so critical work queued waits only for
    /// a synthesis thread). Critical work sorts first in every queue, so
    /// the heads say whether any is ready or queued.
    fn critical_idle_cause(&self) -> IdleCause {
        let critical = |order: Option<&QueueOrder>| order.is_some_and(|o| o.0 .0 == Priority::Critical);
        let (mut synthesizing, mut reserving) = (false, false);
        for (job, since) in self.in_synthesis.values() {
            if job.priority == Priority::Critical {
                synthesizing |= since.is_some();
                reserving |= since.is_none();
            }
        }
        let queued = critical(self.pending.keys().next());
        nearest_cause(critical(self.ready.keys().next()), synthesizing || queued, reserving, queued, false)
    }

    /// What a GPU worker with nothing in its mailbox waits for.
    fn idle_cause(&self) -> IdleCause {
        nearest_cause(
            !self.ready.is_empty(),
            self.synthesizing() > 0,
            self.reserving > 0,
            !self.pending.is_empty(),
            self.paced,
        )
    }

    fn fail(&self, key: PartitionKey, error: StageError) {
        self.peers.release.do_send(Release { key: key.clone(), bytes: None });
        self.peers.failed.do_send(PartitionFailed { key, error });
    }
}

/// The cause an idle worker waits for, given where the work it would take
/// is: synthesized (`ready`), being synthesized, waiting for memory, queued
/// for synthesis, held by the pacer. When several apply, the one nearest
/// the GPU wins: a partition being synthesized will reach a worker before
/// one still waiting for memory or the pacer.
fn nearest_cause(ready: bool, synthesizing: bool, reserving: bool, queued: bool, paced: bool) -> IdleCause {
    if ready {
        IdleCause::Handoff
    } else if synthesizing {
        IdleCause::Synthesis
    } else if reserving {
        IdleCause::Budget
    } else if !queued {
        IdleCause::NoWork
    } else if paced {
        IdleCause::Paced
    } else {
        IdleCause::Synthesis
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;

    /// The queues' and the pacer's gauges exist from the start (empty
    /// queues, the pacer bootstrapping), so that their panels show the
    /// idle state instead of "No data" before the first job.
    fn started(&mut self, _: &mut Context<Self>) {
        self.publish_depths();
        self.pacer.emit();
    }
}

impl Handler<Enqueue> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: Enqueue, ctx: &mut Context<Self>) {
        // A retry may cross the job's failure or cancellation in the mail.
        if !msg.job.is_abandoned() {
            for index in msg.partitions {
                self.pending.insert(msg.job.order(index), msg.job.clone());
            }
        }
        self.pump(ctx);
    }
}

impl Handler<HoldQueued> for Dispatcher {
    type Result = ();

    fn handle(&mut self, _: HoldQueued, _: &mut Context<Self>) {
        self.holding_queued = true;
    }
}

impl Handler<BudgetDecision> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: BudgetDecision, ctx: &mut Context<Self>) {
        let Some((job, synthesizing_since)) = self.in_synthesis.get_mut(&msg.key) else {
            // The job was dropped while its reservation was in the mail.
            self.peers.release.do_send(Release { key: msg.key, bytes: None });
            return;
        };
        *synthesizing_since = Some(Instant::now());
        let job = job.clone();
        self.reserving -= 1;
        match msg.granted {
            Ok(()) => self.peers.synthesis.do_send(Synthesize { job, index: msg.key.index }),
            // No attempt can fit: the job fails, without retries.
            Err(exceeded) => {
                self.in_synthesis.remove(&msg.key);
                self.fail(msg.key, StageError::permanent(exceeded));
            }
        }
        self.pump(ctx);
    }
}

impl Handler<SynthesisDone> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: SynthesisDone, ctx: &mut Context<Self>) {
        let key = msg.job.key(msg.index);
        let tracked = self.in_synthesis.remove(&key);
        if let (Some((_, Some(since))), Ok(_)) = (&tracked, &msg.result) {
            self.pacer.record_synthesis(since.elapsed());
        }
        let tracked = tracked.is_some();
        match msg.result {
            Ok(synthesized) if tracked && !msg.job.is_abandoned() => {
                self.ready.insert(msg.job.order(msg.index), (msg.job, synthesized.payload));
            }
            Ok(_) => {
                self.peers.release.do_send(Release { key, bytes: None });
            }
            Err(error) => self.fail(key, error),
        }
        self.pump(ctx);
    }
}

impl Handler<WorkerDone> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: WorkerDone, ctx: &mut Context<Self>) {
        let mut lane = Lane::General;
        if let Some(slot) = self.workers.get_mut(msg.slot) {
            slot.assigned = slot.assigned.saturating_sub(1);
            lane = slot.lane;
        }
        // Only the general workers' GPU time feeds the pacer: a critical
        // partition (small, and on a worker bulk work never reaches) says
        // nothing about the rate at which bulk partitions leave the buffer.
        if let (Some(busy), Lane::General) = (msg.busy, lane) {
            self.pacer.record_gpu(busy);
            self.pacer.update(self.ready.len(), self.synthesizing());
        }
        self.pump(ctx);
    }
}

impl Handler<DropJob> for Dispatcher {
    type Result = ();

    fn handle(&mut self, msg: DropJob, ctx: &mut Context<Self>) {
        self.pending.retain(|_, job| job.id != msg.job);
        let mut released = Vec::new();
        self.ready.retain(|order, (job, _)| {
            let keep = job.id != msg.job;
            if !keep {
                released.push(job.key(order.2));
            }
            keep
        });
        // Reservations still waiting are withdrawn; partitions being
        // synthesized come back as SynthesisDone and are released there.
        let reserving: Vec<PartitionKey> = self
            .in_synthesis
            .iter()
            .filter(|(k, (_, since))| k.job == msg.job && since.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        for key in &reserving {
            self.in_synthesis.remove(key);
            self.reserving -= 1;
        }
        for key in released.into_iter().chain(reserving) {
            self.peers.release.do_send(Release { key, bytes: None });
        }
        self.pump(ctx);
    }
}

impl Handler<GetQueueStatus> for Dispatcher {
    type Result = QueueStatus;

    fn handle(&mut self, _: GetQueueStatus, _: &mut Context<Self>) -> QueueStatus {
        QueueStatus {
            waiting_synthesis: self.pending.len(),
            waiting_budget: self.reserving,
            synthesizing: self.synthesizing(),
            waiting_gpu: self.ready.len(),
            assigned_to_workers: self.workers.iter().map(|w| w.assigned).sum(),
            pacer: self.pacer.status(),
        }
    }
}
