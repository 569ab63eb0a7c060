//! Compiles Curio's gRPC service (proto/cuzk/v1/proving.proto) into Rust at
//! build time, with protox (a protobuf compiler in Rust) instead of a system
//! `protoc`, so a fresh machine builds with cargo alone. Only the server side
//! is generated; the descriptor set is kept for src/grpc/proto/golden.rs.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/cuzk/v1/proving.proto";
    println!("cargo:rerun-if-changed={proto}");
    let mut compiler = protox::Compiler::new(["proto"])?;
    // Comments kept: tonic-build turns them into the generated items' docs.
    compiler.include_source_info(true).open_file(proto)?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("cuzk_v1_descriptor.bin"), compiler.encode_file_descriptor_set())?;
    tonic_build::configure()
        .build_client(false)
        .build_transport(false)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
