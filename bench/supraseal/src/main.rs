// supraseal-bench: times filecoin-proofs-api 19.1.0 built with `cuda-supraseal`
// (the supraseal-c2 GPU prover) on 2 KiB PoRep C2 and SnapDeals inputs, the
// reference that cuzk's figures in docs/benchmarks.md are compared against.
// Every proof is verified (unless --no-verify: keys from `cuzk-bench key`,
// whose random points make proofs that cannot verify); the output is one
// markdown table on stdout.

use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use filecoin_proofs_api::{
    seal, update, Commitment, PartitionProofBytes, RegisteredUpdateProof, SectorId,
};
use serde::Deserialize;

const USAGE: &str = "\
usage: supraseal-bench [--porep FILE] [--snap FILE] [--runs N] [--no-verify] [--partitions K]

  --porep FILE  {\"c1\": <SealCommitPhase1Output JSON>, \"prover_id\": \"<32-byte hex>\",
                 \"sector_id\": <u64>}  (cuzk's porep-c2 job input)
  --snap FILE   {\"registered_proof\": \"StackedDrg2KiBV1\", \"comm_r_old\": hex32,
                 \"comm_r_new\": hex32, \"comm_d_new\": hex32,
                 \"vanilla_proofs\": [hex of each partition's vanilla proof]}
                (cuzk's snap-prove job input)
  --runs N      warm calls per job after the one cold call (default 3)
  --no-verify   check each proof's length only: for TIMING-ONLY keys
                (`cuzk-bench key`), whose proofs cannot verify
  --partitions K  PoRep: prove only the first K partitions of the C1 (the
                API's circuit-proofs call, without its verification; needs
                --no-verify): supraseal-c2 synthesizes every partition of a
                call at once, so a 32 GiB C2's ten do not fit a 128 GiB host

Groth16 parameters are read from $FIL_PROOFS_PARAMETER_CACHE (files named as
filecoin-proofs expects; test parameters are fine as long as
FIL_PROOFS_VERIFY_PRODUCTION_PARAMS is unset or 0). Set SUPRASEAL_BENCH_LOG=1
to echo info-level library logs on stderr (warnings and errors always are).
Needs an NVIDIA GPU and the driver's libcuda.so.1.";

/// bellperson's supraseal prover logs `synthesis time: {:?}` once per batch of
/// circuits; this collects those durations so the table can split CPU
/// synthesis from the whole call.
static SYNTHESIS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

struct Recorder {
    echo_info: bool,
}

impl log::Log for Recorder {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        let text = record.args().to_string();
        if record.target().starts_with("bellperson") {
            if let Some(d) = text
                .strip_prefix("synthesis time: ")
                .and_then(parse_debug_duration)
            {
                SYNTHESIS.lock().unwrap().push(d);
            }
        }
        if record.level() <= log::Level::Warn || self.echo_info {
            eprintln!("[{} {}] {}", record.level(), record.target(), text);
        }
    }

    fn flush(&self) {}
}

/// Reads a `Duration` as `{:?}` prints it ("1.5s", "812.3ms", "40µs", "7ns").
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(char::is_alphabetic)?);
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(number.parse::<f64>().ok()? * scale))
}

#[derive(Deserialize)]
struct PorepInput {
    c1: seal::SealCommitPhase1Output,
    prover_id: String,
    sector_id: u64,
}

#[derive(Deserialize)]
struct SnapInput {
    registered_proof: RegisteredUpdateProof,
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
    vanilla_proofs: Vec<String>,
}

/// Hex with or without "0x", as the daemon accepts it.
fn unhex(field: &str, text: &str) -> Result<Vec<u8>> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    hex::decode(digits).with_context(|| format!("{field} is not hex"))
}

fn hex32(field: &str, text: &str) -> Result<Commitment> {
    let bytes = unhex(field, text)?;
    let len = bytes.len();
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("{field} must be 32 bytes, got {len}"))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &str) -> Result<T> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {path}"))?;
    serde_json::from_slice(&text).with_context(|| format!("{path} is not the expected JSON"))
}

/// One call's wall time and the synthesis time bellperson logged during it.
struct Sample {
    total: Duration,
    synthesis: Option<Duration>,
}

