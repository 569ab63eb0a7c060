//! The WorkerMonitor: accounts for every second of every GPU worker. A worker
//! is either running a stage (prove_start) or idle, and every idle interval
//! carries one cause. A stage's time is busy if it proved its partition and
//! failed if not: a failed stage occupied the worker but proved nothing, so
//! counting it busy would claim work the device never did. The dispatcher
//! reports the cause an idle worker of each lane would wait for (it alone
//! knows the queues) and each hand-off of a partition; the workers report
//! their spans. The monitor keeps a bounded timeline per worker, advances the
//! idle counters while time passes and the busy or failed one when a stage
//! ends (only then is its outcome known, and counters never go back), and
//! answers `/v1/workers` and `/v1/timeline`.
//!
//! Every report carries the instant it happened; the monitor accounts each
//! worker's time up to a per-worker mark that only moves forward, so busy
//! plus failed plus idle plus the stage in progress equals the time since the
//! monitor started, whatever the order in which reports from different
//! threads arrive.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use actix::prelude::*;

use crate::backend::Phases;
use crate::messages::{
    GetTimeline, GetWorkers, HandOverDropped, HandedOver, IdleCauseChanged, IdleCauses, SpanFinished,
    SpanReport, SpanStarted, SubscribeSpans, TimelineEntry, WorkerReport,
};
use crate::model::{Activity, IdleCause, Lane, PartitionKey, WorkerId, WorkerTime};
use crate::telemetry;
use crate::time::{ms, WallClock};

/// Bound of the monitor's mailbox: every GPU worker's span reports and the
/// dispatcher's hand-offs pass through it.
pub const MAILBOX_CAPACITY: usize = 8192;

/// Timeline segments (busy spans and idle intervals) kept per worker.
const SEGMENTS_PER_WORKER: usize = 4096;
/// How often counters and the utilization gauge advance without events.
const TICK: Duration = Duration::from_millis(500);
/// The window of `cuzk_gpu_utilization_ratio`.
pub const UTILIZATION_WINDOW: Duration = Duration::from_secs(60);

/// The actor that accounts every GPU worker's time as busy, failed or idle with
/// a cause, and keeps the timelines `/v1/workers` and `/v1/timeline` show.
pub struct WorkerMonitor {
    clock: WallClock,
    /// The causes the dispatcher last reported for a worker with nothing
    /// handed to it, one per lane.
    causes: IdleCauses,
    workers: BTreeMap<WorkerId, WorkerAccount>,
    subscribers: Vec<Recipient<SpanFinished>>,
}

struct WorkerAccount {
    id: WorkerId,
    /// Which of the dispatcher's idle causes applies to it, and what the
    /// views show.
    lane: Lane,
    /// This worker's time is accounted up to here.
    accounted_to: Instant,
    activity: Activity,
    /// When the current activity began (for an idle worker: when the
    /// current cause began).
    activity_since: Instant,
    /// When the worker last became idle (the start of the current gap).
    idle_since: Option<Instant>,
    /// The partition it proves, when proving.
    proving: Option<PartitionKey>,
    /// Partitions handed to it that it has not started.
    handed_over: usize,
    /// Stages that proved their partition.
    busy: Duration,
    /// Stages that failed.
    failed: Duration,
    idle: [Duration; IdleCause::ALL.len()],
    /// The stage in progress so far: busy or failed once it ends.
    stage: Duration,
    segments: VecDeque<Segment>,
    /// (instant, busy total) once per tick, for the rolling utilization.
    samples: VecDeque<(Instant, Duration)>,
}

struct Segment {
    start: Instant,
    end: Instant,
    kind: SegmentKind,
}

enum SegmentKind {
    Busy { partition: PartitionKey, ok: bool, waited: Duration, phases: Phases },
    Idle(IdleCause),
}

