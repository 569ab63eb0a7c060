#!/usr/bin/env bash
# Runs on the GPU machine (issue 38, item 2): Filecoin kinds at a real
# sector size proved with GENUINE test-only keys and checked by
# filecoin-proofs-api. For each kind, one after another (the machine's disk
# is 64 GiB, so each key is deleted before the next is made):
#   1. its key made on the device (`cuzk params generate --engine cuda`,
#      random toxic waste known only to that process), its compiled shape
#      kept in the daemon's data directory (`--data-dir`);
#   2. its input made here, without sealing (`cuzk-bench c1` for PoRep,
#      `cuzk-bench vanilla` for the others);
#   3. one job through the daemon's CUDA engine with the finalizer's
#      verification on (the default), after a preload;
#   4. the proof checked by filecoin-proofs-api's own verifier
#      (`cuzk verify --kind`).
#
#   KINDS=winning-post,window-post SIZE=32GiB bash scripts/real-size.sh
#
# Needs cuzk and cuzk-bench built with --features cuda under $DEVICE_DIR
# (default .device). KINDS: porep-c2, winning-post, window-post, snap-prove
# (default winning-post). WINDOW_SECTORS: sectors of the WindowPoSt job
# (default one full partition, 2,349 at 32 GiB; one more gives a second,
# short partition). REPEAT: times the job is proved, one after another
# (default 1; the summary gives the median and the worst, the job's file
# each). FAULT (issue 38 item 4, what a wrong proof looks like): damage
# the kind's files after the key is made, and record what the daemon did:
#   key-points     h's first two points swapped in the .params file (every
#                  point valid, the file well formed, every proof wrong):
#                  expected, the finalizer rejects each attempt's proof,
#                  the job fails, no proof is served, each rejection counted;
#   key-truncated  the .params file cut in half: expected, refused at load
#                  with the reason, the job failed with it;
#   shape          64 bytes flipped in the middle of the kept compiled
#                  shape: expected, found at the preload, removed and
#                  recorded again, the proof accepted.
# EXTRA_TOML: settings appended to the daemon's
# configuration. BASE: a folder with a baseline's cuzk; each kind's job is
# then proved by it first and by $DEVICE_DIR's after, on the same key and
# input, a side-by-side pair from one call (rows "kind (base)" and "kind"). ENGINE=cpu runs the same steps on the CPU (the key made on
# every core, the CPU engine proving): the script checked at 2 KiB on any
# machine. Results under $OUT: summary.md (also printed), each kind's
# key log, job view and daemon log.
set -uo pipefail
OUT="${OUT:-$PWD/real-size-out}"
BIN="${DEVICE_DIR:-.device}"
WORK="${WORK:-/var/tmp/cuzk-real-size}"
SIZE="${SIZE:-32GiB}"
KINDS="${KINDS:-winning-post}"
PORT="${PORT:-9832}"
ENGINE="${ENGINE:-cuda}"
PROVER=e803000000000000000000000000000000000000000000000000000000000000
PARAMS="$WORK/params"
DATA="$WORK/data"
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }
# A kind that stopped before its job: its row says where.
failed() { log "$kind: $1 failed"; tail -20 "$2"; echo "| $kind | $SIZE | $1 failed | | | | | | | | |" >> "$OUT/summary.md"; }
seconds() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
since() { python3 -c "print(round($(seconds) - $1, 1))"; }
log "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null)"
echo "| kind | sector | key s | key GB | key peak RSS GB | input s | preload s | job s | daemon peak RSS GB | finalizer | filecoin-proofs-api |" > "$OUT/summary.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|" >> "$OUT/summary.md"

