//! `cuzk-bench synthesis`: the synthesis stage alone, on the same 2 KiB
//! PoRep C1 output or SnapDeals vanilla proofs, four ways side by side in
//! one run: the daemon's stage (`FilecoinJob::synthesize`, circuit built
//! from the request included) with direct evaluation, the same with
//! compiled evaluation (assignment only, then matrix × witness) once with
//! the assignment recorded from the reference circuit
//! (`Evaluation::CompiledReference`) and once as the daemon records it by
//! default (`Evaluation::Compiled`: PoRep's from the values-only witness,
//! in parallel over its challenges), and bellperson's own synthesis of the
//! same circuit inside filecoin-proofs-api's prover: the time its native
//! prover logs for `synthesize_circuits_batch` ("synthesis time: …"),
//! captured from the log while it proves.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cuzk::filecoin::FilecoinJob;
use cuzk::keys::KeyStore;
use cuzk_filecoin::api::seal::SealCommitPhase1Output;
use cuzk_filecoin::fixtures;
use cuzk_filecoin::porep::PorepRequest;
use cuzk_filecoin::record::{Evaluation, Recorded};
use cuzk_filecoin::{Kind, ProofRequest};
use log::{Log, Metadata, Record};

use crate::filecoin::{case, median, Case};

/// Arguments of `cuzk-bench synthesis`.
#[derive(clap::Args, Clone, Debug)]
pub struct SynthesisBenchArgs {
    /// Kinds to measure: porep (2 KiB PoRep C2), snap (2 KiB SnapDeals) and
    /// winning (2 KiB WinningPoSt), or their API names.
    #[arg(long, value_delimiter = ',', default_value = "porep,snap")]
    pub kinds: Vec<Kind>,
    /// Timed runs per side (medians reported); one untimed warm-up each,
    /// which also loads the key and, for compiled evaluation, records the
    /// matrices.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// A PoRep commit-phase-1 output (filecoin-proofs-api's JSON, any
    /// sector size, e.g. from `cuzk-bench c1`): instead of the table above,
    /// time only the recording of its partitions' assignments, from the
    /// reference circuit and from the values-only witness, each checked
    /// equal to the other; no parameter file is read.
    #[arg(long)]
    pub c1: Option<PathBuf>,
    /// With --c1: the partitions to record.
    #[arg(long, value_delimiter = ',', default_values_t = [0])]
    pub partitions: Vec<usize>,
}

/// bellperson's logged synthesis times, in the order logged.
static BELLPERSON_SYNTHESIS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

/// The process's logger: env_logger's, plus a copy of every synthesis time
/// bellperson's prover logs.
struct Capture(env_logger::Logger);

