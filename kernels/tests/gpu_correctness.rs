//! GPU correctness against arkworks, on fresh random inputs every run.
//! `#[ignore]`d: run with `cargo test --release --features cuda -- --ignored`.
//! Without a CUDA device each test prints SKIPPED and passes.
#![cfg(feature = "cuda")]

use std::sync::OnceLock;
use std::time::Duration;

use ark_bls12_381::{Fq, Fq2, G2Projective};
use ark_ec::{AdditiveGroup, AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{BigInt, FftField, Field, Fp, PrimeField, UniformRand};
use ark_poly::EvaluationDomain;
use ark_relations::lc;
use ark_relations::r1cs::{ConstraintSystemRef, SynthesisError, Variable};
use cuzk_kernels::circuits::CircuitInstance;
use cuzk_kernels::cpu::CpuEngine;
use cuzk_kernels::cuda::bases::KeyBases;
use cuzk_kernels::cuda::gpu::{DBuf, DevFr};
use cuzk_kernels::cuda::inputs;
use cuzk_kernels::cuda::msm::{MsmGroup, ZeroOne, G1, G2};
use cuzk_kernels::cuda::{detect_devices, CudaEngine, CudaOptions, FieldTest};
use cuzk_kernels::device_plan::Place;
use cuzk_kernels::groth16::{
    self, assignment_bigints, Domain, PreparedCircuit, ProveStartEngine, ProveStartOutput, Urgency,
};
use cuzk_kernels::key_source::{KeySource, Query};
use cuzk_kernels::r1cs::{Flattened, Matrices};
use cuzk_kernels::{synthetic, Fr, G1Affine, G2Affine, KernelError};

fn engine() -> Option<&'static CudaEngine> {
    static E: OnceLock<Option<CudaEngine>> = OnceLock::new();
    E.get_or_init(|| match detect_devices() {
        Ok(d) if !d.is_empty() => {
            eprintln!("GPU: {:?}", d[0]);
            Some(CudaEngine::new(0, CudaOptions::default()).expect("engine on device 0"))
        }
        Ok(_) => None,
        Err(e) => {
            eprintln!("no CUDA driver: {e}");
            None
        }
    })
    .as_ref()
}

macro_rules! gpu_or_skip {
    ($name:expr) => {
        match engine() {
            Some(e) => e,
            None => {
                eprintln!("SKIPPED {}: no CUDA device", $name);
                return;
            }
        }
    };
}

fn seed() -> u64 {
    let s = inputs::fresh_seed();
    eprintln!("seed {s}");
    s
}

fn fq_words(x: &Fq) -> Vec<u64> {
    x.0 .0.to_vec()
}
fn fq_from(w: &[u64]) -> Fq {
    Fp::new_unchecked(BigInt([w[0], w[1], w[2], w[3], w[4], w[5]]))
}
fn fr_from(w: &[u64]) -> Fr {
    Fp::new_unchecked(BigInt([w[0], w[1], w[2], w[3]]))
}

#[test]
#[ignore]
fn gpu_field_ops() {
    let e = gpu_or_skip!("gpu_field_ops");
    let mut r = inputs::rng(seed());
    let n = 4096;
    // Fr, with edge values
    let mut a: Vec<Fr> = (0..n).map(|_| Fr::rand(&mut r)).collect();
    let mut b: Vec<Fr> = (0..n).map(|_| Fr::rand(&mut r)).collect();
    a[0] = Fr::from(0u64);
    b[1] = Fr::from(0u64);
    a[2] = -Fr::from(1u64);
    b[2] = -Fr::from(1u64);
    a[3] = b[3];
    let aw: Vec<u64> = a.iter().flat_map(|x| x.0 .0).collect();
    let bw: Vec<u64> = b.iter().flat_map(|x| x.0 .0).collect();
    for op in 0..6u32 {
        let out = e.field_op(FieldTest::Fr, op, &aw, &bw).unwrap();
        for i in 0..n {
            let got = fr_from(&out[4 * i..4 * i + 4]);
            let want = match op {
                0 => a[i] + b[i],
                1 => a[i] - b[i],
                2 => a[i] * b[i],
                3 => a[i].square(),
                4 => -a[i],
                _ => {
                    // from_mont: the plain integer as limbs
                    let bi = a[i].into_bigint();
                    assert_eq!(&out[4 * i..4 * i + 4], &bi.0[..], "Fr from_mont at {i}");
                    continue;
                }
            };
            assert_eq!(got, want, "Fr op {op} at {i}");
        }
    }
    // Fq
    let mut a: Vec<Fq> = (0..n).map(|_| Fq::rand(&mut r)).collect();
    let b: Vec<Fq> = (0..n).map(|_| Fq::rand(&mut r)).collect();
    a[0] = Fq::from(0u64);
    a[1] = -Fq::from(1u64);
    let aw: Vec<u64> = a.iter().flat_map(fq_words).collect();
    let bw: Vec<u64> = b.iter().flat_map(fq_words).collect();
    for op in 0..6u32 {
        let out = e.field_op(FieldTest::Fq, op, &aw, &bw).unwrap();
        for i in 0..n {
            let got = fq_from(&out[6 * i..6 * i + 6]);
            let want = match op {
                0 => a[i] + b[i],
                1 => a[i] - b[i],
                2 => a[i] * b[i],
                3 => a[i].square(),
                4 => -a[i],
                _ => a[i].double(),
            };
            assert_eq!(got, want, "Fq op {op} at {i}");
        }
    }
    // Fq2
    let a: Vec<Fq2> = (0..n).map(|_| Fq2::rand(&mut r)).collect();
    let b: Vec<Fq2> = (0..n).map(|_| Fq2::rand(&mut r)).collect();
    let w2 = |x: &Fq2| [fq_words(&x.c0), fq_words(&x.c1)].concat();
    let aw: Vec<u64> = a.iter().flat_map(w2).collect();
    let bw: Vec<u64> = b.iter().flat_map(w2).collect();
    for op in 0..6u32 {
        let out = e.field_op(FieldTest::Fq2, op, &aw, &bw).unwrap();
        for i in 0..n {
            let o = &out[12 * i..12 * i + 12];
            let got = Fq2::new(fq_from(&o[..6]), fq_from(&o[6..]));
            let want = match op {
                0 => a[i] + b[i],
                1 => a[i] - b[i],
                2 => a[i] * b[i],
                3 => a[i].square(),
                4 => -a[i],
                _ => a[i].double(),
            };
            assert_eq!(got, want, "Fq2 op {op} at {i}");
        }
    }
    eprintln!("field ops: Fr, Fq, Fq2 add/sub/mul/sqr/neg/dbl (+ Fr from_mont) on {n} random inputs: OK");
}

