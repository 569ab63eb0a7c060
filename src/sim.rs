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

use cuzk_filecoin::params::QueryCounts;
use cuzk_filecoin::record::Evaluation;
use cuzk_filecoin::Kind;

use crate::config::{SimConfig, SimFaults, StageFaults};
use crate::filecoin::{default_priority, reservation_for_counts};

/// Stage durations and memory of one kind of proof, derived from the real
/// circuit's shape and the daemon's own measured stage times (below).
#[derive(Clone, Debug, PartialEq)]
pub struct SimProfile {
    /// The profile's name, as `sim.profile` selects it.
    pub name: &'static str,
    /// Partitions each simulated job has, as the real kind's.
    pub partitions: u32,
    /// The priority the real kind's jobs run at.
    pub priority: Priority,
    /// Time one partition's synthesis takes on the CPU.
    pub synthesis: Duration,
    /// prove_start on the GPU, drawn uniformly in this range.
    pub gpu: (Duration, Duration),
    /// Time the finalizer takes per partition.
    pub finalize: Duration,
    /// Memory a partition holds in the budget, as the real kind's would.
    pub reservation: Reservation,
}

/// A circuit's parameter-file counts, as `cuzk-bench shape` counted them from
/// filecoin-proofs' own blank circuits (docs/benchmarks.md, "Circuit shapes").
const fn counts(
    inputs: usize,
    log2_domain: u32,
    aux: usize,
    a_dense_aux: usize,
    b_dense: usize,
) -> QueryCounts {
    QueryCounts {
        ic: inputs,
        h: (1 << log2_domain) - 1,
        l: aux,
        a: inputs + a_dense_aux,
        b_g1: b_dense,
        b_g2: b_dense,
    }
}

const POREP_2KIB: QueryCounts = counts(40, 22, 2_685_673, 2_674_908, 685_522);
const POREP_32GIB: QueryCounts = counts(328, 27, 130_169_893, 129_753_292, 33_112_282);
const WINNING_2KIB: QueryCounts = counts(133, 17, 91_674, 69_300, 66_793);
const WINNING_32GIB: QueryCounts = counts(133, 19, 375_210, 284_196, 272_185);

/// A 2 KiB circuit's stage times (seconds) on the H200 machine: the CUDA
/// engine with compiled evaluation, medians over HTTP (docs/benchmarks.md,
/// 2026-12-01 05:29 UTC).
struct Measured {
    counts: QueryCounts,
    synthesis: f64,
    gpu: f64,
    finalize: f64,
}

const POREP_2KIB_H200: Measured = Measured { counts: POREP_2KIB, synthesis: 1.19, gpu: 0.23, finalize: 0.02 };
const WINNING_2KIB_H200: Measured =
    Measured { counts: WINNING_2KIB, synthesis: 0.23, gpu: 0.05, finalize: 0.04 };

impl Measured {
    /// The stages of a circuit with `counts`, scaled linearly: synthesis by
    /// aux variables (one allocation, about one constraint each),
    /// prove_start by MSM points (h + l + a + b), finalize by B points; the
    /// GPU range is ±10% around the scaled time. The reservation is the
    /// daemon's own rule for those counts.
    fn scaled(
        &self,
        name: &'static str,
        partitions: u32,
        priority: Priority,
        to: &QueryCounts,
    ) -> SimProfile {
        let points = |c: &QueryCounts| (c.h + c.l + c.a + c.b_g1) as f64;
        let ratio = |big: usize, small: usize| big as f64 / small as f64;
        let gpu = self.gpu * points(to) / points(&self.counts);
        SimProfile {
            name,
            partitions,
            priority,
            synthesis: Duration::from_secs_f64(self.synthesis * ratio(to.l, self.counts.l)),
            gpu: (Duration::from_secs_f64(0.9 * gpu), Duration::from_secs_f64(1.1 * gpu)),
            finalize: Duration::from_secs_f64(self.finalize * ratio(to.b_g2, self.counts.b_g2)),
            reservation: reservation_for_counts(to, Evaluation::Compiled, false),
        }
    }
}

