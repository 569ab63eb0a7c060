#!/usr/bin/env bash
# Runs on the GPU machine: the daemon with backend = "cuda" serving real jobs,
# proofs checked by `cuzk verify`. Needs .device/cuzk built with
# --features cuda. Logs under $OUT.
set -uo pipefail
OUT="${OUT:-$PWD/gpu-e2e-out}"
mkdir -p "$OUT"
BIN="${DEVICE_DIR:-.device}/cuzk"
DATA=$(mktemp -d)
cat > "$OUT/cuzk.toml" <<TOML
listen = "127.0.0.1:9830"
data_dir = "$DATA"
backend = "cuda"
TOML
RUST_LOG=info "$BIN" serve --config "$OUT/cuzk.toml" > "$OUT/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null' EXIT
for _ in $(seq 50); do curl -sf localhost:9830/healthz >/dev/null && break; sleep 0.2; done
status=0
for job in 'poseidon-merkle {"depth":8,"challenges":2} 4' 'mimc-chain {"log2_constraints":16} 2'; do
    set -- $job
    echo "== $1 $2 x$3"
    timeout 300 "$BIN" submit --server http://127.0.0.1:9830 --circuit "$1" --params "$2" \
        --partitions "$3" --seed 7 --out "$OUT/proofs-$1.json" || status=1
    timeout 60 "$BIN" verify --server http://127.0.0.1:9830 "$OUT/proofs-$1.json" || status=1
done
# A burst of jobs, then what the workers did meanwhile: /v1/workers before
# and after (idle seconds by cause), and the timeline as CSV.
echo "== burst: ${BURST_JOBS:=12} mimc-chain k=${BURST_K:=16} jobs x2 at once"
curl -s localhost:9830/v1/workers?spans=0 > "$OUT/workers-before.json"
for seed in $(seq 1 "$BURST_JOBS"); do
    curl -s -X POST localhost:9830/v1/jobs -H 'Content-Type: application/json' \
        -d "{\"circuit\":\"mimc-chain\",\"params\":{\"log2_constraints\":$BURST_K},\"partitions\":2,\"seed\":$((100 + seed))}" > /dev/null
done
for _ in $(seq 600); do
    curl -s localhost:9830/v1/status | grep -q '"queued":0,"running":0' && break
    sleep 0.5
done
curl -s localhost:9830/v1/workers?spans=100 > "$OUT/workers-after.json"
curl -s -H 'Accept: text/csv' "localhost:9830/v1/timeline?since=0" > "$OUT/timeline.csv"
curl -s localhost:9830/v1/status > "$OUT/status.json"
curl -s localhost:9830/metrics > "$OUT/metrics.txt"
grep -E 'cuzk_gpu_phase_duration_seconds_(sum|count)' "$OUT/metrics.txt"
echo "e2e exit: $status"
exit $status
