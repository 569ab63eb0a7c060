//! The Rust side of proto/cuzk/v1/proving.proto, generated at build time
//! (build.rs): the messages and the `ProvingEngine` server trait, and the
//! compiled descriptor set the golden test reads.

#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/cuzk.v1.rs"));

/// The compiled `FileDescriptorSet` of proving.proto (protobuf-encoded).
pub const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuzk_v1_descriptor.bin"));

#[cfg(test)]
mod golden;
