//! Every second of every GPU worker is accounted for: busy plus failed plus
//! idle equals wall time, the timeline has no holes or overlaps, idle time
//! lands on the cause that actually held the worker up, and a failed stage's
//! time is failed, not busy.

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{accounts_when_idle, assert_accounted_is_wall_time, timeline, Timed};
use cuzk_actors::messages::{CancelJob, GetTimeline, GetWorkers, TimelineEntry, WorkerReport};
use cuzk_actors::model::IdleCause;
use cuzk_actors::pacer::PacerConfig;
use cuzk_actors::{
    Backend, ErrorKind, Finished, JobId, JobSpec, Lane, Payload, Priority, ProvingSystem, Reservation,
    StageError, Started, Synthesized, SystemConfig,
};

const RESERVATION: Reservation = Reservation { abc_bytes: 1000, retained_bytes: 1000 };

fn config(budget_bytes: u64, pacer: PacerConfig) -> SystemConfig {
    SystemConfig {
        synthesis_threads: 2,
        finalizer_threads: 1,
        workers_per_device: 2,
        // The lane worker too is accounted for, idle while no critical
        // work exists.
        critical_workers_per_device: 1,
        gpu_lookahead: 1,
        budget_bytes,
        pacer,
        max_attempts: 3,
    }
}

async fn run_to_done(system: &ProvingSystem, id: &str, partitions: u32) {
    common::submit(system, common::job(id, Priority::Normal, partitions, RESERVATION)).await;
    common::wait_done(system, id).await;
}

fn idle_total(report: &WorkerReport) -> f64 {
    report.idle_seconds.values().sum()
}

fn by_worker(entries: &[TimelineEntry], worker: usize) -> Vec<&TimelineEntry> {
    entries.iter().filter(|e| e.worker == worker).collect()
}

#[test]
fn busy_plus_idle_is_wall_time_and_the_timeline_is_gapless() {
    let backend = Arc::new(Timed::new(Duration::from_millis(15), Duration::from_millis(10)));
    actix_rt::System::new().block_on(async {
        // Each worker's account starts while `start` runs (the monitor is
        // made there): its life lies between these two readings, so the
        // wall time it must account for is bracketed without a guess.
        let before_start = Instant::now();
        let system = ProvingSystem::start(config(1 << 40, PacerConfig::default()), backend);
        let after_start = Instant::now();
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        run_to_done(&system, "a", 40).await;
        actix_rt::time::sleep(Duration::from_millis(700)).await;
        let (workers, wall) = accounts_when_idle(&system, (before_start, after_start)).await;
        let timeline = timeline(&system).await;

        let mut spans = 0;
        for report in &workers {
            assert_eq!(report.failed_seconds, 0.0, "nothing failed: {report:?}");
            let accounted = assert_accounted_is_wall_time(report, &wall);
            let busy_spans: Vec<_> = report.recent_spans.iter().filter(|s| s.kind == "busy").collect();
            let span_seconds: f64 = busy_spans.iter().map(|s| s.duration_ms / 1e3).sum();
            assert!(
                (span_seconds - report.busy_seconds).abs() < 0.001 * busy_spans.len().max(1) as f64,
                "{}: spans add up to {span_seconds} s, busy counter says {} s",
                report.id,
                report.busy_seconds
            );
            assert!(report.idle_seconds["no_work"] >= 0.25, "{report:?}");
            spans += busy_spans.len();

            // Segments of one worker tile its whole life: each begins where
            // the previous one ended.
            let segments = by_worker(&timeline, report.worker);
            assert!(segments.last().unwrap().open, "the last segment is the current one");
            for pair in segments.windows(2) {
                let gap = pair[1].start_unix_ms - pair[0].end_unix_ms;
                assert!(
                    gap.abs() < 0.002,
                    "worker {}: {:?} then {:?} leave {gap} ms",
                    report.worker,
                    pair[0],
                    pair[1]
                );
            }
            let covered: f64 = segments.iter().map(|e| e.duration_ms).sum::<f64>() / 1e3;
            assert!(
                (covered - accounted).abs() < 0.02,
                "worker {}: timeline covers {covered} s, counters {accounted} s",
                report.worker
            );
        }
        assert_eq!(spans, 40, "every partition is one busy span");
    });
}