/// How a proof is checked after it is timed.
#[derive(Clone, Copy)]
enum Check {
    /// By the API's verifier: a proof that does not verify is an error, so
    /// bad figures can never reach the table.
    Verify,
    /// Its length only (192 bytes per partition): for timing-only keys.
    Length,
}

/// Times `prove` once, then checks its proof as `check` says.
fn sample(
    check: Check,
    prove: impl FnOnce() -> Result<Vec<u8>>,
    verify: impl FnOnce(&[u8]) -> Result<bool>,
) -> Result<Sample> {
    SYNTHESIS.lock().unwrap().clear();
    let start = Instant::now();
    let proof = prove()?;
    let total = start.elapsed();
    let logged = std::mem::take(&mut *SYNTHESIS.lock().unwrap());
    // Several partitions may be synthesized in several batches: sum them.
    let synthesis = (!logged.is_empty()).then(|| logged.iter().sum());
    match check {
        Check::Verify => ensure!(verify(&proof)?, "the proof does not verify"),
        Check::Length => ensure!(
            !proof.is_empty() && proof.len() % 192 == 0,
            "the proof is {} bytes, not whole 192-byte partition proofs",
            proof.len()
        ),
    }
    Ok(Sample { total, synthesis })
}

fn median(mut values: Vec<Duration>) -> Option<Duration> {
    values.sort();
    let n = values.len();
    // The middle value, or the mean of the two middle ones.
    (n > 0).then(|| (values[(n - 1) / 2] + values[n / 2]) / 2)
}

/// One cold call (parameter loading and GPU set-up land here), then `runs`
/// warm calls; returns the table row.
fn bench(job: &str, runs: usize, mut one: impl FnMut() -> Result<Sample>) -> Result<String> {
    let cold = one().with_context(|| format!("{job}: cold call"))?;
    eprintln!("{job}: cold {:.3} s", cold.total.as_secs_f64());
    let mut warm = Vec::with_capacity(runs);
    for i in 0..runs {
        let s = one().with_context(|| format!("{job}: warm call {}", i + 1))?;
        eprintln!("{job}: warm {} {:.3} s", i + 1, s.total.as_secs_f64());
        warm.push(s);
    }
    let secs =
        |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.3}", d.as_secs_f64()));
    let warm_median = median(warm.iter().map(|s| s.total).collect());
    // A median over only the calls that logged one; "-" when none did.
    let synth_median = median(warm.iter().filter_map(|s| s.synthesis).collect());
    // The warm calls one after another: what a stream of `runs` jobs costs
    // this prover (verification excluded).
    let warm_total: Duration = warm.iter().map(|s| s.total).sum();
    Ok(format!(
        "| {job} | {:.3} | {} | {:.2} | {} | {runs} |",
        cold.total.as_secs_f64(),
        secs(warm_median),
        warm_total.as_secs_f64(),
        secs(synth_median)
    ))
}

/// The C1 output with only its first `k` partitions' vanilla proofs.
fn first_partitions(mut c1: seal::SealCommitPhase1Output, k: usize) -> Result<seal::SealCommitPhase1Output> {
    use filecoin_proofs_api::seal::VanillaSealProof as V;
    fn keep<T>(partitions: &mut Vec<T>, k: usize) -> Result<()> {
        ensure!((1..=partitions.len()).contains(&k), "--partitions {k}: the C1 holds {}", partitions.len());
        partitions.truncate(k);
        Ok(())
    }
    match &mut c1.vanilla_proofs {
        V::StackedDrg2KiBV1(p) => keep(p, k),
        V::StackedDrg8MiBV1(p) => keep(p, k),
        V::StackedDrg512MiBV1(p) => keep(p, k),
        V::StackedDrg32GiBV1(p) => keep(p, k),
        V::StackedDrg64GiBV1(p) => keep(p, k),
    }?;
    Ok(c1)
}

