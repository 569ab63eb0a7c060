//! `cuzk-bench gpu`: the CUDA engine's kernels and partitions on one device
//! (or several) against the CPU engine, and partitions of Filecoin's 32 GiB
//! PoRep shape at scale. Needs a build with `--features cuda`, which also
//! turns on the kernels crate's `bench-internals` (its random inputs and
//! span arithmetic, public for this benchmark and the GPU tests only).
//!
//! - `args`: the command's arguments.
//! - `kernels`: the run: MSMs, NTTs and partitions, then the sections below.
//! - `porep`: PoRep-shaped partitions with their key resident and streamed,
//!   and saturated devices; `pass`: partitions sharing passes over a
//!   streamed key; `urgency`: a critical call beside a saturated device.
//! - `eval`: the device's evaluation of compiled matrices (`--eval`).
//! - `partitions`: the fabricated partitions they prove.
//! - `table`: the result lines and their medians.

mod args;
#[cfg(feature = "cuda")]
mod eval;
#[cfg(feature = "cuda")]
mod kernels;
#[cfg(feature = "cuda")]
mod partitions;
#[cfg(feature = "cuda")]
mod pass;
#[cfg(feature = "cuda")]
mod porep;
#[cfg(feature = "cuda")]
mod table;
#[cfg(feature = "cuda")]
mod urgency;

pub use args::{GpuBenchArgs, List, ListItemError};

/// Why `cuzk-bench gpu` did not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum GpuBenchError {
    /// This binary has no CUDA engine.
    #[error("this cuzk-bench was built without the `cuda` feature; rebuild with --features cuda")]
    NoCuda,
    /// The engine failed (no such device, a device fault, a refused input).
    #[error(transparent)]
    Kernel(#[from] cuzk_kernels::KernelError),
}

/// Runs the benchmark; returns the result tables (markdown).
pub fn run(args: &GpuBenchArgs) -> Result<String, GpuBenchError> {
    #[cfg(feature = "cuda")]
    {
        let mut out = kernels::run(args)?;
        if !args.eval.0.is_empty() {
            out.push_str(&eval::run(args.device, &args.eval.0, args.runs, args.eval_cpu_max_log)?);
        }
        Ok(out)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = args;
        Err(GpuBenchError::NoCuda)
    }
}