/// Stages that wait at gates the test opens, and take no time otherwise: the
/// test holds a stage while it watches the workers, so what it asserts
/// follows from the events it saw, not from how fast the machine runs.
struct Gated {
    synthesis: common::Gate,
    prove: common::Gate,
}

impl Backend for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    fn devices(&self) -> Vec<String> {
        vec!["d0".into()]
    }
    fn synthesize(&self, _: &JobSpec, _: u32) -> Result<Synthesized, StageError> {
        self.synthesis.pass();
        Ok(Synthesized { payload: Payload::new(()), phases: vec![] })
    }
    fn prove_start(&self, _: usize, _: &JobSpec, _: u32, _: Payload) -> Result<Started, StageError> {
        self.prove.pass();
        Ok(Started { payload: Payload::new(()), freed_bytes: 0, phases: vec![], device_active: None })
    }
    fn prove_finish(&self, _: &JobSpec, _: u32, _: Payload) -> Result<Finished, StageError> {
        Ok(Finished { proof: vec![1], public_inputs: vec![], phases: vec![] })
    }
}

/// How long a test holds a stage once it has seen the workers wait for it:
/// any length would do (the assertions are bounded by the time measured
/// around it); long enough that time put on the wrong cause shows.
const HOLD: Duration = Duration::from_millis(200);

/// The general lane's workers once `seen` holds for them, and the instant
/// just after the monitor answered (a state it reported began before then).
/// The minute only ends a test whose event never comes.
async fn general_workers_when(
    system: &ProvingSystem,
    what: &str,
    seen: impl Fn(&[WorkerReport]) -> bool,
) -> (Vec<WorkerReport>, Instant) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let workers: Vec<WorkerReport> = system
            .monitor
            .send(GetWorkers { spans: 0 })
            .await
            .unwrap()
            .into_iter()
            .filter(|w| w.lane == Lane::General)
            .collect();
        let answered = Instant::now();
        if seen(&workers) {
            return (workers, answered);
        }
        assert!(answered < deadline, "not seen within a minute: {what}: {workers:?}");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}

fn idle_for(report: &WorkerReport, cause: IdleCause) -> bool {
    report.state == "idle" && report.idle_cause == Some(cause)
}

#[test]
fn held_synthesis_shows_as_synthesis_and_a_full_budget_as_budget() {
    // Synthesis held: every general worker waits for it, and all of the
    // time from seeing that to opening the gate is idle for synthesis.
    let backend = Arc::new(Gated { synthesis: common::Gate::new(false), prove: common::Gate::new(true) });
    actix_rt::System::new().block_on(async {
        let system = ProvingSystem::start(config(1 << 40, PacerConfig::default()), backend.clone());
        common::submit(&system, common::job("held-synthesis", Priority::Normal, 4, RESERVATION)).await;
        let (_, seen) = general_workers_when(&system, "every general worker idle for synthesis", |workers| {
            workers.iter().all(|w| idle_for(w, IdleCause::Synthesis))
        })
        .await;
        actix_rt::time::sleep(HOLD).await;
        let opened = Instant::now();
        backend.synthesis.open();
        common::wait_done(&system, "held-synthesis").await;
        let held = (opened - seen).as_secs_f64();
        for worker in system.monitor.send(GetWorkers { spans: 0 }).await.unwrap() {
            if worker.lane == Lane::General {
                let synthesis = worker.idle_seconds["synthesis"];
                assert!(synthesis >= held, "{}: synthesis {synthesis} s of {held} s held", worker.id);
            }
        }
    });

    // Memory for one partition at a time, its proof held: the other worker
    // waits for budget from seeing that until the gate opens.
    let backend = Arc::new(Gated { synthesis: common::Gate::new(true), prove: common::Gate::new(false) });
    actix_rt::System::new().block_on(async {
        let system =
            ProvingSystem::start(config(RESERVATION.total(), PacerConfig::default()), backend.clone());
        common::submit(&system, common::job("one-at-a-time", Priority::Normal, 3, RESERVATION)).await;
        let (workers, seen) =
            general_workers_when(&system, "one worker proving, another idle for budget", |workers| {
                workers.iter().any(|w| w.state == "proving")
                    && workers.iter().any(|w| idle_for(w, IdleCause::Budget))
            })
            .await;
        let waiting = workers.iter().find(|w| idle_for(w, IdleCause::Budget)).unwrap().worker;
        actix_rt::time::sleep(HOLD).await;
        let opened = Instant::now();
        backend.prove.open();
        common::wait_done(&system, "one-at-a-time").await;
        let held = (opened - seen).as_secs_f64();
        let workers = system.monitor.send(GetWorkers { spans: 0 }).await.unwrap();
        let report = workers.iter().find(|w| w.worker == waiting).unwrap();
        let budget = report.idle_seconds["budget"];
        assert!(budget >= held, "{}: budget {budget} s of {held} s held", report.id);
    });
}

