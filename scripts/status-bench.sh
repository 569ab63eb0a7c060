#!/usr/bin/env bash
# GET /v1/status throughput on one simulated daemon, first with one retained
# job, then with STATUS_JOBS retained (finished) jobs: the status answer is
# kept as counts, so the two should match (docs/benchmarks.md). Needs wrk
# (scripts/install-test-deps.sh).
#
#   scripts/status-bench.sh            # target/debug/cuzk, 20000 jobs, 10 s each
#   CUZK_BIN=... STATUS_JOBS=20000 STATUS_SECONDS=10 scripts/status-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${CUZK_BIN:-target/debug/cuzk}
JOBS=${STATUS_JOBS:-20000}
SECONDS_EACH=${STATUS_SECONDS:-10}

work=$(mktemp -d)
daemon=
cleanup() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

. tests/load/sim-daemon.sh
start_sim_daemon "$(printf '[limits]\nmax_queued_jobs = 0')"

finished() {
    curl -sf -H "Authorization: Bearer $LOAD_TOKEN" "$base/v1/status" |
        python3 -c 'import json, sys; j = json.load(sys.stdin)["jobs"]; print(j["done"] + j["failed"] + j["cancelled"])'
}
submit_and_wait() { # total jobs wanted
    LOAD_JOBS=$(( $1 - $(finished) )) LOAD_THREADS=2 LOAD_PARTITIONS=1 \
        wrk -t2 -c2 -d600s --timeout 10s -s tests/load/submit.lua "$base" > "$work/submit.out" 2>&1 &
    local submitter=$!
    while [ "$(finished)" -lt "$1" ]; do sleep 0.5; done
    kill -INT "$submitter" 2>/dev/null || true
    wait "$submitter" 2>/dev/null || true
}
measure() { # label
    local rps
    rps=$(wrk -t2 -c8 -d"${SECONDS_EACH}s" -H "Authorization: Bearer $LOAD_TOKEN" "$base/v1/status" |
        awk '/Requests\/sec/ {print $2}')
    echo "status-bench: $1: $rps requests/s (wrk -t2 -c8 -d${SECONDS_EACH}s)"
}

submit_and_wait 1
measure "1 retained job"
submit_and_wait "$JOBS"
measure "$(finished) retained jobs"
measure "$(finished) retained jobs (second run)"
