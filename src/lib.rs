//! cuzk, the GPU proving daemon: HTTP API, proving backend, CLI client.
//! docs/architecture.md ("Daemon modules") maps these modules and who may
//! import whom: `cli`, `server` and `http` on top, nothing below imports them.

#![warn(missing_docs)]

pub mod auth;
pub mod backend;
pub mod cli;
pub mod client;
pub mod config;
pub mod filecoin;
pub mod fleet;
pub mod front;
pub mod grpc;
pub mod http;
pub mod job_input;
pub mod jobs;
pub mod json_text;
pub mod keys;
pub mod param_files;
pub mod postgres;
pub mod restore;
pub mod server;
pub mod shutdown;
pub mod sim;
pub mod store;
pub mod telemetry;
pub mod tenants;
pub mod tls;