#[test]
fn a_pacer_holding_work_back_shows_as_paced() {
    // Ten minutes between partitions once the bootstrap's are proved: the
    // rest are held back far longer than the test looks.
    let pacer = PacerConfig { min_interval_ms: 600_000, max_interval_ms: 600_000, ..PacerConfig::default() };
    let backend = Arc::new(Gated { synthesis: common::Gate::new(true), prove: common::Gate::new(true) });
    actix_rt::System::new().block_on(async {
        let system = ProvingSystem::start(config(1 << 40, pacer), backend);
        // More partitions than the bootstrap admits (target buffer 4 + 2
        // workers) and the one the first interval lets through.
        common::submit(&system, common::job("paced", Priority::Normal, 12, RESERVATION)).await;
        let (workers, seen) =
            general_workers_when(&system, "a general worker idle for the pacer", |workers| {
                workers.iter().any(|w| idle_for(w, IdleCause::Paced))
            })
            .await;
        let paced_worker = workers.iter().find(|w| idle_for(w, IdleCause::Paced)).unwrap().worker;
        actix_rt::time::sleep(HOLD).await;
        let asked = Instant::now();
        let workers = system.monitor.send(GetWorkers { spans: 0 }).await.unwrap();
        let report = workers.iter().find(|w| w.worker == paced_worker).unwrap();
        assert!(idle_for(report, IdleCause::Paced), "the pacer still holds the work back: {report:?}");
        let paced = report.idle_seconds["paced"];
        let watched = (asked - seen).as_secs_f64();
        assert!(paced >= watched, "{}: paced {paced} s of {watched} s watched", report.id);
        let cancel = CancelJob(JobId("paced".into()), cuzk_actors::TenantScope::All);
        system.tracker.send(cancel).await.unwrap();
    });
}

/// Reports from different threads arrive out of order: here the dispatcher's
/// cause change (3 µs after the worker started) reaches the monitor before
/// the worker's own start report. The monitor has by then accounted past the
/// start, so the busy segment must begin where the idle one ended, and the
/// spans must still sum to the busy counter. (CI once saw a 3 µs overlap.)
#[actix::test]
async fn a_start_reported_after_a_later_event_still_tiles() {
    use actix::Actor;
    use cuzk_actors::messages::{
        HandedOver, IdleCauseChanged, IdleCauses, SpanFinished, SpanReport, SpanStarted,
    };
    use cuzk_actors::model::IdleCause;
    use cuzk_actors::worker_monitor::WorkerMonitor;
    use cuzk_actors::{Lane, PartitionKey, WorkerId};

    let worker = WorkerId { device: 0, worker: 0 };
    let monitor = WorkerMonitor::new([(worker, Lane::General)]).start();
    let t0 = Instant::now();
    let at = |us: u64| t0 + Duration::from_micros(us);
    let key = PartitionKey { job: JobId("late".into()), index: 0 };
    monitor.send(HandedOver { worker, at: at(1_000) }).await.unwrap();
    let causes = IdleCauses { general: IdleCause::Synthesis, critical: IdleCause::NoWork };
    monitor.send(IdleCauseChanged { causes, at: at(1_010) }).await.unwrap();
    let started = SpanStarted { worker, key: key.clone(), at: at(1_007) };
    monitor.send(SpanReport::Started(started)).await.unwrap();
    let finished = SpanFinished {
        worker,
        key,
        start: at(1_007),
        end: at(6_000),
        waited: Duration::from_micros(7),
        phases: vec![],
        ok: true,
    };
    monitor.send(SpanReport::Finished(finished)).await.unwrap();
    // The reports lie a few milliseconds ahead; query once they are past.
    actix::clock::sleep(Duration::from_millis(10)).await;

    let timeline = monitor.send(GetTimeline { since_unix_ms: 0.0, until_unix_ms: None }).await.unwrap();
    let segments = by_worker(&timeline, 0);
    assert!(segments.iter().any(|s| s.kind == "busy"), "{segments:?}");
    for pair in segments.windows(2) {
        let gap = pair[1].start_unix_ms - pair[0].end_unix_ms;
        assert!(gap.abs() < 0.0005, "{:?} then {:?} leave {gap} ms", pair[0], pair[1]);
    }
    let workers = monitor.send(GetWorkers { spans: 10 }).await.unwrap();
    let busy_ms: f64 = segments.iter().filter(|s| s.kind == "busy").map(|s| s.duration_ms).sum();
    assert!((busy_ms / 1e3 - workers[0].busy_seconds).abs() < 2e-6, "{busy_ms} ms vs {workers:?}");
}

