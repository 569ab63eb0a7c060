#!/usr/bin/env bash
# The README's test command. Installs what the tests need on a clean machine
# (only the Rust toolchain, gcc and Python are assumed), then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test (default build: CPU backend)"
cargo test --workspace --locked 2>&1

echo "== script tests against a running daemon (Debian packages they need first)"
scripts/install-test-deps.sh
cargo build --locked --bin cuzk 2>&1 | tail -n 1
export CUZK_BIN="$PWD/target/debug/cuzk"
tests/ui.sh
scripts/check-dashboards.sh
tests/crash.sh
tests/fuzz.sh
tests/load.sh

if [ "${CUZK_SKIP_CUDA_BUILD:-0}" != 1 ] && [ -f kernels/build.rs ] && [ -d kernels/cuda ]; then
    echo "== CUDA build: kernels compile with nvcc; GPU tests report themselves skipped without a GPU"
    NVCC=$(scripts/install-cuda-toolchain.sh)
    export NVCC
    cargo test --workspace --locked --features cuda 2>&1
    echo "== GPU correctness tests: each says SKIPPED when no CUDA device exists"
    cargo test --locked --features cuda -p cuzk-kernels --test gpu_correctness -- --ignored --nocapture 2>&1
fi
