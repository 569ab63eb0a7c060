#!/usr/bin/env bash
# Runs on the GPU machine (issue 27, item 3): real-shape PoRep C2 jobs of a
# 32 GiB (or 64 GiB) sector through the daemon on the CUDA engine, then
# supraseal-c2 on the same C1 output and the same key, one call after the
# other. Inputs are made on the machine itself: synthetic C1 outputs
# (`cuzk-bench c1`) and a key of the real shape, so nothing large is copied
# to it. KEY=timing (the default): a TIMING-ONLY key (`cuzk-bench key`:
# random points, so proofs are checked for length, not verified).
# KEY=genuine (issue 38): a test-only key made on the device (`cuzk params
# generate --engine cuda`, its compiled shapes kept in the data directory),
# the finalizer's verification on, and every proof served then checked by
# filecoin-proofs-api's verifier (`cuzk verify --kind`).
#
# Needs, under $DEVICE_DIR (default .device): cuzk and cuzk-bench built with
# --features cuda, and optionally supraseal/supraseal-bench
# (bench/supraseal/build.sh). Results under $OUT: the daemon's log, every
# job's view, /v1/workers, the timeline (CSV), /metrics before and after, the
# host's peak RSS and the disk used, and summary.md (also printed last);
# all but summary.md, daemon.log and jobs.json packed into run.tar.gz.
#
#   SIZE=32GiB JOBS=5 SYNTH_THREADS=0 bash scripts/porep32-e2e.sh
#
# WINNING_AT: seconds after the PoRep jobs are submitted when a WinningPoSt
# job of the same sector size arrives (its timing-only key and a synthetic
# vanilla proof made here too), or several, comma-separated ("30,50": the
# second shows a critical call after the first one's); each one's latency
# is a "WinningPoSt still first" figure, with its GPU stage and phases.
# Empty: none.
# DEADLINE: seconds after submission when polling stops, or END_BY: the Unix
# time when it stops (a device call has 10 minutes); jobs not ended by then
# are reported with the partitions they finished. Neither: wait for every job.
# SIZE: 32GiB or 64GiB (2KiB with BACKEND=cpu checks the script itself on any
# machine). JOBS: PoRep jobs submitted at once. KEEP_WORK=1 keeps
# the key and C1s in $WORK for a later call on the same machine. RESTART=1:
# preload, restart the daemon, preload again (the cold cost from disk).
# BUDGET: the scheduler's host memory budget in bytes (default "auto": half
# of a host of 120 GiB or more, docs/operations.md). EXTRA_TOML: settings appended to the daemon's
# configuration (a [cuda] table, say).
# STOP_AFTER_INPUTS=1 KEEP_WORK=1: stop once the keys and inputs are made
# (with KEY=genuine the shapes are in the data directory already, so a
# second call with KEEP_DATA=1 preloads as a restart would).
# A run split over two device calls on one machine (the second started
# within its idle release, so /var/tmp is still there): the first with
# STOP_AFTER_PRELOAD=1 KEEP_WORK=1 makes the inputs, preloads (the compiled
# shape recorded into the data directory) and stops; the second with
# KEEP_DATA=1 starts on that data directory, so its preload is a restart's
# (the shape read back, the key read from its file onto the device).
set -uo pipefail
OUT="${OUT:-$PWD/porep32-out}"
BIN="${DEVICE_DIR:-.device}"
WORK="${WORK:-/var/tmp/cuzk-porep32}"
SIZE="${SIZE:-32GiB}"
JOBS="${JOBS:-5}"
PORT="${PORT:-9831}"
SUPRASEAL_RUNS="${SUPRASEAL_RUNS:-$((JOBS - 1))}"
PARAMS="$WORK/params-$SIZE"
DATA="$WORK/data"
mkdir -p "$OUT" "$PARAMS" "$WORK"
[ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$DATA"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }
# The device tool brings back only a few files of $OUT: everything but the
# summary, the daemon's log and the jobs goes into one archive at the end.
bundle() {
    (cd "$OUT" && find . -maxdepth 1 -type f ! -name summary.md ! -name daemon.log ! -name jobs.json \
        ! -name run.tar.gz -printf '%P\n' | tar -czf run.tar.gz -T - --remove-files) 2>/dev/null
}
seconds() { python3 -c 'import time; print(f"{time.time():.3f}")'; }

log "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null)"

# 1. The keys (reused when a complete one is already there): timing-only
#    (`cuzk-bench key`, seeded) or genuine (`cuzk params generate`).
KEY="${KEY:-timing}"
key_command() { # kind seed: the command that writes the key, as an array
    if [ "$KEY" = genuine ]; then
        key=("$BIN/cuzk" params generate --engine "${BACKEND:-cuda}" --kinds "$1" --sector-size "$SIZE" --out "$PARAMS"
            --force --data-dir "$DATA")
    else
        key=("$BIN/cuzk-bench" key --kinds "$1" --sector-size "$SIZE" --out "$PARAMS" --seed "$2")
    fi
}
if ! ls "$PARAMS"/*.params >/dev/null 2>&1; then
    log "key: writing the $SIZE PoRep $KEY key"
    t=$(seconds)
    key_command porep-c2 0101010101010101010101010101010101010101010101010101010101010101
    /usr/bin/time -v "${key[@]}" > "$OUT/key.log" 2> "$OUT/key.time" || { log "key failed"; tail -20 "$OUT/key.time"; exit 1; }
    log "key: $(python3 -c "print(round($(seconds) - $t, 1))") s, peak RSS $(awk '/Maximum resident/{print $6}' "$OUT/key.time") KB"
    grep -h "recorded in\|at tau in\|G2 points in" "$OUT/key.time" | cut -c1-300 | tee -a "$OUT/steps.log"
fi
# filecoin-proofs names PoSt keys proof-of-spacetime-fallback-*: only the
# WinningPoSt one is ever written here.
if [ -n "${WINNING_AT-60}" ] && ! ls "$PARAMS"/*proof-of-spacetime-fallback*.params >/dev/null 2>&1; then
    log "key: the $SIZE WinningPoSt $KEY key"
    key_command winning-post 0202020202020202020202020202020202020202020202020202020202020202
    "${key[@]}" >> "$OUT/key.log" 2>&1 \
        || { log "winning key failed"; tail -5 "$OUT/key.log"; exit 1; }
fi
if [ -n "${WINNING_AT-60}" ]; then
    "$BIN/cuzk-bench" vanilla --kind winning-post --sector-size "$SIZE" --out "$WORK/winning-$SIZE.json" \
        --public "$WORK/winning-$SIZE-public.json" >> "$OUT/c1.log" 2>&1 \
        || { log "winning vanilla failed"; tail "$OUT/c1.log"; exit 1; }
fi
du -sb "$PARAMS" | tee -a "$OUT/steps.log"

# 2. Synthetic C1 outputs, one per job (different sector ids and data).
for i in $(seq "$JOBS"); do
    [ -s "$WORK/c1-$SIZE-$i.json" ] && continue
    "$BIN/cuzk-bench" c1 --sector-size "$SIZE" --sector-id "$i" --rng-seed "$i" \
        --out "$WORK/c1-$SIZE-$i.json" >> "$OUT/c1.log" 2>&1 || { log "c1 $i failed"; tail "$OUT/c1.log"; exit 1; }
done
log "c1: $JOBS outputs, $(du -sh "$WORK"/c1-"$SIZE"-1.json | cut -f1) each"
if [ "${STOP_AFTER_INPUTS:-0}" = 1 ]; then
    du -sb "$DATA" "$PARAMS" "$WORK" | tee "$OUT/disk.txt"
    log "stopped after the inputs; they are kept for the next call"
    bundle
    exit 0
fi

# 3. The daemon: CUDA engine, the key's directory, bodies large enough for a
#    C1 (about 40 MB of JSON at 32 GiB).
cat > "$OUT/cuzk.toml" <<TOML
listen = "127.0.0.1:$PORT"
data_dir = "$DATA"
params_dir = "$PARAMS"
backend = "${BACKEND:-cuda}"

[scheduler]
synthesis_threads = ${SYNTH_THREADS:-0}
budget = ${BUDGET:-\"auto\"}
critical_workers_per_device = ${CRITICAL_WORKERS:-1}

# A timing-only key's proofs do not verify: the finalizer must not check
# them (their length is checked below instead); a genuine key's it does.
[proving]
verify_proofs = $([ "$KEY" = genuine ] && echo true || echo false)

[limits]
max_body_bytes = 268435456
max_input_bytes = 268435456
max_partitions = 16
TOML
# EXTRA_TOML: more settings appended as they are (a [cuda] memory_limit_bytes
# for a smaller card's plan, say).
[ -n "${EXTRA_TOML:-}" ] && printf '%s\n' "$EXTRA_TOML" >> "$OUT/cuzk.toml"
start_daemon() {
    log "daemon: starting ($1)"
    RUST_LOG="${RUST_LOG:-info}" "$BIN/cuzk" serve --config "$OUT/cuzk.toml" >> "$OUT/daemon.log" 2>&1 &
    daemon=$!
    trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
    for _ in $(seq 100); do curl -sf "localhost:$PORT/healthz" >/dev/null && break; sleep 0.2; done
}
# Every parameter file preloaded first, as an operator would before a
# stream (POST /v1/params/{id}/preload): its time is the cold cost a first
# job would otherwise pay (the blank circuit's compiled shape recorded, or
# read back from the data directory; the key read from its file at the
# first partition), and a WinningPoSt then starts warm. PRELOAD=0: the
# first jobs pay it.
preload() {
    for id in $(curl -s "localhost:$PORT/v1/params" | python3 -c 'import json,sys; print(" ".join(f["id"] for f in json.load(sys.stdin)["files"]))'); do
        t=$(seconds)
        curl -s -m 500 -X POST "localhost:$PORT/v1/params/$id/preload" > "$OUT/preload-$1-$id.json"
        log "preload ($1) $id: $(python3 -c "print(round($(seconds) - $t, 1))") s: $(cat "$OUT/preload-$1-$id.json")"
    done
}
start_daemon first
[ "${PRELOAD:-1}" = 1 ] && preload first
# RESTART=1: the daemon restarted on the same data directory and preloaded
# again, the cold cost of every start after the first (the compiled shapes
# read back from disk).
if [ "${RESTART:-0}" = 1 ]; then
    kill $daemon; wait $daemon 2>/dev/null
    start_daemon restarted
    [ "${PRELOAD:-1}" = 1 ] && preload restarted
fi
if [ "${STOP_AFTER_PRELOAD:-0}" = 1 ]; then
    kill $daemon; wait $daemon 2>/dev/null
    trap - EXIT
    du -sb "$DATA" "$PARAMS" "$WORK" | tee "$OUT/disk.txt"
    log "stopped after the preload; the inputs and data directory are kept for the next call"
    bundle
    exit 0
fi
curl -s "localhost:$PORT/metrics" > "$OUT/metrics-before.txt"
curl -s "localhost:$PORT/v1/workers?spans=0" > "$OUT/workers-before.json"

# 4. Every job submitted at once, then polled until each ends; the host's
#    peak RSS read from the kernel when the run is over.
log "jobs: submitting $JOBS"
python3 - "$PORT" "$WORK" "$SIZE" "$JOBS" "$OUT" "${WINNING_AT-60}" "${DEADLINE:-}" "${END_BY:-}" <<'PY'
import json, sys, time, urllib.request
port, work, size, jobs, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
winning_at = sorted(float(t) for t in sys.argv[6].split(",") if t)
deadline = float(sys.argv[7]) if sys.argv[7] else None
end_by = float(sys.argv[8]) if sys.argv[8] else None
base = f"http://127.0.0.1:{port}"
def call(method, path, body=None):
    req = urllib.request.Request(base + path, data=body, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())
prover = "e803000000000000000000000000000000000000000000000000000000000000"
ids, started = [], time.time()
for i in range(1, jobs + 1):
    with open(f"{work}/c1-{size}-{i}.json", "rb") as f:
        c1 = f.read()
    body = b'{"circuit":"porep-c2","input":{"prover_id":"%s","sector_id":%d,"c1":' % (prover.encode(), i) + c1 + b"}}"
    ids.append(call("POST", "/v1/jobs", body)["id"])
print(f"submitted {jobs} in {time.time() - started:.1f} s", flush=True)
if end_by is not None:
    deadline = end_by - started
done, winnings = {}, []
while (any(job not in done for job in ids + [w["id"] for w in winnings])
       or len(winnings) < len(winning_at)):
    if deadline is not None and time.time() - started > deadline:
        print(f"deadline: {deadline:.0f} s passed with {len(done)} jobs ended", flush=True)
        break
    if len(winnings) < len(winning_at) and time.time() - started >= winning_at[len(winnings)]:
        with open(f"{work}/winning-{size}.json", "rb") as f:
            winning = {"id": call("POST", "/v1/jobs", f.read())["id"], "submitted_s": time.time() - started}
        winnings.append(winning)
        print(f"winning-post {winning['id']} submitted at {winning['submitted_s']:.1f} s", flush=True)
    for job in ids + [w["id"] for w in winnings]:
        if job in done:
            continue
        view = call("GET", f"/v1/jobs/{job}")
        if view["status"] in ("done", "failed", "cancelled"):
            done[job] = (time.time(), view)
            print(f"{job} {view['status']} at {time.time() - started:.1f} s {view.get('error') or ''}", flush=True)
    time.sleep(0.5)
results = []
for job in ids:
    end, view = done.get(job) or (None, call("GET", f"/v1/jobs/{job}"))
    proofs = call("GET", f"/v1/jobs/{job}/proofs") if view["status"] == "done" else {}
    if proofs:
        open(f"{work}/proof-{job}.bin", "wb").write(bytes.fromhex(proofs["proof"]))
    results.append({"id": job, "ended_s": end - started if end else None, "view": view,
                    "proof_bytes": len(bytes.fromhex(proofs.get("proof", "")))})
for winning in winnings:
    if winning["id"] in done:
        end, view = done[winning["id"]]
        winning.update(ended_s=end - started, latency_s=end - started - winning["submitted_s"], view=view)
        if view["status"] == "done":
            proof = call("GET", f"/v1/jobs/{winning['id']}/proofs")["proof"]
            open(f"{work}/proof-{winning['id']}.bin", "wb").write(bytes.fromhex(proof))
json.dump({"started": started, "jobs": results, "winnings": winnings}, open(f"{out}/jobs.json", "w"), indent=1)
open(f"{out}/polled_s", "w").write(f"{time.time() - started:.3f}")
PY
log "jobs: over"
grep -E "VmHWM|VmRSS" /proc/$daemon/status | tee "$OUT/daemon-memory.txt"
curl -s "localhost:$PORT/metrics" > "$OUT/metrics-after.txt"
curl -s "localhost:$PORT/v1/workers?spans=0" > "$OUT/workers-after.json"
curl -s -H 'Accept: text/csv' "localhost:$PORT/v1/timeline?since=0" > "$OUT/timeline.csv"
curl -s "localhost:$PORT/v1/status" > "$OUT/status.json"
du -sb "$DATA" "$PARAMS" "$WORK" > "$OUT/disk.txt" 2>/dev/null
kill $daemon 2>/dev/null; wait $daemon 2>/dev/null
trap - EXIT

# 4b. KEY=genuine: every proof served checked by filecoin-proofs-api's
#     verifier, against the C1 it was made from (PoRep) or the vanilla
#     proofs' public values (WinningPoSt).
if [ "$KEY" = genuine ]; then
    python3 - "$OUT/jobs.json" > "$WORK/verify.list" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
for i, j in enumerate(run["jobs"], 1):
    print(j["id"], "porep", i)
for w in run.get("winnings", []):
    print(w["id"], "winning", 0)
PY
    while read -r id what i; do
        [ -s "$WORK/proof-$id.bin" ] || { echo "$what $id: no proof served" >> "$OUT/verify.txt"; continue; }
        if [ "$what" = porep ]; then
            args=(--kind porep-c2 --c1 "$WORK/c1-$SIZE-$i.json" --prover-id e803000000000000000000000000000000000000000000000000000000000000 --sector-id "$i")
        else
            args=(--kind winning-post --input "$WORK/winning-$SIZE-public.json")
        fi
        if FIL_PROOFS_PARAMETER_CACHE="$PARAMS" "$BIN/cuzk" verify "${args[@]}" "$WORK/proof-$id.bin" > "$WORK/verify.out" 2>&1; then
            echo "$what $id: accepted by filecoin-proofs-api" >> "$OUT/verify.txt"
        else
            echo "$what $id: REJECTED: $(tail -1 "$WORK/verify.out" | cut -c1-300)" >> "$OUT/verify.txt"
        fi
    done < "$WORK/verify.list"
    log "verified: $(grep -c accepted "$OUT/verify.txt") accepted, $(grep -vc accepted "$OUT/verify.txt") not"
fi

# 5. supraseal-c2 on the first job's C1, same key: one cold call, then the
#    warm calls one after the other.
if [ -x "$BIN/supraseal/supraseal-bench" ] && [ "${SUPRASEAL:-1}" = 1 ]; then
    python3 - "$WORK" "$SIZE" > "$WORK/porep-$SIZE.json" <<'PY'
import sys
work, size = sys.argv[1], sys.argv[2]
c1 = open(f"{work}/c1-{size}-1.json").read()
print('{"prover_id":"e803000000000000000000000000000000000000000000000000000000000000","sector_id":1,"c1":' + c1 + "}")
PY
    log "supraseal: 1 cold + $SUPRASEAL_RUNS warm calls"
    FIL_PROOFS_PARAMETER_CACHE="$PARAMS" FIL_PROOFS_VERIFY_PRODUCTION_PARAMS=0 \
        /usr/bin/time -v "$BIN/supraseal/supraseal-bench" --porep "$WORK/porep-$SIZE.json" \
        --runs "$SUPRASEAL_RUNS" --no-verify > "$OUT/supraseal.md" 2> "$OUT/supraseal.log"
    log "supraseal: exit $?, peak RSS $(awk '/Maximum resident/{print $6}' "$OUT/supraseal.log") KB"
fi

# 6. The summary: per job latency, sustained seconds per sector, the GPU's
#    kernel-active fraction over the run, stage times per partition, idle
#    seconds by cause.
python3 - "$OUT" "$JOBS" <<'PY' | tee "$OUT/summary.md"
import json, re, sys, statistics
out, jobs = sys.argv[1], int(sys.argv[2])
run = json.load(open(f"{out}/jobs.json"))
def metric(name, text):
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M))
before, after = open(f"{out}/metrics-before.txt").read(), open(f"{out}/metrics-after.txt").read()
ends = sorted(j["ended_s"] for j in run["jobs"] if j["ended_s"] is not None)
stopped = max(ends + [0.0]) if len(ends) == len(run["jobs"]) else float(open(f"{out}/polled_s").read())
wall = stopped
active = metric("cuzk_gpu_kernel_active_seconds_total", after) - metric("cuzk_gpu_kernel_active_seconds_total", before)
print(f"| job | status | latency s | proof bytes |\n|---|---|---|---|")
for j in run["jobs"]:
    parts = j["view"].get("partitions") or []
    proved = sum(1 for p in parts if p.get("stage") == "done")
    latency = f"{j['ended_s']:.1f}" if j["ended_s"] is not None else f"not ended ({proved}/{len(parts)} partitions)"
    print(f"| {j['id'][:8]} | {j['view']['status']} | {latency} | {j['proof_bytes']} |")
if len(ends) == len(run["jobs"]):
    print(f"\nwall {wall:.1f} s for {jobs} jobs: {wall / jobs:.1f} s per sector over the run; "
          f"between the first and last completion {(ends[-1] - ends[0]) / max(1, jobs - 1):.1f} s per sector")
else:
    print(f"\n{len(ends)} of {jobs} jobs ended in the {wall:.1f} s polled")
proved = sum(1 for j in run["jobs"] for p in (j["view"].get("partitions") or []) if p.get("stage") == "done")
print(f"{proved} partitions proved in {wall:.1f} s: {proved / wall:.3f} per second")
if len(ends) >= 2:
    print(f"steady state: {(ends[-1] - ends[0]) / (len(ends) - 1):.1f} s per sector between the first and the last job ended")
print(f"GPU kernel-active {active:.1f} s of {wall:.1f} s: {active / wall:.3f}")
# A WinningPoSt's latency is the daemon's own `timings_ms.total` (from its
# submission to its end), not the poller's, which is 0.5 s coarse.
latencies = []
for w in run.get("winnings", []):
    if "view" not in w:
        print(f"WinningPoSt submitted at {w['submitted_s']:.1f} s during the stream: not ended")
        continue
    own = w["view"]["timings_ms"]["total"] / 1000
    if w["view"]["status"] == "done":
        latencies.append(own)
    print(f"WinningPoSt submitted at {w['submitted_s']:.1f} s during the stream: {w['view']['status']} "
          f"in {own:.3f} s (polled: {w['latency_s']:.2f} s)")
    for p in w["view"].get("partitions") or []:
        timings = ", ".join(f"{k} {v / 1000:.3f}" for k, v in (p.get("timings_ms") or {}).items())
        phases = ", ".join(f"{k} {v / 1000:.3f}" for k, v in (p.get("gpu_phases_ms") or {}).items())
        print(f"  its partition: {timings}; GPU phases: {phases}")
if latencies:
    ranked = sorted(latencies)
    p95 = ranked[min(len(ranked) - 1, -(-95 * len(ranked) // 100) - 1)]
    print(f"WinningPoSts done: {len(ranked)}; p50 {statistics.median(ranked):.3f} s, p95 {p95:.3f} s, "
          f"worst {ranked[-1]:.3f} s")
stages = {}
for j in run["jobs"]:
    for p in j["view"]["partitions"]:
        for k, v in (p.get("timings_ms") or {}).items():
            stages.setdefault(k, []).append(v / 1000)
        for k, v in (p.get("gpu_phases_ms") or {}).items():
            stages.setdefault("gpu " + k, []).append(v / 1000)
print("\n| stage per partition | median s | max s | n |\n|---|---|---|---|")
for k in sorted(stages):
    print(f"| {k} | {statistics.median(stages[k]):.2f} | {max(stages[k]):.2f} | {len(stages[k])} |")
w0 = {w["id"]: w for w in json.load(open(f"{out}/workers-before.json"))["workers"]}
print("\n| worker | busy s | failed s | idle s by cause (during the run) |\n|---|---|---|---|")
for w in json.load(open(f"{out}/workers-after.json"))["workers"]:
    b = w0.get(w["id"], {"busy_seconds": 0, "failed_seconds": 0, "idle_seconds": {}})
    idle = {k: v - b["idle_seconds"].get(k, 0) for k, v in w["idle_seconds"].items()}
    causes = ", ".join(f"{k} {v:.1f}" for k, v in sorted(idle.items()) if v >= 0.05)
    failed = w.get("failed_seconds", 0) - b.get("failed_seconds", 0)
    print(f"| {w['id']} | {w['busy_seconds'] - b['busy_seconds']:.1f} | {failed:.1f} | {causes} |")
for d in json.load(open(f"{out}/status.json")).get("devices", []):
    for c in d["memory"]["circuits"]:
        p = c["plan"]
        parts = ["a", "b_g1", "l", "h", "b_g2"]
        kept = ",".join(n for n, r in zip(parts, p["resident"]) if r) or "none"
        print(f"\ndevice memory plan, {d['device']}, {c['circuit_id'][:40]}: resident {kept} "
              f"({sum(b for b, r in zip(p['needs']['key'], p['resident']) if r) / 1e9:.1f} GB), "
              f"pinned {p['pinned_bytes'] / 1e9:.1f} GB, slots {p['slots']}, passes of {p['pass']}, "
              f"call estimated {p['needs']['call'] / 1e9:.1f} GB, measured {c['measured_call_bytes'] / 1e9:.1f} GB, "
              f"{p['device_bytes'] / 1e9:.1f} of {p['usable'] / 1e9:.1f} GB planned")
print("\n" + open(f"{out}/daemon-memory.txt").read().strip())
print(open(f"{out}/disk.txt").read().strip())
try:
    print("\nfilecoin-proofs-api's verifier on every proof served:\n" + open(f"{out}/verify.txt").read())
except OSError:
    pass
try:
    print("\nsupraseal-c2, same C1 and key:\n" + open(f"{out}/supraseal.md").read())
except OSError:
    pass
PY
bundle
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
