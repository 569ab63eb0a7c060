//! The arguments of `cuzk-bench gpu`, and the list type its size lists
//! take (a list given as `,` or `''` is empty, which skips that group).

use std::str::FromStr;

/// Arguments of `cuzk-bench gpu`. A list given as `,` or `''` is empty: that
/// group is skipped (`--g1 , --g2 20` times G2 alone).
#[derive(clap::Args, Clone, Debug)]
pub struct GpuBenchArgs {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// log2 sizes of the G1 MSMs (data already on the GPU).
    #[arg(long, default_value = "16,18,20,22,24")]
    pub g1: List<u32>,
    /// log2 sizes of the G2 MSMs.
    #[arg(long, default_value = "16,18,20,22")]
    pub g2: List<u32>,
    /// log2 sizes of the NTTs.
    #[arg(long, default_value = "16,18,20,22,24")]
    pub ntt: List<u32>,
    /// log2 constraint counts (domain sizes) of the Groth16 partitions.
    #[arg(long, default_value = "16,18,20,22")]
    pub partition: List<u32>,
    /// Largest partition also proved by the CPU engine (all cores).
    #[arg(long, default_value_t = 20)]
    pub cpu_max_log: u32,
    /// Timed runs per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Window sizes to compare on the largest G1 MSM.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub sweep_c: List<u32>,
    /// Level-0 work item lengths (entries) to compare on the largest G1 MSM
    /// (`msm::level0_k` picks one otherwise).
    #[arg(long, default_value = "", hide_default_value = true)]
    pub sweep_k0: List<u32>,
    /// log2 sizes of the 0/1-heavy MSMs (G1; G2 too up to the largest of
    /// --g2), each with the 0/1 split and with the plain path.
    #[arg(long, default_value = "20,22,24")]
    pub zero_one: List<u32>,
    /// Percent of bits (0 or 1) among the 0/1-heavy MSMs' scalars.
    #[arg(long, default_value_t = 90)]
    pub bits_pct: u64,
    /// Percent of bits among the partitions' witness values (0: random).
    #[arg(long, default_value_t = 0)]
    pub partition_bits_pct: u64,
    /// Also time partitions with 1 and 2 workers sharing the engine, with
    /// the workspace pool on and off (a value may follow: `--pool-compare 1`
    /// as the recorded commands give it, `false`, `0`).
    #[arg(long, num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub pool_compare: bool,
    /// log2 domains of PoRep-shaped partitions (27: the 32 GiB shape), each
    /// with its key resident and streamed.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub porep: List<u32>,
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
    #[arg(long, default_value = "", hide_default_value = true)]
    pub saturate_devices: List<usize>,
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
    #[arg(long, default_value = "1,2,4")]
    pub pass: List<usize>,
    /// log2 domains of synthetic compiled matrices of 32 GiB PoRep's shape
    /// (27: its 130 M rows) whose evaluation on the device is timed, against
    /// the bytes it moves and the host's (up to --eval-cpu-max-log).
    #[arg(long, default_value = "", hide_default_value = true)]
    pub eval: List<u32>,
    /// Largest --eval domain also evaluated on the host (all cores).
    #[arg(long, default_value_t = 24)]
    pub eval_cpu_max_log: u32,
}

/// A comma-separated list argument whose empty items are skipped, so that
/// `--g1 ,` and `--g1 ''` both mean "none": the form the commands recorded
/// in docs/gpu.md and docs/benchmarks.md use to skip a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

/// An item of a list argument that its type refuses.
#[derive(Debug, thiserror::Error)]
#[error("{item:?} in the list: {source}")]
pub struct ListItemError<E: std::error::Error + 'static> {
    /// The item as given.
    pub item: String,
    /// Why the item's type refused it.
    #[source]
    pub source: E,
}

impl<T: FromStr> FromStr for List<T>
where
    T::Err: std::error::Error + 'static,
{
    type Err = ListItemError<T::Err>;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        (s.split(',').map(str::trim).filter(|item| !item.is_empty()))
            .map(|item| item.parse().map_err(|source| ListItemError { item: item.to_string(), source }))
            .collect::<Result<_, _>>()
            .map(List)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{GpuBenchArgs, List};

    /// The command line as `cuzk-bench gpu` would get it.
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GpuBenchArgs,
    }

    fn parse(line: &[&str]) -> Result<GpuBenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("gpu").chain(line.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn a_comma_or_nothing_is_an_empty_list() {
        let args = parse(&["--g1", ",", "--g2", "", "--ntt", "20"]).unwrap();
        assert_eq!(args.g1, List(vec![]));
        assert_eq!(args.g2, List(vec![]));
        assert_eq!(args.ntt, List(vec![20]));
        assert_eq!(parse(&["--partition", "20, 22,"]).unwrap().partition.0, [20, 22]);
        // Lists not given keep their defaults; those without one are empty.
        assert_eq!(args.zero_one, List(vec![20, 22, 24]));
        assert_eq!(args.pass, List(vec![1, 2, 4]));
        assert_eq!(args.porep, List(vec![]));
        assert!(!args.pool_compare);
    }

    #[test]
    fn a_bad_item_is_refused_by_name() {
        let err = parse(&["--g1", "20,x"]).expect_err("x is no size");
        assert!(err.to_string().contains("\"x\" in the list"), "{err}");
        assert!(parse(&["--saturate-devices", "0,-1"]).is_err());
    }

    #[test]
    fn pool_compare_is_a_flag_that_may_take_a_value() {
        let pool_compare = |line: &[&str]| parse(line).unwrap().pool_compare;
        assert!(pool_compare(&["--pool-compare"]));
        assert!(pool_compare(&["--pool-compare", "1", "--g1", ","]));
        assert!(!pool_compare(&["--pool-compare", "0"]));
        assert!(pool_compare(&["--pool-compare", "--runs", "3"]));
    }
}
