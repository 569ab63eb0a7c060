#!/usr/bin/env bash
# Installs what the script tests need beyond the Rust toolchain, gcc and
# Python: Chromium (tests/ui.sh), Prometheus (scripts/check-dashboards.sh),
# wrk and bc (tests/load.sh), Python's venv (tests/fuzz.sh installs
# schemathesis into one), curl, openssl (the test cluster's certificates),
# and the PostgreSQL server
# (scripts/pg-test-cluster.sh starts a throwaway cluster of it). Debian
# packages; skipped when present. Then the gRPC conformance test's client
# (tests/grpc_conformance.py): grpcio and grpcio-tools, pinned, from the
# Python package index into target/grpc-venv.
set -euo pipefail

missing=()
for tool in chromium:chromium prometheus:prometheus wrk:wrk bc:bc curl:curl openssl:openssl; do
    command -v "${tool%%:*}" > /dev/null || missing+=("${tool##*:}")
done
python3 -c 'import ensurepip, venv' 2> /dev/null || missing+=(python3-venv)
# Debian keeps the server's tools out of PATH, one directory per version.
compgen -G '/usr/lib/postgresql/*/bin/initdb' > /dev/null || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "== apt-get install ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q > /dev/null
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" fonts-dejavu-core > /dev/null
fi

GRPCIO_VERSION=1.85.1
GRPC_VENV="$(dirname "$0")/../target/grpc-venv"
if [ "$("$GRPC_VENV/bin/python" -c 'import grpc; print(grpc.__version__)' 2> /dev/null)" != "$GRPCIO_VERSION" ]; then
    echo "== pip install grpcio grpcio-tools $GRPCIO_VERSION into target/grpc-venv"
    python3 -m venv "$GRPC_VENV"
    "$GRPC_VENV/bin/pip" install --quiet --disable-pip-version-check \
        "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_VERSION"
fi