#[test]
#[ignore]
fn gpu_curve_ops() {
    let e = gpu_or_skip!("gpu_curve_ops");
    let s = seed();
    let n = 1024;
    let mut a = inputs::random_g1(n, s);
    let mut b = inputs::random_g1(n, s ^ 5);
    b[0] = a[0]; // doubling through add
    b[1] = (-a[1].into_group()).into_affine(); // P + (-P)
    b[2] = G1Affine::identity();
    a[3] = G1Affine::identity();
    let out = e.curve_ops::<G1>(&a, &b).unwrap();
    for i in 0..n {
        let j = |k: usize| out[3 * i + k];
        let pa = a[i].into_group();
        let s = pa + b[i];
        assert_eq!(j(0), pa + pa, "G1 dbl at {i}");
        assert_eq!(j(1), s, "G1 madd at {i}");
        assert_eq!(j(2), s + pa, "G1 add at {i}");
    }
    let a2 = inputs::random_g2(256, s ^ 9);
    let mut b2 = inputs::random_g2(256, s ^ 11);
    b2[0] = a2[0];
    b2[1] = (-a2[1].into_group()).into_affine();
    b2[2] = G2Affine::identity();
    let out = e.curve_ops::<G2>(&a2, &b2).unwrap();
    for i in 0..256 {
        let j = |k: usize| out[3 * i + k];
        let pa = a2[i].into_group();
        let s = pa + b2[i];
        assert_eq!(j(0), pa + pa, "G2 dbl at {i}");
        assert_eq!(j(1), s, "G2 madd at {i}");
        assert_eq!(j(2), s + pa, "G2 add at {i}");
    }
    eprintln!("curve ops G1 (1024) and G2 (256), with doubling/inverse/identity cases: OK");
}

#[test]
#[ignore]
fn gpu_ntt_all_sizes() {
    let e = gpu_or_skip!("gpu_ntt_all_sizes");
    let s = seed();
    // 2^25 and 2^26 for their pass plans (two later passes of 8 stages).
    for k in (1..=22u32).chain([25, 26]) {
        let n = 1usize << k;
        let domain = Domain::new(n).unwrap();
        let coset = domain.get_coset(Fr::GENERATOR).unwrap();
        let input = inputs::random_fr(n, s ^ k as u64);
        for (inverse, is_coset) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut want = input.clone();
            match (inverse, is_coset) {
                (false, false) => domain.fft_in_place(&mut want),
                (true, false) => domain.ifft_in_place(&mut want),
                (false, true) => coset.fft_in_place(&mut want),
                (true, true) => coset.ifft_in_place(&mut want),
            }
            let d = e.upload_fr(&input).unwrap();
            e.ntt_device(&d, n, inverse, is_coset).unwrap();
            let got = e.download_fr(&d, n).unwrap();
            if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
                panic!("NTT 2^{k} inverse={inverse} coset={is_coset}: first mismatch at {i}");
            }
        }
    }
    eprintln!("NTT forward/inverse/coset/coset-inverse at 2^1..=2^22, 2^25, 2^26 equal ark-poly: OK");
}

/// A group's affine points, as the host holds them.
type Affine<G> = <<G as MsmGroup>::Curve as CurveGroup>::Affine;

/// The device's MSM equals arkworks' under each rule for the 0/1 split.
fn check_msm<G: MsmGroup>(e: &CudaEngine, bases: &[Affine<G>], scalars: &[Fr], rules: &[ZeroOne], what: &str)
where
    G::Curve: VariableBaseMSM<MulBase = Affine<G>, ScalarField = Fr>,
{
    let want = G::Curve::msm(bases, scalars).unwrap();
    for &rule in rules {
        let got = e.msm::<G>(bases, scalars, rule).unwrap();
        assert_eq!(got.into_affine(), want.into_affine(), "MSM {what} (n = {}, {rule:?})", bases.len());
    }
}

fn check_msm_g1(e: &CudaEngine, bases: &[G1Affine], scalars: &[Fr], what: &str) {
    check_msm::<G1>(e, bases, scalars, &[ZeroOne::Auto], what);
}

