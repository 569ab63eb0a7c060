//! The GPU benchmark's configuration and its table helpers, shared by
//! bench.rs (MSMs, NTTs, partitions) and porep_bench.rs (PoRep-shaped
//! partitions): bench.rs calls porep_bench.rs, and both read these, so the
//! two modules do not import each other.

use std::fmt::Write as _;

/// What `cuzk bench gpu` (and `examples/gpu_bench.rs`) runs.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub device: usize,
    pub g1_logs: Vec<u32>,
    pub g2_logs: Vec<u32>,
    pub ntt_logs: Vec<u32>,
    pub partition_logs: Vec<u32>,
    /// Largest partition also proved on the CPU engine (all cores).
    pub cpu_max_log: u32,
    pub runs: usize,
    /// Window sizes to try for the largest G1 MSM (empty: the default only).
    pub sweep_c: Vec<u32>,
    /// Level-0 item lengths to try for the largest G1 MSM (`msm::level0_k`).
    pub sweep_k0: Vec<u32>,
    /// Sizes of the 0/1-heavy MSMs (G1; G2 too up to the largest of
    /// `g2_logs`), each with the 0/1 split and with the plain path.
    pub zero_one_logs: Vec<u32>,
    /// Percent of bits (0 or 1) in the 0/1-heavy MSMs' scalars.
    pub bits_pct: u64,
    /// Percent of bits in the partitions' witness (0: random values).
    pub partition_bits_pct: u64,
    /// Also time partitions with 1 and 2 workers sharing the engine, with
    /// the workspace pool on and off (`CudaOptions::pool`).
    pub pool_compare: bool,
    /// Domains (log2) of PoRep-shaped partitions (27: the 32 GiB shape),
    /// each proved with its key resident and streamed (porep_bench.rs).
    pub porep_logs: Vec<u32>,
    /// The resident budget, GiB, under which those keys stream.
    pub stream_budget_gib: u64,
    /// Percent of bits in the PoRep-shaped partitions' witness.
    pub porep_bits_pct: u64,
    /// Domain (log2) of PoRep-shaped partitions proved in shared passes
    /// over their key, streamed under `stream_budget_gib` (pass_bench.rs);
    /// `None`: not run.
    pub pass_log: Option<u32>,
    /// Partitions per pass there.
    pub pass_sizes: Vec<usize>,

    /// Domain (log2) of the PoRep-shaped partitions that saturate devices
    /// with two workers each; `None`: not run.
    pub saturate_log: Option<u32>,
    /// Devices saturated together (empty: `device` alone).
    pub saturate_devices: Vec<usize>,
    /// Partitions each saturating worker proves.
    pub saturate_per_worker: usize,
    /// Domain (log2) of a PoRep-shaped partition standing in for a critical
    /// job (the 32 GiB WinningPoSt's domain is 2^19), timed alone and
    /// injected into the device saturated at `saturate_log`, urgent and
    /// normal; `None`: not run.
    pub urgent_log: Option<u32>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            device: 0,
            g1_logs: vec![16, 18, 20, 22, 24],
            g2_logs: vec![16, 18, 20, 22],
            ntt_logs: vec![16, 18, 20, 22, 24],
            partition_logs: vec![16, 18, 20, 22],
            cpu_max_log: 20,
            runs: 5,
            sweep_c: vec![],
            sweep_k0: vec![],
            zero_one_logs: vec![20, 22, 24],
            bits_pct: 90,
            partition_bits_pct: 0,
            pool_compare: false,
            porep_logs: vec![],
            stream_budget_gib: 16,
            porep_bits_pct: 0,
            pass_log: None,
            pass_sizes: vec![1, 2, 4],
            saturate_log: None,
            saturate_devices: vec![],
            saturate_per_worker: 6,
            urgent_log: None,
        }
    }
}

/// The median of the values (the mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A result line: on stderr as it comes, and into the returned table.
pub fn line(out: &mut String, s: String) {
    eprintln!("{s}");
    let _ = writeln!(out, "{s}");
}
