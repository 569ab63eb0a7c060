#!/usr/bin/env bash
# Load test of the HTTP API on loopback with wrk: LOAD_JOBS (10,000) jobs of
# LOAD_PARTITIONS (2) partitions submitted to the simulated backend (time
# scale 1e-4), while GET /v1/status is polled, every request with a token. Asserts that every
# job completes, that the daemon's peak RSS stays under LOAD_MAX_RSS_MB, and
# prints p50/p99 latency of submit and of status. The queue limit is kept at
# its default (1024) on purpose: submitters honour 429 + Retry-After.
#
#   tests/load.sh                       # needs wrk (Debian: apt-get install wrk)
#   CUZK_BIN=target/release/cuzk LOAD_JOBS=2000 tests/load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${CUZK_BIN:-target/debug/cuzk}
export LOAD_JOBS=${LOAD_JOBS:-10000}
export LOAD_PARTITIONS=${LOAD_PARTITIONS:-2}
export LOAD_THREADS=2
export LOAD_POLL_MS=${LOAD_POLL_MS:-5}
MAX_RSS_MB=${LOAD_MAX_RSS_MB:-256}
DEADLINE_S=${LOAD_DEADLINE_S:-240}

command -v wrk > /dev/null || { echo "load: wrk is not installed (apt-get install wrk)"; exit 1; }
[ -x "$BIN" ] || cargo build --locked --bin cuzk

work=$(mktemp -d)
daemon=
poller=
submitter=
cleanup() {
    for pid in $poller $submitter $daemon; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            wait "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$work"
}
trap cleanup EXIT

. tests/load/sim-daemon.sh
start_sim_daemon "$(printf '[auth]\nread_requires_token = true')" || { echo "load: FAILED"; exit 1; }

status() { curl -sf -H "Authorization: Bearer $LOAD_TOKEN" "$base/v1/status"; }
started=$(date +%s.%N)

# Both wrk runs are stopped with SIGINT (wrk then prints its figures): the
# submitter once the daemon holds LOAD_JOBS jobs (its threads stop sending at
# their quotas), the poller once every job has finished.
wrk -t1 -c2 -d "${DEADLINE_S}s" --latency -s tests/load/status.lua "$base" > "$work/status.out" 2>&1 &
poller=$!
# With -c equal to -t, no request is in flight when a thread meets its quota.
wrk -t"$LOAD_THREADS" -c"$LOAD_THREADS" -d "${DEADLINE_S}s" --timeout 10s --latency \
    -s tests/load/submit.lua "$base" > "$work/submit.out" 2>&1 &
submitter=$!

# jobs: done, unfinished, failed or cancelled, all
counts() {
    status | python3 -c 'import json, sys; j = json.load(sys.stdin)["jobs"]; print(j["done"], j["queued"] + j["running"], j["failed"] + j["cancelled"], sum(j.values()))'
}
elapsed_over_deadline() { [ "$(echo "$(date +%s.%N) - $started > $DEADLINE_S" | bc)" = 1 ]; }
while :; do
    read -r done unfinished other all <<< "$(counts)"
    [ "$all" -ge "$LOAD_JOBS" ] && break
    kill -0 "$submitter" 2>/dev/null || { cat "$work/submit.out"; echo "load: FAILED, wrk (submit) ended early"; exit 1; }
    elapsed_over_deadline && { echo "load: FAILED, $all of $LOAD_JOBS submitted after ${DEADLINE_S}s"; exit 1; }
    sleep 0.2
done
kill -INT "$submitter"
wait "$submitter" || true
submitted_at=$(date +%s.%N)

while :; do
    read -r done unfinished other all <<< "$(counts)"
    [ "$unfinished" = 0 ] && break
    elapsed_over_deadline && { echo "load: FAILED, $unfinished jobs unfinished after ${DEADLINE_S}s"; exit 1; }
    sleep 0.2
done
finished_at=$(date +%s.%N)
kill -INT "$poller"
wait "$poller" || true
poller=

rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
finished_metric=$(curl -sf -H "Authorization: Bearer $LOAD_TOKEN" "$base/metrics" | awk '/^cuzk_jobs_finished_total\{outcome="done"\}/ {print $2}')
alive=$(curl -sf "$base/healthz" > /dev/null && echo yes || echo no)

cat "$work/submit.out"
submit_line=$(grep '^SUBMIT' "$work/submit.out")
status_line=$(grep '^STATUS' "$work/status.out")
submit_s=$(echo "$submitted_at - $started" | bc)
total_s=$(echo "$finished_at - $started" | bc)
echo "load: $LOAD_JOBS jobs x $LOAD_PARTITIONS partitions; submitted in ${submit_s}s, all finished after ${total_s}s"
echo "load: $submit_line"
echo "load: $status_line (2 connections, each ${LOAD_POLL_MS} ms apart, for the whole run)"
echo "load: accepted=$all done=$done failed_or_cancelled=$other cuzk_jobs_finished_total{done}=$finished_metric peak_rss=$((rss_kb / 1024)) MiB (bound $MAX_RSS_MB MiB) alive=$alive"

fail=0
# A wrk thread may send one request more as it stops: at least LOAD_JOBS
# were accepted, and every accepted job must be done.
[ "$all" -ge "$LOAD_JOBS" ] && [ "$done" = "$all" ] || { echo "load: FAILED, $done of $all jobs done"; fail=1; }
[ "$finished_metric" = "$all" ] || { echo "load: FAILED, the metric says $finished_metric done"; fail=1; }
[ "$((rss_kb / 1024))" -lt "$MAX_RSS_MB" ] || { echo "load: FAILED, peak RSS over $MAX_RSS_MB MiB"; fail=1; }
grep -q 'unexpected=0' <<< "$submit_line" || { echo "load: FAILED, unexpected submit answers"; fail=1; }
grep -q 'non_200=0' <<< "$status_line" || { echo "load: FAILED, status answered other than 200"; fail=1; }
[ "$alive" = yes ] || fail=1
[ "$fail" = 0 ] && echo "load: PASSED"
exit "$fail"