#[test]
#[ignore]
fn gpu_msm_g1() {
    let e = gpu_or_skip!("gpu_msm_g1");
    let s = seed();
    let max = 1usize << 22;
    let pool = inputs::random_g1(max, s);
    let sc = inputs::random_fr(max, s ^ 77);
    for n in [1usize, 2, 3, 5, 17, 100, 1000, 4096, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22] {
        check_msm_g1(e, &pool[..n], &sc[..n], "random");
    }
    let n = 5000;
    let zeros = vec![Fr::from(0u64); n];
    check_msm_g1(e, &pool[..n], &zeros, "all zero scalars");
    let mut mixed = sc[..n].to_vec();
    for i in (0..n).step_by(3) {
        mixed[i] = Fr::from(0u64);
    }
    for i in (1..n).step_by(7) {
        mixed[i] = minus_one();
    }
    for i in (2..n).step_by(11) {
        mixed[i] = Fr::from(1u64);
    }
    // Either side of (r-1)/2, where the kernels start negating a scalar
    // and its point (s > (r-1)/2 becomes r - s).
    let half = -Fr::from(1u64) / Fr::from(2u64);
    for (i, d) in (4..n).step_by(13).zip([0i64, 1, -1, 2].iter().cycle()) {
        mixed[i] = half + Fr::from(*d);
    }
    check_msm_g1(e, &pool[..n], &mixed, "zero, one, r-1 and (r-1)/2 + {-1, 0, 1, 2}");
    let ident = with_identity(pool[..n].to_vec(), &[0, 1, 2, 100, 4999]);
    check_msm_g1(e, &ident, &sc[..n], "identity points");
    let repeated: Vec<G1Affine> = (0..n).map(|i| pool[i % 7]).collect();
    check_msm_g1(e, &repeated, &sc[..n], "repeated points");
    let same_scalar = vec![sc[0]; n];
    check_msm_g1(e, &repeated, &same_scalar, "repeated points, one scalar");
    let all_minus_one = vec![minus_one(); 1 << 16];
    check_msm_g1(e, &pool[..1 << 16], &all_minus_one, "all r-1 (one bucket per window)");
    let ones = vec![Fr::from(1u64); 1 << 20];
    check_msm_g1(e, &pool[..1 << 20], &ones, "2^20 ones (one huge bucket)");
    // The 20-bit windows the engine takes from 1.5 x 2^26 points (too many
    // to check here), on 2^20: 2 points per bucket, many buckets empty. Set
    // through CUZK_MSM_C, which changes only how the sum is found, so a
    // test running meanwhile still gets its right answer.
    std::env::set_var("CUZK_MSM_C", "20");
    check_msm_g1(e, &pool[..1 << 20], &sc[..1 << 20], "20-bit windows");
    // 15 windows of 17 bits: the top one holds a halved scalar's last 16
    // bits and a carry, nothing more.
    std::env::set_var("CUZK_MSM_C", "17");
    check_msm_g1(e, &pool[..1 << 18], &sc[..1 << 18], "17-bit windows");
    check_msm_g1(e, &pool[..n], &mixed, "17-bit windows, edge scalars");
    std::env::remove_var("CUZK_MSM_C");
    // Level-0 work items longer than the levels' 32 entries (msm::level0_k
    // takes 64 from 2^26 sorted entries and 128 from 2^27, more than a test
    // holds), and a length that is no power of two, through CUZK_MSM_K0.
    for k0 in ["128", "48"] {
        std::env::set_var("CUZK_MSM_K0", k0);
        let what = format!("level-0 items of {k0}");
        check_msm_g1(e, &pool[..1 << 20], &sc[..1 << 20], &what);
        check_msm_g1(e, &pool[..1 << 20], &ones, &format!("{what}, one huge bucket"));
        check_msm_g1(e, &pool[..n], &mixed, &format!("{what}, edge scalars"));
        check_msm_g1(e, &repeated, &same_scalar, &format!("{what}, one scalar"));
    }
    std::env::remove_var("CUZK_MSM_K0");
    eprintln!("G1 MSM sizes 1..2^22 and edge cases equal arkworks: OK");
}

#[test]
#[ignore]
fn gpu_msm_g2() {
    let e = gpu_or_skip!("gpu_msm_g2");
    let s = seed();
    let max = 1usize << 18;
    let pool = inputs::random_g2(max, s);
    let sc = inputs::random_fr(max, s ^ 3);
    let check = |b: &[G2Affine], x: &[Fr], what: &str| {
        check_msm::<G2>(e, b, x, &[ZeroOne::Auto], what);
    };
    for n in [1usize, 2, 3, 100, 4096, 1 << 16, 1 << 18] {
        check(&pool[..n], &sc[..n], "random");
    }
    let n = 3000;
    let mut mixed = sc[..n].to_vec();
    for i in (0..n).step_by(3) {
        mixed[i] = Fr::from(0u64);
    }
    for i in (1..n).step_by(5) {
        mixed[i] = minus_one();
    }
    let mut pts = pool[..n].to_vec();
    pts[4] = G2Affine::identity();
    pts[5] = pts[6];
    check(&pts, &mixed, "zeros, r-1, identity, repeated");
    // G2's level 0 with long work items (see gpu_msm_g1).
    std::env::set_var("CUZK_MSM_K0", "128");
    check(&pool[..1 << 18], &sc[..1 << 18], "level-0 items of 128");
    check(&pts, &mixed, "level-0 items of 128, edge cases");
    std::env::remove_var("CUZK_MSM_K0");
    eprintln!("G2 MSM sizes 1..2^18 and edge cases equal arkworks: OK");
}

/// The 0/1 cases of one group, with the split (Auto) and without (Off).
fn zero_one_cases<G: MsmGroup>(e: &CudaEngine, pool: &[Affine<G>], big: usize, seed: u64)
where
    G::Curve: VariableBaseMSM<MulBase = Affine<G>, ScalarField = Fr>,
{
    let both = [ZeroOne::Auto, ZeroOne::Off];
    let one = Fr::from(1u64);
    let check = |b: &[Affine<G>], x: &[Fr], what: &str| check_msm::<G>(e, b, x, &both, what);
    for (n, pct) in [(big, 90), (1 << 14, 99), (5000, 50), (5000, 10), (4096, 100)] {
        let sc = inputs::mostly_bits(n, pct, seed ^ n as u64 ^ pct);
        check(&pool[..n], &sc, &format!("{pct}% bits"));
    }
    for n in [1usize, 2, 31, 32, 33, 1025, 1 << 16] {
        check(&pool[..n], &vec![one; n], "all ones");
    }
    check(&pool[..1000], &vec![Fr::from(0u64); 1000], "all zeros");
    let mut zeros_one = vec![Fr::from(0u64); 1000];
    zeros_one[999] = one;
    check(&pool[..1000], &zeros_one, "zeros and a single one");
    let mut r1 = vec![one; 3000];
    for i in (0..3000).step_by(4) {
        r1[i] = minus_one();
    }
    check(&pool[..3000], &r1, "ones and r-1 (P - P pairs)");
    // Ones on repeated points (doublings inside the sum) and identities.
    let mut pts: Vec<Affine<G>> = (0..3000).map(|i| pool[i % 5]).collect();
    for i in (0..3000).step_by(97) {
        pts[i] = Affine::<G>::zero();
    }
    let sc = inputs::mostly_bits(3000, 95, seed ^ 7);
    check(&pts, &sc, "95% bits, repeated points and identities");
}

#[test]
#[ignore]
fn gpu_msm_zero_one_g1() {
    let e = gpu_or_skip!("gpu_msm_zero_one_g1");
    let s = seed();
    let pool = inputs::random_g1(1 << 20, s);
    zero_one_cases::<G1>(e, &pool, 1 << 20, s);
    eprintln!("G1 MSM 0/1-heavy scalars (split and plain) equal arkworks: OK");
}

