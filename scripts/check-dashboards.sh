#!/usr/bin/env bash
# Tests the Grafana dashboards for real: starts a cuzk daemon with the sim
# backend (2 devices, injected faults) on a free loopback port, loads it (jobs
# of every priority, missed deadlines, cancelled and failed jobs, retries, actor
# restarts, 4xx requests), starts a real Prometheus scraping it every second,
# then evaluates every PromQL expression of every dashboard through
# Prometheus's HTTP API (scripts/check_dashboards.py): each must parse and
# return data, and the load must have produced every outcome (--expect). Also
# checks the dashboards' JSON (uids, panel ids, datasource uids against
# deploy/grafana/provisioning).
#
# Needs: bash, python3, coreutils, Prometheus (Debian: apt-get install -y prometheus).
# Environment:
#   CUZK_BIN         daemon binary (default target/debug/cuzk, built if missing)
#   PROMETHEUS_BIN   prometheus binary (default: from PATH, then /usr/bin/prometheus)
#   WARMUP_SECONDS   load before the checks start (default 25)
#   SIM_PROFILE      porep-32g (default) or winning-post
#   KEEP_TMP=1       keep the temp dir (logs, TSDB) for inspection
# Last line: "dashboards: N passed, M failed"; exit status non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

warmup="${WARMUP_SECONDS:-25}"
profile="${SIM_PROFILE:-porep-32g}"
started=$(date +%s)

die() { echo "check-dashboards: $*" >&2; echo "dashboards: 0 passed, 1 failed"; exit 1; }

command -v python3 >/dev/null || die "python3 not found"

prom="${PROMETHEUS_BIN:-$(command -v prometheus || true)}"
[ -n "$prom" ] || [ ! -x /usr/bin/prometheus ] || prom=/usr/bin/prometheus
[ -n "$prom" ] && [ -x "$prom" ] || die "prometheus not found: apt-get install -y prometheus (or set PROMETHEUS_BIN)"

bin="${CUZK_BIN:-$root/target/debug/cuzk}"
if [ ! -x "$bin" ]; then
    [ -z "${CUZK_BIN:-}" ] || die "CUZK_BIN=$CUZK_BIN is not executable"
    echo "== building cuzk (target/debug/cuzk missing)"
    cargo build --bin cuzk 2>&1 | tail -n 3
    [ -x "$bin" ] || die "build produced no $bin"
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/cuzk-dashboards.XXXXXX")"
pids=()
# shellcheck disable=SC2329 # invoked by the EXIT trap
cleanup() {
    local rc=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        # Bounded: a process that ignores SIGTERM for 10 s gets SIGKILL.
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "$rc" -ne 0 ]; then
        for log in cuzk.log prometheus.log load.log; do
            [ -s "$tmp/$log" ] && { echo "--- last lines of $log"; tail -n 15 "$tmp/$log"; }
        done
    fi
    if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# GET url within seconds (python, not curl: curl is not assumed).
wait_http() { # url seconds
    python3 - "$1" "$2" <<'PY'
import sys, time, urllib.request
url, deadline = sys.argv[1], time.time() + float(sys.argv[2])
while True:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    if time.time() > deadline:
        sys.exit(1)
    time.sleep(0.2)
PY
}

cuzk_port=$(free_port)
prom_port=$(free_port)
while [ "$prom_port" = "$cuzk_port" ]; do prom_port=$(free_port); done

# --- the daemon: sim backend, 2 devices x (2 general + 1 critical-lane)
# workers, 100x faster than real.
# A budget of 4 porep-32g partitions (38 GiB each, the real circuit's
# reservation) so that partitions also wait for memory; the sim holds no real
# memory.
cat > "$tmp/cuzk.toml" <<EOF
listen = "127.0.0.1:$cuzk_port"
data_dir = "$tmp/data"
backend = "sim"
shutdown_grace_secs = 2

[scheduler]
synthesis_threads = 4
workers_per_device = 2
critical_workers_per_device = 1
budget = $(( 4 * 38 * 1024 * 1024 * 1024 + 1024 * 1024 * 1024 ))
# Two attempts: with the faults below some partitions fail both, so jobs
# also end failed.
max_attempts = 2

[sim]
profile = "$profile"
time_scale = 0.01
jitter = 0.2
devices = 2

