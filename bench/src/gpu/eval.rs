//! `cuzk-bench gpu --eval`: the CUDA engine's evaluation of compiled
//! matrices (kernels/cuda/r1cs.cuh, the a, b and c of a deferred partition)
//! on synthetic matrices of 32 GiB PoRep's shape
//! (`cuzk_kernels::synthetic::porep_like`: 130,278,541 rows at 2^27, 328
//! inputs, 5.5 terms per constraint, the rows in the same proportion at
//! smaller domains), against the bytes it moves (`cuda::r1cs::traffic` at
//! the H200's 4 TB/s: the prediction) and the host's evaluation on every
//! core; with the matrices on the device and read in place from pinned host
//! memory (the device-memory plan's choice on cards too small for them). Kept apart from the other GPU benchmarks: only the engine's public
//! API and the kernels' synthetic matrices.

use std::fmt::Write;
use std::time::Instant;

use cuzk_kernels::cuda::gpu::{DBuf, DevFr};
use cuzk_kernels::cuda::{r1cs, CudaEngine, CudaOptions};
use cuzk_kernels::device_plan::Place;
use cuzk_kernels::{synthetic, KernelError};

/// 32 GiB PoRep's rows (constraints without the input constraints) and
/// inputs, in its domain of 2^27.
const POREP_ROWS: u64 = 130_278_541;
const POREP_INPUTS: usize = 328;
/// The device's memory bandwidth the prediction assumes (H200, bytes/s).
const BANDWIDTH: f64 = 4e12;

/// Two table rows per log2 domain in `logs`, the matrices on the device and
/// on the host: the evaluation's median of `runs` (CUDA events) after the
/// first call, which also uploads (or writes) the matrices; the host's
/// evaluation for domains up to 2^`cpu_max_log`.
pub fn run(device: usize, logs: &[u32], runs: usize, cpu_max_log: u32) -> Result<String, KernelError> {
    let engine = CudaEngine::new(device, CudaOptions::default())?;
    let mut out = String::from(
        "\n| eval 2^k | matrices | rows | terms | device MB | generate s | matrices upload ms | assignment upload ms | eval ms | predicted ms | GB/s | host ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for &log in logs {
        let n = 1usize << log;
        let rows = ((POREP_ROWS * n as u64) >> 27) as usize;
        let t = Instant::now();
        let (matrices, z) = synthetic::porep_like(rows, POREP_INPUTS, u64::from(log));
        let generate = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let dz = engine.upload_fr(&z)?;
        let upload_z = t.elapsed().as_secs_f64() * 1e3;
        let abc: [DBuf<DevFr>; 3] = [DBuf::new(n)?, DBuf::new(n)?, DBuf::new(n)?];
        let host = if log <= cpu_max_log {
            let t = Instant::now();
            matrices.evaluate(&z, n)?;
            format!("{:.1}", t.elapsed().as_secs_f64() * 1e3)
        } else {
            "-".into()
        };
        let terms: usize = (0..3).map(|k| matrices.num_terms(k)).sum();
        let bytes = r1cs::traffic(&matrices, n) as f64;
        for place in [Place::Device, Place::Host] {
            let id = format!("eval-bench-2^{log}-{place:?}");
            let before = engine.resident_bytes();
            let t = Instant::now();
            let first = engine.evaluate_device(&id, &matrices, place, &dz, &abc, n)?;
            let upload_m = t.elapsed().as_secs_f64() * 1e3 - first;
            let device_mb = (engine.resident_bytes() - before) as f64 / 1e6;
            let mut ms: Vec<f64> = (0..runs.max(1))
                .map(|_| engine.evaluate_device(&id, &matrices, place, &dz, &abc, n))
                .collect::<Result<_, _>>()?;
            ms.sort_by(f64::total_cmp);
            let eval = ms[ms.len() / 2];
            let row = format!(
                "| {log} | {place:?} | {rows} | {terms} | {device_mb:.0} | {generate:.1} | {upload_m:.1} | {upload_z:.1} | {eval:.3} | {:.3} | {:.0} | {host} |",
                bytes / BANDWIDTH * 1e3,
                bytes / (eval / 1e3) / 1e9,
            );
            eprintln!("{row}");
            let _ = writeln!(out, "{row}");
            engine.evict(&id);
        }
    }
    Ok(out)
}
