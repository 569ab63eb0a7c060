//! `cuzk-bench fleet`: N daemons (the simulated backend, in this process)
//! sharing one PostgreSQL, for each N asked (1, 2, 4 by default), each in a
//! schema of its own. A feeder keeps the fleet's queue full by submitting
//! jobs to the nodes in turn; after a warm-up, one window is measured:
//! partitions proved per second (from the database), each simulated
//! device's busy fraction (its one GPU worker's busy time over the window,
//! from each node's /v1/workers), the claim statement's latency (p50, p99, from
//! `cuzk_fleet_db_seconds{op="claim"}`, to its bucket's bound) and the
//! database's own cost per partition (statements and milliseconds of
//! execution from `pg_stat_statements`, when the server preloads it:
//! `CUZK_PG_PRELOAD=pg_stat_statements scripts/pg-test-cluster.sh ...`).
//! The target (issue 14): throughput with N nodes at least 0.95 × N × one
//! node's, and busy fractions within a point of one node's.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk::postgres::StoreUrl;
use cuzk::server::{self, RunningDaemon};
use cuzk_kernels::circuits::CircuitRegistry;
use postgres::{Client, NoTls};
use serde_json::Value;

use crate::scheduler::plan::Plan;
use crate::scheduler::SchedulerBenchArgs;

/// Arguments of `cuzk-bench fleet`.
#[derive(clap::Args, Clone, Debug)]
pub struct FleetBenchArgs {
    /// Fleet sizes, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub nodes: Vec<usize>,
    /// The database (scripts/pg-test-cluster.sh sets CUZK_TEST_PG_URL).
    #[arg(long, env = "CUZK_TEST_PG_URL", hide_env_values = true)]
    pub url: String,
    /// Simulated backend profile of every node.
    #[arg(long, default_value = "porep-32g")]
    pub profile: String,
    /// Simulated GPU devices per node.
    #[arg(long, default_value_t = 1)]
    pub devices: usize,
    /// Multiplies every simulated duration: large enough that the machine's
    /// cores are not what limits N nodes.
    #[arg(long, default_value_t = 0.05)]
    pub time_scale: f64,
    /// Seconds measured per run, after the warm-up.
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Seconds of pipeline fill left out [default: the scheduler
    /// benchmark's for the profile].
    #[arg(long)]
    pub warmup: Option<f64>,
}

/// One run's figures.
struct Figures {
    nodes: usize,
    partitions_per_s: f64,
    /// Per node, per device: its worker's busy fraction.
    busy: Vec<Vec<f64>>,
    claim_p50_ms: f64,
    claim_p99_ms: f64,
    /// (statements, milliseconds) per partition; None without the extension.
    database: Option<(f64, f64)>,
}

/// Runs the fleet benchmark and returns its report.
pub fn run(args: &FleetBenchArgs) -> Result<String, String> {
    let node_args = SchedulerBenchArgs {
        profile: args.profile.clone(),
        devices: args.devices,
        // One worker per device: its busy time is the device's, and any gap
        // in feeding it (a claim too late, synthesis behind) shows as idle.
        workers_per_device: 1,
        duration: args.duration,
        time_scale: args.time_scale,
        jitter: 0.1,
        budget: None,
        synthesis_threads: None,
        finalizer_threads: None,
        status_load: 0.0,
        finalizer_stall_ms: 0,
        warmup: args.warmup,
        no_pacer: false,
        json: false,
        svg: None,
    };
    let plan = Plan::new(&node_args)?;
    let mut runs = Vec::new();
    for &n in &args.nodes {
        eprintln!("fleet of {n}: {} s warm-up, {} s measured", plan.warmup.as_secs_f64(), args.duration);
        runs.push(measure(args, &plan, n)?);
    }
    Ok(report(args, &plan, &runs))
}

fn measure(args: &FleetBenchArgs, plan: &Plan, n: usize) -> Result<Figures, String> {
    let db = |e: postgres::Error| format!("database: {e}");
    let mut admin = Client::connect(&args.url, NoTls).map_err(db)?;
    let schema = format!("fleet_bench_{}", uuid::Uuid::new_v4().simple());
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).map_err(db)?;
    let separator = if args.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}options=-c%20search_path%3D{schema}", args.url);
    let figures = run_fleet(plan, n, &url);
    let _ = admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
    figures
}