impl WorkerAccount {
    fn new(id: WorkerId, lane: Lane, now: Instant, cause: IdleCause) -> Self {
        Self {
            id,
            lane,
            accounted_to: now,
            activity: Activity::Idle(cause),
            activity_since: now,
            idle_since: Some(now),
            proving: None,
            handed_over: 0,
            busy: Duration::ZERO,
            failed: Duration::ZERO,
            idle: [Duration::ZERO; IdleCause::ALL.len()],
            stage: Duration::ZERO,
            segments: VecDeque::new(),
            samples: VecDeque::from([(now, Duration::ZERO)]),
        }
    }

    /// Accounts the time up to `to` to the current activity: an idle cause
    /// at once, a stage when it ends ([`Self::settle_stage`]).
    fn advance(&mut self, to: Instant) {
        let Some(elapsed) = to.checked_duration_since(self.accounted_to) else {
            return;
        };
        self.accounted_to = to;
        if elapsed.is_zero() {
            return;
        }
        match self.activity {
            Activity::Proving => self.stage += elapsed,
            Activity::Idle(cause) => {
                self.idle[cause as usize] += elapsed;
                self.emit_time(WorkerTime::Idle(cause), elapsed);
            }
        }
    }

    /// The stage that just ended goes to busy or failed, by its outcome.
    fn settle_stage(&mut self, ok: bool) {
        let stage = std::mem::take(&mut self.stage);
        let time = if ok {
            self.busy += stage;
            WorkerTime::Busy
        } else {
            self.failed += stage;
            WorkerTime::Failed
        };
        if !stage.is_zero() {
            self.emit_time(time, stage);
        }
    }

    fn emit_time(&self, time: WorkerTime, elapsed: Duration) {
        telemetry::WorkerTimeAccounted { worker: self.id, time, elapsed }.emit();
    }

    fn push(&mut self, segment: Segment) {
        if self.segments.len() == SEGMENTS_PER_WORKER {
            self.segments.pop_front();
        }
        self.segments.push_back(segment);
    }

    /// Switches activity at `at`, closing the current idle segment.
    fn switch(&mut self, to: Activity, at: Instant) {
        let at = at.max(self.accounted_to);
        self.advance(at);
        if to == self.activity {
            return;
        }
        if let Activity::Idle(cause) = self.activity {
            if at > self.activity_since {
                self.push(Segment { start: self.activity_since, end: at, kind: SegmentKind::Idle(cause) });
            }
        }
        telemetry::WorkerStateChanged { worker: self.id, from: self.activity, to }.emit();
        self.activity = to;
        self.activity_since = at;
    }

    /// The cause this worker is idle for, given the dispatcher's causes.
    fn idle_cause(&self, causes: IdleCauses) -> IdleCause {
        if self.handed_over > 0 {
            IdleCause::Handoff
        } else {
            causes.of(self.lane)
        }
    }

    fn settle_idle_cause(&mut self, causes: IdleCauses, at: Instant) {
        if matches!(self.activity, Activity::Idle(_)) {
            self.switch(Activity::Idle(self.idle_cause(causes)), at);
        }
    }

    fn utilization(&self) -> f64 {
        let Some(&(since, busy_then)) = self.samples.front() else {
            return 0.0;
        };
        let window = self.accounted_to.saturating_duration_since(since);
        if window.is_zero() {
            return 0.0;
        }
        // A stage counts when it ends, so one that began before the window
        // could otherwise exceed it.
        let ratio = (self.busy.saturating_sub(busy_then)).as_secs_f64() / window.as_secs_f64();
        ratio.min(1.0)
    }

    fn sample(&mut self) {
        self.samples.push_back((self.accounted_to, self.busy));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| self.accounted_to.saturating_duration_since(*t) > UTILIZATION_WINDOW)
        {
            self.samples.pop_front();
        }
        telemetry::WorkerUtilization { worker: self.id, ratio: self.utilization() }.emit();
    }
}

impl WorkerMonitor {
    /// `workers`: every GPU worker with its lane.
    pub fn new(workers: impl IntoIterator<Item = (WorkerId, Lane)>) -> Self {
        let clock = WallClock::now();
        let causes = IdleCauses::NO_WORK;
        let workers = workers
            .into_iter()
            .map(|(id, lane)| (id, WorkerAccount::new(id, lane, clock.instant(), causes.of(lane))))
            .collect::<BTreeMap<_, _>>();
        for account in workers.values() {
            telemetry::WorkerRegistered { worker: account.id, activity: account.activity }.emit();
        }
        Self { clock, causes, workers, subscribers: Vec::new() }
    }

