//! The daemon's integration tests, one binary: each module is one subject
//! (`api`, `limits`, `job_store`, …) and shares `common`'s helpers. One
//! binary links the Filecoin stack once, where a binary per file linked it
//! eighteen times.
//!
//! Three subjects stay binaries of their own, since what they measure is the
//! whole process's: `metrics_catalogue` and `observe` read the process-wide
//! metrics recorder, which every daemon of a process adds to; and
//! `reservation_peak` installs a counting global allocator that sees every
//! thread. Filter a subject here by its module: `cargo test --test daemon
//! limits::`.
//!
//! The tests that stop, restart or reconfigure the test PostgreSQL
//! (`pg_outage`, `pg_tls`, `fleet`) must not run beside the other
//! PostgreSQL tests: scripts/test.sh runs them in a run of their own.

#![forbid(unsafe_code)]

#[path = "../common/mod.rs"]
mod common;

mod api;
mod bad_input;
mod deploy_config;
mod durability;
mod faults;
mod filecoin;
mod fleet;
mod job_store;
mod limits;
mod module_graph;
mod pg_keys;
mod pg_leases;
mod pg_outage;
mod pg_tls;
mod security;
mod setup;
mod sim_profiles;
mod tenants;