#[test]
#[ignore]
fn gpu_msm_zero_one_g2() {
    let e = gpu_or_skip!("gpu_msm_zero_one_g2");
    let s = seed();
    let pool = inputs::random_g2(1 << 16, s);
    zero_one_cases::<G2>(e, &pool, 1 << 16, s);
    eprintln!("G2 MSM 0/1-heavy scalars (split and plain) equal arkworks: OK");
}

fn chain_circuit(steps: usize, seed: u64) -> PreparedCircuit {
    let mut r = inputs::rng(seed);
    let x = Fr::rand(&mut r);
    // The same id for every shape on purpose: the engine must notice a
    // different key under a known id and re-upload.
    PreparedCircuit::setup("gpu-test-chain", || Box::new(ChainInstance { steps, x }), &mut r).unwrap()
}

#[test]
#[ignore]
fn gpu_prove_start_equals_cpu() {
    let e = gpu_or_skip!("gpu_prove_start_equals_cpu");
    let s = seed();
    let cpu = CpuEngine::new(0).unwrap();
    for steps in [5usize, 1000, 20000] {
        let circuit = chain_circuit(steps, s ^ steps as u64);
        let mut r = inputs::rng(s ^ 999 ^ steps as u64);
        let x = Fr::rand(&mut r);
        let syn = || groth16::synthesize(&circuit, Box::new(ChainInstance { steps, x })).unwrap();
        let c = cpu.prove_start(&circuit, syn()).unwrap();
        let g = e.prove_start(&circuit, syn()).unwrap();
        // The compact key (sparse A and B, as Filecoin's) on the GPU: the
        // same accumulators from the gathered scalars.
        let compact = circuit.compact().unwrap();
        let gs = e.prove_start(&compact, syn()).unwrap();
        assert_eq!(gs.a_acc.into_affine(), c.a_acc.into_affine(), "compact a_acc");
        assert_eq!(gs.b1_acc.into_affine(), c.b1_acc.into_affine(), "compact b1_acc");
        assert_eq!(gs.b2_acc.map(|b| b.into_affine()), g.b2_acc.map(|b| b.into_affine()), "compact b2_acc");
        assert_eq!(g.a_acc.into_affine(), c.a_acc.into_affine(), "a_acc, {steps} steps");
        assert_eq!(g.b1_acc.into_affine(), c.b1_acc.into_affine(), "b1_acc");
        assert_eq!(g.l_acc.into_affine(), c.l_acc.into_affine(), "l_acc");
        assert_eq!(g.h_acc.into_affine(), c.h_acc.into_affine(), "h_acc");
        let b2_cpu =
            G2Projective::msm_bigint(&circuit.pk.b_g2_query[1..], &assignment_bigints(&c.assignment));
        assert_eq!(g.b2_acc.unwrap().into_affine(), b2_cpu.into_affine(), "b2_acc");
        let phases: Vec<_> = g.phases.iter().map(|p| format!("{}={:?}", p.phase, p.duration)).collect();
        eprintln!("prove_start {steps} steps: {}", phases.join(" "));
        let (rr, ss) = (Fr::rand(&mut r), Fr::rand(&mut r));
        // With B's G2 MSM done, only the public part of the assignment
        // comes back (the rest is freed during the call).
        assert_eq!(g.assignment.len(), g.num_inputs, "assignment kept");
        let inputs = g.public_inputs().to_vec();
        let (pg, _) = groth16::prove_finish(&circuit, g, rr, ss).unwrap();
        let (pc, _) = groth16::prove_finish(&circuit, c, rr, ss).unwrap();
        assert_eq!(pg, pc, "GPU proof equals CPU proof");
        let pvk = ark_groth16::prepare_verifying_key(circuit.vk());
        assert!(ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof(&pvk, &pg, &inputs).unwrap());
    }
    // without G2 on the GPU: b2_acc left to the finalizer
    let e2 = CudaEngine::new(0, CudaOptions { g2_on_gpu: false, ..Default::default() }).unwrap();
    let circuit = chain_circuit(300, s ^ 4242);
    let x = Fr::from(7u64);
    let g = e2
        .prove_start(
            &circuit,
            groth16::synthesize(&circuit, Box::new(ChainInstance { steps: 300, x })).unwrap(),
        )
        .unwrap();
    assert!(g.b2_acc.is_none());
    assert!(g.assignment.len() > g.num_inputs, "the finalizer's G2 MSM needs the whole assignment");
    let inputs = g.public_inputs().to_vec();
    let (p, _) = groth16::prove_finish(&circuit, g, Fr::from(3u64), Fr::from(5u64)).unwrap();
    let pvk = ark_groth16::prepare_verifying_key(circuit.vk());
    assert!(ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof(&pvk, &p, &inputs).unwrap());
    assert!(e.resident_bytes() > 0);
    eprintln!("GPU prove_start equals CPU, proofs verify (G2 on GPU and on CPU): OK");
}

/// The device-memory plan `engine` made for `circuit_id`.
fn plan_of(engine: &CudaEngine, circuit_id: &str) -> cuzk_kernels::device_plan::Plan {
    let report = engine.plans_report().expect("the engine reports its plans");
    let circuit = report.circuits.into_iter().find(|c| c.circuit_id == circuit_id);
    circuit.expect("a plan for every circuit proved").plan
}

