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
}
trap step_table EXIT

step "format (first: a slip fails in seconds, not after the tests)"
cargo fmt --all -- --check
step "lints"
cargo clippy --workspace --all-targets --locked -- -D warnings 2>&1

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
step "tests/crash.sh"
tests/crash.sh
step "tests/hostile.py"
python3 tests/hostile.py
step "gRPC: Curio's protocol from an independent client (grpcio), 2 KiB Filecoin proofs verified by filecoin-proofs-api"
[ -x target/debug/cuzk-bench ] || cargo build --locked -p cuzk-bench 2>&1 | tail -n 1
CUZK_BENCH_BIN="$PWD/target/debug/cuzk-bench" target/grpc-venv/bin/python tests/grpc_conformance.py
step "tests/fuzz.sh"
tests/fuzz.sh
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
    step "CUDA build: everything compiles with nvcc; the kernels' tests run"
    # Only the kernels change with the feature: the rest of the suite ran
    # above. Naming a test target (the kernels' GPU tests, run below) makes
    # cargo resolve features with the dev-dependencies, as `cargo test` did:
    # every dependency but the CUDA crates is the test build's. A plain
    # `--bins` build resolved without them and compiled prost, tonic, regex
    # and env_logger again (docs/benchmarks.md, "CI time").
    cargo build --workspace --locked --features cuda --bins --test gpu_correctness 2>&1 | tail -n 1
    cargo test --locked --features cuda -p cuzk-kernels 2>&1
    step "GPU correctness tests: each says SKIPPED when no CUDA device exists"
    cargo test --locked --features cuda -p cuzk-kernels --test gpu_correctness -- --ignored --nocapture 2>&1
fi
