//! The host harnesses' build (tests/ptx_host, tests/r1cs_host,
//! tests/fixed_base_host): a C++ file compiled against kernels/cuda's
//! headers, whose portable code the host compiles as it is, into the test's
//! temporary directory; and one run of a harness that reads its input from
//! a file and writes its output to another.

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

/// Runs harness `exe` as `exe IN OUT ARG`, IN holding `input` (files named
/// after `name` in the test's temporary directory, removed afterwards);
/// returns what it wrote to OUT, or panics with its error output.
#[allow(dead_code)] // ptx_host runs its harness otherwise
pub fn run(exe: &Path, name: &str, input: &[u8], arg: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (inp, out) = (dir.join(format!("{name}.in")), dir.join(format!("{name}.out")));
    std::fs::write(&inp, input).unwrap();
    let run = Command::new(exe)
        .arg(&inp)
        .arg(&out)
        .arg(arg)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", exe.display()));
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let bytes = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&inp);
    let _ = std::fs::remove_file(&out);
    bytes
}