/// The spans of a worker's timeline that ended with this outcome: their
/// seconds, and how many there are.
fn stage_seconds(entries: &[&TimelineEntry], ok: bool) -> (f64, usize) {
    let stages: Vec<_> = entries.iter().filter(|e| e.kind == "busy" && e.ok == Some(ok)).collect();
    (stages.iter().map(|e| e.duration_ms / 1e3).sum(), stages.len())
}

/// A stage that fails after a known time: that time is failed, not busy,
/// from the moment the stage ends (its outcome is unknown before), and busy
/// plus failed plus idle is still the worker's whole life. The reports lie
/// half a minute ahead, so that neither the monitor's tick nor the queries
/// pass them, and within the utilization's minute: every figure is exact,
/// whatever the machine's speed.
#[actix::test]
async fn a_failed_stage_is_failed_time_not_busy() {
    use actix::Actor;
    use cuzk_actors::messages::{HandedOver, SpanFinished, SpanReport, SpanStarted};
    use cuzk_actors::worker_monitor::WorkerMonitor;
    use cuzk_actors::{Lane, PartitionKey, WorkerId};

    let worker = WorkerId { device: 0, worker: 0 };
    let monitor = WorkerMonitor::new([(worker, Lane::General)]).start();
    let t0 = Instant::now() + Duration::from_secs(30);
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let key = |index| PartitionKey { job: JobId("fails".into()), index };
    // (partition, start, end, ok): a failed stage of 5 ms, then a proved
    // one of 3 ms.
    let stages = [(0, 2, 7, false), (1, 9, 12, true)];
    for (index, start, end, ok) in stages {
        monitor.send(HandedOver { worker, at: at(start - 1) }).await.unwrap();
        let started = SpanStarted { worker, key: key(index), at: at(start) };
        monitor.send(SpanReport::Started(started)).await.unwrap();
        // Running, its outcome unknown: neither busy nor failed yet.
        let running = &monitor.send(GetWorkers { spans: 0 }).await.unwrap()[0];
        assert_eq!(running.state, "proving", "{running:?}");
        let settled = (running.busy_seconds, running.failed_seconds);
        let finished = SpanFinished {
            worker,
            key: key(index),
            start: at(start),
            end: at(end),
            waited: Duration::ZERO,
            phases: vec![],
            ok,
        };
        monitor.send(SpanReport::Finished(finished)).await.unwrap();
        let ended = &monitor.send(GetWorkers { spans: 0 }).await.unwrap()[0];
        let stage = Duration::from_millis(end - start).as_secs_f64();
        let expected = if ok { (settled.0 + stage, settled.1) } else { (settled.0, settled.1 + stage) };
        assert_eq!((ended.busy_seconds, ended.failed_seconds), expected, "{ok}: {ended:?}");
    }

    // The timeline up to a minute from now, past the reports.
    let until = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
        * 1e3
        + 60e3;
    let timeline =
        monitor.send(GetTimeline { since_unix_ms: 0.0, until_unix_ms: Some(until) }).await.unwrap();
    let report = &monitor.send(GetWorkers { spans: 10 }).await.unwrap()[0];
    assert_eq!(report.failed_seconds, 0.005, "{report:?}");
    assert_eq!(report.busy_seconds, 0.003, "{report:?}");
    // The timeline shows the failed stage as a span with ok false, and
    // tiles the worker's life from the monitor's start to the last event.
    let segments = by_worker(&timeline, 0);
    assert_eq!(stage_seconds(&segments, false), (0.005, 1), "{segments:?}");
    assert_eq!(stage_seconds(&segments, true), (0.003, 1), "{segments:?}");
    for pair in segments.windows(2) {
        let gap = pair[1].start_unix_ms - pair[0].end_unix_ms;
        assert!(gap.abs() < 0.0005, "{:?} then {:?} leave {gap} ms", pair[0], pair[1]);
    }
    let life = (segments.last().unwrap().end_unix_ms - segments[0].start_unix_ms) / 1e3;
    let accounted = report.busy_seconds + report.failed_seconds + idle_total(report);
    // Each figure is rounded to the microsecond.
    assert!(
        (accounted - life).abs() < 1e-5,
        "busy + failed + idle = {accounted} s, life {life} s: {report:?}"
    );
    // Utilization counts the proved stage only.
    let busy_share = report.utilization_ratio * life;
    assert!((busy_share - 0.003).abs() < 1e-6, "utilization {} over {life} s", report.utilization_ratio);
}

