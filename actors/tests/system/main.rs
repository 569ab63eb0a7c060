//! The actor system's integration tests, one binary: each module is one
//! subject (the critical lane, isolation of the GPU workers, properties over
//! random job mixes, retries, worker accounting), sharing `common`'s timed
//! backend and gate. Filter a subject by its module: `cargo test -p cuzk-actors
//! --test system retries::`.

#![forbid(unsafe_code)]

mod common;

mod critical_lane;
mod durability;
mod isolation;
mod properties;
mod retries;
mod worker_accounting;
