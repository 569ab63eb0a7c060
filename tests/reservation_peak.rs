//! A partition's real peak allocation stays within the reservation the daemon
//! makes for it. One test in this binary: the counting allocator sees every
//! thread of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ark_std::UniformRand;
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
        let _ = groth16::prove_finish(&circuit, engine.prove_start(&circuit, warm).unwrap(), Fr::rand(&mut rng), Fr::rand(&mut rng));

        let baseline = CURRENT.load(Ordering::Relaxed);
        PEAK.store(baseline, Ordering::Relaxed);
        let synthesized = groth16::synthesize(&circuit, instance()).unwrap();
        let started = engine.prove_start(&circuit, synthesized).unwrap();
        let (proof, _) = groth16::prove_finish(&circuit, started, Fr::rand(&mut rng), Fr::rand(&mut rng));
        drop(proof);
        let peak = (PEAK.load(Ordering::Relaxed) - baseline) as u64;
        println!("{}: peak {peak} bytes, reservation {} bytes", shape.circuit_id, reservation.total());
        assert!(
            peak <= reservation.total(),
            "{}: a partition peaked at {peak} bytes but reserves {}",
            shape.circuit_id,
            reservation.total()
        );
    }
}


