//! `cuzk params generate`: TEST-ONLY Filecoin parameter files, written where
//! filecoin-proofs reads them.

use std::path::PathBuf;

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
    },
}

/// Runs `cuzk params`' subcommand.
pub(super) fn run(which: ParamsCommand) -> Result<(), CliError> {
    let ParamsCommand::Generate { sector_size, kinds, out, force } = which;
    let files = cuzk_filecoin::generate(sector_size, &kinds, &out, force)?;
    for file in files {
        println!("{} {} bytes {} (TEST-ONLY)", file.kind.cli_name(), file.bytes, file.path.display());
    }
    Ok(())
}