    fn report(&self, account: &WorkerAccount, spans: usize, now: Instant) -> WorkerReport {
        // Count an idle worker's time since the last event too, without
        // mutating; a stage's counts once it ends.
        let mut idle = account.idle;
        if let Activity::Idle(cause) = account.activity {
            idle[cause as usize] += now.saturating_duration_since(account.accounted_to);
        }
        let (state, cause) = match account.activity {
            Activity::Proving => ("proving", None),
            Activity::Idle(cause) => ("idle", Some(cause)),
        };
        let since = match account.activity {
            Activity::Proving => account.activity_since,
            Activity::Idle(_) => account.idle_since.unwrap_or(account.activity_since),
        };
        WorkerReport {
            id: account.id.to_string(),
            device: account.id.device,
            worker: account.id.worker,
            lane: account.lane,
            state,
            idle_cause: cause,
            job: account.proving.as_ref().map(|k| k.job.0.clone()),
            partition: account.proving.as_ref().map(|k| k.index),
            since_unix_ms: self.clock.unix_ms(since),
            for_ms: ms(now.saturating_duration_since(since)),
            handed_over: account.handed_over,
            busy_seconds: account.busy.as_secs_f64(),
            failed_seconds: account.failed.as_secs_f64(),
            idle_seconds: IdleCause::ALL
                .iter()
                .map(|c| (c.as_str(), idle[*c as usize].as_secs_f64()))
                .collect(),
            utilization_ratio: account.utilization(),
            recent_spans: account
                .segments
                .iter()
                .rev()
                .filter(|s| matches!(s.kind, SegmentKind::Busy { .. }))
                .take(spans)
                .map(|s| self.entry(account, s, false))
                .collect(),
        }
    }

    fn entry(&self, account: &WorkerAccount, segment: &Segment, open: bool) -> TimelineEntry {
        let (kind, cause, job, partition, ok, waited_ms, phases) = match &segment.kind {
            SegmentKind::Busy { partition, ok, waited, phases } => (
                "busy",
                None,
                Some(partition.job.0.clone()),
                Some(partition.index),
                Some(*ok),
                Some(ms(*waited)),
                phases.iter().map(|(n, d)| (*n, ms(*d))).collect(),
            ),
            SegmentKind::Idle(cause) => ("idle", Some(*cause), None, None, None, None, Vec::new()),
        };
        TimelineEntry {
            device: account.id.device,
            worker: account.id.worker,
            lane: account.lane,
            kind,
            cause,
            job,
            partition,
            ok,
            start_unix_ms: self.clock.unix_ms(segment.start),
            end_unix_ms: self.clock.unix_ms(segment.end),
            duration_ms: ms(segment.end.saturating_duration_since(segment.start)),
            open,
            waited_ms,
            phases,
        }
    }

    /// The segment in progress, up to `now`.
    fn open_segment(account: &WorkerAccount, now: Instant) -> Option<Segment> {
        let kind = match account.activity {
            Activity::Idle(cause) => SegmentKind::Idle(cause),
            Activity::Proving => SegmentKind::Busy {
                partition: account.proving.clone()?,
                ok: true,
                waited: Duration::ZERO,
                phases: Vec::new(),
            },
        };
        Some(Segment { start: account.activity_since, end: now.max(account.activity_since), kind })
    }
}

impl Actor for WorkerMonitor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(TICK, |monitor, _| {
            let now = Instant::now();
            for account in monitor.workers.values_mut() {
                account.advance(now);
                account.sample();
            }
        });
    }
}

// ---- handlers -------------------------------------------------------------

impl Handler<IdleCauseChanged> for WorkerMonitor {
    type Result = ();

    fn handle(&mut self, msg: IdleCauseChanged, _: &mut Context<Self>) {
        self.causes = msg.causes;
        for account in self.workers.values_mut() {
            account.settle_idle_cause(msg.causes, msg.at);
        }
    }
}

