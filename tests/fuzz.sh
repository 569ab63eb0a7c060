#!/usr/bin/env bash
# Fuzzes the HTTP API from its own OpenAPI document (GET /v1/openapi.json)
# with schemathesis: every operation, with bearer auth, against the simulated
# backend on loopback. Fails on any 5xx, any answer that breaks its documented
# schema, or a daemon that is not alive and answering afterwards.
#
#   tests/fuzz.sh                 # builds target/debug/cuzk if missing
#   CUZK_BIN=path/to/cuzk FUZZ_MAX_TIME=60 FUZZ_SEED=1 tests/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
BIN=${CUZK_BIN:-target/debug/cuzk}
VENV=target/fuzz-venv                     # target/ is git-ignored
MAX_TIME=${FUZZ_MAX_TIME:-150}            # seconds of fuzzing
SEED=${FUZZ_SEED:-$RANDOM}

if [ ! -x "$BIN" ]; then
    cargo build --locked --bin cuzk
fi
if [ "$("$VENV/bin/schemathesis" --version 2>/dev/null | grep -o '[0-9.]*$')" != "$SCHEMATHESIS_VERSION" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

work=$(mktemp -d)
daemon=
cleanup() {
    if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
        kill "$daemon"
        wait "$daemon" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
token=fuzz-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
echo "$token:submit,read" > "$work/tokens"
cat > "$work/cuzk.toml" <<TOML
listen = "127.0.0.1:$port"
data_dir = "$work/data"
backend = "sim"

[sim]
profile = "winning-post"
time_scale = 0.001

[auth]
read_requires_token = true
TOML

"$BIN" serve --config "$work/cuzk.toml" --token-file "$work/tokens" > "$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
    curl -sf "$base/healthz" > /dev/null && break
    kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log"; echo "fuzz: FAILED, the daemon did not start"; exit 1; }
    sleep 0.1
done

echo "== schemathesis $SCHEMATHESIS_VERSION against $base (seed $SEED, ${MAX_TIME}s)"
status=0
# From the temp dir: schemathesis leaves a cache folder where it runs.
schemathesis=$PWD/$VENV/bin/schemathesis
(cd "$work" && "$schemathesis" run "$base/v1/openapi.json" \
    --checks not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance,response_headers_conformance \
    --header "Authorization: Bearer $token" \
    --workers 2 --seed "$SEED" --max-time "$MAX_TIME" --request-timeout 10 \
    --suppress-health-check all --no-color) 2>&1 | tee "$work/schemathesis.log" || status=$?

alive=no
if kill -0 "$daemon" 2>/dev/null \
    && curl -sf "$base/healthz" > /dev/null \
    && curl -sf -H "Authorization: Bearer $token" "$base/v1/status" > /dev/null; then
    alive=yes
fi
if grep -q panicked "$work/daemon.log"; then
    grep -B2 -A5 panicked "$work/daemon.log"
    alive="yes, but a thread panicked"
fi
cases=$(grep -A1 'Test cases:' "$work/schemathesis.log" | tail -1 | xargs || true)
echo "fuzz: seed $SEED; test cases: ${cases:-unknown}; schemathesis exit $status; daemon alive: $alive"
[ "$status" = 0 ] && [ "$alive" = yes ]
