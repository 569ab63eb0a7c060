//! `cuzk-bench synthesis`: the synthesis stage alone, on the same 2 KiB
//! PoRep C1 output or SnapDeals vanilla proofs, three ways side by side in
//! one run: the daemon's stage (`FilecoinJob::synthesize`, circuit built
//! from the request included) with direct evaluation, the same with
//! compiled evaluation (assignment only, then matrix × witness), and
//! bellperson's own synthesis of the same circuit inside filecoin-proofs-api's
//! prover: the time its native prover logs for `synthesize_circuits_batch`
//! ("synthesis time: …"), captured from the log while it proves.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use cuzk::filecoin::FilecoinJob;
use cuzk::keys::KeyStore;
use cuzk_filecoin::fixtures;
use cuzk_filecoin::record::Evaluation;
use cuzk_filecoin::Kind;
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
    let (number, scale) = units
        .iter()
        .find_map(|(unit, scale)| text.trim().strip_suffix(unit).map(|n| (n, *scale)))?;
    number.parse::<f64>().ok().map(|n| Duration::from_secs_f64(n * scale))
}

/// Runs the benchmark; returns the result table (markdown).
pub fn run(args: &SynthesisBenchArgs) -> Result<String, String> {
    let params = fixtures::params_dir().to_path_buf();
    let mut table = String::from(
        "| job | daemon direct s | daemon compiled s (record + evaluate) | bellperson synthesis s | direct / bellperson | compiled / bellperson | compile once s |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for &kind in &args.kinds {
        let case = case(kind)?;
        let job = FilecoinJob::parse(kind, &case.body["input"], &params).map_err(|e| e.to_string())?;
        let (direct, _, _) = ours(&job, Evaluation::Direct, args.runs)?;
        let (compiled, split, once) = ours(&job, Evaluation::Compiled, args.runs)?;
        let theirs = bellperson(&case, job.partitions as usize, args.runs)?;
        table += &format!(
            "| {} | {direct:.3} | {compiled:.3} ({split}) | {theirs:.3} | {:.2} | {:.2} | {once:.2} |\n",
            kind.api_name(),
            direct / theirs,
            compiled / theirs
        );
    }
    Ok(table)
}

/// The daemon's synthesis stage for every partition of `job`, `runs` times
/// after a warm-up: the median seconds per partition, the median phases and
/// the warm-up's key time (parameter file and, compiled, the matrices).
fn ours(job: &FilecoinJob, evaluation: Evaluation, runs: usize) -> Result<(f64, String, f64), String> {
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
    let split: Vec<String> = ["synthesize", "evaluate"]
        .iter()
        .map(|name| {
            let mut values: Vec<f64> = phases
                .iter()
                .flat_map(|p| p.iter().filter(|(n, _)| n == name).map(|(_, s)| *s))
                .collect();
            format!("{name} {:.3}", median(&mut values))
        })
        .collect();
    Ok((median(&mut totals), split.join(", "), once))
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