/// Fails each partition's first prove_start after the stage's full time,
/// then proves it: a device error found late, as in issue 37's run.
struct FailsFirstAttempt {
    timed: Timed,
    /// Partitions whose first attempt has run.
    tried: Mutex<HashSet<u32>>,
}

impl Backend for FailsFirstAttempt {
    fn name(&self) -> &str {
        "fails-first-attempt"
    }
    fn devices(&self) -> Vec<String> {
        self.timed.devices()
    }
    fn synthesize(&self, job: &JobSpec, index: u32) -> Result<Synthesized, StageError> {
        self.timed.synthesize(job, index)
    }
    fn prove_start(
        &self,
        device: usize,
        job: &JobSpec,
        index: u32,
        input: Payload,
    ) -> Result<Started, StageError> {
        let started = self.timed.prove_start(device, job, index, input)?;
        if self.tried.lock().unwrap().insert(index) {
            return Err(StageError::new(
                ErrorKind::Retryable,
                format!("scripted failure of partition {index}"),
            ));
        }
        Ok(started)
    }
    fn prove_finish(&self, job: &JobSpec, index: u32, input: Payload) -> Result<Finished, StageError> {
        self.timed.prove_finish(job, index, input)
    }
}

#[test]
fn failed_stages_of_a_running_system_are_failed_time_and_the_sum_holds() {
    let backend = Arc::new(FailsFirstAttempt {
        timed: Timed::new(Duration::from_millis(5), Duration::from_millis(20)),
        tried: Mutex::new(HashSet::new()),
    });
    actix_rt::System::new().block_on(async {
        let before_start = Instant::now();
        let system = ProvingSystem::start(config(1 << 40, PacerConfig::default()), backend);
        let after_start = Instant::now();
        run_to_done(&system, "retried", 6).await;
        let (workers, wall) = accounts_when_idle(&system, (before_start, after_start)).await;
        let timeline = timeline(&system).await;

        let (mut failed_stages, mut proved_stages) = (0, 0);
        for report in &workers {
            assert_accounted_is_wall_time(report, &wall);
            // The counters and the worker's spans agree, outcome by outcome.
            let segments = by_worker(&timeline, report.worker);
            let (failed, failed_count) = stage_seconds(&segments, false);
            let (busy, busy_count) = stage_seconds(&segments, true);
            assert!((failed - report.failed_seconds).abs() < 1e-5 * (failed_count + 1) as f64, "{report:?}");
            assert!((busy - report.busy_seconds).abs() < 1e-5 * (busy_count + 1) as f64, "{report:?}");
            assert_eq!(failed_count > 0, report.failed_seconds > 0.0, "{report:?}");
            failed_stages += failed_count;
            proved_stages += busy_count;
        }
        assert_eq!((failed_stages, proved_stages), (6, 6), "each partition failed once, then proved");
    });
}
