//! Messages about GPU worker time: what the dispatcher tells the monitor
//! (hand-offs, the idle cause), the span report a GPU worker publishes to
//! its subscribers (the monitor and the tracker), and the views the monitor
//! answers (`/v1/workers`, `/v1/timeline`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde::Serialize;

use crate::backend::Phases;
use crate::model::{IdleCause, Lane, PartitionKey, WorkerId};

/// The dispatcher's view changed: what an idle worker with nothing handed to
/// it now waits for, per lane.
#[derive(Message)]
#[rtype(result = "()")]
pub struct IdleCauseChanged {
    /// What an idle worker of each lane now waits for.
    pub causes: IdleCauses,
    /// When the dispatcher's view changed: idle time before it is accounted to
    /// the old causes, after it to the new.
    pub at: Instant,
}

/// What an idle worker of each lane waits for. A critical worker's cause
/// is computed over critical work only: bulk work queued is no reason for
/// it to be idle, since it would not take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleCauses {
    /// Over all work.
    pub general: IdleCause,
    /// Over `Priority::Critical` work.
    pub critical: IdleCause,
}

impl IdleCauses {
    /// Before any work: nothing to wait for in either lane.
    pub const NO_WORK: IdleCauses = IdleCauses { general: IdleCause::NoWork, critical: IdleCause::NoWork };

    /// The cause that applies to an idle worker of `lane`.
    pub fn of(self, lane: Lane) -> IdleCause {
        match lane {
            Lane::General => self.general,
            Lane::Critical => self.critical,
        }
    }
}

/// The dispatcher handed a partition to a worker's mailbox.
#[derive(Message)]
#[rtype(result = "()")]
pub struct HandedOver {
    /// The worker whose mailbox got the partition.
    pub worker: WorkerId,
    /// When it was handed over: from then on an idle worker with it waits for
    /// the hand-off, not for the dispatcher's cause.
    pub at: Instant,
}

/// A worker dropped a handed-over partition without proving it (its job
/// was cancelled or failed meanwhile).
#[derive(Message)]
#[rtype(result = "()")]
pub struct HandOverDropped {
    /// The worker that dropped it.
    pub worker: WorkerId,
    /// When it dropped it: the monitor stops counting the partition as handed
    /// to the worker from then on.
    pub at: Instant,
}

/// A GPU worker started a partition.
#[derive(Clone, Debug)]
pub struct SpanStarted {
    /// The worker that started it.
    pub worker: WorkerId,
    /// The partition it runs, shown by `/v1/workers` while it runs.
    pub key: PartitionKey,
    /// When prove_start began: the worker's idle time ends here.
    pub at: Instant,
}

/// A GPU worker finished a partition, successfully or not. Also a message
/// of its own: the monitor forwards it to [`SubscribeSpans`] subscribers.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub struct SpanFinished {
    /// The worker that ran it.
    pub worker: WorkerId,
    /// The partition it ran.
    pub key: PartitionKey,
    /// When prove_start began.
    pub start: Instant,
    /// When prove_start returned: the span's time is accounted up to here.
    pub end: Instant,
    /// Time between the worker being free with this partition handed to it
    /// and starting it (the hand-off before the span; not busy time).
    pub waited: Duration,
    /// prove_start's named steps, shown in the timeline and kept as the
    /// partition's GPU phases.
    pub phases: Phases,
    /// Whether the stage proved its partition: its time counts as busy if so,
    /// as failed if not.
    pub ok: bool,
}

/// What a GPU worker publishes, once, to every subscriber it was wired
/// with: the monitor accounts the time, the tracker moves the partition.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub enum SpanReport {
    /// The worker started a partition: the monitor ends the worker's idle
    /// interval, the tracker moves the partition to Proving.
    Started(SpanStarted),
    /// The worker finished a partition: the monitor accounts the span, the
    /// tracker keeps its worker and GPU phases.
    Finished(SpanFinished),
}

/// Forwards a copy of every finished span (benchmarks).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SubscribeSpans(pub Recipient<SpanFinished>);

/// Every worker's state and its last `spans` spans.
#[derive(Message)]
#[rtype(result = "Vec<WorkerReport>")]
pub struct GetWorkers {
    /// How many of each worker's most recent spans to include.
    pub spans: usize,
}

/// Busy and idle segments of all workers that overlap `[since, until]`
/// (Unix milliseconds), oldest first, the ones in progress included.
#[derive(Message)]
#[rtype(result = "Vec<TimelineEntry>")]
pub struct GetTimeline {
    /// The start of the window, in Unix milliseconds.
    pub since_unix_ms: f64,
    /// The end of the window, in Unix milliseconds; `None` for now.
    pub until_unix_ms: Option<f64>,
}

/// One GPU worker as `/v1/workers` and `/v1/status` show it: what it does now
/// and where its time went.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    /// The worker's name as logs and metrics give it, such as `gpu0/w1`.
    pub id: String,
    /// The device it proves on.
    pub device: usize,
    /// Its index on the device.
    pub worker: usize,
    /// Which partitions it takes: "general" (any) or "critical".
    pub lane: Lane,
    /// "proving" or "idle".
    pub state: &'static str,
    /// What it waits for, present while it is idle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_cause: Option<IdleCause>,
    /// The job of the partition it runs, present while it proves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The index of the partition it runs, present while it proves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// When the current state began (for an idle worker: when the gap began).
    pub since_unix_ms: f64,
    /// How long it has been in its current state, in milliseconds.
    pub for_ms: f64,
    /// Partitions in its mailbox that it has not started.
    pub handed_over: usize,
    /// Stages that proved their partition, each counted when it ended.
    pub busy_seconds: f64,
    /// Stages that failed (not busy, not idle), each counted when it ended.
    pub failed_seconds: f64,
    /// Idle time by cause, in seconds, with an entry for every cause.
    pub idle_seconds: BTreeMap<&'static str, f64>,
    /// Busy fraction over the last minute (failed stages excluded).
    pub utilization_ratio: f64,
    /// Its last spans, newest first, as many as [`GetWorkers`] asked for.
    pub recent_spans: Vec<TimelineEntry>,
}

/// One segment of a worker's timeline, a stage (busy) or an idle interval, as
/// `/v1/timeline` and a worker's recent spans show it.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineEntry {
    /// The worker's device.
    pub device: usize,
    /// The worker's index on its device.
    pub worker: usize,
    /// The worker's lane: "general" or "critical".
    pub lane: Lane,
    /// "busy" (a stage; `ok` false when it failed) or "idle".
    pub kind: &'static str,
    /// What the worker waited for, present on idle segments only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<IdleCause>,
    /// The job of the partition it ran, present on busy segments only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The index of the partition it ran, present on busy segments only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// Whether the stage proved its partition, present on busy segments only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// When the segment began, in Unix milliseconds.
    pub start_unix_ms: f64,
    /// When it ended, in Unix milliseconds.
    pub end_unix_ms: f64,
    /// Its length, in milliseconds.
    pub duration_ms: f64,
    /// Still in progress: `end_unix_ms` is the time of the query.
    pub open: bool,
    /// On busy segments: how long the partition sat handed to the free worker
    /// before it started, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<f64>,
    /// Phases of a busy span, in the order they ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<(&'static str, f64)>,
}
