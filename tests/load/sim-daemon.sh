# Sourced by tests/load.sh and scripts/status-bench.sh: starts the simulated
# daemon (winning-post, time scale 1e-4) on a free loopback port with a fresh
# submit+read token. Needs BIN and work (a temp dir); $1 is extra TOML.
# Sets base, daemon (the pid) and LOAD_TOKEN (exported, for the wrk scripts).
start_sim_daemon() {
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    base="http://127.0.0.1:$port"
    LOAD_TOKEN=load-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    export LOAD_TOKEN
    cat > "$work/cuzk.toml" <<TOML
listen = "127.0.0.1:$port"
data_dir = "$work/data"
backend = "sim"

[scheduler]
budget = 68719476736

[sim]
profile = "winning-post"
time_scale = 0.0001

$1
TOML
    # Every request carries the token, as in production.
    RUST_LOG=warn CUZK_API_TOKENS="$LOAD_TOKEN:submit,read" "$BIN" serve --config "$work/cuzk.toml" > "$work/daemon.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do
        curl -sf "$base/healthz" > /dev/null && return 0
        sleep 0.1
    done
    cat "$work/daemon.log"
    echo "the daemon did not start"
    return 1
}