#[test]
#[ignore]
fn gpu_streamed_equals_resident() {
    let e = gpu_or_skip!("gpu_streamed_equals_resident");
    let s = seed();
    // Two resident limits, in chunks of 3000 points (several per query,
    // the last one partial): none of the key (every part streams from
    // pinned memory), and 5 MiB, which beside these circuits' NTT tables
    // holds some of their keys' parts and not all (a split key: the
    // device-memory plan's choice on a card smaller than the key).
    let mut split = 0;
    for limit in [0, 5 << 20] {
        let streamed = CudaEngine::new(
            0,
            CudaOptions { resident_budget: Some(limit), stream_chunk: 3000, ..Default::default() },
        )
        .unwrap();
        for steps in [10000usize, 20000] {
            let circuit = chain_circuit(steps, s ^ steps as u64);
            let compact = circuit.compact().unwrap();
            let mut r = inputs::rng(s ^ 77 ^ steps as u64);
            let x = Fr::rand(&mut r);
            let syn = || groth16::synthesize(&circuit, Box::new(ChainInstance { steps, x })).unwrap();
            // The whole key (A and B sharing their sort) and the compact one
            // (gathered A and B scalars, sorted apart).
            for (what, c) in [("full", &circuit), ("compact", &compact)] {
                let what = format!("{what}, {steps} steps, resident limit {limit}");
                let want = e.prove_start(c, syn()).unwrap();
                let got = streamed.prove_start(c, syn()).unwrap();
                // This key's streamed parts alone are pinned (the previous
                // key, under the same circuit id, was replaced); the plan
                // splits the whole key between device and host.
                let plan = plan_of(&streamed, &c.circuit_id);
                let key_bytes = KeyBases::bytes(&c.pk, true);
                assert_eq!(plan.resident_key_bytes() + plan.pinned_bytes, key_bytes, "{what}");
                assert_eq!(streamed.pinned_bytes(), plan.pinned_bytes, "{what}: pinned bytes");
                if limit == 0 {
                    assert_eq!(plan.pinned_bytes, key_bytes, "{what}: every part streams");
                } else if plan.resident_key_bytes() > 0 && plan.pinned_bytes > 0 {
                    split += 1;
                }
                // The resident parts are on the device (beside the tables,
                // and the earlier circuits' idle entries, which nothing
                // asked to evict).
                assert!(
                    streamed.resident_bytes() > plan.resident_key_bytes(),
                    "{what}: the resident parts on the device"
                );
                let again = streamed.prove_start(c, syn()).unwrap();
                assert_eq!(streamed.pinned_bytes(), plan.pinned_bytes, "{what}: pinned bytes");
                let phases: Vec<_> = got.phases.iter().map(|p| p.phase).collect();
                assert!(phases.contains(&"msm_b2"), "{what}: phases {phases:?}");
                for g in [&got, &again] {
                    assert_same_start(g, &want, &what);
                }
                let (rr, ss) = (Fr::rand(&mut r), Fr::rand(&mut r));
                let inputs = got.public_inputs().to_vec();
                let (pg, _) = groth16::prove_finish(c, got, rr, ss).unwrap();
                let (pw, _) = groth16::prove_finish(c, want, rr, ss).unwrap();
                assert_eq!(pg, pw, "{what}: the streamed proof equals the resident one");
                let pvk = ark_groth16::prepare_verifying_key(c.vk());
                assert!(ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof(&pvk, &pg, &inputs)
                    .unwrap());
            }
        }
    }
    assert!(split > 0, "the 5 MiB limit split at least one key between device and host");
    eprintln!("streamed and split keys (chunks of 3000 points) prove as resident ones ({split} split): OK");
}

#[test]
#[ignore]
fn gpu_pass_shares_a_streamed_key() {
    let e = gpu_or_skip!("gpu_pass_shares_a_streamed_key");
    let s = seed();
    // Every key streams (as in gpu_streamed_equals_resident); passes of two,
    // whose first call waits up to a minute for the second.
    let streamed = &pass_engine(5 << 20);
    let steps = 20000;
    let circuit = chain_circuit(steps, s ^ 5150);
    let compact = circuit.compact().unwrap();
    let mut r = inputs::rng(s ^ 5151);
    let syn = |x| groth16::synthesize(&circuit, Box::new(ChainInstance { steps, x })).unwrap();
    for (what, c) in [("full", &circuit), ("compact", &compact)] {
        let xs = [Fr::rand(&mut r), Fr::rand(&mut r)];
        let before = streamed.pass_counts();
        let got: Vec<ProveStartOutput> = std::thread::scope(|sc| {
            let calls: Vec<_> = (xs.iter())
                .map(|&x| {
                    let syn = syn(x);
                    sc.spawn(move || streamed.prove_start(c, syn).unwrap())
                })
                .collect();
            calls.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let after = streamed.pass_counts();
        let counted = (after.0 - before.0, after.1 - before.1);
        assert_eq!(counted, (1, 2), "{what}: one pass of both partitions");
        for (got, &x) in got.into_iter().zip(&xs) {
            let want = e.prove_start(c, syn(x)).unwrap();
            assert_same_start(&got, &want, what);
            let inputs = got.public_inputs().to_vec();
            let (p, _) = groth16::prove_finish(c, got, Fr::rand(&mut r), Fr::rand(&mut r)).unwrap();
            let pvk = ark_groth16::prepare_verifying_key(c.vk());
            assert!(
                ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof(&pvk, &p, &inputs).unwrap(),
                "{what}: a proof from a shared pass verifies"
            );
        }
    }
    // An urgent call never waits for others: a pass of its own, at once.
    let (before, t) = (streamed.pass_counts(), std::time::Instant::now());
    let urgent = streamed.prove_start_as(&circuit, syn(Fr::from(9u64)), Urgency::Urgent);
    let want = e.prove_start(&circuit, syn(Fr::from(9u64))).unwrap();
    assert_same_start(&urgent.unwrap(), &want, "urgent");
    assert!(t.elapsed() < Duration::from_secs(50), "the urgent call waited");
    let after = streamed.pass_counts();
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1));
    eprintln!("two calls on a streamed key share one pass, proofs verify: OK");
}

/// The device's a, b and c of `z` by `m` (kept under `id`) over a domain
/// of n, or the row it found unsatisfied; the matrices where `place` says.
fn device_abc(
    e: &CudaEngine,
    (id, place): (&str, Place),
    m: &Matrices,
    z: &[Fr],
    n: usize,
) -> Result<[Vec<Fr>; 3], KernelError> {
    let dz = e.upload_fr(z).unwrap();
    let abc: [DBuf<DevFr>; 3] = std::array::from_fn(|_| DBuf::new(n).unwrap());
    e.evaluate_device(id, m, place, &dz, &abc, n)?;
    Ok(std::array::from_fn(|k| e.download_fr(&abc[k], n).unwrap()))
}

