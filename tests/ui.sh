#!/usr/bin/env bash
# Loads the built-in page (/) in headless Chromium against a daemon that is
# proving jobs on the sim backend, checks that the timeline was drawn, and
# saves a screenshot. Needs Debian's chromium (scripts/install-test-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${CUZK_BIN:-target/debug/cuzk}
SHOT=${UI_SCREENSHOT:-target/ui/cuzk-workers.png}
[ -x "$BIN" ] || cargo build --locked --bin cuzk
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "ui: chromium is not installed (scripts/install-test-deps.sh)"; exit 1; }

work=$(mktemp -d)
cleanup() {
    [ -n "${feeder:-}" ] && kill "$feeder" 2>/dev/null || true
    [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/cuzk.toml" <<TOML
listen = "127.0.0.1:0"
data_dir = "$work/data"
backend = "sim"
[scheduler]
synthesis_threads = 6
[sim]
profile = "winning-post"
time_scale = 0.2
devices = 2
TOML
RUST_LOG=info "$BIN" serve --config "$work/cuzk.toml" > "$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
    url=$(grep -o 'listening on http://[0-9.:]*' "$work/daemon.log" | head -1 | cut -d' ' -f3 || true)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { cat "$work/daemon.log"; echo "ui: the daemon did not start"; exit 1; }

# Keep the workers busy while the page loads.
(
    for seed in $(seq 1 200); do
        curl -sf -X POST "$url/v1/jobs" -H 'Content-Type: application/json' \
            -d "{\"circuit\":\"mimc-chain\",\"params\":{\"log2_constraints\":5},\"partitions\":4,\"seed\":$seed}" > /dev/null || true
        sleep 0.2
    done
) &
feeder=$!
sleep 4

browse() {
    timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size=1400,900 --virtual-time-budget=5000 "$@" "$url/" 2>/dev/null
}

passed=0 failed=0
check() {
    if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "ui: FAILED: $1"; fi
}
dom=$(browse --dump-dom)
segments=$(grep -o 'data-segments="[0-9]*"' <<<"$dom" | grep -o '[0-9]*' || echo 0)
check "the page rendered (data-ready)" '[[ $dom == *data-ready=\"true\"* ]]'
check "the timeline has segments ($segments)" '[ "${segments:-0}" -gt 0 ]'
check "busy spans are drawn" '[[ $dom == *\"seg\ busy* ]]'
check "idle intervals are drawn with a cause" '[[ $dom == *\"seg\ idle\ idle-* ]]'
check "one table row per worker (2 devices x (2 general + 1 critical) = 6)" '[ "$(grep -o "<tr><td>gpu" <<<"$dom" | wc -l)" -eq 6 ]'
check "no error shown" '[[ $dom == *\<span\ id=\"error\"\>\</span\>* ]]'

mkdir -p "$(dirname "$SHOT")"
browse --screenshot="$SHOT" > /dev/null || true
check "a screenshot was saved ($SHOT)" '[ "$(stat -c %s "$SHOT" 2>/dev/null || echo 0)" -gt 10000 ]'

echo "ui: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
