//! `cuzk params generate`: TEST-ONLY Filecoin parameter files, written where
//! filecoin-proofs reads them, with the generators' multiplications on the
//! CPU or (a `--features cuda` build) on a CUDA device.

use std::path::PathBuf;

use cuzk_filecoin::shape_cache::ShapeCache;
use cuzk_filecoin::Generate;

use super::CliError;

/// What `cuzk params` does.
#[derive(clap::Subcommand)]
pub(super) enum ParamsCommand {
    /// Write TEST-ONLY parameters (random toxic waste, never for mainnet) in
    /// the layout and file names filecoin-proofs reads.
    Generate {
        /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB, 64GiB (or bytes).
        #[arg(long, value_parser = cuzk_filecoin::parse_sector_size)]
        sector_size: u64,
        /// Circuits, comma-separated: porep, winning, window, snap (or
        /// their API names, porep-c2 ...).
        #[arg(long, value_delimiter = ',', default_value = "porep,winning,window,snap")]
        kinds: Vec<cuzk_filecoin::Kind>,
        /// Directory to write into (filecoin-proofs reads it as
        /// FIL_PROOFS_PARAMETER_CACHE).
        #[arg(long)]
        out: PathBuf,
        /// Write files above 512 MiB too.
        #[arg(long)]
        force: bool,
        /// Where the generators' multiplications run: cpu (every core) or
        /// cuda (CUDA device 0; a `--features cuda` build only).
        #[arg(long, value_enum, default_value = "cpu")]
        engine: EngineArg,
        /// A daemon's data directory: each circuit's compiled shape, recorded
        /// here anyway, is also kept in its shapes/ so that the daemon's first
        /// preload reads it back instead of recording the circuit again.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

/// `--engine`'s values.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum EngineArg {
    Cpu,
    Cuda,
}

/// The multiplier `--engine` names.
fn multiplier(engine: EngineArg) -> Result<Box<dyn cuzk_filecoin::FixedBaseMul>, CliError> {
    match engine {
        EngineArg::Cpu => Ok(Box::new(cuzk_filecoin::CpuFixedBase::default())),
        #[cfg(feature = "cuda")]
        EngineArg::Cuda => Ok(Box::new(cuzk_filecoin::gpu_setup::CudaFixedBase::new(0)?)),
        #[cfg(not(feature = "cuda"))]
        EngineArg::Cuda => Err(CliError::Usage(
            "--engine cuda needs a cuzk built with --features cuda; this one has only --engine cpu",
        )),
    }
}

/// Runs `cuzk params`' subcommand.
pub(super) fn run(which: ParamsCommand) -> Result<(), CliError> {
    let ParamsCommand::Generate { sector_size, kinds, out, force, engine, data_dir } = which;
    let mul = multiplier(engine)?;
    let dir = data_dir.map(|d| d.join("shapes"));
    // The daemon's own rule: a shape is kept only while the filesystem keeps
    // the store's default free-space floor.
    let floor = crate::config::StoreConfig::default().min_free_bytes;
    let room = |bytes: u64| dir.as_deref().is_some_and(|dir| crate::store::room_for(dir, bytes, floor));
    let shapes = dir.as_deref().map(|dir| ShapeCache { dir, room: &room });
    let what = Generate { force, shapes: shapes.as_ref(), ..Generate::new(sector_size, &kinds, &out) };
    let files = cuzk_filecoin::generate(&what, mul.as_ref())?;
    for file in files {
        println!("{} {} bytes {} (TEST-ONLY)", file.kind.cli_name(), file.bytes, file.path.display());
    }
    Ok(())
}
