//! `cuzk-bench filecoin`: the daemon proving Filecoin jobs over HTTP against
//! filecoin-proofs-api's own prover (bellperson) on the same machine and the
//! same C1 output or vanilla proofs, side by side in one run. The sectors,
//! vanilla proofs and TEST-ONLY parameters come from cuzk-filecoin's
//! fixtures (filecoin-proofs-api seals the sectors itself).

use std::time::{Duration, Instant};

use cuzk::config::{BackendKind, Budget, Config};
use cuzk::server::{spawn, RunningDaemon};
use cuzk_filecoin::api::{post, seal, update};
use cuzk_filecoin::fixtures::{self, Sector, PROVER_ID, UPDATE, WINNING};
use cuzk_filecoin::Kind;
use cuzk_kernels::circuits::CircuitRegistry;
use serde_json::{json, Value};

/// Arguments of `cuzk-bench filecoin`.
#[derive(clap::Args, Clone, Debug)]
pub struct FilecoinBenchArgs {
    /// Which of the daemon's engines proves: cpu or cuda.
    #[arg(long, default_value = "cpu")]
    pub engine: String,
    /// Kinds to measure: porep (2 KiB PoRep C2), snap (2 KiB SnapDeals)
    /// and winning (2 KiB WinningPoSt), or their API names.
    #[arg(long, value_delimiter = ',', default_value = "porep,snap")]
    pub kinds: Vec<Kind>,
    /// Timed runs per side (the median is reported); one untimed warm-up
    /// run each comes first.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Also submit this many porep-c2 jobs at once and time the stream.
    #[arg(long, default_value_t = 0)]
    pub stream: usize,
    /// Time the stream alone, without bellperson proving as many jobs one
    /// after another (about 18 s each on 16 cores).
    #[arg(long)]
    pub no_stream_reference: bool,
    /// Write each kind's job input (`porep.json`, `snap.json`) here, for
    /// the supraseal reference (bench/supraseal) to prove the same work.
    #[arg(long)]
    pub dump_inputs: Option<std::path::PathBuf>,
    /// The daemon's `[cuda] memory_limit_bytes`: its device-memory plan
    /// as on a card of this size (issue 37: 2 KiB kinds under a 16 GiB
    /// cap).
    #[arg(long)]
    pub cuda_memory_limit_bytes: Option<u64>,
    /// The daemon's `[cuda] resident_budget_bytes`: with less than a key's
    /// bytes, its plan splits the key between the device and pinned host
    /// memory, and the proofs, verified, show the split path right.
    #[arg(long)]
    pub cuda_resident_budget_bytes: Option<u64>,
}

/// One kind's job: the daemon's request and the same proof by bellperson.
pub(crate) struct Case {
    pub(crate) kind: Kind,
    pub(crate) body: Value,
    pub(crate) reference: Box<dyn Fn() -> Result<Vec<u8>, String>>,
}

