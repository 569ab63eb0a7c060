#!/usr/bin/env bash
# Crash test: 50 small real jobs on the CPU backend survive a kill -9 and a
# SIGTERM. The daemon is killed with work in flight, restarted on the same
# data directory, stopped again by SIGTERM (which must exit 0), restarted,
# and then every job must be done with exactly one valid proof per partition
# and its idempotency key must still name it.
#
#   tests/crash.sh                     # builds target/debug/cuzk first
#   CUZK_BIN=path/to/cuzk tests/crash.sh
#
# Needs bash and python3 (standard library only). Bounded in time: every
# wait has a limit, and the whole run stops after CRASH_TIME_LIMIT seconds.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

JOBS=${CRASH_JOBS:-50}
TIME_LIMIT=${CRASH_TIME_LIMIT:-900}
# A port below the kernel's ephemeral range: one inside it can be taken, as
# the local end of an outgoing connection (the daemon's own to PostgreSQL),
# before the daemon listens on it (seen once in CI: "Address already in use").
EPHEMERAL_LOW=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "${EPHEMERAL_LOW:-0}" -gt 12000 ] 2>/dev/null || EPHEMERAL_LOW=32768
PORT=${CRASH_PORT:-$((10000 + RANDOM % (EPHEMERAL_LOW - 10000)))}
URL="http://127.0.0.1:$PORT"
if [ -n "${CUZK_BIN:-}" ]; then
    BIN=$CUZK_BIN
else
    cargo build --locked --bin cuzk >&2
    BIN=target/debug/cuzk
fi

WORK=$(mktemp -d)
DATA="$WORK/data"
LOG="$WORK/daemon.log"
PID=""
cleanup() {
    if [ -n "$PID" ]; then kill -9 "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# Everything to stderr: it may run inside a command substitution.
fail() {
    {
        echo "--- last lines of the daemon log:"
        tail -n 30 "$LOG" || true
        echo "crash test: failed after ${SECONDS}s: $*"
    } >&2
    exit 1
}

check_time() {
    [ "$SECONDS" -lt "$TIME_LIMIT" ] || fail "over the ${TIME_LIMIT}s limit"
}

cat >"$WORK/cuzk.toml" <<EOF
shutdown_grace_secs = 60

[scheduler]
synthesis_threads = 1
budget = 2147483648

[cpu]
threads_per_device = 2
EOF

# The HTTP side, in Python's standard library only.
cat >"$WORK/client.py" <<'EOF'
import json, sys, urllib.error, urllib.request

url, command = sys.argv[1], sys.argv[2]

def call(method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())

def job_body(i):
    # Two shapes, one to three partitions each.
    if i % 2:
        body = {"circuit": "poseidon-merkle", "params": {"depth": 4, "challenges": 2}}
    else:
        body = {"circuit": "mimc-chain", "params": {"log2_constraints": 9}}
    body.update({"partitions": i % 3 + 1, "seed": 1000 + i})
    return body

if command == "submit":
    for i in range(int(sys.argv[3])):
        status, answer = call("POST", "/v1/jobs", job_body(i), {"Idempotency-Key": f"crash-{i}"})
        if status != 202:
            sys.exit(f"job {i}: HTTP {status} {answer}")
        print(answer["id"], job_body(i)["partitions"])
elif command == "resubmit":
    # Every idempotency key still names its job after the restarts.
    for i, line in enumerate(open(sys.argv[3])):
        status, answer = call("POST", "/v1/jobs", job_body(i), {"Idempotency-Key": f"crash-{i}"})
        if (status, answer.get("id")) != (200, line.split()[0]):
            sys.exit(f"job {i}: repeated key answered HTTP {status} {answer}")
elif command == "post-one":
    status, answer = call("POST", "/v1/jobs", job_body(0), {"Idempotency-Key": "after-sigterm"})
    print(status, answer.get("reason", ""))
elif command == "count-done":
    done = 0
    for line in open(sys.argv[3]):
        job_id = line.split()[0]
        status, job = call("GET", f"/v1/jobs/{job_id}")
        if status != 200:
            sys.exit(f"job {job_id} lost: HTTP {status} {job}")
        if job["status"] in ("failed", "cancelled"):
            sys.exit(f"job {job_id} {job['status']}: {job.get('error')}")
        done += job["status"] == "done"
    print(done)
elif command == "fetch-proofs":
    # Writes <dir>/<id>.json for every job whose proofs are complete; prints
    # one line per job that is not.
    for line in open(sys.argv[3]):
        job_id, partitions = line.split()
        status, doc = call("GET", f"/v1/jobs/{job_id}/proofs")
        if status != 200:
            print(f"{job_id}: proofs HTTP {status} {doc}")
            continue
        indices = sorted(p["partition"] for p in doc["proofs"])
        if indices != list(range(int(partitions))):
            print(f"{job_id}: partitions {indices}, expected 0..{partitions}")
            continue
        with open(f"{sys.argv[4]}/{job_id}.json", "w") as out:
            json.dump(doc, out)
EOF
client() { python3 "$WORK/client.py" "$URL" "$@"; }

start_daemon() {
    "$BIN" serve --config "$WORK/cuzk.toml" --listen "127.0.0.1:$PORT" \
        --data-dir "$DATA" --backend cpu >>"$LOG" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        if python3 -c "import urllib.request; urllib.request.urlopen('$URL/healthz', timeout=1)" 2>/dev/null; then
            return
        fi
        kill -0 "$PID" 2>/dev/null || fail "the daemon exited while starting"
        sleep 0.1
    done
    fail "the daemon did not answer within 60s"
}

done_count() { client count-done "$WORK/jobs" || fail "a job was lost or failed"; }

# Waits until at least $1 jobs are done; fails if all are (nothing in flight).
wait_until_done() {
    local want=$1 finished
    while :; do
        check_time
        finished=$(done_count)
        [ "$finished" -ge "$JOBS" ] && fail "all $JOBS jobs finished before the interruption; make them bigger"
        [ "$finished" -ge "$want" ] && { echo "$finished"; return; }
        sleep 0.5
    done
}

start_daemon
client submit "$JOBS" >"$WORK/jobs" || fail "submission failed"
echo "submitted $JOBS jobs ($(awk '{s+=$2} END {print s}' "$WORK/jobs") partitions)" >&2

# 1. kill -9 with work in flight.
before_kill=$(wait_until_done 5)
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
echo "kill -9 with $before_kill of $JOBS done" >&2

start_daemon
after_kill=$(done_count)
[ "$after_kill" -ge "$before_kill" ] || fail "$before_kill jobs were done before the kill, $after_kill after"

# 2. SIGTERM with work in flight: refuses new jobs, exits 0.
before_term=$(wait_until_done $((after_kill + 5)))
term_started=$SECONDS
kill -TERM "$PID"
refused=$(client post-one 2>/dev/null || echo "gone")
set +e
wait "$PID"
code=$?
set -e
PID=""
[ "$code" -eq 0 ] || fail "SIGTERM: exit code $code"
case "$refused" in
    "503 shutting_down" | gone) ;;
    *) fail "a job submitted during shutdown got: $refused" ;;
