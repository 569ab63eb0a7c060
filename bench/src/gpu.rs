//! `cuzk-bench gpu`: MSM, NTT and Groth16-partition benchmarks on a CUDA
//! device against the CPU engine. The work is in
//! `cuzk_kernels::cuda::bench`, and the constraint evaluation's in
//! `gpu/eval.rs`; this module is the command's arguments.

#[cfg(feature = "cuda")]
mod eval;

/// Arguments of `cuzk-bench gpu`.
#[derive(clap::Args, Clone, Debug)]
pub struct GpuBenchArgs {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// log2 sizes of the G1 MSMs (data already on the GPU).
    #[arg(long, value_delimiter = ',', default_values_t = [16u32, 18, 20, 22, 24])]
    pub g1: Vec<u32>,
    /// log2 sizes of the G2 MSMs.
    #[arg(long, value_delimiter = ',', default_values_t = [16u32, 18, 20, 22])]
    pub g2: Vec<u32>,
    /// log2 sizes of the NTTs.
    #[arg(long, value_delimiter = ',', default_values_t = [16u32, 18, 20, 22, 24])]
    pub ntt: Vec<u32>,
    /// log2 constraint counts (domain sizes) of the Groth16 partitions.
    #[arg(long, value_delimiter = ',', default_values_t = [16u32, 18, 20, 22])]
    pub partition: Vec<u32>,
    /// Largest partition also proved by the CPU engine (all cores).
    #[arg(long, default_value_t = 20)]
    pub cpu_max_log: u32,
    /// Timed runs per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Window sizes to compare on the largest G1 MSM.
    #[arg(long, value_delimiter = ',')]
    pub sweep_c: Vec<u32>,
    /// Level-0 work item lengths (entries) to compare on the largest G1 MSM.
    #[arg(long, value_delimiter = ',')]
    pub sweep_k0: Vec<u32>,
    /// log2 sizes of the 0/1-heavy MSMs (the 0/1 split against the plain path).
    #[arg(long, value_delimiter = ',', default_values_t = [20u32, 22, 24])]
    pub zero_one: Vec<u32>,
    /// Percent of bits (0 or 1) among the 0/1-heavy MSMs' scalars.
    #[arg(long, default_value_t = 90)]
    pub bits_pct: u64,
    /// Percent of bits among the partitions' witness values (0: random).
    #[arg(long, default_value_t = 0)]
    pub partition_bits_pct: u64,
    /// Also time partitions with 1 and 2 workers sharing the engine, with
    /// the workspace pool on and off.
    #[arg(long)]
    pub pool_compare: bool,
    /// log2 domains of PoRep-shaped partitions (27: the 32 GiB shape), each
    /// with its key resident and streamed.
    #[arg(long, value_delimiter = ',')]
    pub porep: Vec<u32>,
    /// Resident budget (GiB) under which the PoRep-shaped keys stream.
    #[arg(long, default_value_t = 16)]
    pub stream_budget_gib: u64,
    /// Percent of bits among the PoRep-shaped partitions' witness values.
    #[arg(long, default_value_t = 0)]
    pub porep_bits_pct: u64,
    /// log2 domain of the PoRep-shaped partitions that saturate the devices
    /// (two workers each): kernel-active fraction and throughput.
    #[arg(long)]
    pub saturate: Option<u32>,
    /// Devices saturated together (default: --device alone).
    #[arg(long, value_delimiter = ',')]
    pub saturate_devices: Vec<usize>,
    /// Partitions each saturating worker proves.
    #[arg(long, default_value_t = 6)]
    pub saturate_per_worker: usize,
    /// log2 domain of a PoRep-shaped partition standing in for a critical
    /// job (19: the 32 GiB WinningPoSt's), timed alone and injected into
    /// the device saturated at --saturate, urgent and normal.
    #[arg(long)]
    pub urgent: Option<u32>,
    /// log2 domain of PoRep-shaped partitions proved in shared passes over
    /// their key, streamed under --stream-budget-gib: the time per
    /// partition of passes of each of --pass's sizes against passes of one.
    #[arg(long)]
    pub pass_log: Option<u32>,
    /// Partitions per shared pass (with --pass-log).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub pass: Vec<usize>,
    /// log2 domains of synthetic compiled matrices of 32 GiB PoRep's shape
    /// (27: its 130 M rows) whose evaluation on the device is timed, against
    /// the bytes it moves and the host's (up to --eval-cpu-max-log).
    #[arg(long, value_delimiter = ',')]
    pub eval: Vec<u32>,
    /// Largest --eval domain also evaluated on the host (all cores).
    #[arg(long, default_value_t = 24)]
    pub eval_cpu_max_log: u32,
}

/// Runs the benchmark; returns the result tables (markdown).
pub fn run(args: &GpuBenchArgs) -> Result<String, String> {
    #[cfg(feature = "cuda")]
    {
        use cuzk_kernels::cuda::bench::{run_bench, BenchConfig};
        let cfg = BenchConfig {
            device: args.device,
            g1_logs: args.g1.clone(),
            g2_logs: args.g2.clone(),
            ntt_logs: args.ntt.clone(),
            partition_logs: args.partition.clone(),
            cpu_max_log: args.cpu_max_log,
            runs: args.runs,
            sweep_c: args.sweep_c.clone(),
            sweep_k0: args.sweep_k0.clone(),
            zero_one_logs: args.zero_one.clone(),
            bits_pct: args.bits_pct,
            partition_bits_pct: args.partition_bits_pct,
            pool_compare: args.pool_compare,
            porep_logs: args.porep.clone(),
            stream_budget_gib: args.stream_budget_gib,
            porep_bits_pct: args.porep_bits_pct,
            saturate_log: args.saturate,
            saturate_devices: args.saturate_devices.clone(),
            saturate_per_worker: args.saturate_per_worker,
            urgent_log: args.urgent,
            pass_log: args.pass_log,
            pass_sizes: args.pass.clone(),
        };
        let mut out = run_bench(&cfg)?;
        if !args.eval.is_empty() {
            let eval = eval::run(args.device, &args.eval, args.runs, args.eval_cpu_max_log);
            out.push_str(&eval.map_err(|e| e.to_string())?);
        }
        Ok(out)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = args;
        Err(
            "this cuzk-bench was built without the `cuda` feature; rebuild with --features cuda"
                .into(),
        )
    }
}
