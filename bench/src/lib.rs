//! Benchmarks of the cuzk daemon, outside it: `scheduler` (how busy the
//! scheduler keeps every GPU, measured on a daemon started in-process) and
//! `gpu` (the CUDA kernels against the CPU engine), `filecoin` (Filecoin
//! jobs over HTTP against filecoin-proofs-api's own prover), `synthesis`
//! (the synthesis stage alone against bellperson's), `shape` (the real
//! counts of Filecoin's circuits at any sector size), `key` (a timing-only
//! key of such a shape), `c1` (a PoRep C1 output of any sector size
//! generated without sealing, and its check) and `vanilla` (PoSt and
//! SnapDeals vanilla proofs of sectors never sealed); and `curio-inputs`,
//! which writes the Filecoin fixtures' inputs as files for the gRPC
//! conformance test's client.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod c1;
pub mod curio_inputs;
pub mod filecoin;
pub mod fleet;
pub mod gpu;
pub mod key;
pub mod scheduler;
pub mod shape;
pub mod synthesis;
pub mod vanilla;
