#!/usr/bin/env bash
# Issue 27 item 4 (constraint evaluation on the device), one device call of
# under 5 minutes on the GPU machine, in the repository root, from stripped
# binaries built elsewhere with --features cuda and put in .device/eval/
# (git-ignored; carry it; the commands are in docs/gpu.md, "Build and run"):
#   gpu_correctness  kernels/tests/gpu_correctness.rs's test binary
#   filecoin         tests/filecoin.rs's test binary
#   cuzk-bench       the cuzk-bench binary
# Logs under $OUT (or ./device-eval-out):
#   1. the GPU tests of what the change touches: the evaluation, prove_start
#      (deferred and host a, b, c; resident, streamed, shared passes,
#      concurrent calls) and the NTT (its Fr accesses moved);
#   2. the device's evaluation against the host's on every 2 KiB Filecoin kind;
#   3. `cuzk-bench gpu --eval` at 2^22..2^27 (EVAL_LOGS), the other groups at
#      their smallest (BENCH_GROUPS: "--g1 , --g2 , ..." once cuzk-bench takes
#      empty lists).
set -uo pipefail
OUT="${OUT:-$PWD/device-eval-out}"
mkdir -p "$OUT"
D="${DEVICE_DIR:-.device/eval}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nproc
} | tee "$OUT/machine.txt"
echo "== GPU tests =="
timeout "${TEST_LIMIT:-150}" "$D/gpu_correctness" --ignored --test-threads=1 --nocapture \
  gpu_r1cs gpu_prove_start gpu_streamed gpu_pass gpu_concurrent gpu_ntt 2>&1 | tee "$OUT/tests.log"
echo "tests exit: ${PIPESTATUS[0]}" | tee -a "$OUT/tests.log"
echo "== Filecoin kinds =="
timeout "${FILECOIN_LIMIT:-90}" "$D/filecoin" --ignored --test-threads=1 --nocapture \
  device_evaluation_equals_the_host_on_every_kind 2>&1 | tee "$OUT/filecoin.log"
echo "filecoin exit: ${PIPESTATUS[0]}" | tee -a "$OUT/filecoin.log"
echo "== evaluation bench =="
# shellcheck disable=SC2086
timeout "${BENCH_LIMIT:-150}" "$D/cuzk-bench" gpu \
  ${BENCH_GROUPS:---g1 16 --g2 16 --ntt 16 --partition 16 --zero-one 16 --cpu-max-log 0} \
  --runs 5 --eval "${EVAL_LOGS:-22,23,24,25,26,27}" 2>"$OUT/bench.err" | tee "$OUT/bench.md"
echo "bench exit: ${PIPESTATUS[0]}" | tee -a "$OUT/bench.md"
tail -5 "$OUT/bench.err"
grep -hE "^test |test result|SKIPPED|panicked|: OK$|equal$" "$OUT/tests.log" "$OUT/filecoin.log"
