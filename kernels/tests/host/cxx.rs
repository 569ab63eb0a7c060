//! The host harnesses' build (tests/ptx_host, tests/r1cs_host): a C++ file
//! compiled against kernels/cuda's headers, whose portable code the host
//! compiles as it is, into the test's temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `tests/<name>/<name>.cpp` with `$CXX` (default `c++`) into the
/// executable `name`; panics with the compiler's output when it fails.
pub fn harness(name: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let built = Command::new(&cxx)
        .args(["-O2", "-std=c++17", "-Wno-unknown-pragmas", "-I"])
        .arg(manifest.join("cuda"))
        .arg("-o")
        .arg(&exe)
        .arg(manifest.join(format!("tests/{name}/{name}.cpp")))
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C++ compiler {cxx}: {e}"));
    assert!(
        built.status.success(),
        "{cxx} failed on {name}.cpp:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    exe
}
