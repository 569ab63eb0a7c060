//! The simulated backend, for tests and capacity planning only: the same
//! actors and messages as the real backends, with stage bodies that sleep
//! for a profile's durations and hold a profile's bytes. It proves nothing;
//! its "proofs" are marked as simulated.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cuzk_actors::{
    Backend, Finished, JobSpec, Payload, Priority, Reservation, StageError, Started, Synthesized,
};
use rand::{Rng, SeedableRng};

use crate::config::{SimConfig, SimFaults, StageFaults};

/// Stage durations and memory of one kind of proof, from cuzk's published
/// numbers (docs/benchmarks.md cites them).
#[derive(Clone, Debug, PartialEq)]
pub struct SimProfile {
    pub name: &'static str,
    pub partitions: u32,
    pub priority: Priority,
    pub synthesis: Duration,
    /// prove_start on the GPU, drawn uniformly in this range.
    pub gpu: (Duration, Duration),
    pub finalize: Duration,
    pub reservation: Reservation,
}

const GIB: u64 = 1 << 30;

impl SimProfile {
    pub const NAMES: [&'static str; 2] = ["porep-32g", "winning-post"];

    /// The profile of that name; the error lists the known ones.
    pub fn by_name(name: &str) -> Result<Self, String> {
        match name {
            // 10 partitions of ~130M constraints: synthesis ~30 s, GPU 1 to
            // 3.3 s, G2 MSM on CPU ~0.5 s, ~14 GiB per partition of which
            // a, b, c are ~4.2 GiB each.
            "porep-32g" => Ok(Self {
                name: "porep-32g",
                partitions: 10,
                priority: Priority::Normal,
                synthesis: Duration::from_secs(30),
                gpu: (Duration::from_millis(1000), Duration::from_millis(3300)),
                finalize: Duration::from_millis(500),
                reservation: Reservation {
                    abc_bytes: 12 * GIB + GIB / 2,
                    retained_bytes: 3 * GIB / 2,
                },
            }),
            // One partition of ~3.5M constraints that must finish within an
            // epoch.
            "winning-post" => Ok(Self {
                name: "winning-post",
                partitions: 1,
                priority: Priority::Critical,
                synthesis: Duration::from_millis(900),
                gpu: (Duration::from_millis(60), Duration::from_millis(120)),
                finalize: Duration::from_millis(20),
                reservation: Reservation {
                    abc_bytes: 340 << 20,
                    retained_bytes: 110 << 20,
                },
            }),
            _ => Err(format!(
                "unknown sim profile {name:?}; known: {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// Share of prove_start spent on the host before the device is needed
/// (staging inputs), during which a device's other worker can use it.
const HOST_SHARE: f64 = 0.05;

pub struct SimBackend {
    profile: SimProfile,
    time_scale: f64,
    jitter: f64,
    finalizer_stall: Duration,
    faults: SimFaults,
    /// Stage calls so far: each draws its faults from its own number.
    calls: AtomicU64,
    /// One per simulated device: held while it "computes", so that the
    /// workers of one device take turns as on a real GPU.
    devices: Vec<Mutex<()>>,
}

impl SimBackend {
    pub fn from_config(config: &SimConfig) -> Result<Self, String> {
        let profile = SimProfile::by_name(&config.profile)?;
        if !(config.time_scale > 0.0 && config.time_scale.is_finite()) {
            return Err(format!(
                "sim time_scale must be positive, got {}",
                config.time_scale
            ));
        }
        if !(0.0..1.0).contains(&config.jitter) {
            return Err(format!(
                "sim jitter must be in [0, 1), got {}",
                config.jitter
            ));
        }
        let faults = &config.faults;
        for (stage, f) in [("synthesis", &faults.synthesis), ("prove", &faults.prove), ("finalize", &faults.finalize)] {
            for (name, rate) in [("error_rate", f.error_rate), ("panic_rate", f.panic_rate), ("stall_rate", f.stall_rate)] {
                if !(0.0..=1.0).contains(&rate) {
                    return Err(format!("sim.faults.{stage}.{name} must be in [0, 1], got {rate}"));
                }
            }
            if f.error_rate + f.panic_rate > 1.0 {
                return Err(format!("sim.faults.{stage}: error_rate + panic_rate exceeds 1"));
            }
        }
        Ok(Self {
            profile,
            time_scale: config.time_scale,
            jitter: config.jitter,
            finalizer_stall: Duration::from_millis(config.finalizer_stall_ms),
            faults: faults.clone(),
            calls: AtomicU64::new(0),
            devices: (0..config.devices.max(1)).map(|_| Mutex::new(())).collect(),
        })
    }

    pub fn profile(&self) -> &SimProfile {
        &self.profile
    }

    /// Sleeps for `base` scaled and jittered; returns the time slept.
    fn take(&self, base: Duration) -> Duration {
        let factor = if self.jitter > 0.0 {
            rand::thread_rng().gen_range(1.0 - self.jitter..=1.0 + self.jitter)
        } else {
            1.0
        };
        let started = Instant::now();
        std::thread::sleep(base.mul_f64(self.time_scale * factor));
        // What was slept, not what was asked: the OS oversleeps, and the
        // benchmark's device intervals must match the real ones.
        started.elapsed()
    }
}

impl SimBackend {
    /// Stalls, panics or fails one stage call as the faults say. Injected
    /// errors are retryable: they stand for transient faults.
    fn inject(&self, stage: &str, faults: &StageFaults) -> Result<(), StageError> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let mut draw = rand::rngs::StdRng::seed_from_u64(self.faults.seed ^ call.rotate_left(17));
        if draw.gen::<f64>() < faults.stall_rate {
            std::thread::sleep(Duration::from_millis(faults.stall_ms));
        }
        let roll = draw.gen::<f64>();
        if roll < faults.panic_rate {
            panic!("injected panic in {stage} (sim fault, call {call})");
        }
        if roll < faults.panic_rate + faults.error_rate {
            return Err(StageError::retryable(format!(
                "injected error in {stage} (sim fault, call {call})"
            )));
        }
        Ok(())
    }
}

impl Backend for SimBackend {
    fn name(&self) -> &str {
        "sim"
    }

    fn devices(&self) -> Vec<String> {
        (0..self.devices.len()).map(|i| format!("sim{i}")).collect()
    }

    fn synthesize(&self, _: &JobSpec, _: u32) -> Result<Synthesized, StageError> {
        self.inject("synthesis", &self.faults.synthesis)?;
        let took = self.take(self.profile.synthesis);
        Ok(Synthesized {
            payload: Payload::new(()),
            phases: vec![("synthesize", took)],
        })
    }

    /// Phases, in order: `host` (staging), `device_wait` (the device's other
    /// worker holds it), `device` (the simulated kernels).
    fn prove_start(
        &self,
        device: usize,
        _: &JobSpec,
        _: u32,
        _: Payload,
    ) -> Result<Started, StageError> {
        self.inject("prove_start", &self.faults.prove)?;
        let (low, high) = self.profile.gpu;
        let base = low + (high - low).mul_f64(rand::thread_rng().gen::<f64>());
        let host = self.take(base.mul_f64(HOST_SHARE));
        let asked = Instant::now();
        let gpu = self
            .devices
            .get(device)
            .ok_or_else(|| StageError::permanent(format!("no simulated device {device}")))?;
        let _held = gpu.lock().unwrap_or_else(|e| e.into_inner());
        let device_wait = asked.elapsed();
        let compute = self.take(base.mul_f64(1.0 - HOST_SHARE));
        Ok(Started {
            payload: Payload::new(()),
            freed_bytes: self.profile.reservation.abc_bytes,
            phases: vec![
                ("host", host),
                ("device_wait", device_wait),
                ("device", compute),
            ],
        })
    }

    fn prove_finish(&self, job: &JobSpec, partition: u32, _: Payload) -> Result<Finished, StageError> {
        self.inject("prove_finish", &self.faults.finalize)?;
        let took = self.take(self.profile.finalize);
        std::thread::sleep(self.finalizer_stall);
        Ok(Finished {
            proof: format!("simulated:{}:{partition}", job.id).into_bytes(),
            public_inputs: Vec::new(),
            phases: vec![("finalize", took)],
        })
    }

    fn resident_bytes(&self) -> u64 {
        self.faults.resident_bytes
    }
}
