//! cuzk, the GPU proving daemon: HTTP API, proving backend, CLI client.

pub mod api;
pub mod auth;
pub mod backend;
pub mod bench_gpu;
pub mod bench_scheduler;
pub mod client;
pub mod config;
pub mod keys;
pub mod observe;
pub mod openapi;
pub mod server;
pub mod shutdown;
pub mod sim;
pub mod store;
pub mod tls;
