//! `cuzk-bench key`: a TIMING-ONLY key of a Filecoin circuit's real shape
//! (`cuzk_filecoin::timing_key`: the counts of its blank circuit, random
//! subgroup points), written where the daemon and supraseal-c2 both read
//! parameters, so the two can be timed on the same 32 GiB or 64 GiB file.
//! Proofs made with it do not verify.

use std::path::PathBuf;
use std::time::Instant;

use cuzk_filecoin::timing_key::write_timing_key;
use cuzk_filecoin::{parse_sector_size, Kind};
use rand::RngCore;

/// Arguments of `cuzk-bench key`.
#[derive(clap::Args, Clone, Debug)]
pub struct KeyBenchArgs {
    /// Circuits: porep, winning, window, snap.
    #[arg(long, value_delimiter = ',', default_values_t = ["porep".to_string()])]
    pub kinds: Vec<String>,
    /// Sector size by name (2KiB, 32GiB, 64GiB) or bytes.
    #[arg(long, default_value = "32GiB")]
    pub sector_size: String,
    /// The parameter directory to write into (FIL_PROOFS_PARAMETER_CACHE for
    /// the daemon and supraseal-c2).
    #[arg(long)]
    pub out: PathBuf,
    /// 32 bytes of hex: the same seed writes the same points (random when
    /// not given).
    #[arg(long)]
    pub seed: Option<String>,
}

/// Writes each requested key; returns what was written, with sizes and times.
pub fn run(args: &KeyBenchArgs) -> Result<String, String> {
    let sector_size = parse_sector_size(&args.sector_size).map_err(|e| e.to_string())?;
    let seed = match &args.seed {
        Some(text) => <[u8; 32]>::try_from(hex::decode(text).map_err(|e| format!("--seed: {e}"))?)
            .map_err(|_| "--seed must be 32 bytes of hex".to_string())?,
        None => {
            let mut seed = [0; 32];
            rand::rngs::OsRng.fill_bytes(&mut seed);
            seed
        }
    };
    let mut report = format!(
        "TIMING-ONLY keys (random points, seed {}): proofs made with them do not verify\n",
        hex::encode(seed)
    );
    for name in &args.kinds {
        let kind: Kind = name.parse().map_err(|e: cuzk_filecoin::Error| e.to_string())?;
        let cli = kind.cli_name();
        let start = Instant::now();
        let files =
            write_timing_key(kind, sector_size, &args.out, seed).map_err(|e| format!("{cli}: {e}"))?;
        for file in files {
            report += &format!("{} {} bytes\n", file.path.display(), file.bytes);
        }
        report += &format!("{cli} {}: {:.1} s\n", args.sector_size, start.elapsed().as_secs_f64());
    }
    Ok(report)
}