fn run_fleet(plan: &Plan, n: usize, url: &str) -> Result<Figures, String> {
    let dirs: Vec<tempfile::TempDir> =
        (0..n).map(|_| tempfile::tempdir().map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let mut nodes = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let mut config = plan.config(dir.path());
        config.store.url = Some(StoreUrl::new(url));
        config.fleet.node = Some(format!("bench-{i}"));
        config.fleet.poll_secs = 1;
        nodes.push(server::spawn(config, CircuitRegistry::builtin()).map_err(|e| e.to_string())?);
    }
    let urls: Vec<String> = nodes.iter().map(RunningDaemon::url).collect();
    let mut client = Client::connect(url, NoTls).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    // Enough waiting that no node ever finds the queue empty: every node's
    // room (its synthesis threads and one) twice over.
    let low_water = 2 * n * (plan.synthesis_threads + 1);
    let feeder = {
        let (urls, url, stop, body) = (urls.clone(), url.to_string(), stop.clone(), plan.job_body());
        std::thread::spawn(move || feed(&urls, &url, low_water, &body, &stop))
    };
    std::thread::sleep(plan.warmup);
    let statements = Client::connect(url, NoTls)
        .and_then(|mut c| c.batch_execute("SELECT public.pg_stat_statements_reset()").map(|()| c))
        .ok();
    let before = Sample::take(&urls, &mut client)?;
    std::thread::sleep(plan.duration);
    let after = Sample::take(&urls, &mut client)?;
    let database = statements.and_then(|mut c| {
        let row = c
            .query_one(
                "SELECT sum(calls)::float8, sum(total_exec_time)::float8 FROM public.pg_stat_statements
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .ok()?;
        Some((row.get::<_, Option<f64>>(0)?, row.get::<_, Option<f64>>(1)?))
    });
    stop.store(true, Ordering::Relaxed);
    let _ = feeder.join();
    for node in nodes {
        node.stop();
    }
    let seconds = after.at.duration_since(before.at).as_secs_f64();
    let proved = (after.proved - before.proved) as f64;
    let busy = before
        .busy
        .iter()
        .zip(&after.busy)
        .map(|(b, a)| b.iter().zip(a).map(|(b, a)| (a - b) / seconds).collect())
        .collect();
    let claims: Vec<(f64, f64)> =
        after.claim_buckets.iter().zip(&before.claim_buckets).map(|(a, b)| (a.0, a.1 - b.1)).collect();
    Ok(Figures {
        nodes: n,
        partitions_per_s: proved / seconds,
        busy,
        claim_p50_ms: 1e3 * quantile(&claims, 0.5),
        claim_p99_ms: 1e3 * quantile(&claims, 0.99),
        database: database.map(|(calls, ms)| (calls / proved, ms / proved)),
    })
}

/// Submits jobs to the nodes in turn while fewer than `low_water`
/// partitions wait to be claimed.
fn feed(urls: &[String], url: &str, low_water: usize, body: &Value, stop: &AtomicBool) {
    let Ok(mut client) = Client::connect(url, NoTls) else { return };
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
    let (mut next, mut seed) = (0, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let waiting: i64 = client
            .query_one("SELECT count(*) FROM cuzk_leases WHERE owner IS NULL OR lease_until < now()", &[])
            .map_or(0, |row| row.get(0));
        for _ in waiting.max(0) as usize..low_water {
            let mut job = body.clone();
            job["seed"] = seed.into();
            seed += 1;
            let _ = agent.post(&format!("{}/v1/jobs", urls[next % urls.len()])).send_json(job);
            next += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What is read at each end of the window.
struct Sample {
    at: Instant,
    proved: i64,
    /// Per node, per device: its worker's busy seconds.
    busy: Vec<Vec<f64>>,
    /// The claim histogram: (bucket bound, cumulative count).
    claim_buckets: Vec<(f64, f64)>,
}

impl Sample {
    fn take(urls: &[String], client: &mut Client) -> Result<Sample, String> {
        let at = Instant::now();
        let proved: i64 = client
            .query_one("SELECT count(*) FROM cuzk_partitions WHERE proof IS NOT NULL", &[])
            .map_err(|e| e.to_string())?
            .get(0);
        let agent = ureq::agent();
        let mut busy = Vec::new();
        for url in urls {
            let workers: Value = agent
                .get(&format!("{url}/v1/workers?spans=0"))
                .call()
                .map_err(|e| e.to_string())?
                .into_json()
                .map_err(|e| e.to_string())?;
            let mut devices: Vec<(f64, f64)> = Vec::new();
            for worker in workers["workers"].as_array().into_iter().flatten() {
                let device = worker["device"].as_u64().unwrap_or(0) as usize;
                if devices.len() <= device {
                    devices.resize(device + 1, (0.0, 0.0));
                }
                devices[device].0 += worker["busy_seconds"].as_f64().unwrap_or(0.0);
                devices[device].1 += 1.0;
            }
            busy.push(devices.into_iter().map(|(seconds, workers)| seconds / workers).collect());
        }
        // One process, one recorder: any node's /metrics has every node's
        // claims.
        let metrics = agent.get(&format!("{}/metrics", urls[0])).call().map_err(|e| e.to_string())?;
        let text = metrics.into_string().map_err(|e| e.to_string())?;
        let claim_buckets = text
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cuzk_fleet_db_seconds_bucket{")?;
                if !rest.contains("op=\"claim\"") {
                    return None;
                }
                let bound = rest.split("le=\"").nth(1)?.split('"').next()?;
                let count = line.rsplit(' ').next()?.parse().ok()?;
                Some((if bound == "+Inf" { f64::INFINITY } else { bound.parse().ok()? }, count))
            })
            .collect();
        Ok(Sample { at, proved, busy, claim_buckets })
    }
}

/// The bound of the bucket holding quantile `q` of a cumulative histogram.
fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    let total = buckets.iter().map(|b| b.1).fold(0.0, f64::max);
    buckets.iter().find(|b| b.1 >= q * total).map_or(f64::NAN, |b| b.0)
}

fn report(args: &FleetBenchArgs, plan: &Plan, runs: &[Figures]) -> String {
    let mut out = format!(
        "fleet benchmark: profile {}, time scale {}, {} device(s) x 1 worker per node, {} synthesis threads per node, {} s measured\n",
        args.profile, args.time_scale, args.devices, plan.synthesis_threads, args.duration
    );
    out.push_str("| nodes | partitions/s | vs N x one node | busy per device | claim p50 / p99 (bucket bound) | DB per partition |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- |\n");
    let single = runs.iter().find(|r| r.nodes == 1).map(|r| r.partitions_per_s);
    for run in runs {
        let scaling = single
            .map_or("-".to_string(), |one| format!("{:.3}", run.partitions_per_s / (run.nodes as f64 * one)));
        let busy: Vec<String> = run.busy.iter().flatten().map(|b| format!("{:.3}", b)).collect();
        let database =
            run.database.map_or("not measured (pg_stat_statements not preloaded)".into(), |(s, ms)| {
                format!("{s:.1} statements, {ms:.2} ms")
            });
        let _ = writeln!(
            out,
            "| {} | {:.2} | {} | {} | ≤{} ms / ≤{} ms | {} |",
            run.nodes,
            run.partitions_per_s,
            scaling,
            busy.join(" "),
            run.claim_p50_ms,
            run.claim_p99_ms,
            database
        );
    }
    out
}