/// A profile: a Filecoin kind at 32 GiB, its 2 KiB measurement scaled to
/// the 32 GiB circuit's counts, at the kind's default priority.
struct Known {
    /// What `sim.profile` says.
    name: &'static str,
    /// The kind whose jobs it stands for (its priority follows).
    kind: Kind,
    /// The 32 GiB request's circuit partitions.
    partitions: u32,
    /// The kind's 2 KiB stage times.
    measured: &'static Measured,
    /// The 32 GiB circuit's counts.
    counts: &'static QueryCounts,
}

static PROFILES: [Known; 2] = [
    // 10 partitions of 130,278,869 constraints (domain 2^27): about 58 s
    // synthesis, 9.6 s on the GPU, 1 s finalize, 38 GiB each.
    Known {
        name: "porep-32g",
        kind: Kind::Porep,
        partitions: 10,
        measured: &POREP_2KIB_H200,
        counts: &POREP_32GIB,
    },
    // One partition of 370,723 constraints (domain 2^19), critical.
    Known {
        name: "winning-post",
        kind: Kind::WinningPost,
        partitions: 1,
        measured: &WINNING_2KIB_H200,
        counts: &WINNING_32GIB,
    },
];

/// Why the simulated backend cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// `sim.profile` names no known profile.
    #[error("unknown sim profile {name:?}; known: {}", profile_names())]
    UnknownProfile {
        /// What `sim.profile` says.
        name: String,
    },
    /// Zero, negative or not finite.
    #[error("sim time_scale must be positive, got {0}")]
    TimeScale(f64),
    /// A jitter of 1 or more could make a stage take no time or less.
    #[error("sim jitter must be in [0, 1), got {0}")]
    Jitter(f64),
    /// A fault rate that is no probability.
    #[error("sim.faults.{stage}.{name} must be in [0, 1], got {rate}")]
    Rate {
        /// The stage's faults section.
        stage: &'static str,
        /// The rate's setting.
        name: &'static str,
        /// Its value.
        rate: f64,
    },
    /// One draw decides a stage's error or panic, so their rates add up.
    #[error("sim.faults.{0}: error_rate + panic_rate exceeds 1")]
    RatesOverOne(&'static str),
}

fn profile_names() -> String {
    PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

impl SimProfile {
    /// The profile of that name; the error lists the known ones.
    pub fn by_name(name: &str) -> Result<Self, SimError> {
        let known = PROFILES
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| SimError::UnknownProfile { name: name.to_string() })?;
        Ok(known.measured.scaled(known.name, known.partitions, default_priority(known.kind), known.counts))
    }
}

/// Share of prove_start spent on the host before the device is needed
/// (staging inputs), during which a device's other worker can use it.
const HOST_SHARE: f64 = 0.05;