#[test]
#[ignore]
fn gpu_r1cs_eval_equals_host() {
    let e = gpu_or_skip!("gpu_r1cs_eval_equals_host");
    let s = seed();
    // Each case with the matrices on the device and read in place from
    // pinned host memory (the plan's choice on cards too small for them).
    let check_at = |(id, place): (&str, Place), m: &Matrices, z: &[Fr], n: usize, what: &str| {
        let want = m.evaluate(z, n).unwrap();
        let got = device_abc(e, (id, place), m, z, n).unwrap();
        for k in 0..3 {
            if let Some(i) = (0..n).find(|&i| got[k][i] != want[k][i]) {
                panic!("{what} ({place:?}): matrix {k} differs first at row {i} of {n}");
            }
        }
    };
    let check = |id: &str, m: &Matrices, z: &[Fr], n: usize, what: &str| {
        check_at((id, Place::Device), m, z, n, what);
        check_at((&format!("{id}-host"), Place::Host), m, z, n, what);
    };
    let domain = |m: &Matrices| (m.num_constraints() + m.num_inputs()).next_power_of_two();
    // Long rows (a warp each), empty rows, inputs among the terms, a
    // coefficient table beyond a block's shared copy; the domain exactly
    // and twice (zero padding).
    for rows in [1usize, 100, 3000, 40000] {
        let (m, z) = synthetic::mixed(rows, s ^ rows as u64);
        let id = format!("r1cs-mixed-{rows}");
        check(&id, &m, &z, domain(&m), &id);
        check(&id, &m, &z, 2 * domain(&m), &format!("{id} padded"));
    }
    // The PoRep-like shape at 2^20 rows (a 2 KiB PoRep partition is 2^22).
    let before = e.resident_bytes();
    let (m, z) = synthetic::porep_like(1_000_000, 328, s);
    check("r1cs-porep", &m, &z, domain(&m), "porep-like 2^20");
    let flat = Flattened::new(&m, cuzk_kernels::cuda::r1cs::LONG_ROW).unwrap();
    // Only those on the device count in its resident bytes (the host's
    // copy keeps its coefficients and long rows there: a few KB), and the
    // host's in the pinned bytes.
    let resident = e.resident_bytes() - before;
    assert!(resident >= flat.device_bytes() && resident < flat.device_bytes() + (1 << 20), "{resident}");
    assert!(e.pinned_bytes() >= flat.ends_and_terms_bytes(), "the host's matrices count in the pinned bytes");
    e.evict("r1cs-porep-host");
    // A row that does not hold: the first one, as the host finds it.
    let mut bad = z.clone();
    let w = |i: usize| 328 + 250_000 + i;
    bad[w(777_777)] += Fr::from(1u64);
    bad[w(123_457)] += Fr::from(1u64);
    assert!(matches!(m.evaluate(&bad, domain(&m)), Err(KernelError::Unsatisfied(123_457))));
    let found = device_abc(e, ("r1cs-porep", Place::Device), &m, &bad, domain(&m));
    assert!(matches!(found, Err(KernelError::Unsatisfied(123_457))), "found {:?}", found.err());
    // Other matrices under the same id are noticed and uploaded.
    let (other, oz) = synthetic::mixed(5000, s ^ 5);
    check("r1cs-porep", &other, &oz, domain(&other), "replaced under the same id");
    e.evict("r1cs-porep");
    assert!(e.resident_bytes() < before + flat.device_bytes(), "evicted");
    eprintln!("device evaluation of compiled matrices equals the host's: OK");
}

#[test]
#[ignore]
fn gpu_prove_start_deferred_equals_host_abc() {
    let e = gpu_or_skip!("gpu_prove_start_deferred_equals_host_abc");
    let s = seed();
    let cpu = CpuEngine::new(0).unwrap();
    let steps = 20000;
    let circuit = chain_circuit(steps, s);
    let compact = circuit.compact().unwrap();
    let mut r = inputs::rng(s ^ 3);
    let instance = |x| -> Box<dyn CircuitInstance> { Box::new(ChainInstance { steps, x }) };
    for (what, c) in [("full", &circuit), ("compact", &compact)] {
        let z = groth16::assign(c, instance(Fr::rand(&mut r))).unwrap();
        assert!(e.evaluates_on_device() && !cpu.evaluates_on_device());
        let host = e.prove_start(c, groth16::evaluate(c, z.clone()).unwrap()).unwrap();
        let deferred = groth16::defer(c, z.clone()).unwrap();
        assert_eq!(deferred.abc_bytes(), 0);
        let got = e.prove_start(c, deferred).unwrap();
        assert_same_start(&got, &host, what);
        assert_eq!(got.freed_bytes, 0, "{what}: no host a, b, c to free");
        let phases: Vec<_> = got.phases.iter().map(|p| p.phase).collect();
        assert!(phases.contains(&"evaluate"), "{what}: phases {phases:?}");
        // The CPU engine evaluates a deferred partition on the host.
        let on_cpu = cpu.prove_start(c, groth16::defer(c, z.clone()).unwrap()).unwrap();
        assert_eq!(on_cpu.a_acc.into_affine(), host.a_acc.into_affine(), "{what}: CPU");
        assert_eq!(on_cpu.h_acc.into_affine(), host.h_acc.into_affine(), "{what}: CPU");
        let (rr, ss) = (Fr::rand(&mut r), Fr::rand(&mut r));
        let [pg, ph] = [got, host].map(|o| groth16::prove_finish(c, o, rr, ss).unwrap().0);
        assert_eq!(pg, ph, "{what}: the deferred proof equals the host-evaluated one");
        let pvk = ark_groth16::prepare_verifying_key(c.vk());
        let verify = ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof;
        assert!(verify(&pvk, &pg, &z[1..c.num_inputs]).unwrap(), "{what}: verifies");
        // A witness that breaks a row fails as the host's evaluation does:
        // a variable A's middle row reads (a fixed index may be one the
        // compact circuit no longer constrains).
        let rows = c.matrices.num_constraints();
        let read = (rows / 2..rows)
            .find_map(|i| c.matrices.row(0, i).map(|(_, var)| var).find(|&var| var >= c.num_inputs))
            .expect("A reads an aux variable");
        let mut bad = z;
        bad[read] += Fr::from(1u64);
        let row = match groth16::evaluate(c, bad.clone()) {
            Err(KernelError::Unsatisfied(row)) => row,
            other => panic!("{what}: the host found {:?}", other.err()),
        };
        let failed = e.prove_start(c, groth16::defer(c, bad).unwrap());
        assert!(matches!(failed, Err(KernelError::Unsatisfied(r)) if r == row), "{what}: {:?}", failed.err());
    }
    // In a shared pass over a streamed key, the partition that does not
    // hold fails alone; the other's output is whole. The budget holds the
    // NTT tables (4.3 MB) and the compiled matrices (2.3 MB), not the key
    // (25 MB).
    let streamed = &pass_engine(8 << 20);
    let good = groth16::assign(&circuit, instance(Fr::rand(&mut r))).unwrap();
    let mut bad = groth16::assign(&circuit, instance(Fr::rand(&mut r))).unwrap();
    bad[7001] += Fr::from(1u64);
    let Err(KernelError::Unsatisfied(row)) = groth16::evaluate(&circuit, bad.clone()) else {
        panic!("the host finds the broken row")
    };
    let before = streamed.pass_counts();
    let chain = &circuit;
    let (ok, failed) = std::thread::scope(|sc| {
        let call = |z: Vec<Fr>| {
            let syn = groth16::defer(chain, z).unwrap();
            sc.spawn(move || streamed.prove_start(chain, syn))
        };
        let (g, b) = (call(good.clone()), call(bad));
        (g.join().unwrap(), b.join().unwrap())
    });
    let after = streamed.pass_counts();
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 2), "one pass of both");
    assert!(matches!(failed, Err(KernelError::Unsatisfied(r)) if r == row));
    let want = e.prove_start(&circuit, groth16::evaluate(&circuit, good).unwrap()).unwrap();
    assert_same_start(&ok.unwrap(), &want, "the good partition of the pass");
    eprintln!("prove_start from the assignment alone equals host a, b, c; bad rows fail alone: OK");
}

