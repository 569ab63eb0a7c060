//! A partition's real peak allocation stays within the reservation the daemon
//! makes for it: built-in families by their shape, a Filecoin WinningPoSt
//! partition by its parameter file's counts, under both evaluations. One
//! test in this binary: the counting allocator sees every thread of the
//! process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ark_std::UniformRand;
use cuzk::filecoin::FilecoinJob;
use cuzk::keys::KeyStore;
use cuzk_filecoin::fixtures::{self, PROVER_ID, WINNING};
use cuzk_filecoin::record::Evaluation;
use cuzk_filecoin::Kind;
use cuzk_kernels::circuits::{CircuitRegistry, WitnessSource};
use cuzk_kernels::cpu::CpuEngine;
use cuzk_kernels::groth16::{self, PreparedCircuit, ProveStartEngine};
use cuzk_kernels::Fr;
use serde_json::json;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn partition_peak_fits_its_reservation() {
    let registry = CircuitRegistry::builtin();
    let engine = CpuEngine::new(2).unwrap();
    let mut rng = rand::thread_rng();
    for (family, params) in [
        ("mimc-chain", json!({"log2_constraints": 8})),
        ("mimc-chain", json!({"log2_constraints": 12})),
        ("mimc-chain", json!({"log2_constraints": 15})),
        ("poseidon-merkle", json!({"depth": 8, "challenges": 2})),
    ] {
        let family = registry.get(family).unwrap().clone();
        let shape = family.shape(&params).unwrap();
        let instance = || family.instance(&shape, &WitnessSource::Seed(1)).unwrap();
        let circuit = PreparedCircuit::setup(&shape.circuit_id, instance, &mut rand::thread_rng()).unwrap();
        let reservation = cuzk::job_input::reservation_for(&shape);
        // Warm the thread pool and the NTT tables once: they are resident,
        // not per partition.
        let warm = groth16::synthesize(&circuit, instance()).unwrap();
        groth16::prove_finish(
            &circuit,
            engine.prove_start(&circuit, warm).unwrap(),
            Fr::rand(&mut rng),
            Fr::rand(&mut rng),
        )
        .unwrap();

        let baseline = CURRENT.load(Ordering::Relaxed);
        PEAK.store(baseline, Ordering::Relaxed);
        let synthesized = groth16::synthesize(&circuit, instance()).unwrap();
        let started = engine.prove_start(&circuit, synthesized).unwrap();
        groth16::prove_finish(&circuit, started, Fr::rand(&mut rng), Fr::rand(&mut rng)).unwrap();
        check_peak(&shape.circuit_id, baseline, reservation.total());
    }
    filecoin_partition_peak_fits_its_reservation(&engine);
}

fn check_peak(name: &str, baseline: usize, reserved: u64) {
    let peak = (PEAK.load(Ordering::Relaxed) - baseline) as u64;
    println!("{name}: peak {peak} bytes, reservation {reserved} bytes");
    assert!(peak <= reserved, "{name}: a partition peaked at {peak} bytes but reserves {reserved}");
}

/// A 2 KiB WinningPoSt partition (90,883 constraints, domain 2^17) through
/// the daemon's synthesis stage and the CPU engine.
fn filecoin_partition_peak_fits_its_reservation(engine: &CpuEngine) {
    fixtures::ensure_params(&[Kind::WinningPost]).unwrap();
    let sector = fixtures::seal(1).unwrap();
    let vanilla = fixtures::post_vanilla_proofs(WINNING, [9; 32], &[&sector]).unwrap();
    let input = json!({
        "registered_proof": WINNING,
        "randomness": hex::encode([9u8; 32]),
        "prover_id": hex::encode(PROVER_ID),
        "vanilla_proofs": vanilla.iter().map(hex::encode).collect::<Vec<_>>(),
    });
    let job = FilecoinJob::parse(Kind::WinningPost, &input, fixtures::params_dir()).unwrap();
    let mut rng = rand::thread_rng();
    for evaluation in [Evaluation::Compiled, Evaluation::Direct] {
        let data = tempfile::tempdir().unwrap();
        let keys = KeyStore::open(data.path()).unwrap();
        let prove = |rng: &mut rand::rngs::ThreadRng| {
            let (circuit, synthesized, _) = job.synthesize(&keys, 0, evaluation).unwrap();
            let started = engine.prove_start(&circuit, synthesized).unwrap();
            groth16::prove_finish(&circuit, started, Fr::rand(rng), Fr::rand(rng)).unwrap();
        };
        // The first loads the key (and, compiled, the matrices): resident.
        prove(&mut rng);
        let baseline = CURRENT.load(Ordering::Relaxed);
        PEAK.store(baseline, Ordering::Relaxed);
        prove(&mut rng);
        check_peak(
            &format!("winning-post {evaluation:?}"),
            baseline,
            job.reservation(evaluation, false).total(),
        );
    }
}
