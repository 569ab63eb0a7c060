//! Benchmarks of the cuzk daemon, outside it: `scheduler` (how busy the
//! scheduler keeps every GPU, measured on a daemon started in-process) and
//! `gpu` (the CUDA kernels against the CPU engine), `filecoin` (Filecoin
//! jobs over HTTP against filecoin-proofs-api's own prover), `synthesis`
//! (the synthesis stage alone against bellperson's) and `shape` (the real
//! counts of Filecoin's circuits at any sector size); and `curio-inputs`,
//! which writes the Filecoin fixtures' inputs as files for the gRPC
//! conformance test's client.

pub mod curio_inputs;
pub mod filecoin;
pub mod fleet;
pub mod gpu;
pub mod scheduler;
pub mod shape;
pub mod synthesis;
