//! The `cuzk` binary: `serve`, `submit`, `verify`, `params generate`, each
//! in `cuzk::cli`. It parses the arguments, runs the command and prints its
//! error.

use std::process::ExitCode;

use clap::Parser;
use cuzk::cli::Cli;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    // Runs before anything can start a thread: `serve` takes its secrets
    // out of the environment.
    match Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cuzk: {error}");
            ExitCode::FAILURE
        }
    }
}
