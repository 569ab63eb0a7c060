//! The run of `cuzk-bench gpu`: the device, the random bases, G1 and G2
//! MSMs with their data already on the device (window and level-0 sweeps,
//! 0/1-heavy scalars with the split and without), NTTs, and Groth16
//! partitions (prove_start + prove_finish) on the GPU against the CPU
//! engine; then the PoRep-shaped sections (porep.rs, pass.rs, urgency.rs).
//!
//! Inputs are random and fresh each run. MSM bases are random curve points
//! (`cuzk_kernels::cuda::inputs`); partitions use a fabricated proving key
//! with random bases and random a, b, c, assignment (partitions.rs): the
//! work is a real partition's, the proof is not valid (correctness is the
//! GPU tests' job, kernels/tests/gpu_correctness.rs).

use std::time::Instant;

use cuzk_kernels::cpu::CpuEngine;
use cuzk_kernels::cuda::gpu::{DBuf, DevFr};
use cuzk_kernels::cuda::inputs;
use cuzk_kernels::cuda::msm::{MsmGroup, ZeroOne, G1, G2};
use cuzk_kernels::cuda::{detect_devices, CudaEngine, CudaOptions};
use cuzk_kernels::groth16::{prove_finish, ProveStartEngine};
use cuzk_kernels::{DeviceError, Fr, KernelError};

use super::args::GpuBenchArgs;
use super::partitions::{self, PorepInputs};
use super::table::{line, median};
use super::{pass, porep, urgency};

fn time_ms<T>(f: impl FnOnce() -> Result<T, KernelError>) -> Result<(f64, T), KernelError> {
    let t = Instant::now();
    let out = f()?;
    Ok((t.elapsed().as_secs_f64() * 1e3, out))
}

/// Median time of `runs` MSMs of the first n bases and scalars, after one
/// warm-up.
fn time_msm<G: MsmGroup>(
    engine: &CudaEngine,
    bases: &DBuf<G::Affine>,
    scalars: &DBuf<DevFr>,
    n: usize,
    rule: ZeroOne,
    runs: usize,
) -> Result<f64, KernelError> {
    engine.msm_device::<G>(bases, scalars, n, rule)?;
    let mut ts = Vec::new();
    for _ in 0..runs {
        ts.push(time_ms(|| engine.msm_device::<G>(bases, scalars, n, rule))?.0);
    }
    Ok(median(ts))
}

