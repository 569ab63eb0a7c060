//! The benchmark's shared passes over a streamed key (issue 12 item 4, the
//! original's cross-sector batching): PoRep-shaped partitions whose key
//! exceeds the resident budget, proved 1, 2 or 4 to a pass, so that each
//! chunk of bases crosses PCIe once for all of them. Per pass size: the
//! time of a pass from the calls' start to the last finished proof, and
//! that time per partition against passes of one. Inputs as in
//! porep.rs (fabricated: the work is a real partition's, the proofs
//! are not valid).

use std::time::Instant;

use cuzk_kernels::cuda::{CudaEngine, CudaOptions};
use cuzk_kernels::groth16::{PreparedCircuit, Synthesized, Urgency};
use cuzk_kernels::KernelError;

use super::partitions::{PorepInputs, TiledKey};
use super::porep::prove_once;
use super::table::{line, median};

/// Rows for each of `args.pass` at `args.pass_log`, under a resident
/// budget of `args.stream_budget_gib`.
pub(super) fn pass_rows(inputs: &PorepInputs, out: &mut String) -> Result<(), KernelError> {
    let &PorepInputs { args, seed, .. } = inputs;
    let Some(k) = args.pass_log else {
        return Ok(());
    };
    let runs = args.runs.clamp(1, 3);
    let (circuit, key, make) = inputs.partition(k);
    // One engine (its key pinned once: about a minute at the 32 GiB shape)
    // with room for the largest pass; passes take no call after their
    // first call's H step (`pass_wait` zero, the default), and the p calls
    // of a round start together, so each round is one pass of p.
    let most = args.pass.0.iter().copied().max().unwrap_or(1).max(1);
    let engine = CudaEngine::new(
        args.device,
        CudaOptions {
            resident_budget: Some(args.stream_budget_gib << 30),
            pass_partitions: most,
            ..Default::default()
        },
    )?;
    line(out, String::new());
    line(
        out,
        format!(
            "| PoRep-shaped 2^{k} ({}% bits), key streamed, {} GiB budget | partitions per pass | ms per pass (median of {runs}) | ms per partition | against 1 per pass | passes, partitions counted |",
            args.porep_bits_pct, args.stream_budget_gib
        ),
    );
    line(out, "|---|---|---|---|---|---|".into());
    let mut single = None;
    for &p in &args.pass.0 {
        let p = p.max(1);
        let round = |r: u64| -> Result<f64, KernelError> {
            let syns: Vec<Synthesized> = (0..p as u64).map(|i| make(seed ^ r ^ i)).collect();
            one_pass(&engine, &circuit, &key, syns)
        };
        round(0x9000)?; // the key pinned, buffers pooled for p partitions
        let before = engine.pass_counts();
        let times = (0..runs as u64).map(|r| round(0x9100 + (r << 8)));
        let ms = median(times.collect::<Result<_, _>>()?);
        let after = engine.pass_counts();
        let per = ms / p as f64;
        let against = *single.get_or_insert(per);
        line(
            out,
            format!(
                "| 2^{k} | {p} | {ms:.0} | {per:.0} | {:.2} | {}, {} |",
                per / against,
                after.0 - before.0,
                after.1 - before.1
            ),
        );
    }
    Ok(())
}

/// Proves `syns` from as many threads at once; ms until the last is done.
fn one_pass(
    engine: &CudaEngine,
    circuit: &PreparedCircuit,
    key: &TiledKey,
    syns: Vec<Synthesized>,
) -> Result<f64, KernelError> {
    let t = Instant::now();
    std::thread::scope(|sc| {
        let calls: Vec<_> = (syns.into_iter())
            .map(|syn| sc.spawn(move || prove_once(engine, circuit, key, syn, Urgency::Normal)))
            .collect();
        calls.into_iter().try_for_each(|h| h.join().expect("a call's thread").map(|_| ()))
    })?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}
