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

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
export LOAD_TOKEN=bench-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
cat > "$work/cuzk.toml" <<TOML
listen = "127.0.0.1:$port"
data_dir = "$work/data"
backend = "sim"

[scheduler]
budget = 68719476736

[sim]
profile = "winning-post"
time_scale = 0.0001

[limits]
max_queued_jobs = 0
TOML
RUST_LOG=warn CUZK_API_TOKENS="$LOAD_TOKEN:submit,read" "$BIN" serve --config "$work/cuzk.toml" > "$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do curl -sf "$base/healthz" > /dev/null && break; sleep 0.1; done

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
