#!/usr/bin/env bash
# Installs what the script tests need beyond the Rust toolchain, gcc and
# Python: Chromium (tests/ui.sh), Prometheus (scripts/check-dashboards.sh),
# wrk (tests/load.sh) and curl. Debian packages; skipped when present.
set -euo pipefail

missing=()
for tool in chromium:chromium prometheus:prometheus wrk:wrk curl:curl; do
    command -v "${tool%%:*}" > /dev/null || missing+=("${tool##*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "== apt-get install ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q > /dev/null
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" fonts-dejavu-core > /dev/null
fi
