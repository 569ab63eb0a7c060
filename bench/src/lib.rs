//! Benchmarks of the cuzk daemon, outside it: `scheduler` (how busy the
//! scheduler keeps every GPU, measured on a daemon started in-process) and
//! `gpu` (the CUDA kernels against the CPU engine).

pub mod gpu;
pub mod scheduler;