fn porep_row(path: &str, runs: usize, check: Check, partitions: Option<usize>) -> Result<String> {
    let input: PorepInput = read_json(path)?;
    let prover_id = hex32("prover_id", &input.prover_id)?;
    let sector_id = SectorId::from(input.sector_id);
    let c1 = match partitions {
        Some(k) => first_partitions(input.c1, k)?,
        None => input.c1,
    };
    let job = match partitions {
        Some(k) => format!("porep-c2 {:?}, first {k} partitions", c1.registered_proof),
        None => format!("porep-c2 {:?}", c1.registered_proof),
    };
    bench(&job, runs, || {
        // The API consumes its input: clone before the clock starts.
        let owned = c1.clone();
        sample(
            check,
            || match partitions {
                Some(_) => Ok(seal::seal_commit_phase2_circuit_proofs(owned, sector_id)?.proof),
                None => Ok(seal::seal_commit_phase2(owned, prover_id, sector_id)?.proof),
            },
            |proof| {
                seal::verify_seal(
                    c1.registered_proof,
                    c1.comm_r,
                    c1.comm_d,
                    prover_id,
                    sector_id,
                    c1.ticket,
                    c1.seed,
                    proof,
                )
            },
        )
    })
}

fn snap_row(path: &str, runs: usize, check: Check) -> Result<String> {
    let input: SnapInput = read_json(path)?;
    let proof_kind = input.registered_proof;
    let comm_r_old = hex32("comm_r_old", &input.comm_r_old)?;
    let comm_r_new = hex32("comm_r_new", &input.comm_r_new)?;
    let comm_d_new = hex32("comm_d_new", &input.comm_d_new)?;
    let vanilla = (input.vanilla_proofs.iter().enumerate())
        .map(|(i, h)| unhex(&format!("vanilla_proofs[{i}]"), h).map(PartitionProofBytes))
        .collect::<Result<Vec<_>>>()?;
    let job = format!("snap-prove {proof_kind:?}");
    bench(&job, runs, || {
        let owned = vanilla.clone();
        sample(
            check,
            || {
                let proof = update::generate_empty_sector_update_proof_with_vanilla(
                    proof_kind, owned, comm_r_old, comm_r_new, comm_d_new,
                )?;
                Ok(proof.0)
            },
            |proof| {
                update::verify_empty_sector_update_proof(
                    proof_kind, proof, comm_r_old, comm_r_new, comm_d_new,
                )
            },
        )
    })
}

fn run(args: &[String]) -> Result<Vec<String>> {
    let (mut porep, mut snap, mut runs, mut check) = (None, None, 3usize, Check::Verify);
    let mut partitions = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--porep" => porep = Some(value()?.clone()),
            "--snap" => snap = Some(value()?.clone()),
            "--runs" => runs = value()?.parse().context("--runs takes a whole number")?,
            "--no-verify" => check = Check::Length,
            "--partitions" => {
                partitions = Some(value()?.parse().context("--partitions takes a whole number")?)
            }
            other => bail!("unknown argument {other}"),
        }
    }
    ensure!(
        porep.is_some() || snap.is_some(),
        "give --porep and/or --snap"
    );
    ensure!(runs >= 1, "--runs must be at least 1");
    ensure!(
        partitions.is_none() || matches!(check, Check::Length),
        "--partitions needs --no-verify: a proof of some partitions is no seal proof to verify"
    );
    ensure!(
        std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").is_some(),
        "set FIL_PROOFS_PARAMETER_CACHE to the directory holding the parameters"
    );
    let mut rows = Vec::new();
    if let Some(path) = porep {
        rows.push(porep_row(&path, runs, check, partitions)?);
    }
    if let Some(path) = snap {
        rows.push(snap_row(&path, runs, check)?);
    }
    Ok(rows)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // No GPU, driver or parameter is touched before the arguments are read.
    if args.is_empty() || args.iter().any(|a| a == "-h" || a == "--help") {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    // supraseal-c2's CUDA objects call into blst, but no Rust code of the
    // dependency tree names blst; this reference makes the linker keep it.
    std::hint::black_box(blst::blst_p1_generator as unsafe extern "C" fn() -> *const blst::blst_p1);
    let echo_info = std::env::var("SUPRASEAL_BENCH_LOG").is_ok_and(|v| v != "0" && !v.is_empty());
    if log::set_boxed_logger(Box::new(Recorder { echo_info })).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    match run(&args) {
        Ok(rows) => {
            println!("| job | supraseal cold s | supraseal warm median s | warm calls in sequence s | synthesis (bellperson log) median s | runs |");
            println!("|---|---|---|---|---|---|");
            for row in rows {
                println!("{row}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("supraseal-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
