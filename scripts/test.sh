#!/usr/bin/env bash
# The README's test command. Installs what the tests need on a clean machine
# (only the Rust toolchain, gcc and Python are assumed), then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."

# A CI run builds once from a clean tree: incremental state would only cost
# disk (about 4 GB) and time.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

# Seconds per step, printed at the end even when a step fails, so that every
# run (CI's above all) says where its time went. `step NAME` closes the step
# before it and opens the next; the table's last line is the whole run.
STEP_NAMES=()
STEP_SECS=()
STEP_T0=$SECONDS
RUN_T0=$SECONDS
step() {
    step_close
    STEP_NAMES+=("$1")
    STEP_T0=$SECONDS
    echo "== $1"
}
step_close() {
    if [ ${#STEP_NAMES[@]} -gt ${#STEP_SECS[@]} ]; then
        STEP_SECS+=($((SECONDS - STEP_T0)))
    fi
}
step_table() {
    local rc=$?
    step_close
    echo "== seconds per step ($([ "$rc" = 0 ] && echo passed || echo "failed, exit $rc"))"
    local i
    for i in "${!STEP_SECS[@]}"; do
        printf '%6d  %s\n' "${STEP_SECS[$i]}" "${STEP_NAMES[$i]}"
    done
    printf '%6d  %s\n' $((SECONDS - RUN_T0)) "total"
    # A fuzzer still running in the background (a step beside it failed)
    # goes with the run.
    if [ -n "${FUZZ_PID:-}" ]; then kill "$FUZZ_PID" 2>/dev/null || true; fi
}
trap step_table EXIT

step "format (first: a slip fails in seconds, not after the tests)"
cargo fmt --all -- --check
# The lints ride on the build the tests need: cargo runs clippy's driver in
# place of rustc for this workspace's own crates (as `cargo clippy` does),
# so each is linted while it is compiled, and the dependencies are compiled
# once instead of a second time for a separate check build (about 400 s on
# two cores: docs/benchmarks.md, "CI time"). Every cargo command below runs
# under the same two variables, so none compiles the workspace again.
# CLIPPY_ARGS is how `cargo clippy -- -D warnings` hands its arguments to
# the driver.
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
step "build every target, linted (clippy -D warnings)"
cargo test --workspace --locked --no-run 2>&1

step "cargo test (default build: CPU backend)"
# Filecoin's test parameter files are generated once per run and shared by
# every test process (the PoRep file alone takes minutes).
export CUZK_TEST_PARAMS_DIR="$PWD/target/test-params"
cargo test --workspace --locked 2>&1

step "Debian packages the script tests need"
scripts/install-test-deps.sh
# The daemon binary cargo test built: a plain `cargo build` resolves
# features without the dev-dependencies and would rebuild the Filecoin stack.
export CUZK_BIN="$PWD/target/debug/cuzk"
[ -x "$CUZK_BIN" ] || cargo build --locked --bin cuzk 2>&1 | tail -n 1

# The fuzzer runs for a set time (tests/fuzz.sh: 150 s of fuzzing) however
# busy the machine is, mostly on one core: it starts here, beside the
# PostgreSQL suites and the ui and dashboard checks, which wait on a
# database and on Prometheus as much as they compute, and the step that
# waits for it prints its log. Not beside the crash, hostile, gRPC or load
# tests: they time what a daemon does.
FUZZ_LOG="$PWD/target/fuzz.log"
tests/fuzz.sh > "$FUZZ_LOG" 2>&1 &
FUZZ_PID=$!

step "PostgreSQL: the store suite, the database restarted under it, leases, shared keys, a daemon restarted on it, a fleet"
# The same build as above: the tests named postgres, now with a database.
# Those that stop, restart or reconfigure it (pg_outage, pg_tls) and the
# fleet (which restarts it too, and runs processes of its own) go one at a
# time after the others, so that none takes the database from a test using it.
scripts/pg-test-cluster.sh bash -c '
    cargo test --workspace --locked --test daemon -- postgres --skip pg_outage:: --skip pg_tls:: --skip fleet:: 2>&1 &&
    cargo test --workspace --locked --test daemon -- --test-threads=1 pg_outage:: pg_tls:: fleet:: 2>&1'
step "PostgreSQL: the API tests once more (one suite, two stores: each daemon a fleet of one node)"
CUZK_TEST_STORE=postgres scripts/pg-test-cluster.sh cargo test --workspace --locked --test daemon -- api:: 2>&1
step "PostgreSQL: the crash test once more"
# Single quotes: the URL is the cluster's, set inside the script.
scripts/pg-test-cluster.sh bash -c 'CUZK_STORE_URL=$CUZK_TEST_PG_URL tests/crash.sh'
step "tests/ui.sh"
tests/ui.sh
step "scripts/check-dashboards.sh"
scripts/check-dashboards.sh
step "tests/fuzz.sh (started beside the PostgreSQL steps): what is left of it"
fuzz_rc=0
wait "$FUZZ_PID" || fuzz_rc=$?
FUZZ_PID=
cat "$FUZZ_LOG"
[ "$fuzz_rc" = 0 ] || { echo "tests/fuzz.sh failed (exit $fuzz_rc)"; exit "$fuzz_rc"; }
step "tests/crash.sh"
tests/crash.sh
step "tests/hostile.py"
python3 tests/hostile.py
step "gRPC: Curio's protocol from an independent client (grpcio), 2 KiB Filecoin proofs verified by filecoin-proofs-api"
[ -x target/debug/cuzk-bench ] || cargo build --locked -p cuzk-bench 2>&1 | tail -n 1
CUZK_BENCH_BIN="$PWD/target/debug/cuzk-bench" target/grpc-venv/bin/python tests/grpc_conformance.py
step "tests/load.sh"
tests/load.sh

if [ "${CUZK_SKIP_CUDA_BUILD:-0}" != 1 ] && [ -f kernels/build.rs ] && [ -d kernels/cuda ]; then
    step "CUDA toolchain"
    NVCC=$(scripts/install-cuda-toolchain.sh)
    export NVCC
    # One machine-code target, sm_90 (the GPU machines'), plus compute_90
    # PTX, which build.rs always adds: every kernel still goes through nvcc
    # and ptxas. The default adds sm_80, the same source compiled again
    # (nothing in kernels/cuda depends on the architecture's version), at
    # about 3 minutes per build on two cores.
    export CUZK_CUDA_ARCHS="${CUZK_CUDA_ARCHS:-90}"
    step "CUDA build: everything compiles with nvcc; the unit tests of the crates it changes run"
    # Features are resolved over the packages a command selects. Naming
    # only the kernels (`-p cuzk-kernels`) resolved serde, syn, libc and a
    # dozen more without the features the daemon's packages ask of them, and
    # compiled them, and most of the kernels' dependencies after them, a
    # second time. Selecting the daemon's package beside the kernels
    # resolves the dependencies as the build above did: the CUDA crates,
    # the workspace's own crates and the regex stack (regex-syntax with
    # fewer features, about a minute) are all that is compiled here. The
    # kernels' host tests (tests/host: C++ harnesses and the CPU engine)
    # are the same code with or without the feature and ran in the CPU
    # step: only the unit tests, which `cuda` adds to, run again.
    cuda_tests=(--workspace --exclude cuzk-filecoin --exclude cuzk-bench --exclude cuzk-actors --locked --features cuda)
    cargo build --workspace --locked --features cuda --bins --test gpu_correctness 2>&1 | tail -n 1
    cargo test "${cuda_tests[@]}" --lib --bins 2>&1
    step "GPU correctness tests: each says SKIPPED when no CUDA device exists"
    cargo test "${cuda_tests[@]}" --test gpu_correctness -- --ignored --nocapture 2>&1
fi