/// Runs the benchmark; returns the result table (markdown).
pub fn run(args: &FilecoinBenchArgs) -> Result<String, String> {
    let backend = match args.engine.as_str() {
        "cpu" => BackendKind::Cpu,
        "cuda" => BackendKind::Cuda,
        other => return Err(format!("--engine is cpu or cuda, not {other:?}")),
    };
    let cases: Vec<Case> = args.kinds.iter().map(|&kind| case(kind)).collect::<Result<_, _>>()?;
    if let Some(dir) = &args.dump_inputs {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for case in &cases {
            let path = dir.join(format!("{}.json", case.kind.cli_name()));
            std::fs::write(&path, case.body["input"].to_string())
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut config = Config {
        listen: "127.0.0.1:0".into(),
        data_dir: data.path().to_path_buf(),
        backend,
        params_dir: Some(fixtures::params_dir().to_path_buf()),
        ..Config::default()
    };
    config.scheduler.budget = Budget::Bytes(64 << 30);
    config.cuda.memory_limit_bytes = args.cuda_memory_limit_bytes;
    config.cuda.resident_budget_bytes = args.cuda_resident_budget_bytes;
    config.limits.max_body_bytes = 64 << 20;
    let daemon = spawn(config, CircuitRegistry::builtin()).map_err(|e| e.to_string())?;

    let mut table = String::from(
        "| job | engine | daemon median s | bellperson median s | ratio | daemon stages (last run) |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for case in &cases {
        let mut ours = Vec::new();
        let mut stages = String::new();
        for run in 0..=args.runs {
            let (seconds, job) = prove(&daemon, &case.body)?;
            if run > 0 {
                ours.push(seconds);
            }
            stages = stage_summary(&job);
        }
        let mut theirs = Vec::new();
        for run in 0..=args.runs {
            let start = Instant::now();
            (case.reference)()?;
            if run > 0 {
                theirs.push(start.elapsed().as_secs_f64());
            }
        }
        let (o, t) = (median(&mut ours), median(&mut theirs));
        table += &format!(
            "| {} | {} | {o:.2} | {t:.2} | {:.2} | {stages} |\n",
            case.kind.api_name(),
            args.engine,
            o / t
        );
    }
    if args.stream > 0 {
        let case = cases.iter().find(|c| c.kind == Kind::Porep).ok_or("--stream needs porep")?;
        let start = Instant::now();
        let ids: Vec<String> =
            (0..args.stream).map(|_| submit(&daemon, &case.body)).collect::<Result<_, _>>()?;
        for id in &ids {
            wait(&daemon, id)?;
        }
        let ours = start.elapsed().as_secs_f64();
        let (theirs, ratio) = if args.no_stream_reference {
            ("not run".to_string(), "-".to_string())
        } else {
            let start = Instant::now();
            for _ in 0..args.stream {
                (case.reference)()?;
            }
            let theirs = start.elapsed().as_secs_f64();
            (format!("{theirs:.2} (one after another)"), format!("{:.2}", ours / theirs))
        };
        table += &format!(
            "| {} porep-c2 jobs at once | {} | {ours:.2} (total) | {theirs} | {ratio} | |\n",
            args.stream, args.engine
        );
    }
    daemon.stop();
    Ok(table)
}

/// The 2 KiB job of `kind` (every kind but WindowPoSt, which is not measured).
pub(crate) fn case(kind: Kind) -> Result<Case, String> {
    match kind {
        Kind::Porep => porep_case(),
        Kind::EmptySectorUpdate => snap_case(),
        Kind::WinningPost => winning_case(),
        Kind::WindowPost => Err("--kinds takes porep, snap and winning, not window".into()),
    }
}

fn porep_case() -> Result<Case, String> {
    fixtures::ensure_params(&[Kind::Porep]).map_err(|e| format!("{e:#}"))?;
    let sector: Sector = fixtures::seal(1).map_err(|e| format!("{e:#}"))?;
    let body = json!({ "circuit": Kind::Porep.api_name(), "input": {
        "c1": sector.c1, "prover_id": hex::encode(PROVER_ID), "sector_id": 1 } });
    Ok(Case {
        kind: Kind::Porep,
        body,
        reference: Box::new(move || {
            seal::seal_commit_phase2(sector.c1.clone(), PROVER_ID, sector.id)
                .map(|out| out.proof)
                .map_err(|e| format!("seal_commit_phase2: {e:#}"))
        }),
    })
}

fn snap_case() -> Result<Case, String> {
    fixtures::ensure_params(&[Kind::EmptySectorUpdate]).map_err(|e| format!("{e:#}"))?;
    let sector = fixtures::seal(2).map_err(|e| format!("{e:#}"))?;
    let up = fixtures::update(&sector).map_err(|e| format!("{e:#}"))?;
    let body = json!({ "circuit": Kind::EmptySectorUpdate.api_name(), "input": {
        "registered_proof": UPDATE,
        "comm_r_old": hex::encode(up.comm_r_old),
        "comm_r_new": hex::encode(up.comm_r_new),
        "comm_d_new": hex::encode(up.comm_d_new),
        "vanilla_proofs": up.vanilla_proofs.iter().map(hex::encode).collect::<Vec<_>>() } });
    Ok(Case {
        kind: Kind::EmptySectorUpdate,
        body,
        reference: Box::new(move || {
            let proofs =
                up.vanilla_proofs.iter().cloned().map(cuzk_filecoin::api::PartitionProofBytes).collect();
            update::generate_empty_sector_update_proof_with_vanilla(
                UPDATE,
                proofs,
                up.comm_r_old,
                up.comm_r_new,
                up.comm_d_new,
            )
            .map(|proof| proof.0)
            .map_err(|e| format!("generate_empty_sector_update_proof_with_vanilla: {e:#}"))
        }),
    })
}

fn winning_case() -> Result<Case, String> {
    fixtures::ensure_params(&[Kind::WinningPost]).map_err(|e| format!("{e:#}"))?;
    let sector = fixtures::seal(3).map_err(|e| format!("{e:#}"))?;
    let randomness = [5u8; 32];
    let vanilla =
        fixtures::post_vanilla_proofs(WINNING, randomness, &[&sector]).map_err(|e| format!("{e:#}"))?;
    let body = json!({ "circuit": Kind::WinningPost.api_name(), "input": {
        "registered_proof": WINNING,
        "randomness": hex::encode(randomness),
        "prover_id": hex::encode(PROVER_ID),
        "vanilla_proofs": vanilla.iter().map(hex::encode).collect::<Vec<_>>() } });
    Ok(Case {
        kind: Kind::WinningPost,
        body,
        reference: Box::new(move || {
            post::generate_winning_post_with_vanilla(WINNING, &randomness, PROVER_ID, &vanilla)
                .map(|proofs| proofs.into_iter().flat_map(|(_, proof)| proof).collect())
                .map_err(|e| format!("generate_winning_post_with_vanilla: {e:#}"))
        }),
    })
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build()
}

fn submit(daemon: &RunningDaemon, body: &Value) -> Result<String, String> {
    let answer: Value = agent()
        .post(&format!("{}/v1/jobs", daemon.url()))
        .send_json(body)
        .map_err(|e| format!("submit: {e}"))?
        .into_json()
        .map_err(|e| e.to_string())?;
    answer["id"].as_str().map(str::to_string).ok_or_else(|| format!("submit answered {answer}"))
}

/// Polls the job until it ends; its view, or why it did not finish.
fn wait(daemon: &RunningDaemon, id: &str) -> Result<Value, String> {
    loop {
        let job: Value = agent()
            .get(&format!("{}/v1/jobs/{id}", daemon.url()))
            .call()
            .map_err(|e| e.to_string())?
            .into_json()
            .map_err(|e| e.to_string())?;
        match job["status"].as_str() {
            Some("done") => return Ok(job),
            Some("failed" | "cancelled") => return Err(format!("job {id}: {job}")),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Seconds from submission to done, over HTTP, and the job's view.
fn prove(daemon: &RunningDaemon, body: &Value) -> Result<(f64, Value), String> {
    let start = Instant::now();
    let id = submit(daemon, body)?;
    let job = wait(daemon, &id)?;
    Ok((start.elapsed().as_secs_f64(), job))
}

/// "synthesis 1.2 s, gpu 3.4 s (ntt 0.5, msm_h 1.2, ...), finalize 0.1 s"
/// for the job's first partition.
fn stage_summary(job: &Value) -> String {
    let p = &job["partitions"][0];
    let ms = |key: &str| p["timings_ms"][key].as_f64().unwrap_or(0.0) / 1e3;
    let phases: Vec<String> = p["gpu_phases_ms"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k} {:.2}", v.as_f64().unwrap_or(0.0) / 1e3)).collect())
        .unwrap_or_default();
    format!(
        "synthesis {:.2} s, prove_start {:.2} s ({}), finalize {:.2} s",
        ms("synthesis"),
        ms("gpu"),
        phases.join(", "),
        ms("finalize")
    )
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
