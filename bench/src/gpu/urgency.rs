//! The benchmark's critical-call latency (docs/api.md, `critical`): how
//! long a WinningPoSt-sized partition takes on a device that two workers
//! keep busy with PoRep partitions, sent as an urgent call (rank 0, the
//! greatest stream priority) and as a normal one, against the same call on
//! the idle device. A late WinningPoSt loses its block reward, which is
//! what the urgent rank is for; this is where it is measured, not assumed.
//! The stand-in is a PoRep-shaped partition scaled to the critical job's
//! domain (the 32 GiB WinningPoSt's is 2^19): the same kinds of work at
//! that size, fabricated inputs (porep.rs says what that means).

use std::sync::Mutex;
use std::time::Duration;

use cuzk_kernels::cuda::{CudaEngine, CudaOptions};
use cuzk_kernels::groth16::Urgency;
use cuzk_kernels::KernelError;

use super::partitions::PorepInputs;
use super::porep::{prove_once, saturate_device};
use super::table::{line, median};

/// Pause before each injected call, so that the calls land at different
/// points of the running partitions.
const GAP: Duration = Duration::from_millis(150);
/// Calls timed on the idle device.
const IDLE_CALLS: usize = 7;

/// Rows for `args.urgent` against partitions of `args.saturate`
/// (both needed): median and worst latency, idle, then injected urgent and
/// normal.
pub(super) fn urgency_rows(inputs: &PorepInputs, out: &mut String) -> Result<(), KernelError> {
    let &PorepInputs { args, seed, .. } = inputs;
    let (Some(j), Some(k)) = (args.urgent, args.saturate) else {
        return Ok(());
    };
    let pct = args.porep_bits_pct;
    let (big, big_key, make_big) = inputs.partition(k);
    let (small, small_key, make_small) = inputs.partition(j);
    let engine = CudaEngine::new(args.device, CudaOptions::default())?;
    // Key uploads and warm-up of both shapes.
    prove_once(&engine, &big, &big_key, make_big(seed ^ 60), Urgency::Normal)?;
    prove_once(&engine, &small, &small_key, make_small(seed ^ 61), Urgency::Urgent)?;
    line(out, String::new());
    line(
        out,
        format!(
            "| critical call, PoRep-shaped 2^{j} ({pct}% bits), beside 2 workers on 2^{k} | calls | median ms | worst ms | median / idle |"
        ),
    );
    line(out, "|---|---|---|---|---|".into());
    let mut idle = Vec::new();
    for i in 0..IDLE_CALLS {
        let syn = make_small(seed ^ (70 + i as u64));
        idle.push(prove_once(&engine, &small, &small_key, syn, Urgency::Urgent)?.0);
    }
    let idle_median = median(idle.clone());
    let row = |out: &mut String, name: &str, ms: Vec<f64>| {
        let worst = ms.iter().copied().fold(0.0, f64::max);
        let n = ms.len();
        let m = if n > 0 { median(ms) } else { f64::NAN };
        line(out, format!("| {name} | {n} | {m:.1} | {worst:.1} | {:.2} |", m / idle_median));
    };
    row(out, "idle device", idle);
    for (name, urgency) in
        [("busy device, urgent", Urgency::Urgent), ("busy device, normal", Urgency::Normal)]
    {
        let times = Mutex::new(Vec::new());
        let failed = Mutex::new(None);
        let inject = |waiting: &dyn Fn() -> bool| {
            let mut i = 0u64;
            while waiting() {
                std::thread::sleep(GAP);
                let syn = make_small(seed ^ (100 + i));
                i += 1;
                match prove_once(&engine, &small, &small_key, syn, urgency) {
                    Ok((ms, _)) => times.lock().expect("times").push(ms),
                    Err(e) => {
                        *failed.lock().expect("failure") = Some(e);
                        return;
                    }
                }
            }
        };
        let per_worker = args.saturate_per_worker.max(1);
        saturate_device(&engine, &big, &big_key, &make_big, per_worker, seed, inject)?;
        if let Some(e) = failed.into_inner().expect("failure") {
            return Err(e);
        }
        row(out, name, times.into_inner().expect("times"));
    }
    Ok(())
}
