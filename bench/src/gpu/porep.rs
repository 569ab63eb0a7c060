//! The benchmark's PoRep-shaped partitions (issue 12, items 3, 4, 5 and 7):
//! a partition of Filecoin's 32 GiB PoRep shape (or that shape scaled to a
//! smaller domain) proved with its key resident and with the key streamed
//! under a small resident budget; and devices saturated by two workers each,
//! for the kernel-active fraction and the throughput of several devices
//! against one. Inputs from partitions.rs (`porep_shaped_partition`):
//! fabricated bases and witness, so the proofs are not valid; the work is a
//! real partition's.

use std::sync::Mutex;
use std::time::Instant;

use cuzk_kernels::cuda::{newly_covered, CudaEngine, CudaOptions};
use cuzk_kernels::groth16::{prove_finish, PreparedCircuit, ProveStartEngine, Synthesized, Urgency};
use cuzk_kernels::{Fr, KernelError};

use super::partitions::{PorepInputs, TiledKey};
use super::table::{line, median};

/// One partition from the synthesized a, b, c on the host to the finished
/// proof: ms, and prove_start's GPU phases.
pub(super) fn prove_once(
    engine: &CudaEngine,
    circuit: &PreparedCircuit,
    key: &TiledKey,
    syn: Synthesized,
    urgency: Urgency,
) -> Result<(f64, String), KernelError> {
    let t = Instant::now();
    let st = engine.prove_start_with(circuit, key, syn, urgency)?;
    let phases: Vec<String> =
        st.phases.iter().map(|p| format!("{} {:.0}", p.phase, p.duration.as_secs_f64() * 1e3)).collect();
    prove_finish(circuit, st, Fr::from(3u64), Fr::from(5u64))?;
    Ok((t.elapsed().as_secs_f64() * 1e3, phases.join(", ")))
}

/// PoRep-shaped partitions at each of `args.porep`: key resident, then
/// streamed with a resident budget of `args.stream_budget_gib`.
pub(super) fn porep_rows(inputs: &PorepInputs, out: &mut String) -> Result<(), KernelError> {
    let &PorepInputs { args, seed, .. } = inputs;
    if args.porep.0.is_empty() {
        return Ok(());
    }
    let runs = args.runs.clamp(1, 3);
    line(out, String::new());
    line(
        out,
        format!(
            "| PoRep-shaped partition ({}% bits) | key | setup s | start+finish ms (median of {runs}) | GPU phases ms (last run) |",
            args.porep_bits_pct
        ),
    );
    line(out, "|---|---|---|---|---|".into());
    for &k in &args.porep.0 {
        let (circuit, key, make) = inputs.partition(k);
        let budget = args.stream_budget_gib << 30;
        let mut medians = Vec::new();
        for (name, resident_budget) in [("resident", None), ("streamed", Some(budget))] {
            let engine = CudaEngine::new(args.device, CudaOptions { resident_budget, ..Default::default() })?;
            // The first call uploads (or pins) the key: the setup column.
            let t = Instant::now();
            prove_once(&engine, &circuit, &key, make(seed ^ 900), Urgency::Normal)?;
            let setup = t.elapsed().as_secs_f64();
            let mut ts = Vec::new();
            let mut phases = String::new();
            for i in 0..runs {
                let syn = make(seed ^ (901 + i as u64));
                let (ms, p) = prove_once(&engine, &circuit, &key, syn, Urgency::Normal)?;
                ts.push(ms);
                phases = p;
            }
            let ms = median(ts);
            medians.push(ms);
            let label = match resident_budget {
                None => name.to_string(),
                Some(b) => format!(
                    "{name}, {} GiB budget ({:.1} GB pinned)",
                    b >> 30,
                    engine.pinned_bytes() as f64 / 1e9
                ),
            };
            line(out, format!("| 2^{k} | {label} | {setup:.1} (first call) | {ms:.0} | {phases} |"));
        }
        line(out, format!("| 2^{k} | streamed / resident | | {:.2} | |", medians[1] / medians[0]));
    }
    Ok(())
}

