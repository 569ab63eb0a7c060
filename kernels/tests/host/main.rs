//! The kernels' host-side integration tests, one binary: the PTX carry
//! chains, the constraint evaluation and the setup's fixed-base
//! multiplication checked through C++ harnesses
//! (`cxx` builds them), and the three-stage split on the CPU engine. The
//! GPU tests stay a binary of their own (`gpu_correctness`): it is built
//! only with the `cuda` feature, is run with `--ignored` in a step of its
//! own, and sets the process's environment (the MSM window sizes).

#![forbid(unsafe_code)]

mod cxx;

mod fixed_base_host;
mod ptx_host;
mod r1cs_host;
mod three_stage;
