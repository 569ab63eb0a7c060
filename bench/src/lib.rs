//! Benchmarks of the cuzk daemon, outside it: `scheduler` (how busy the
//! scheduler keeps every GPU, measured on a daemon started in-process) and
//! `gpu` (the CUDA kernels against the CPU engine) and `filecoin` (Filecoin
//! jobs over HTTP against filecoin-proofs-api's own prover).

pub mod filecoin;
pub mod gpu;
pub mod scheduler;
