//! The critical lane: a device's extra worker that takes only critical
//! partitions. A critical partition starts on it at once while the general
//! workers are busy with bulk partitions and hold lookahead; bulk work never
//! reaches it; with the lane off a critical partition waits for a general
//! worker as before; and the lane worker's time is accounted like any
//! other's, idle for `no_work` while only bulk work exists. Its synthesis
//! slot: a critical partition starts synthesis while bulk partitions hold
//! every `synthesis_threads` slot.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{accounts_when_idle, assert_accounted_is_wall_time, timeline, wait_done, Timed};
use cuzk_actors::messages::{GetJob, GetQueueStatus, GetWorkers, JobStatus, TimelineEntry, WorkerReport};
use cuzk_actors::pacer::PacerConfig;
use cuzk_actors::{
    Backend, Finished, JobId, JobSpec, Lane, Payload, Priority, ProvingSystem, Reservation, StageError,
    Started, Synthesized, SystemConfig, TenantScope,
};

/// GPU time of a bulk partition: long enough that a critical partition
/// arriving mid-stream clearly either waits for one or does not.
const BULK_PROVE: Duration = Duration::from_millis(400);
const CRITICAL_PROVE: Duration = Duration::from_millis(20);
const GENERAL_WORKERS: usize = 2;

fn start(critical_workers_per_device: usize) -> ProvingSystem {
    let config = SystemConfig {
        synthesis_threads: 2,
        finalizer_threads: 1,
        workers_per_device: GENERAL_WORKERS,
        critical_workers_per_device,
        gpu_lookahead: 1,
        budget_bytes: 1 << 40,
        pacer: PacerConfig::default(),
        max_attempts: 1,
    };
    // Bulk partitions slow, critical ones fast, as on the H200.
    let backend =
        Timed { critical_prove: CRITICAL_PROVE, ..Timed::new(Duration::from_millis(5), BULK_PROVE) };
    ProvingSystem::start(config, Arc::new(backend))
}

async fn submit(system: &ProvingSystem, id: &str, priority: Priority, partitions: u32) {
    let reservation = Reservation { abc_bytes: 1, retained_bytes: 1 };
    common::submit(system, common::job(id, priority, partitions, reservation)).await;
}

/// Waits until every general worker proves a bulk partition and holds the
/// next one in its mailbox: the moment a critical partition used to wait
/// longest. Each must have started its partition less than half a bulk
/// partition ago, so that none finishes within the few milliseconds a
/// critical partition takes to be synthesized: the order of the critical
/// start and the first general finish is then the lane's doing, not chance.
async fn wait_general_full(system: &ProvingSystem) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let fresh = BULK_PROVE.as_secs_f64() * 1e3 / 2.0;
    loop {
        let workers = system.monitor.send(GetWorkers { spans: 0 }).await.unwrap();
        let full = workers
            .iter()
            .filter(|w| w.lane == Lane::General)
            .filter(|w| w.state == "proving" && w.handed_over == 1 && w.for_ms < fresh)
            .count();
        if full == GENERAL_WORKERS {
            return;
        }
        assert!(Instant::now() < deadline, "general workers never all full: {workers:?}");
        actix_rt::time::sleep(Duration::from_millis(2)).await;
    }
}

fn now_unix_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1e3
}

fn busy_of<'a>(timeline: &'a [TimelineEntry], job: &str) -> Vec<&'a TimelineEntry> {
    timeline.iter().filter(|e| e.kind == "busy" && e.job.as_deref() == Some(job)).collect()
}

/// The general workers' spans in progress at `at` (Unix ms).
fn general_spans_at(timeline: &[TimelineEntry], at: f64) -> Vec<&TimelineEntry> {
    timeline
        .iter()
        .filter(|e| e.kind == "busy" && e.lane == Lane::General)
        .filter(|e| e.start_unix_ms <= at && e.end_unix_ms > at)
        .collect()
}