/// An engine on which every key of these tests streams (its resident
/// budget holds their NTT tables and compiled matrices, not their keys, in
/// chunks of 3000 points: several per query, the last partial) and calls
/// share passes of two, whose first call waits up to a minute for the
/// second.
fn pass_engine(resident_budget: u64) -> CudaEngine {
    let options = CudaOptions {
        resident_budget: Some(resident_budget),
        stream_chunk: 3000,
        pass_partitions: 2,
        pass_wait: Duration::from_secs(60),
        ..Default::default()
    };
    CudaEngine::new(0, options).unwrap()
}

/// The five accumulators of two prove_starts are the same group elements.
fn assert_same_start(got: &ProveStartOutput, want: &ProveStartOutput, what: &str) {
    let pairs = [
        ("h_acc", got.h_acc, want.h_acc),
        ("l_acc", got.l_acc, want.l_acc),
        ("a_acc", got.a_acc, want.a_acc),
        ("b1_acc", got.b1_acc, want.b1_acc),
    ];
    for (name, g, w) in pairs {
        assert_eq!(g.into_affine(), w.into_affine(), "{what} {name}");
    }
    let b2 = |o: &ProveStartOutput| o.b2_acc.map(|b| b.into_affine());
    assert_eq!(b2(got), b2(want), "{what} b2_acc");
}

