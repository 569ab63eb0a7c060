//! Standalone GPU benchmark (the same code as `cuzk bench gpu`), for runs on
//! the GPU machine without the daemon:
//!   gpu_bench [--device N] [--g1 16,18,..] [--g2 ..] [--ntt ..] [--partition ..]
//!             [--cpu-max-log 20] [--runs 5] [--sweep-c 13,16,18] [--sweep-k0 32,64,128]
//!             [--zero-one 20,22,24] [--bits-pct 90] [--partition-bits-pct 0]
//!             [--pool-compare 1] [--porep 27] [--stream-budget-gib 16]
//!             [--porep-bits-pct N] [--saturate 25] [--saturate-devices 0,1]
//!             [--saturate-per-worker 6] [--urgent 19]
//!             [--pass-log 27] [--pass 1,2,4]
//! An empty list ("--g2 ''") skips that group.
#[cfg(feature = "cuda")]
fn main() {
    use cuzk_kernels::cuda::bench::{run_bench, BenchConfig};
    let mut cfg = BenchConfig::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let list = |s: &str| -> Vec<u32> {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.trim().parse().expect("a number"))
            .collect()
    };
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--device" => cfg.device = v.parse().unwrap(),
            "--g1" => cfg.g1_logs = list(&v),
            "--g2" => cfg.g2_logs = list(&v),
            "--ntt" => cfg.ntt_logs = list(&v),
            "--partition" => cfg.partition_logs = list(&v),
            "--cpu-max-log" => cfg.cpu_max_log = v.parse().unwrap(),
            "--runs" => cfg.runs = v.parse().unwrap(),
            "--sweep-c" => cfg.sweep_c = list(&v),
            "--sweep-k0" => cfg.sweep_k0 = list(&v),
            "--zero-one" => cfg.zero_one_logs = list(&v),
            "--bits-pct" => cfg.bits_pct = v.parse().unwrap(),
            "--partition-bits-pct" => cfg.partition_bits_pct = v.parse().unwrap(),
            "--pool-compare" => cfg.pool_compare = v == "1",
            "--porep" => cfg.porep_logs = list(&v),
            "--stream-budget-gib" => cfg.stream_budget_gib = v.parse().unwrap(),
            "--porep-bits-pct" => cfg.porep_bits_pct = v.parse().unwrap(),
            "--saturate" => cfg.saturate_log = list(&v).first().copied(),
            "--saturate-devices" => {
                cfg.saturate_devices = list(&v).into_iter().map(|d| d as usize).collect()
            }
            "--saturate-per-worker" => cfg.saturate_per_worker = v.parse().unwrap(),
            "--urgent" => cfg.urgent_log = list(&v).first().copied(),
            "--pass-log" => cfg.pass_log = list(&v).first().copied(),
            "--pass" => cfg.pass_sizes = list(&v).into_iter().map(|p| p as usize).collect(),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    match run_bench(&cfg) {
        Ok(table) => println!("{table}"),
        Err(e) => {
            eprintln!("gpu bench failed: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("gpu_bench needs the `cuda` feature");
    std::process::exit(1);
}