esac
echo "SIGTERM with $before_term of $JOBS done: exit 0 after $((SECONDS - term_started))s (a submit during the drain: $refused)" >&2

start_daemon
after_term=$(done_count)
[ "$after_term" -ge "$before_term" ] || fail "$before_term jobs were done before SIGTERM, $after_term after"

# 3. Everything finishes, nothing lost, every proof verifies.
while :; do
    finished=$(done_count)
    [ "$finished" -ge "$JOBS" ] && break
    check_time
    sleep 1
done
client resubmit "$WORK/jobs" || fail "idempotency keys did not survive the restarts"
mkdir -p "$WORK/proofs"
incomplete=$(client fetch-proofs "$WORK/jobs" "$WORK/proofs")
[ -z "$incomplete" ] || echo "$incomplete" >&2
passed=0
failed=0
while read -r id _; do
    if [ -f "$WORK/proofs/$id.json" ] &&
        "$BIN" verify --server "$URL" "$WORK/proofs/$id.json" >"$WORK/verify.out" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "job $id: $(tail -n 1 "$WORK/verify.out" 2>/dev/null)" >&2
    fi
done <"$WORK/jobs"
kill -0 "$PID" 2>/dev/null || fail "the daemon died"
python3 -c "import urllib.request; urllib.request.urlopen('$URL/healthz', timeout=5)" ||
    fail "the daemon stopped answering"
kill -TERM "$PID"
wait "$PID" || fail "final SIGTERM: exit code $?"
PID=""

echo "crash test: $passed passed, $failed failed (${SECONDS}s)"
[ "$failed" -eq 0 ]