/// Runs every section the arguments ask for; returns the result tables
/// (markdown), which are also printed on stderr as they come.
pub(super) fn run(args: &GpuBenchArgs) -> Result<String, KernelError> {
    let mut out = String::new();
    let devices = detect_devices()?;
    let dev = devices.get(args.device).ok_or_else(|| {
        DeviceError::engine("choosing the device", format!("no CUDA device {}", args.device))
    })?;
    let threads = rayon::current_num_threads();
    line(
        &mut out,
        format!(
            "device {}: {} ({} GiB), host threads {threads}",
            dev.ordinal,
            dev.name,
            dev.total_memory >> 30
        ),
    );
    let engine = CudaEngine::new(args.device, CudaOptions::default())?;
    let seed = inputs::fresh_seed();
    let runs = args.runs.max(1);

    let max_g1 = (args.g1.0.iter())
        .chain(args.partition.0.iter())
        .chain(args.zero_one.0.iter())
        .copied()
        .max()
        .unwrap_or(16);
    let max_g2 = (args.g2.0.iter()).chain(args.partition.0.iter()).copied().max().unwrap_or(16);
    // PoRep-shaped partitions tile pools of 2^20 points (partitions.rs).
    let tiled = !args.porep.0.is_empty() || args.saturate.is_some();
    let (max_g1, max_g2) = if tiled { (max_g1.max(20), max_g2.max(20)) } else { (max_g1, max_g2) };
    let t = Instant::now();
    let g1_pool = inputs::random_g1(1 << max_g1, seed);
    let g2_pool = inputs::random_g2(1 << max_g2, seed ^ 1);
    line(
        &mut out,
        format!("random bases: 2^{max_g1} G1 + 2^{max_g2} G2 in {:.1} s", t.elapsed().as_secs_f64()),
    );

    line(&mut out, "| op | size | median ms | runs |".into());
    line(&mut out, "|---|---|---|---|".into());
    // G1 MSM, data on the device
    if !args.g1.0.is_empty() {
        let maxn = 1usize << args.g1.0.iter().max().unwrap();
        let bases = engine.upload_g1(&g1_pool[..maxn])?;
        let host = inputs::random_fr(maxn, seed ^ 2);
        let (ms, scalars) = time_ms(|| engine.upload_fr(&host))?;
        let gbs = (maxn * 32) as f64 / ms / 1e6;
        let k = maxn.trailing_zeros();
        line(&mut out, format!("| upload Fr, pinned staging ({gbs:.1} GB/s) | 2^{k} | {ms:.2} | 1 |"));
        for &k in &args.g1.0 {
            let ms = time_msm::<G1>(&engine, &bases, &scalars, 1 << k, ZeroOne::Auto, runs)?;
            line(&mut out, format!("| G1 MSM | 2^{k} | {ms:.2} | {runs} |"));
        }
        // Sweeps at the largest size (maxn = 2^k): window widths, level-0
        // item lengths.
        let sweeps = [("CUZK_MSM_C", "c", &args.sweep_c.0), ("CUZK_MSM_K0", "k0", &args.sweep_k0.0)];
        for (var, name, values) in sweeps {
            for &v in values {
                std::env::set_var(var, v.to_string());
                let r = time_msm::<G1>(&engine, &bases, &scalars, maxn, ZeroOne::Auto, 3);
                std::env::remove_var(var);
                match r {
                    Ok(ms) => line(&mut out, format!("| G1 MSM {name}={v} | 2^{k} | {ms:.2} | 3 |")),
                    Err(e) => line(&mut out, format!("| G1 MSM {name}={v} | 2^{k} | error: {e} | |")),
                }
            }
        }
    }
    // G2 MSM
    if !args.g2.0.is_empty() {
        let maxn = 1usize << args.g2.0.iter().max().unwrap();
        let bases = engine.upload_g2(&g2_pool[..maxn])?;
        let scalars = engine.upload_fr(&inputs::random_fr(maxn, seed ^ 3))?;
        for &k in &args.g2.0 {
            let r = runs.min(3);
            let ms = time_msm::<G2>(&engine, &bases, &scalars, 1 << k, ZeroOne::Auto, r)?;
            line(&mut out, format!("| G2 MSM | 2^{k} | {ms:.2} | {r} |"));
        }
    }
    // 0/1-heavy MSMs: the split against the plain path, same inputs.
    if let Some(&top) = args.zero_one.0.iter().max() {
        let pct = args.bits_pct;
        let scalars = engine.upload_fr(&inputs::mostly_bits(1 << top, pct, seed ^ 5))?;
        let g1 = engine.upload_g1(&g1_pool[..1 << top.min(max_g1)])?;
        let g2_top = args.g2.0.iter().max().copied().unwrap_or(0);
        let g2 = engine.upload_g2(&g2_pool[..1 << top.min(g2_top).min(max_g2)])?;
        for &k in &args.zero_one.0 {
            let n = 1usize << k;
            let mut row = |group: &str, t: &dyn Fn(ZeroOne) -> Result<f64, KernelError>| {
                let (split, plain) = (t(ZeroOne::Auto)?, t(ZeroOne::Off)?);
                line(
                    &mut out,
                    format!(
                        "| {group} MSM {pct}% bits, split / plain (ratio) | 2^{k} | {split:.2} / {plain:.2} ({:.2}) | {runs} |",
                        split / plain
                    ),
                );
                Ok::<_, KernelError>(())
            };
            if k <= max_g1 {
                row("G1", &|rule| time_msm::<G1>(&engine, &g1, &scalars, n, rule, runs))?;
            }
            if k <= g2_top.min(max_g2) {
                let r = runs.min(3);
                row("G2", &|rule| time_msm::<G2>(&engine, &g2, &scalars, n, rule, r))?;
            }
        }
    }
    // NTT
    for &k in &args.ntt.0 {
        let n = 1usize << k;
        let data = engine.upload_fr(&inputs::random_fr(n, seed ^ 4))?;
        let scratch = engine.upload_fr(&vec![Fr::from(0u64); n])?;
        engine.ntt_device_with(&data, &scratch, n, false, false)?;
        for (name, inv, coset) in [("NTT", false, false), ("iNTT", true, false), ("coset NTT", false, true)] {
            // Host wall clock around the call, and the passes alone on the
            // stream (CUDA events, as sppark's tool measures its NTT).
            let (mut wall, mut gpu) = (Vec::new(), Vec::new());
            for _ in 0..runs.max(5) {
                let (ms, on_stream) = time_ms(|| engine.ntt_device_with(&data, &scratch, n, inv, coset))?;
                wall.push(ms);
                gpu.push(on_stream);
            }
            let r = runs.max(5);
            line(&mut out, format!("| {name} | 2^{k} | {:.3} | {r} |", median(wall)));
            line(&mut out, format!("| {name}, CUDA events | 2^{k} | {:.3} | {r} |", median(gpu)));
        }
    }
    // partitions
    if !args.partition.0.is_empty() {
        let cpu = CpuEngine::new(0)?;
        let engine_g2cpu =
            CudaEngine::new(args.device, CudaOptions { g2_on_gpu: false, ..Default::default() })?;
        let engine_unpooled = if args.pool_compare {
            Some(CudaEngine::new(args.device, CudaOptions { pool: false, ..Default::default() })?)
        } else {
            None
        };
        let mut pool_rows = Vec::new();
        line(&mut out, String::new());
        line(&mut out, "| partition 2^k | GPU start+finish ms (G2 on GPU) | GPU phases (last run) | GPU, G2 on CPU ms | CPU engine ms | speedup (G2 on GPU) |".into());
        line(&mut out, "|---|---|---|---|---|---|".into());
        for &k in &args.partition.0 {
            let (circuit, make) =
                partitions::fabricated_partition(k, &g1_pool, &g2_pool, args.partition_bits_pct);
            let (r, s) = (Fr::from(3u64), Fr::from(5u64));
            let prove = |e: &dyn ProveStartEngine, i: u64| -> Result<(f64, String), KernelError> {
                let syn = make(seed ^ i);
                let t = Instant::now();
                let st = e.prove_start(&circuit, syn)?;
                let phases: Vec<String> = st
                    .phases
                    .iter()
                    .map(|p| format!("{} {:.1}", p.phase, p.duration.as_secs_f64() * 1e3))
                    .collect();
                let (_proof, fin) = prove_finish(&circuit, st, r, s)?;
                let fins: Vec<String> = fin
                    .iter()
                    .map(|p| format!("fin:{} {:.1}", p.phase, p.duration.as_secs_f64() * 1e3))
                    .collect();
                Ok((t.elapsed().as_secs_f64() * 1e3, format!("{} {}", phases.join(", "), fins.join(", "))))
            };
            prove(&engine, 100)?; // upload bases, tables; warm-up
            let mut ts = Vec::new();
            let mut ph = String::new();
            for i in 0..runs.min(3) {
                let (ms, p) = prove(&engine, i as u64)?;
                ts.push(ms);
                ph = p;
            }
            let gpu_ms = median(ts);
            let g2cpu_ms = if k <= args.cpu_max_log {
                prove(&engine_g2cpu, 200)?;
                let ms = prove(&engine_g2cpu, 201)?.0;
                engine_g2cpu.evict(&circuit.circuit_id);
                Some(ms)
            } else {
                None
            };
            let cpu_ms = if k <= args.cpu_max_log { Some(prove(&cpu, 300)?.0) } else { None };
            if let Some(unpooled) = &engine_unpooled {
                // Throughput: `workers` threads share one engine, each proving
                // `per` partitions synthesized beforehand.
                let per = runs.min(3);
                let throughput = |e: &CudaEngine, workers: usize| -> Result<f64, KernelError> {
                    let jobs: Vec<Vec<_>> = (0..workers)
                        .map(|w| (0..per).map(|i| make(seed ^ (1000 + w * per + i) as u64)).collect())
                        .collect();
                    let t = Instant::now();
                    std::thread::scope(|sc| {
                        let handles: Vec<_> = jobs
                            .into_iter()
                            .map(|syns| {
                                sc.spawn(|| -> Result<(), KernelError> {
                                    for syn in syns {
                                        let st = e.prove_start(&circuit, syn)?;
                                        prove_finish(&circuit, st, r, s)?;
                                    }
                                    Ok(())
                                })
                            })
                            .collect();
                        handles.into_iter().try_for_each(|h| h.join().expect("a worker thread"))
                    })?;
                    Ok(t.elapsed().as_secs_f64() * 1e3 / (workers * per) as f64)
                };
                prove(unpooled, 400)?; // its own key upload; warm-up
                for workers in [1, 2] {
                    let on = throughput(&engine, workers)?;
                    let off = throughput(unpooled, workers)?;
                    pool_rows.push(format!("| 2^{k} | {workers} | {on:.1} | {off:.1} | {:.2} |", on / off));
                }
                unpooled.evict(&circuit.circuit_id);
            }
            engine.evict(&circuit.circuit_id);
            line(
                &mut out,
                format!(
                    "| 2^{k} | {gpu_ms:.1} | {ph} | {} | {} | {} |",
                    g2cpu_ms.map_or("-".into(), |c| format!("{c:.1}")),
                    cpu_ms.map_or("-".into(), |c| format!("{c:.0}")),
                    cpu_ms.map_or("-".into(), |c| format!("{:.1}x", c / gpu_ms))
                ),
            );
        }
        if !pool_rows.is_empty() {
            line(&mut out, String::new());
            line(
                &mut out,
                "| partition 2^k | workers | ms per partition, pool on | pool off | on / off |".into(),
            );
            line(&mut out, "|---|---|---|---|---|".into());
            for row in pool_rows {
                line(&mut out, row);
            }
        }
    }
    let (p1, p2) = (&g1_pool[..1 << 20.min(max_g1)], &g2_pool[..1 << 20.min(max_g2)]);
    let shaped = PorepInputs { args, g1_pool: p1, g2_pool: p2, seed };
    porep::porep_rows(&shaped, &mut out)?;
    pass::pass_rows(&shaped, &mut out)?;
    porep::saturate_rows(&shaped, &mut out)?;
    urgency::urgency_rows(&shaped, &mut out)?;
    Ok(out)
}
