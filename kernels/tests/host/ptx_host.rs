//! The device's field arithmetic on PTX carry chains (kernels/cuda/
//! field_ptx.cuh: products, squares, sums of two products, additions,
//! subtractions), checked on the host on every build, GPU or not: the C++
//! harness in tests/ptx_host/ runs the same templates over an emulated carry
//! flag against the portable CIOS of field.cuh, on fresh random values and
//! the edges 0, 1 and p - 1. The GPU tests then check what nvcc made of it.

use crate::cxx;

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// Cases per operation: about a second on one core.
const CASES: u32 = 200_000;

#[test]
fn ptx_field_arithmetic_equals_the_portable_code() {
    let exe = cxx::harness("ptx_host");
    // A new seed each run (printed, so that a failure can be replayed with
    // `ptx_host SEED CASES`).
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let run =
        Command::new(&exe).arg(seed.to_string()).arg(CASES.to_string()).output().expect("running ptx_host");
    let report = String::from_utf8_lossy(&run.stdout);
    eprintln!("{report}");
    assert!(run.status.success(), "emulated PTX arithmetic differs:\n{report}");
    assert!(
        report.contains(&format!("{CASES} cases per operation, 0 mismatches, 0 carries lost")),
        "unexpected report: {report}"
    );
}