impl Log for Capture {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.target().starts_with("bellperson") || self.0.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if record.target().starts_with("bellperson") {
            let text = record.args().to_string();
            if let Some(time) = text.strip_prefix("synthesis time: ").and_then(parse_debug_duration) {
                BELLPERSON_SYNTHESIS.lock().unwrap_or_else(|e| e.into_inner()).push(time);
            }
        }
        if self.0.matches(record) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Installs the capturing logger (env_logger's filter, `info` by default).
pub fn install_logger() {
    let inner = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).build();
    // bellperson's line is at info, whatever the filter lets through.
    log::set_max_level(inner.filter().max(log::LevelFilter::Info));
    // Only fails when a logger is already set, which main does not do.
    let _ = log::set_boxed_logger(Box::new(Capture(inner)));
}

/// A `Duration` as `{:?}` writes it: "1.5s", "812.3ms", "12µs", "7ns".
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let units = [("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9), ("s", 1.0)];
    let (number, scale) =
        units.iter().find_map(|(unit, scale)| text.trim().strip_suffix(unit).map(|n| (n, *scale)))?;
    number.parse::<f64>().ok().map(|n| Duration::from_secs_f64(n * scale))
}

/// Runs the benchmark; returns the result table (markdown).
pub fn run(args: &SynthesisBenchArgs) -> Result<String, String> {
    if let Some(path) = &args.c1 {
        return record_only(path, &args.partitions, args.runs);
    }
    let params = fixtures::params_dir().to_path_buf();
    let mut table = String::from(
        "| job | daemon direct s | compiled, reference record s (record + evaluate) | compiled s (record + evaluate) | bellperson synthesis s | compiled / bellperson | reference record / record | compile once s |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for &kind in &args.kinds {
        let case = case(kind)?;
        let job = FilecoinJob::parse(kind, &case.body["input"], &params).map_err(|e| e.to_string())?;
        let direct = ours(&job, Evaluation::Direct, args.runs)?;
        let reference = ours(&job, Evaluation::CompiledReference, args.runs)?;
        let compiled = ours(&job, Evaluation::Compiled, args.runs)?;
        let theirs = bellperson(&case, job.partitions as usize, args.runs)?;
        table += &format!(
            "| {} | {:.3} | {} | {} | {theirs:.3} | {:.2} | {:.2} | {:.2} |\n",
            kind.api_name(),
            direct.total,
            reference.split(),
            compiled.split(),
            compiled.total / theirs,
            reference.synthesize / compiled.synthesize,
            compiled.key_once,
        );
    }
    Ok(table)
}

/// Medians of one way of running the synthesis stage, seconds per partition.
struct Timing {
    /// The whole stage.
    total: f64,
    /// Its recording phase (the circuit or the witness).
    synthesize: f64,
    /// Its evaluation phase (compiled: matrices × assignment).
    evaluate: f64,
    /// The warm-up's key time (parameter file and, compiled, the matrices;
    /// each way loads its own).
    key_once: f64,
}

impl Timing {
    /// "total (synthesize s, evaluate s)", as the table shows it.
    fn split(&self) -> String {
        format!("{:.3} (synthesize {:.3}, evaluate {:.3})", self.total, self.synthesize, self.evaluate)
    }
}

/// The daemon's synthesis stage for every partition of `job`, `runs` times
/// after a warm-up: the median seconds per partition and per phase.
fn ours(job: &FilecoinJob, evaluation: Evaluation, runs: usize) -> Result<Timing, String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let keys = KeyStore::open(data.path()).map_err(|e| e.to_string())?;
    let mut totals = Vec::new();
    let mut phases: Vec<Vec<(&'static str, f64)>> = Vec::new();
    let mut once = 0.0;
    for run in 0..=runs {
        for partition in 0..job.partitions {
            let start = Instant::now();
            let (_, _, stage) = job
                .synthesize(&keys, partition, evaluation)
                .map_err(|e| format!("{evaluation:?} synthesis: {e}"))?;
            let seconds = start.elapsed().as_secs_f64();
            let named: Vec<(&'static str, f64)> = stage.iter().map(|(n, d)| (*n, d.as_secs_f64())).collect();
            if run == 0 {
                once += named.iter().filter(|(n, _)| *n == "key").map(|(_, s)| s).sum::<f64>();
            } else {
                totals.push(seconds);
                phases.push(named);
            }
        }
    }
    let phase = |name: &str| {
        let mut values: Vec<f64> =
            phases.iter().flat_map(|p| p.iter().filter(|(n, _)| *n == name).map(|(_, s)| *s)).collect();
        median(&mut values)
    };
    Ok(Timing {
        total: median(&mut totals),
        synthesize: phase("synthesize"),
        evaluate: phase("evaluate"),
        key_once: once,
    })
}

/// `--c1`: each partition's assignment recorded `runs` times both ways
/// (no warm-up: nothing is loaded once), medians, and whether the two
/// assignments are equal.
fn record_only(path: &Path, partitions: &[usize], runs: usize) -> Result<String, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let c1: SealCommitPhase1Output =
        serde_json::from_slice(&text).map_err(|e| format!("{}: not a C1 output: {e}", path.display()))?;
    drop(text);
    // Recording reads only the C1; the prover and sector matter to `check`
    // (the replica id), which this timing does not run.
    let request = PorepRequest { c1, prover_id: [0; 32], sector_id: 0 };
    let record = |k: usize, evaluation: Evaluation| -> Result<(Vec<_>, usize, f64), String> {
        let start = Instant::now();
        match request.record_partition(k, evaluation) {
            Ok(Recorded::Assignment { values, num_inputs }) => {
                Ok((values, num_inputs, start.elapsed().as_secs_f64()))
            }
            Ok(Recorded::Witness(_)) => Err(format!("{evaluation:?} recorded a witness")),
            Err(e) => Err(format!("partition {k}, {evaluation:?}: {e}")),
        }
    };
    let mut table = String::from(
        "| sector | partition | values | reference record s | record s | reference / record | equal |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for &k in partitions {
        let (mut slow, mut fast, mut equal) = (Vec::new(), Vec::new(), true);
        let mut count = 0;
        for _ in 0..runs.max(1) {
            let (reference, reference_inputs, seconds) = record(k, Evaluation::CompiledReference)?;
            slow.push(seconds);
            let (values, inputs, seconds) = record(k, Evaluation::Compiled)?;
            fast.push(seconds);
            equal &= inputs == reference_inputs && values == reference;
            count = values.len();
        }
        let (slow, fast) = (median(&mut slow), median(&mut fast));
        table += &format!(
            "| {:?} | {k} | {count} | {slow:.3} | {fast:.3} | {:.1} | {equal} |\n",
            request.c1.registered_proof,
            slow / fast
        );
    }
    Ok(table)
}

/// bellperson's synthesis per partition inside the reference prover, `runs`
/// times after a warm-up: the median seconds per partition (its batch
/// synthesizes every partition in parallel, so the batch time is divided).
fn bellperson(case: &Case, partitions: usize, runs: usize) -> Result<f64, String> {
    let mut per_partition = Vec::new();
    for run in 0..=runs {
        BELLPERSON_SYNTHESIS.lock().unwrap_or_else(|e| e.into_inner()).clear();
        (case.reference)()?;
        let logged = std::mem::take(&mut *BELLPERSON_SYNTHESIS.lock().unwrap_or_else(|e| e.into_inner()));
        let total: Duration = logged.iter().sum();
        if logged.is_empty() {
            return Err("bellperson logged no synthesis time (is its native prover in use?)".into());
        }
        if run > 0 {
            per_partition.push(total.as_secs_f64() / partitions as f64);
        }
    }
    Ok(median(&mut per_partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_durations_parse_in_every_unit() {
        for d in [
            Duration::from_secs(2),
            Duration::from_millis(1500),
            Duration::from_micros(812_345),
            Duration::from_micros(12),
            Duration::from_nanos(7),
        ] {
            let parsed = parse_debug_duration(&format!("{d:?}")).unwrap();
            assert!(parsed.abs_diff(d) < Duration::from_nanos(2), "{d:?} read as {parsed:?}");
        }
        assert_eq!(parse_debug_duration("soon"), None);
    }
}