/// The simulated backend (`backend = "sim"`): stages that sleep for a profile's
/// durations, hold its memory and inject the configured faults, to test the
/// scheduler and plan capacity without a prover.
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
    /// The backend `config` describes; errors on an unknown profile or a scale,
    /// jitter or fault rate out of range.
    pub fn from_config(config: &SimConfig) -> Result<Self, SimError> {
        let profile = SimProfile::by_name(&config.profile)?;
        if !(config.time_scale > 0.0 && config.time_scale.is_finite()) {
            return Err(SimError::TimeScale(config.time_scale));
        }
        if !(0.0..1.0).contains(&config.jitter) {
            return Err(SimError::Jitter(config.jitter));
        }
        let faults = &config.faults;
        for (stage, f) in
            [("synthesis", &faults.synthesis), ("prove", &faults.prove), ("finalize", &faults.finalize)]
        {
            for (name, rate) in
                [("error_rate", f.error_rate), ("panic_rate", f.panic_rate), ("stall_rate", f.stall_rate)]
            {
                if !(0.0..=1.0).contains(&rate) {
                    return Err(SimError::Rate { stage, name, rate });
                }
            }
            if f.error_rate + f.panic_rate > 1.0 {
                return Err(SimError::RatesOverOne(stage));
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

    /// The profile the stages simulate.
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
            return Err(StageError::retryable(format!("injected error in {stage} (sim fault, call {call})")));
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
        Ok(Synthesized { payload: Payload::new(()), phases: vec![("synthesize", took)] })
    }

    /// Phases, in order: `host` (staging), `device_wait` (the device's other
    /// worker holds it), `device` (the simulated kernels).
    fn prove_start(&self, device: usize, _: &JobSpec, _: u32, _: Payload) -> Result<Started, StageError> {
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
            phases: vec![("host", host), ("device_wait", device_wait), ("device", compute)],
            // The simulated device runs one call at a time (the lock above).
            device_active: Some(compute),
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

#[cfg(test)]
mod tests {
    use cuzk_filecoin::Kind;

    use super::*;

    /// A blank circuit's counts as its parameter file would hold them.
    fn counted(kind: Kind, sector_size: u64) -> QueryCounts {
        let shape = kind.blank_counts(sector_size).unwrap().shape;
        let d = &shape.densities;
        let a_dense = d.a_aux.iter().filter(|&&dense| dense).count();
        counts(shape.num_inputs(), shape.domain_size().ilog2(), shape.num_aux(), a_dense, d.b_query_len())
    }

    /// The profiles' counts are filecoin-proofs' circuits' (the 32 GiB
    /// PoRep count takes minutes: `sim_porep_profile_counts_the_32_gib_circuit`).
    #[test]
    fn sim_profiles_count_the_real_circuits() {
        assert_eq!(counted(Kind::Porep, 2048), POREP_2KIB);
        assert_eq!(counted(Kind::WinningPost, 2048), WINNING_2KIB);
        assert_eq!(counted(Kind::WinningPost, 32 << 30), WINNING_32GIB);
    }

    #[test]
    #[ignore = "counts 130 million constraints: about 2 minutes"]
    fn sim_porep_profile_counts_the_32_gib_circuit() {
        assert_eq!(counted(Kind::Porep, 32 << 30), POREP_32GIB);
    }

    /// Scaled to its own counts a measurement is itself; the 32 GiB
    /// profiles grow with their circuits and reserve what a real job would.
    #[test]
    fn profiles_scale_the_measured_stages() {
        let same = POREP_2KIB_H200.scaled("same", 1, Priority::Normal, &POREP_2KIB);
        assert!((same.synthesis.as_secs_f64() - POREP_2KIB_H200.synthesis).abs() < 1e-9);
        assert!((same.finalize.as_secs_f64() - POREP_2KIB_H200.finalize).abs() < 1e-9);
        let mid = (same.gpu.0 + same.gpu.1).as_secs_f64() / 2.0;
        assert!((mid - POREP_2KIB_H200.gpu).abs() < 1e-9);

        let porep = SimProfile::by_name("porep-32g").unwrap();
        assert_eq!(porep.partitions, 10);
        assert!(porep.synthesis > same.synthesis * 40 && porep.gpu.0 > same.gpu.1 * 30);
        assert_eq!(porep.reservation, reservation_for_counts(&POREP_32GIB, Evaluation::Compiled, false));
        assert_eq!(porep.reservation.abc_bytes, 3 * (1 << 27) * 32, "a, b, c over the 2^27 domain");
        // On a device that evaluates and proves, the host keeps the
        // assignment and its copy: a quarter of the CPU engine's need.
        let device = reservation_for_counts(&POREP_32GIB, Evaluation::Compiled, true);
        assert_eq!(device.abc_bytes, 0);
        assert_eq!(device.retained_bytes, 2 * (328 + 130_169_893) * 32 + (8 << 20));
        assert!(device.total() * 4 < porep.reservation.total(), "{device:?} vs {:?}", porep.reservation);
        let winning = SimProfile::by_name("winning-post").unwrap();
        assert_eq!((winning.partitions, winning.priority), (1, Priority::Critical));
        assert!(winning.synthesis < porep.synthesis / 10);
        let unknown = SimProfile::by_name("porep-64g").unwrap_err();
        assert!(matches!(unknown, SimError::UnknownProfile { .. }), "{unknown:?}");
        assert!(unknown.to_string().ends_with("known: porep-32g, winning-post"), "{unknown}");
    }
}
