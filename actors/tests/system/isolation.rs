//! Nothing the finalizer or the tracker does can hold up a GPU worker: with
//! every finalizer thread stuck and the tracker flooded with status queries,
//! the workers still prove every synthesized partition.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cuzk_actors::messages::{GetTrackerStatus, SubmitJob};
use cuzk_actors::pacer::PacerConfig;
use cuzk_actors::{
    Backend, Finished, JobSpec, Payload, Priority, ProvingSystem, Reservation, StageError, Started,
    Synthesized, SystemConfig,
};

#[derive(Default)]
struct StuckFinalizer {
    proved: AtomicUsize,
    finished: AtomicUsize,
    released: Mutex<bool>,
    release: Condvar,
}

impl Backend for StuckFinalizer {
    fn name(&self) -> &str {
        "stuck-finalizer"
    }
    fn devices(&self) -> Vec<String> {
        vec!["d0".into()]
    }
    fn synthesize(&self, _: &JobSpec, _: u32) -> Result<Synthesized, StageError> {
        Ok(Synthesized { payload: Payload::new(()), phases: vec![] })
    }
    fn prove_start(&self, _: usize, _: &JobSpec, _: u32, _: Payload) -> Result<Started, StageError> {
        std::thread::sleep(Duration::from_millis(1));
        self.proved.fetch_add(1, Ordering::SeqCst);
        Ok(Started { payload: Payload::new(()), freed_bytes: 0, phases: vec![], device_active: None })
    }
    fn prove_finish(&self, _: &JobSpec, _: u32, _: Payload) -> Result<Finished, StageError> {
        let mut released = self.released.lock().unwrap();
        while !*released {
            released = self.release.wait(released).unwrap();
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        Ok(Finished { proof: vec![], public_inputs: vec![], phases: vec![] })
    }
}

#[test]
fn gpu_workers_prove_on_while_finalizers_are_stuck_and_status_is_flooded() {
    const PARTITIONS: u32 = 40;
    let backend = Arc::new(StuckFinalizer::default());
    actix_rt::System::new().block_on(async {
        let system = ProvingSystem::start(
            SystemConfig {
                synthesis_threads: 2,
                finalizer_threads: 2,
                workers_per_device: 2,
                critical_workers_per_device: 0,
                gpu_lookahead: 1,
                budget_bytes: 1 << 40,
                pacer: PacerConfig::default(),
                max_attempts: 3,
            },
            backend.clone(),
        );
        let job = common::job(
            "stuck",
            Priority::Normal,
            PARTITIONS,
            Reservation { abc_bytes: 1, retained_bytes: 1 },
        );
        system.tracker.send(SubmitJob(job)).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut queries = 0;
        while backend.proved.load(Ordering::SeqCst) < PARTITIONS as usize {
            assert!(
                Instant::now() < deadline,
                "GPU workers stalled at {} of {PARTITIONS} partitions",
                backend.proved.load(Ordering::SeqCst)
            );
            // A burst of status queries at the tracker, answered or not.
            let burst: Vec<_> = (0..50).map(|_| system.tracker.send(GetTrackerStatus)).collect();
            for answer in burst {
                answer.await.unwrap();
            }
            queries += 50;
        }
        assert_eq!(backend.finished.load(Ordering::SeqCst), 0, "the finalizers were stuck all along");
        assert!(queries > 0);
        *backend.released.lock().unwrap() = true;
        backend.release.notify_all();
        while backend.finished.load(Ordering::SeqCst) < PARTITIONS as usize {
            assert!(Instant::now() < deadline, "finalizers did not drain");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    });
}