/// A critical job submitted while both general workers run bulk partitions
/// and hold lookahead; returns its one busy span, the general spans that
/// were in progress when it was submitted, and the submission time.
async fn critical_during_stream(system: &ProvingSystem) -> (TimelineEntry, Vec<TimelineEntry>, f64) {
    submit(system, "bulk", Priority::Normal, 10).await;
    wait_general_full(system).await;
    let submitted = now_unix_ms();
    submit(system, "winning", Priority::Critical, 1).await;
    wait_done(system, "winning").await;
    wait_done(system, "bulk").await;
    let timeline = timeline(system).await;
    let critical = busy_of(&timeline, "winning");
    assert_eq!(critical.len(), 1, "{critical:?}");
    let running: Vec<TimelineEntry> = general_spans_at(&timeline, submitted).into_iter().cloned().collect();
    assert_eq!(
        running.len(),
        GENERAL_WORKERS,
        "both general workers were proving at submission: {running:?}"
    );
    (critical[0].clone(), running, submitted)
}

#[test]
fn a_critical_partition_starts_on_the_lane_before_any_general_worker_finishes() {
    actix_rt::System::new().block_on(async {
        let system = start(1);
        let (critical, running, submitted) = critical_during_stream(&system).await;
        assert_eq!(critical.lane, Lane::Critical, "{critical:?}");
        assert_eq!(critical.worker, GENERAL_WORKERS, "the lane's worker is numbered after the general ones");
        // The event that tells the lane from a general worker: it started
        // before any general worker was free, however long that took.
        let first_end = running.iter().map(|s| s.end_unix_ms).fold(f64::INFINITY, f64::min);
        assert!(
            critical.start_unix_ms < first_end,
            "critical started at {} ms (submitted at {submitted} ms), a general worker finished at {first_end} ms",
            critical.start_unix_ms
        );
    });
}

#[test]
fn with_the_lane_off_a_critical_partition_waits_for_a_general_worker() {
    actix_rt::System::new().block_on(async {
        let system = start(0);
        let workers = system.monitor.send(GetWorkers { spans: 0 }).await.unwrap();
        assert_eq!(workers.len(), GENERAL_WORKERS);
        assert!(workers.iter().all(|w| w.lane == Lane::General), "{workers:?}");
        let (critical, running, _) = critical_during_stream(&system).await;
        assert_eq!(critical.lane, Lane::General, "{critical:?}");
        let first_end = running.iter().map(|s| s.end_unix_ms).fold(f64::INFINITY, f64::min);
        assert!(
            critical.start_unix_ms >= first_end,
            "critical started at {} ms, before any general worker finished ({first_end} ms)",
            critical.start_unix_ms
        );
    });
}

#[test]
fn bulk_partitions_never_run_on_the_lane() {
    actix_rt::System::new().block_on(async {
        let system = start(1);
        submit(&system, "bulk", Priority::High, 12).await;
        // Bulk partitions wait for a GPU while only the lane has room: the
        // general workers hold all they may and the lane holds nothing.
        let per_worker = 2;
        let mut lane_free_with_work_waiting = false;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !lane_free_with_work_waiting {
            let queues = system.dispatcher.send(GetQueueStatus).await.unwrap();
            lane_free_with_work_waiting =
                queues.waiting_gpu > 0 && queues.assigned_to_workers == GENERAL_WORKERS * per_worker;
            assert!(Instant::now() < deadline, "never saw bulk work waiting with the lane free: {queues:?}");
            actix_rt::time::sleep(Duration::from_millis(2)).await;
        }
        wait_done(&system, "bulk").await;
        let timeline = timeline(&system).await;
        let spans = busy_of(&timeline, "bulk");
        assert_eq!(spans.len(), 12, "every partition is one span");
        assert!(spans.iter().all(|s| s.lane == Lane::General && s.worker < GENERAL_WORKERS), "{spans:?}");
        let workers = system.monitor.send(GetWorkers { spans: 100 }).await.unwrap();
        let lane: Vec<&WorkerReport> = workers.iter().filter(|w| w.lane == Lane::Critical).collect();
        assert_eq!(lane.len(), 1, "{workers:?}");
        assert_eq!(lane[0].busy_seconds, 0.0, "{:?}", lane[0]);
    });
}

