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
    pub causes: IdleCauses,
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
    pub worker: WorkerId,
    pub at: Instant,
}

/// A worker dropped a handed-over partition without proving it (its job
/// was cancelled or failed meanwhile).
#[derive(Message)]
#[rtype(result = "()")]
pub struct HandOverDropped {
    pub worker: WorkerId,
    pub at: Instant,
}

/// A GPU worker started a partition.
#[derive(Clone, Debug)]
pub struct SpanStarted {
    pub worker: WorkerId,
    pub key: PartitionKey,
    pub at: Instant,
}

/// A GPU worker finished a partition, successfully or not. Also a message
/// of its own: the monitor forwards it to [`SubscribeSpans`] subscribers.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub struct SpanFinished {
    pub worker: WorkerId,
    pub key: PartitionKey,
    pub start: Instant,
    pub end: Instant,
    /// Time between the worker being free with this partition handed to it
    /// and starting it (the hand-off before the span; not busy time).
    pub waited: Duration,
    pub phases: Phases,
    pub ok: bool,
}

/// What a GPU worker publishes, once, to every subscriber it was wired
/// with: the monitor accounts the time, the tracker moves the partition.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub enum SpanReport {
    Started(SpanStarted),
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
    pub spans: usize,
}

/// Busy and idle segments of all workers that overlap `[since, until]`
/// (Unix milliseconds), oldest first, the ones in progress included.
#[derive(Message)]
#[rtype(result = "Vec<TimelineEntry>")]
pub struct GetTimeline {
    pub since_unix_ms: f64,
    pub until_unix_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    pub id: String,
    pub device: usize,
    pub worker: usize,
    /// Which partitions it takes: "general" (any) or "critical".
    pub lane: Lane,
    /// "proving" or "idle".
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_cause: Option<IdleCause>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// When the current state began (for an idle worker: when the gap began).
    pub since_unix_ms: f64,
    pub for_ms: f64,
    /// Partitions in its mailbox that it has not started.
    pub handed_over: usize,
    /// Stages that proved their partition, each counted when it ended.
    pub busy_seconds: f64,
    /// Stages that failed (not busy, not idle), each counted when it ended.
    pub failed_seconds: f64,
    pub idle_seconds: BTreeMap<&'static str, f64>,
    /// Busy fraction over the last minute (failed stages excluded).
    pub utilization_ratio: f64,
    pub recent_spans: Vec<TimelineEntry>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineEntry {
    pub device: usize,
    pub worker: usize,
    /// The worker's lane: "general" or "critical".
    pub lane: Lane,
    /// "busy" (a stage; `ok` false when it failed) or "idle".
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<IdleCause>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
    pub duration_ms: f64,
    /// Still in progress: `end_unix_ms` is the time of the query.
    pub open: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<f64>,
    /// Phases of a busy span, in the order they ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<(&'static str, f64)>,
}
