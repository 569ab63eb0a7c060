//! The `cuzk-bench` command: `scheduler`, `fleet`, `gpu`, `filecoin`, `synthesis`,
//! `shape`, `key`, `c1`, `vanilla` and `curio-inputs` (test inputs for a gRPC client). A binary of its own because this crate depends on the daemon's
//! library (it starts a daemon in-process), so the daemon's `cuzk` binary
//! cannot depend on it.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cuzk-bench", version, about = "Benchmarks of the cuzk proving daemon")]
struct Cli {
    #[command(subcommand)]
    which: Command,
}

#[derive(Subcommand)]
enum Command {
    /// How busy the scheduler keeps every GPU (simulated backend).
    Scheduler(cuzk_bench::scheduler::SchedulerBenchArgs),
    /// N daemons sharing one PostgreSQL (simulated backend): throughput,
    /// busy fractions and the database's cost, for each N.
    Fleet(cuzk_bench::fleet::FleetBenchArgs),
    /// MSM, NTT and whole partitions on a CUDA device against the CPU engine
    /// (needs a build with `--features cuda`).
    Gpu(cuzk_bench::gpu::GpuBenchArgs),
    /// Filecoin jobs (2 KiB PoRep C2, SnapDeals) over HTTP against
    /// filecoin-proofs-api's bellperson prover, on the CPU or CUDA engine.
    Filecoin(cuzk_bench::filecoin::FilecoinBenchArgs),
    /// The synthesis stage alone (direct and compiled evaluation) against
    /// bellperson's synthesis of the same Filecoin circuit.
    Synthesis(cuzk_bench::synthesis::SynthesisBenchArgs),
    /// Constraints, variables and densities of Filecoin's circuits at any
    /// sector size, from their blank circuits.
    Shape(cuzk_bench::shape::ShapeBenchArgs),
    /// A TIMING-ONLY parameter file of a Filecoin circuit's real shape
    /// (random points; proofs made with it do not verify).
    Key(cuzk_bench::key::KeyBenchArgs),
    /// A PoRep C1 output of any sector size generated without sealing, or
    /// one read from a file; its partitions' circuits checked on request.
    C1(cuzk_bench::c1::C1Args),
    /// WinningPoSt, WindowPoSt or SnapDeals vanilla proofs of sectors never
    /// sealed: a job body and the verifier's input.
    Vanilla(cuzk_bench::vanilla::VanillaArgs),
    /// Writes the 2 KiB Filecoin fixtures' inputs (a C1 output, PoSt and
    /// SnapDeals vanilla proofs, commitments) as files and a manifest, for
    /// a gRPC client that wraps them in Curio's encodings itself.
    CurioInputs(cuzk_bench::curio_inputs::CurioInputsArgs),
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.which {
        Command::Scheduler(args) => cuzk_bench::scheduler::run(&args),
        Command::Fleet(args) => {
            println!("{}", cuzk_bench::fleet::run(&args)?);
            Ok(())
        }
        Command::Gpu(args) => {
            println!("{}", cuzk_bench::gpu::run(&args).map_err(|e| e.to_string())?);
            Ok(())
        }
        Command::Filecoin(args) => {
            println!("{}", cuzk_bench::filecoin::run(&args)?);
            Ok(())
        }
        Command::Synthesis(args) => {
            println!("{}", cuzk_bench::synthesis::run(&args)?);
            Ok(())
        }
        Command::Shape(args) => {
            println!("{}", cuzk_bench::shape::run(&args)?);
            Ok(())
        }
        Command::Key(args) => {
            println!("{}", cuzk_bench::key::run(&args)?);
            Ok(())
        }
        Command::C1(args) => {
            println!("{}", cuzk_bench::c1::run(&args)?);
            Ok(())
        }
        Command::Vanilla(args) => {
            println!("{}", cuzk_bench::vanilla::run(&args)?);
            Ok(())
        }
        Command::CurioInputs(args) => {
            println!("{}", cuzk_bench::curio_inputs::run(&args)?.display());
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    cuzk_bench::synthesis::install_logger();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("cuzk-bench: {message}");
            ExitCode::FAILURE
        }
    }
}
