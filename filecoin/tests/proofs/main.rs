//! The Filecoin crate's integration tests, one binary that links the
//! Filecoin proof crates once: each module is one subject (the parameter
//! files from `generate` against filecoin-proofs-api, a key read from its
//! file, the `.params` layout, the PoSt and SnapDeals partitions, the
//! synthetic generators, the values-only witness). Filter a subject by its
//! module: `cargo test -p cuzk-filecoin --test proofs witness::`.

#![forbid(unsafe_code)]

mod filecoin_api;
mod key_in_file;
mod params_file;
mod post_update;
mod synthetic;
mod witness;
