//! The setup's multiplications on the GPU (feature `cuda`), against the
//! CPU's, on a CUDA device: the device's fixed-base products equal arkworks'
//! for G1 and G2 (sizes 1, 2, 1000 and 2^16 + 3, with 0, 1 and r - 1 among
//! the scalars, and one batch boundary of the device's own), and the 2 KiB
//! WindowPoSt and WinningPoSt files the CUDA engine writes are byte for byte
//! the CPU engine's for the same seed. `#[ignore]`d: run with
//! `cargo test --release -p cuzk-filecoin --features cuda --test gpu_setup
//! -- --ignored`. Without a CUDA device each test prints SKIPPED and passes.
#![cfg(feature = "cuda")]

use std::sync::OnceLock;

use ark_bls12_381::{G1Projective, G2Projective};
use ark_ec::scalar_mul::BatchMulPreprocessing;
use ark_ec::PrimeGroup;
use ark_ff::UniformRand;
use cuzk_filecoin::gpu_setup::CudaFixedBase;
use cuzk_filecoin::setup::{generate_from_seed, CpuFixedBase, FixedBaseMul, Generate};
use cuzk_filecoin::Kind;
use cuzk_kernels::cuda::detect_devices;
use cuzk_kernels::cuda::fixed_base::BATCH;
use cuzk_kernels::Fr;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn device() -> Option<&'static CudaFixedBase> {
    static D: OnceLock<Option<CudaFixedBase>> = OnceLock::new();
    D.get_or_init(|| match detect_devices() {
        Ok(d) if !d.is_empty() => {
            eprintln!("GPU: {:?}", d[0]);
            Some(CudaFixedBase::new(0).expect("fixed-base multiplier on device 0"))
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
        match device() {
            Some(d) => d,
            None => {
                eprintln!("SKIPPED {}: no CUDA device", $name);
                return;
            }
        }
    };
}

fn rng() -> ChaCha20Rng {
    let s = rand::rngs::OsRng.next_u64();
    eprintln!("seed {s}");
    ChaCha20Rng::seed_from_u64(s)
}

/// n scalars, 0, 1 and r - 1 first and again at random places.
fn scalars(n: usize, rng: &mut ChaCha20Rng) -> Vec<Fr> {
    let special = [Fr::from(0u64), Fr::from(1u64), -Fr::from(1u64)];
    let mut s: Vec<Fr> = (0..n).map(|_| Fr::rand(rng)).collect();
    for (i, x) in special.iter().enumerate().take(n) {
        s[i] = *x;
    }
    for x in special.iter().cycle().take(n / 100) {
        let at = rng.next_u64() as usize % n;
        s[at] = *x;
    }
    s
}

#[test]
#[ignore]
fn gpu_fixed_base_equals_arkworks() {
    let d = gpu_or_skip!("gpu_fixed_base_equals_arkworks");
    let mut rng = rng();
    let g1 = BatchMulPreprocessing::new(G1Projective::generator(), 1 << 16);
    let g2 = BatchMulPreprocessing::new(G2Projective::generator(), 1 << 16);
    for n in [1, 2, 1000, (1 << 16) + 3] {
        let s = scalars(n, &mut rng);
        assert_eq!(d.g1(&s).unwrap(), g1.batch_mul(&s), "G1, {n} scalars");
        assert_eq!(d.g2(&s).unwrap(), g2.batch_mul(&s), "G2, {n} scalars");
    }
    // Past one device batch: the second batch's points land after the first's.
    let s = scalars(BATCH + 5, &mut rng);
    let got = d.g1(&s).unwrap();
    let tail = &s[BATCH - 2..];
    assert_eq!(&got[BATCH - 2..], &g1.batch_mul(tail)[..], "G1 across a batch boundary");
}

#[test]
#[ignore]
fn gpu_setup_writes_the_cpu_files() {
    let d = gpu_or_skip!("gpu_setup_writes_the_cpu_files");
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    let kinds = [Kind::WindowPost, Kind::WinningPost];
    let (cpu, gpu) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let started = std::time::Instant::now();
    let want =
        generate_from_seed(seed, &Generate::new(2048, &kinds, cpu.path()), &CpuFixedBase::default()).unwrap();
    eprintln!("CPU engine: {:.1?}", started.elapsed());
    let started = std::time::Instant::now();
    let got =
        generate_from_seed(seed, &Generate::new(2048, &kinds, gpu.path()), d as &dyn FixedBaseMul).unwrap();
    eprintln!("CUDA engine: {:.1?}", started.elapsed());
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.path.file_name(), g.path.file_name());
        let (wb, gb) = (std::fs::read(&w.path).unwrap(), std::fs::read(&g.path).unwrap());
        assert!(wb == gb, "{:?} differs ({} vs {} bytes)", w.path.file_name(), wb.len(), gb.len());
    }
}
