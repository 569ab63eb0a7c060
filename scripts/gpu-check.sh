#!/usr/bin/env bash
# Runs on the GPU machine, in the repository root: the GPU correctness tests,
# then the benchmark, from binaries built elsewhere with --features cuda and
# copied into .device/ (git-ignored; carry it):
#   .device/gpu_correctness  the test binary of kernels/tests/gpu_correctness.rs
#                            (cargo test --release -p cuzk-kernels --features cuda
#                             --test gpu_correctness --no-run --message-format=json
#                             names it)
#   .device/cuzk-bench       target/release/cuzk-bench (cargo build --release
#                            -p cuzk-bench --features cuda), run as `cuzk-bench gpu`
#   .device/filecoin         optional: the daemon's test binary, tests/daemon/ (cargo
#                            test --release -p cuzk --features cuda --test daemon
#                            --no-run), for its filecoin:: device test: the device's a, b, c against the host's on
#                            every 2 KiB Filecoin kind
# Writes logs under $OUT (or ./gpu-check-out). Each step has a time limit so
# the whole script ends well inside a 10-minute call.
#   TEST_FILTER   tests to run (default: all gpu_ tests)
#   TEST_LIMIT    seconds for the tests (default 240)
#   BENCH_ARGS    arguments for `cuzk-bench gpu` (default: its defaults; a list
#                 given as ',' skips that group: --g1 , --g2 20)
#   BENCH_LIMIT   seconds for the benchmark (default 300)
set -uo pipefail
OUT="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$OUT"
DIR="${DEVICE_DIR:-.device}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv 2>&1
  nproc
} | tee "$OUT/machine.txt"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== tests =="
  timeout "${TEST_LIMIT:-240}" "$DIR/gpu_correctness" --ignored --test-threads=1 --nocapture ${TEST_FILTER:-} 2>&1 | tee "$OUT/tests.log"
  echo "tests exit: ${PIPESTATUS[0]}" | tee -a "$OUT/tests.log"
fi
if [ -x "$DIR/filecoin" ]; then
  echo "== Filecoin kinds =="
  timeout "${FILECOIN_LIMIT:-150}" "$DIR/filecoin" --ignored --test-threads=1 --nocapture \
    device_evaluation_equals_the_host_on_every_kind 2>&1 | tee "$OUT/filecoin.log"
  echo "filecoin exit: ${PIPESTATUS[0]}" | tee -a "$OUT/filecoin.log"
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  echo "== bench =="
  # shellcheck disable=SC2086
  timeout "${BENCH_LIMIT:-300}" "$DIR/cuzk-bench" gpu ${BENCH_ARGS:-} 2>"$OUT/bench.err" | tee "$OUT/bench.md"
  echo "bench exit: ${PIPESTATUS[0]}" | tee -a "$OUT/bench.md"
  tail -5 "$OUT/bench.err"
fi
grep -hE "^test |test result|SKIPPED|panicked|OK$" "$OUT/tests.log" "$OUT/filecoin.log" 2>/dev/null