impl Handler<HandedOver> for WorkerMonitor {
    type Result = ();

    fn handle(&mut self, msg: HandedOver, _: &mut Context<Self>) {
        if let Some(account) = self.workers.get_mut(&msg.worker) {
            account.advance(msg.at);
            account.handed_over += 1;
            account.settle_idle_cause(self.causes, msg.at);
        }
    }
}

impl Handler<HandOverDropped> for WorkerMonitor {
    type Result = ();

    fn handle(&mut self, msg: HandOverDropped, _: &mut Context<Self>) {
        if let Some(account) = self.workers.get_mut(&msg.worker) {
            account.advance(msg.at);
            account.handed_over = account.handed_over.saturating_sub(1);
            account.settle_idle_cause(self.causes, msg.at);
        }
    }
}

impl Handler<SpanReport> for WorkerMonitor {
    type Result = ();

    fn handle(&mut self, msg: SpanReport, _: &mut Context<Self>) {
        match msg {
            SpanReport::Started(span) => self.span_started(span),
            SpanReport::Finished(span) => self.span_finished(span),
        }
    }
}

impl WorkerMonitor {
    fn span_started(&mut self, msg: SpanStarted) {
        let Some(account) = self.workers.get_mut(&msg.worker) else {
            return;
        };
        account.handed_over = account.handed_over.saturating_sub(1);
        account.switch(Activity::Proving, msg.at);
        if let Some(since) = account.idle_since.take() {
            telemetry::IdleGapEnded {
                worker: msg.worker,
                gap: account.activity_since.saturating_duration_since(since),
            }
            .emit();
        }
        account.proving = Some(msg.key);
    }

    fn span_finished(&mut self, msg: SpanFinished) {
        for subscriber in &self.subscribers {
            subscriber.do_send(msg.clone());
        }
        let Some(account) = self.workers.get_mut(&msg.worker) else {
            return;
        };
        // The stage's segment runs between the two switches as accounted,
        // not as the worker timed it: a report that arrives after the
        // monitor has already accounted past its instant is clamped forward,
        // and the segments must still tile (and sum to the busy and failed
        // counters).
        let start = match account.activity {
            Activity::Proving => account.activity_since,
            Activity::Idle(_) => msg.start,
        };
        let idle = Activity::Idle(account.idle_cause(self.causes));
        account.switch(idle, msg.end);
        account.settle_stage(msg.ok);
        account.idle_since = Some(account.activity_since);
        account.proving = None;
        account.push(Segment {
            start,
            end: account.activity_since,
            kind: SegmentKind::Busy {
                partition: msg.key,
                ok: msg.ok,
                waited: msg.waited,
                phases: msg.phases,
            },
        });
    }
}

impl Handler<SubscribeSpans> for WorkerMonitor {
    type Result = ();

    fn handle(&mut self, msg: SubscribeSpans, _: &mut Context<Self>) {
        self.subscribers.push(msg.0);
    }
}

impl Handler<GetWorkers> for WorkerMonitor {
    type Result = MessageResult<GetWorkers>;

    fn handle(&mut self, msg: GetWorkers, _: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        MessageResult(self.workers.values().map(|account| self.report(account, msg.spans, now)).collect())
    }
}

impl Handler<GetTimeline> for WorkerMonitor {
    type Result = MessageResult<GetTimeline>;

    fn handle(&mut self, msg: GetTimeline, _: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        let since = self.clock.instant_of(msg.since_unix_ms);
        let until = msg.until_unix_ms.map(|u| self.clock.instant_of(u)).unwrap_or(now);
        let mut entries = Vec::new();
        for account in self.workers.values() {
            let overlapping = |s: &Segment| s.end >= since && s.start <= until;
            entries.extend(
                account.segments.iter().filter(|s| overlapping(s)).map(|s| self.entry(account, s, false)),
            );
            if let Some(open) = Self::open_segment(account, now).filter(overlapping) {
                entries.push(self.entry(account, &open, true));
            }
        }
        entries.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
        MessageResult(entries)
    }
}