# Injected faults, so that retries, actor restarts, failed jobs and failed
# GPU stages have data.
[sim.faults]
seed = 7
[sim.faults.synthesis]
error_rate = 0.12
panic_rate = 0.02
[sim.faults.prove]
error_rate = 0.03
panic_rate = 0.02
[sim.faults.finalize]
error_rate = 0.03
panic_rate = 0.02
EOF
echo "== cuzk $("$bin" --version 2>/dev/null | head -n1) on 127.0.0.1:$cuzk_port (sim $profile, 2 devices)"
RUST_LOG=warn "$bin" serve --config "$tmp/cuzk.toml" > "$tmp/cuzk.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$cuzk_port/healthz" 30 || die "cuzk did not answer /healthz within 30 s"

# --- Prometheus, scraping every second.
cat > "$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: cuzk
    static_configs:
      - targets: ["127.0.0.1:$cuzk_port"]
EOF
echo "== $("$prom" --version 2>&1 | head -n1) on 127.0.0.1:$prom_port"
"$prom" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn > "$tmp/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$prom_port/-/ready" 30 || die "prometheus not ready within 30 s"

# --- load: runs until killed (at exit), so rate windows stay filled while
# the checks run.
cat > "$tmp/load.py" <<'EOF'
import json, random, sys, time, urllib.error, urllib.request

base = sys.argv[1]
rng = random.Random(7)

def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None

def job(partitions, priority, deadline_ms=None):
    body = {"circuit": "poseidon-merkle", "params": {"depth": 8, "challenges": 2},
            "partitions": partitions, "priority": priority, "seed": rng.randrange(1 << 32)}
    if deadline_ms is not None:
        body["deadline_ms"] = deadline_ms
    status, answer = call("POST", "/v1/jobs", body)
    if status != 202:
        print("submit answered", status, answer, flush=True)
        return None
    return answer["id"]

def cancel_one():
    jid = job(12, "low")
    if jid:
        print("cancel", call("POST", f"/v1/jobs/{jid}/cancel")[0], flush=True)

# 4xx answers for the HTTP panels: unknown circuit (422), unknown job (404).
call("POST", "/v1/jobs", {"circuit": "no-such-circuit", "partitions": 1, "seed": 1})
call("GET", "/v1/jobs/00000000000000000000000000000000")
cancel_one()
outstanding = []
last_cancel = time.time()
n = 0
while True:
    still = []
    for jid in outstanding:
        status, answer = call("GET", f"/v1/jobs/{jid}")
        if status == 200 and answer["status"] in ("queued", "running"):
            still.append(jid)
    outstanding = still
    while len(outstanding) < 6:
        n += 1
        priority = ["low", "normal", "high", "critical"][n % 4]
        # Every third job has a deadline it cannot meet.
        deadline = 1 if n % 3 == 0 else 600000
        jid = job(rng.randint(1, 4), priority, deadline)
        if jid:
            outstanding.append(jid)
    if time.time() - last_cancel > 5:
        cancel_one()
        last_cancel = time.time()
    call("GET", "/v1/status")
    time.sleep(0.1)
EOF
python3 -u "$tmp/load.py" "http://127.0.0.1:$cuzk_port" > "$tmp/load.log" 2>&1 &
pids+=($!)

echo "== load for ${warmup}s"
sleep "$warmup"
kill -0 "${pids[2]}" 2>/dev/null || die "load generator died: $(tail -n 5 "$tmp/load.log")"
up=$(python3 -c 'import json, sys, urllib.request
r = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/query?query=up", timeout=5))["data"]["result"]
print(r[0]["value"][1] if r else "none")' "http://127.0.0.1:$prom_port" || echo error)
[ "$up" = 1 ] || die "prometheus does not scrape cuzk (up=$up)"

echo "== checking dashboards"
set +e
timeout 180 python3 scripts/check_dashboards.py --prometheus "http://127.0.0.1:$prom_port" \
    --rate-interval 4s --interval 1s --window "$warmup" \
    --expect 'cuzk_jobs_finished_total{outcome="done"} > 0' \
    --expect 'cuzk_jobs_finished_total{outcome="failed"} > 0' \
    --expect 'cuzk_jobs_finished_total{outcome="cancelled"} > 0' \
    --expect 'sum(cuzk_jobs_deadline_missed_total) > 0' \
    --expect 'sum(cuzk_partition_retries_total) > 0' \
    --expect 'sum(cuzk_actor_restarts_total) > 0' \
    --expect 'count(count by (device, worker) (cuzk_gpu_busy_seconds_total)) == 6' \
    --expect 'sum(cuzk_gpu_failed_seconds_total) > 0' \
    --expect 'count(count by (status) (cuzk_http_requests_total)) >= 3' \
    "$@"
rc=$?
set -e
echo "check-dashboards: $(( $(date +%s) - started )) s"
exit "$rc"