#[test]
fn the_lane_worker_is_accounted_and_idle_for_no_work_while_only_bulk_work_exists() {
    actix_rt::System::new().block_on(async {
        // The lane worker's account starts while `start` runs: its life lies
        // between these two readings.
        let before_start = Instant::now();
        let system = start(1);
        let after_start = Instant::now();
        submit(&system, "bulk", Priority::Normal, 6).await;
        wait_done(&system, "bulk").await;
        let lane =
            |workers: Vec<WorkerReport>| workers.into_iter().find(|w| w.lane == Lane::Critical).unwrap();
        let report = lane(system.monitor.send(GetWorkers { spans: 0 }).await.unwrap());
        let idle: f64 = report.idle_seconds.values().sum();
        assert!(idle > 0.5, "{report:?}");
        assert_eq!(
            report.idle_seconds["no_work"], idle,
            "only no_work while only bulk work exists: {report:?}"
        );

        // Once it has proved a critical partition, its busy, failed (none)
        // and idle time still add up to its whole life.
        submit(&system, "winning", Priority::Critical, 1).await;
        wait_done(&system, "winning").await;
        let (workers, wall) = accounts_when_idle(&system, (before_start, after_start)).await;
        let report = lane(workers);
        assert!(report.busy_seconds >= CRITICAL_PROVE.as_secs_f64(), "{report:?}");
        assert_accounted_is_wall_time(&report, &wall);
    });
}

/// Bulk synthesis held at a gate the test opens, critical synthesis and
/// every GPU stage at once: while the gate is shut, bulk partitions hold
/// their synthesis slots for as long as the test likes.
struct BulkHeld {
    bulk: common::Gate,
    /// Bulk partitions that have entered synthesis.
    entered: AtomicUsize,
}

impl Backend for BulkHeld {
    fn name(&self) -> &str {
        "bulk-held"
    }
    fn devices(&self) -> Vec<String> {
        vec!["d0".into()]
    }
    fn synthesize(&self, job: &JobSpec, _: u32) -> Result<Synthesized, StageError> {
        if job.priority != Priority::Critical {
            self.entered.fetch_add(1, Ordering::SeqCst);
            self.bulk.pass();
        }
        Ok(Synthesized { payload: Payload::new(()), phases: vec![] })
    }
    fn prove_start(&self, _: usize, _: &JobSpec, _: u32, _: Payload) -> Result<Started, StageError> {
        Ok(Started { payload: Payload::new(()), freed_bytes: 0, phases: vec![], device_active: None })
    }
    fn prove_finish(&self, _: &JobSpec, _: u32, _: Payload) -> Result<Finished, StageError> {
        Ok(Finished { proof: vec![1], public_inputs: vec![], phases: vec![] })
    }
}

#[test]
fn a_critical_partition_is_synthesized_while_bulk_partitions_hold_every_synthesis_slot() {
    actix_rt::System::new().block_on(async {
        const THREADS: usize = 2;
        let config = SystemConfig {
            synthesis_threads: THREADS,
            finalizer_threads: 1,
            workers_per_device: GENERAL_WORKERS,
            critical_workers_per_device: 1,
            gpu_lookahead: 1,
            budget_bytes: 1 << 40,
            pacer: PacerConfig::default(),
            max_attempts: 1,
        };
        let backend = Arc::new(BulkHeld { bulk: common::Gate::new(false), entered: AtomicUsize::new(0) });
        let system = ProvingSystem::start(config, backend.clone());
        submit(&system, "bulk", Priority::Normal, 6).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while backend.entered.load(Ordering::SeqCst) < THREADS {
            assert!(Instant::now() < deadline, "bulk partitions never filled the synthesis slots");
            actix_rt::time::sleep(Duration::from_millis(2)).await;
        }
        // Every slot is a bulk partition's, for as long as the gate is shut:
        // the WinningPoSt finishes only if it has a slot of its own.
        submit(&system, "winning", Priority::Critical, 1).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let view = system
                .tracker
                .send(GetJob(JobId("winning".into()), TenantScope::All))
                .await
                .unwrap()
                .unwrap();
            if view.status == JobStatus::Done {
                break;
            }
            assert!(Instant::now() < deadline, "the critical job waited for a bulk synthesis: {view:?}");
            actix_rt::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(
            backend.entered.load(Ordering::SeqCst),
            THREADS,
            "no bulk partition took the critical slot"
        );
        backend.bulk.open();
        wait_done(&system, "bulk").await;
    });
}