for kind in ${KINDS//,/ }; do
    rm -rf "$WORK"; mkdir -p "$PARAMS" "$DATA"
    log "$kind $SIZE: key"
    t=$(seconds)
    /usr/bin/time -v "$BIN/cuzk" params generate --engine "$ENGINE" --sector-size "$SIZE" --kinds "$kind" \
        --out "$PARAMS" --force --data-dir "$DATA" > "$OUT/key-$kind.log" 2> "$OUT/key-$kind.time" \
        || { failed key "$OUT/key-$kind.time"; continue; }
    key_s=$(since "$t")
    key_gb=$(du -sb "$PARAMS" | awk '{printf "%.2f", $1 / 1e9}')
    key_rss=$(awk '/Maximum resident/{printf "%.1f", $6 / 1e6}' "$OUT/key-$kind.time")
    grep -h "recorded in\|at tau in\|G2 points in\|wrote TEST-ONLY" "$OUT/key-$kind.time" | cut -c1-300 | tee -a "$OUT/steps.log"
    case "${FAULT:-}" in
    "") ;;
    key-points)
        python3 - "$PARAMS"/*.params <<'PY'
import sys
# bellperson's layout: the verifying key (alpha_g1, beta_g1, beta_g2,
# gamma_g2, delta_g1, delta_g2, then ic with its u32 count), then h with its
# count; uncompressed G1 points of 96 bytes.
for path in sys.argv[1:]:
    with open(path, "r+b") as f:
        ic_at = 3 * 96 + 3 * 192
        f.seek(ic_at)
        ic = int.from_bytes(f.read(4), "big")
        h = ic_at + 4 + ic * 96 + 4
        f.seek(h)
        first, second = f.read(96), f.read(96)
        assert first != second
        f.seek(h)
        f.write(second + first)
PY
        ;;
    key-truncated)
        for f in "$PARAMS"/*.params; do truncate -s $(($(stat -c %s "$f") / 2)) "$f"; done
        ;;
    shape)
        python3 - "$DATA"/shapes/*.shape <<'PY'
import os, sys
for path in sys.argv[1:]:
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        middle = f.read(64)
        f.seek(-64, 1)
        f.write(bytes(b ^ 0xFF for b in middle))
PY
        ;;
    *) failed "FAULT=$FAULT (unknown)" /dev/null; continue ;;
    esac
    [ -n "${FAULT:-}" ] && log "$kind: $FAULT applied"

    log "$kind: input"
    t=$(seconds)
    case "$kind" in
    porep-c2)
        "$BIN/cuzk-bench" c1 --sector-size "$SIZE" --out "$WORK/c1.json" > "$OUT/input-$kind.log" 2>&1 \
            || { failed c1 "$OUT/input-$kind.log"; continue; }
        python3 - "$WORK" "$PROVER" <<'PY'
import sys
work, prover = sys.argv[1], sys.argv[2]
c1 = open(f"{work}/c1.json").read()
open(f"{work}/job.json", "w").write('{"circuit":"porep-c2","input":{"prover_id":"%s","sector_id":1,"c1":%s}}' % (prover, c1))
PY
        verify_args=(--c1 "$WORK/c1.json" --prover-id "$PROVER" --sector-id 1)
        ;;
    *)
        sectors=()
        [ "$kind" = window-post ] && [ -n "${WINDOW_SECTORS:-}" ] && sectors=(--sectors "$WINDOW_SECTORS")
        "$BIN/cuzk-bench" vanilla --kind "$kind" --sector-size "$SIZE" "${sectors[@]}" --out "$WORK/job.json" \
            --public "$WORK/public.json" > "$OUT/input-$kind.log" 2>&1 \
            || { failed vanilla "$OUT/input-$kind.log"; continue; }
        verify_args=(--input "$WORK/public.json")
        ;;
    esac
    input_s=$(since "$t")
    log "$kind: input in $input_s s, $(du -sh "$WORK/job.json" | cut -f1)"

    # With BASE set, the same key and input are proved first by the
    # baseline's cuzk, then by $BIN's: a side-by-side pair from one call.
    for bin in ${BASE:+"$BASE"} "$BIN"; do
        label=$([ "$bin" = "$BIN" ] && echo "$kind" || echo "$kind (base)")
        tag=$([ "$bin" = "$BIN" ] && echo "$kind" || echo "$kind-base")
        rm -f "$WORK/proof.bin"
        cat > "$WORK/cuzk.toml" <<TOML
listen = "127.0.0.1:$PORT"
data_dir = "$DATA"
params_dir = "$PARAMS"
backend = "$ENGINE"

[limits]
max_body_bytes = 1073741824
max_input_bytes = 1073741824
max_partitions = 16
TOML
        [ -n "${EXTRA_TOML:-}" ] && printf '%s\n' "$EXTRA_TOML" >> "$WORK/cuzk.toml"
        RUST_LOG="${RUST_LOG:-info}" "$bin/cuzk" serve --config "$WORK/cuzk.toml" > "$OUT/daemon-$tag.log" 2>&1 &
        daemon=$!
        for _ in $(seq 100); do curl -sf "localhost:$PORT/healthz" > /dev/null && break; sleep 0.2; done
        t=$(seconds)
        for id in $(curl -s "localhost:$PORT/v1/params" | python3 -c 'import json,sys; print(" ".join(f["id"] for f in json.load(sys.stdin)["files"]))'); do
            curl -s -m 550 -X POST "localhost:$PORT/v1/params/$id/preload" > "$OUT/preload-$tag.json"
        done
        preload_s=$(since "$t")
        log "$label: preload in $preload_s s: $(cut -c1-300 "$OUT/preload-$tag.json")"
        python3 - "$PORT" "$WORK" "$OUT/job-$tag.json" "${REPEAT:-1}" <<'PY'
import json, sys, time, urllib.error, urllib.request
port, work, out, repeat = sys.argv[1:5]
def call(method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())
runs = []
for _ in range(int(repeat)):
    started = time.time()
    try:
        job = call("POST", "/v1/jobs", open(f"{work}/job.json", "rb").read())["id"]
    except urllib.error.HTTPError as e:
        view = {"status": f"refused {e.code}", "error": e.read().decode()[:300], "id": None}
        break
    while (view := call("GET", f"/v1/jobs/{job}"))["status"] not in ("done", "failed", "cancelled"):
        time.sleep(0.2)
    runs.append(time.time() - started)
    if view["status"] != "done":
        break
if view["status"] == "done":
    open(f"{work}/proof.bin", "wb").write(bytes.fromhex(call("GET", f"/v1/jobs/{job}/proofs")["proof"]))
json.dump({"seconds": sorted(runs)[len(runs) // 2] if runs else 0.0, "each": runs, "view": view}, open(out, "w"), indent=1)
print(f"{view['status']}: {', '.join(f'{s:.2f}' for s in runs)} s {view.get('error') or ''}")
PY
        job_s=$(python3 -c "import json; j = json.load(open('$OUT/job-$tag.json')); print(round(j['seconds'], 2), *(['(worst', str(round(max(j['each']), 2)) + ')'] if len(j['each']) > 1 else []))")
        status=$(python3 -c "import json; print(json.load(open('$OUT/job-$tag.json'))['view']['status'])")
        rss=$(awk '/VmHWM/{printf "%.1f", $2 / 1e6}' /proc/$daemon/status)
        if [ -n "${FAULT:-}" ]; then
            job_id=$(python3 -c "import json; print(json.load(open('$OUT/job-$tag.json'))['view']['id'])")
            log "$label: $FAULT: job $status: $(python3 -c "import json; print(json.load(open('$OUT/job-$tag.json'))['view'].get('error'))" | cut -c1-300)"
            [ "$job_id" != None ] && log "$label: $FAULT: proofs answered HTTP $(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/v1/jobs/$job_id/proofs")"
            log "$label: $FAULT: $(curl -s "localhost:$PORT/metrics" | grep '^cuzk_proofs_rejected_total' | tr '\n' ' ')"
            grep -h "not used\|self-verification\|rejected" "$OUT/daemon-$tag.log" | cut -c1-300 | head -5 | tee -a "$OUT/steps.log"
        fi
        kill $daemon; wait $daemon 2>/dev/null
        verdict="no proof"
        if [ -s "$WORK/proof.bin" ]; then
            if FIL_PROOFS_PARAMETER_CACHE="$PARAMS" "$BIN/cuzk" verify --kind "$kind" "${verify_args[@]}" "$WORK/proof.bin" \
                > "$OUT/verify-$tag.log" 2>&1; then
                verdict="accepted"
            else
                verdict="REJECTED"
            fi
        fi
        log "$label: job $status in $job_s s; filecoin-proofs-api: $verdict ($(tail -1 "$OUT/verify-$tag.log" 2>/dev/null | cut -c1-200))"
        echo "| $label | $SIZE | $key_s | $key_gb | $key_rss | $input_s | $preload_s | $job_s | $rss | $status | $verdict |" >> "$OUT/summary.md"
    done
done
rm -rf "$WORK"
cat "$OUT/summary.md"