#[test]
#[ignore]
fn gpu_concurrent_prove_start() {
    let e = gpu_or_skip!("gpu_concurrent_prove_start");
    let s = seed();
    // Two workers share the engine, as a device's workers do: each call
    // leases its own workspace, and pooled buffers pass between calls. The
    // second worker's calls are urgent (rank 0, the greatest stream
    // priority), as a WinningPoSt beside a PoRep.
    let steps = 20000;
    let circuit = chain_circuit(steps, s);
    let mut r = inputs::rng(s ^ 31);
    let xs: Vec<Fr> = (0..6).map(|_| Fr::rand(&mut r)).collect();
    let syn = |x: Fr| groth16::synthesize(&circuit, Box::new(ChainInstance { steps, x })).unwrap();
    let cpu = CpuEngine::new(0).unwrap();
    let want: Vec<_> = xs.iter().map(|&x| cpu.prove_start(&circuit, syn(x)).unwrap()).collect();
    let got: Vec<Vec<_>> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (syn, circuit, xs) = (&syn, &circuit, &xs);
                sc.spawn(move || {
                    let urgency = [Urgency::Normal, Urgency::Urgent][w];
                    (w..xs.len())
                        .step_by(2)
                        .map(|i| (i, e.prove_start_as(circuit, syn(xs[i]), urgency).unwrap()))
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, g) in got.into_iter().flatten() {
        let c = &want[i];
        assert_eq!(g.a_acc.into_affine(), c.a_acc.into_affine(), "a_acc of job {i}");
        assert_eq!(g.b1_acc.into_affine(), c.b1_acc.into_affine(), "b1_acc of job {i}");
        assert_eq!(g.l_acc.into_affine(), c.l_acc.into_affine(), "l_acc of job {i}");
        assert_eq!(g.h_acc.into_affine(), c.h_acc.into_affine(), "h_acc of job {i}");
        let b2 = G2Projective::msm_bigint(&circuit.pk.b_g2_query[1..], &assignment_bigints(&c.assignment));
        assert_eq!(g.b2_acc.unwrap().into_affine(), b2.into_affine(), "b2_acc of job {i}");
    }
    eprintln!("6 prove_starts on 2 threads sharing the engine, normal and urgent, equal the CPU's: OK");
}

/// A small real circuit: a chain v_{i+1} = v_i^2 + i with v_0 secret and the
/// last value public, plus boolean wires (many 0/1 witness values, which pile
/// into one bucket) and a repeated constant wire.
struct ChainInstance {
    /// Squarings in the chain.
    steps: usize,
    /// The secret start value.
    x: Fr,
}

impl ChainInstance {
    fn output(&self) -> Fr {
        let mut v = self.x;
        for i in 0..self.steps {
            v = v * v + Fr::from(i as u64);
        }
        v
    }
}

impl CircuitInstance for ChainInstance {
    fn public_inputs(&self) -> Vec<Fr> {
        vec![self.output()]
    }

    fn generate(self: Box<Self>, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let out = cs.new_input_variable(|| Ok(self.output()))?;
        let mut v_val = self.x;
        let mut v = cs.new_witness_variable(|| Ok(v_val))?;
        for i in 0..self.steps {
            let next_val = v_val * v_val + Fr::from(i as u64);
            let next = if i + 1 == self.steps { out } else { cs.new_witness_variable(|| Ok(next_val))? };
            cs.enforce_constraint(lc!() + v, lc!() + v, lc!() + next - (Fr::from(i as u64), Variable::One))?;
            // a boolean wire: b * (1 - b) = 0
            let bit = next_val.into_bigint().0[0] & 1;
            let b = cs.new_witness_variable(|| Ok(Fr::from(bit)))?;
            cs.enforce_constraint(lc!() + b, lc!() + Variable::One - b, lc!())?;
            v = next;
            v_val = next_val;
        }
        Ok(())
    }
}

/// The points with the identity put at the given indices (edge cases).
fn with_identity(mut pts: Vec<G1Affine>, at: &[usize]) -> Vec<G1Affine> {
    for &i in at {
        if i < pts.len() {
            pts[i] = G1Affine::zero();
        }
    }
    pts
}

fn minus_one() -> Fr {
    -Fr::from(1u64)
}

/// A key's queries served from memory range by range, as a parameter file
/// serves them (`QueryFile`), failing every read when `broken`.
struct HeldQueries {
    pk: ark_groth16::ProvingKey<ark_bls12_381::Bls12_381>,
    broken: bool,
}

impl KeySource for HeldQueries {
    fn len(&self, q: Query) -> usize {
        KeyBases::len(&self.pk, q)
    }
    fn b2_len(&self) -> usize {
        self.pk.b_g2_query.len()
    }
    fn g1(&self, q: Query, start: usize, out: &mut [G1Affine]) -> Result<(), KernelError> {
        if self.broken {
            return Err(KernelError::Key("held queries: unreadable".into()));
        }
        let query = match q {
            Query::A => &self.pk.a_query,
            Query::B1 => &self.pk.b_g1_query,
            Query::L => &self.pk.l_query,
            Query::H => &self.pk.h_query,
        };
        out.copy_from_slice(&query[start..start + out.len()]);
        Ok(())
    }
    fn g2(&self, start: usize, out: &mut [G2Affine]) -> Result<(), KernelError> {
        if self.broken {
            return Err(KernelError::Key("held queries: unreadable".into()));
        }
        out.copy_from_slice(&self.pk.b_g2_query[start..start + out.len()]);
        Ok(())
    }
}

/// `circuit` with its queries left in a source (its first points kept, as
/// the daemon keeps a 32 GiB key's in its file), under `id`.
fn from_source(circuit: &PreparedCircuit, id: &str, broken: bool) -> PreparedCircuit {
    let mut head = circuit.pk.clone();
    head.a_query.truncate(1);
    head.b_g1_query.truncate(1);
    head.b_g2_query.truncate(1);
    head.h_query.clear();
    head.l_query.clear();
    let source = std::sync::Arc::new(HeldQueries { pk: circuit.pk.clone(), broken });
    PreparedCircuit::sparse_from_source(
        id,
        head,
        source,
        circuit.matrices.clone(),
        circuit.num_constraints,
        circuit.a_selection.clone(),
        circuit.b_selection.clone(),
    )
    .unwrap()
}

/// A key read range by range from a source proves what the key held on the
/// host proves: resident, streamed through pinned memory, with B's G2 MSM
/// left to the finalizer (which then reads that query from the source); a
/// source that cannot be read fails the call with its reason.
#[test]
#[ignore]
fn gpu_key_source_equals_held_key() {
    let e = gpu_or_skip!("gpu_key_source_equals_held_key");
    let s = seed();
    let steps = 20000;
    let held = chain_circuit(steps, s).compact().unwrap();
    let mut r = inputs::rng(s ^ 11);
    let z = groth16::assign(&held, Box::new(ChainInstance { steps, x: Fr::rand(&mut r) })).unwrap();
    let (rr, ss) = (Fr::rand(&mut r), Fr::rand(&mut r));
    assert!(e.reads_key_by_range());
    // A resident budget of 8 MiB streams the 25 MB key; no pass to wait for.
    let streamed = &CudaEngine::new(
        0,
        CudaOptions { resident_budget: Some(8 << 20), stream_chunk: 3000, ..Default::default() },
    )
    .unwrap();
    let no_g2 = &CudaEngine::new(0, CudaOptions { g2_on_gpu: false, ..Default::default() }).unwrap();
    assert!(!no_g2.reads_key_by_range(), "B's G2 query would be read whole per proof");
    for (what, engine) in [("resident", e), ("streamed", streamed), ("G2 in the finalizer", no_g2)] {
        let source = from_source(&held, &format!("chain-source-{what}"), false);
        assert!(source.resident_bytes() < held.resident_bytes() / 4, "{what}: the host holds the head only");
        // A preload's warm takes the key onto the device (or into pinned
        // memory) before the first call.
        let before = (engine.resident_bytes(), engine.pinned_bytes());
        engine.warm(&source, Urgency::Normal).unwrap();
        assert_ne!((engine.resident_bytes(), engine.pinned_bytes()), before, "{what}: warmed");
        let want = engine.prove_start(&held, groth16::defer(&held, z.clone()).unwrap()).unwrap();
        let got = engine.prove_start(&source, groth16::defer(&source, z.clone()).unwrap()).unwrap();
        assert_same_start(&got, &want, what);
        let pg = groth16::prove_finish(&source, got, rr, ss).unwrap().0;
        let pw = groth16::prove_finish(&held, want, rr, ss).unwrap().0;
        assert_eq!(pg, pw, "{what}: the same proof");
        let pvk = ark_groth16::prepare_verifying_key(source.vk());
        let verify = ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof;
        assert!(verify(&pvk, &pg, &z[1..held.num_inputs]).unwrap(), "{what}: verifies");
    }
    let broken = from_source(&held, "chain-source-broken", true);
    assert!(
        matches!(e.warm(&broken, Urgency::Normal), Err(KernelError::Key(_))),
        "a warm reads the source too"
    );
    let failed = e.prove_start(&broken, groth16::defer(&broken, z).unwrap());
    assert!(
        matches!(failed, Err(KernelError::Key(ref why)) if why.contains("unreadable")),
        "{:?}",
        failed.err()
    );
    eprintln!("a key read by range from its source proves what the held key proves: OK");
}
