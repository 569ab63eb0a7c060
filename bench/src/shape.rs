//! `cuzk-bench shape`: the real shapes of Filecoin's circuits at any sector
//! size, counted from their blank circuits (constraints, variables, the A and
//! B densities) without holding their rows, so 32 GiB PoRep's 130 million
//! constraints fit a small machine. The simulated backend's profiles and the
//! GPU benchmarks' fabricated partitions are derived from these counts
//! (docs/benchmarks.md).

use std::time::Instant;

use cuzk_filecoin::{parse_sector_size, Kind};

/// Arguments of `cuzk-bench shape`.
#[derive(clap::Args, Clone, Debug)]
pub struct ShapeBenchArgs {
    /// Circuits: porep, winning, window, snap (or their API names).
    #[arg(long, value_delimiter = ',', default_value = "porep,winning")]
    pub kinds: Vec<Kind>,
    /// Sector sizes by name (2KiB, 32GiB) or bytes.
    #[arg(long, value_delimiter = ',', default_values_t = ["2KiB".to_string()])]
    pub sector_sizes: Vec<String>,
    /// Also record the rows (compiled matrices) and report their memory;
    /// only for sizes whose matrices fit in memory.
    #[arg(long)]
    pub rows: bool,
    /// Also seal a 2 KiB sector (test fixture) and count the 0/1 values of
    /// its PoRep partition's witness, per MSM (the GPU benchmark's
    /// PoRep-shaped partitions take their share of bits from it).
    #[arg(long)]
    pub witness: bool,
}

/// Counts every requested circuit; returns the table (markdown).
pub fn run(args: &ShapeBenchArgs) -> Result<String, String> {
    let mut table = String::from(
        "| circuit | sector | constraints (with inputs) | domain | inputs | aux | A-dense aux | B-dense variables | B share | matrices MiB | recorded in s |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for size in &args.sector_sizes {
        let bytes = parse_sector_size(size).map_err(|e| e.to_string())?;
        for &kind in &args.kinds {
            let start = Instant::now();
            let blank = if args.rows { kind.blank(bytes) } else { kind.blank_counts(bytes) }
                .map_err(|e| format!("{} at {size}: {e}", kind.cli_name()))?;
            let seconds = start.elapsed().as_secs_f64();
            let shape = &blank.shape;
            let d = &shape.densities;
            let a_dense = d.a_aux.iter().filter(|&&x| x).count();
            let b_dense = d.b_query_len();
            let variables = shape.num_inputs() + shape.num_aux();
            let matrices = if args.rows {
                format!("{:.0}", shape.matrices.resident_bytes() as f64 / f64::from(1 << 20))
            } else {
                "-".into()
            };
            table += &format!(
                "| {} | {size} | {} | 2^{} | {} | {} | {a_dense} | {b_dense} | {:.1}% | {matrices} | {seconds:.1} |\n",
                kind.cli_name(),
                shape.num_constraints(),
                shape.domain_size().ilog2(),
                shape.num_inputs(),
                shape.num_aux(),
                100.0 * b_dense as f64 / variables as f64,
            );
        }
    }
    if args.witness {
        table += &witness_bits()?;
    }
    Ok(table)
}

/// Shares of 0 and 1 among the scalars of each MSM of the 2 KiB PoRep
/// partition's real witness: L (every aux value), A (the A-dense aux, the
/// inputs after ONE), B (the B-dense inputs and aux).
fn witness_bits() -> Result<String, String> {
    use cuzk_filecoin::fixtures::{self, PROVER_ID};
    use cuzk_filecoin::porep::PorepRequest;
    use cuzk_filecoin::record::{Evaluation, Recorded};
    use cuzk_filecoin::ProofRequest;
    use cuzk_kernels::Fr;
    let sector = fixtures::seal(1).map_err(|e| format!("{e:#}"))?;
    let request = PorepRequest { c1: sector.c1, prover_id: PROVER_ID, sector_id: u64::from(sector.id) };
    let start = Instant::now();
    let recorded = request.record_partition(0, Evaluation::Direct).map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let Recorded::Witness(w) = recorded else {
        return Err("the direct evaluation records the witness".into());
    };
    let bit = |x: &Fr| *x == Fr::from(0u64) || *x == Fr::from(1u64);
    let share = |values: &mut dyn Iterator<Item = &Fr>| {
        let (mut bits, mut all) = (0usize, 0usize);
        for v in values {
            all += 1;
            bits += usize::from(bit(v));
        }
        (bits, all)
    };
    let d = &w.densities;
    let rows = [
        ("L (all aux)", share(&mut w.aux.iter())),
        (
            "A (inputs, A-dense aux)",
            share(
                &mut w.inputs[1..]
                    .iter()
                    .chain(w.aux.iter().zip(&d.a_aux).filter(|(_, &on)| on).map(|(v, _)| v)),
            ),
        ),
        (
            "B (B-dense inputs and aux)",
            share(
                &mut w
                    .inputs
                    .iter()
                    .zip(&d.b_input)
                    .filter(|(_, &on)| on)
                    .map(|(v, _)| v)
                    .chain(w.aux.iter().zip(&d.b_aux).filter(|(_, &on)| on).map(|(v, _)| v)),
            ),
        ),
    ];
    let mut out = format!(
        "\n2 KiB PoRep partition 0's witness (synthesized in {seconds:.1} s): scalars equal to 0 or 1 per MSM\n\n| MSM | scalars | 0 or 1 | share |\n| --- | --- | --- | --- |\n"
    );
    for (name, (bits, all)) in rows {
        out += &format!("| {name} | {all} | {bits} | {:.1}% |\n", 100.0 * bits as f64 / all.max(1) as f64);
    }
    Ok(out)
}