/// Devices saturated by two workers each with PoRep-shaped partitions at
/// 2^`args.saturate`: first the first device
/// alone, then all of `args.saturate_devices` at once. Per device: the
/// kernel-active fraction (the union of its calls' kernel spans over the
/// span from the first kernel to the last) and partitions per second.
pub(super) fn saturate_rows(inputs: &PorepInputs, out: &mut String) -> Result<(), KernelError> {
    let &PorepInputs { args, seed, .. } = inputs;
    let Some(k) = args.saturate else {
        return Ok(());
    };
    let devices =
        if args.saturate_devices.0.is_empty() { vec![args.device] } else { args.saturate_devices.0.clone() };
    let (circuit, key, make) = inputs.partition(k);
    let engines: Vec<CudaEngine> =
        devices.iter().map(|&d| CudaEngine::new(d, CudaOptions::default())).collect::<Result<_, _>>()?;
    for e in &engines {
        prove_once(e, &circuit, &key, make(seed ^ 77), Urgency::Normal)?; // key upload, warm-up
    }
    line(out, String::new());
    line(
        out,
        format!(
            "| saturated, PoRep-shaped 2^{k} ({}% bits), 2 workers per device, {} partitions each | device | partitions/s | kernel-active fraction | wall s |",
            args.porep_bits_pct, args.saturate_per_worker
        ),
    );
    line(out, "|---|---|---|---|---|".into());
    let per_worker = args.saturate_per_worker.max(1);
    let mut alone = 0.0;
    let sets: Vec<&[CudaEngine]> =
        if engines.len() > 1 { vec![&engines[..1], &engines[..]] } else { vec![&engines[..]] };
    for set in sets {
        let results: Vec<Result<(f64, f64, f64), KernelError>> = std::thread::scope(|sc| {
            let handles: Vec<_> = set
                .iter()
                .enumerate()
                .map(|(di, e)| {
                    let (circuit, key, make) = (&circuit, &key, &make);
                    let seed = seed ^ ((di as u64) << 32);
                    sc.spawn(move || saturate_device(e, circuit, key, make, per_worker, seed, |_| ()))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a device thread")).collect()
        });
        let mut total = 0.0;
        for (e, r) in set.iter().zip(results) {
            let (rate, active, wall) = r?;
            total += rate;
            let n = set.len();
            let name = e.name();
            line(out, format!("| {n} device(s) | {name} | {rate:.3} | {active:.4} | {wall:.1} |"));
        }
        if set.len() == 1 {
            alone = total;
        } else {
            line(
                out,
                format!("| {} devices together / the first alone | | {:.3} | | |", set.len(), total / alone),
            );
        }
    }
    Ok(())
}

/// Two workers prove `per_worker` partitions each on `engine`, all
/// synthesized beforehand (so the benchmark's input maker cannot starve the
/// device), while `beside` runs on a thread of its own, given a probe that
/// says whether partitions are still waiting; returns partitions per
/// second, the kernel-active fraction and the wall time in s.
pub(super) fn saturate_device(
    engine: &CudaEngine,
    circuit: &PreparedCircuit,
    key: &TiledKey,
    make: &(impl Fn(u64) -> Synthesized + Sync),
    per_worker: usize,
    seed: u64,
    beside: impl FnOnce(&dyn Fn() -> bool) + Send,
) -> Result<(f64, f64, f64), KernelError> {
    let total = 2 * per_worker;
    let queue = Mutex::new((0..total).map(|i| make(seed ^ (1000 + i as u64))).collect::<Vec<_>>());
    let before = engine.kernel_spans().len();
    let t = Instant::now();
    std::thread::scope(|sc| {
        let waiting = || !queue.lock().expect("queue").is_empty();
        sc.spawn(move || beside(&waiting));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let queue = &queue;
                sc.spawn(move || -> Result<(), KernelError> {
                    loop {
                        let next = queue.lock().expect("queue").pop();
                        let Some(syn) = next else { return Ok(()) };
                        prove_once(engine, circuit, key, syn, Urgency::Normal)?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|h| h.join().expect("a worker thread"))
    })?;
    let wall = t.elapsed().as_secs_f64();
    let spans: Vec<(f64, f64)> = engine.kernel_spans().into_iter().skip(before).collect();
    Ok((total as f64 / wall, active_fraction(&spans), wall))
}

/// The union of the spans' lengths over the span from the first start to
/// the last end.
pub(super) fn active_fraction(spans: &[(f64, f64)]) -> f64 {
    let first = spans.iter().map(|s| s.0).min_by(f64::total_cmp);
    let last = spans.iter().map(|s| s.1).max_by(f64::total_cmp);
    let (Some(first), Some(last)) = (first, last) else {
        return 0.0;
    };
    let covered: f64 = (0..spans.len()).map(|i| newly_covered(&spans[..i], spans[i])).sum();
    if last > first {
        covered / (last - first)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::active_fraction;

    #[test]
    fn overlapping_spans_count_once_and_gaps_not_at_all() {
        // [0, 4] and [2, 6] cover 6 of the 10 ms from 0 to 10; [8, 10] 2 more.
        let f = active_fraction(&[(8.0, 10.0), (0.0, 4.0), (2.0, 6.0)]);
        assert!((f - 0.8).abs() < 1e-12, "{f}");
        // a span inside another adds nothing
        assert_eq!(active_fraction(&[(0.0, 10.0), (2.0, 3.0)]), 1.0);
        assert_eq!(active_fraction(&[]), 0.0);
    }
}
