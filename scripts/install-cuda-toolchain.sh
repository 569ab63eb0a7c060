#!/usr/bin/env bash
# Installs the pinned CUDA compiler (nvcc 13.0) from PyPI into ./.cuda-toolchain
# when no nvcc is present, and prints the NVCC path. .cuda-toolchain is git-ignored.
# Pins: these give an nvcc that emits PTX ISA 9.0 and sm_90 cubins that the
# GPU machine's driver (580, CUDA 13.0) accepts. nvvm must be pinned too: a
# newer one emits PTX ISA 9.5, which the 13.0 driver and ptxas reject.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${NVCC:-}" ] && [ -x "$NVCC" ]; then echo "$NVCC"; exit 0; fi
if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then echo "$CUDA_HOME/bin/nvcc"; exit 0; fi
if command -v nvcc >/dev/null 2>&1; then command -v nvcc; exit 0; fi
dir="$root/.cuda-toolchain"
find_nvcc() { find "$dir" -path '*nvidia/cu13/bin/nvcc' -type f 2>/dev/null | head -n1; }
existing="$(find_nvcc || true)"
if [ -n "$existing" ]; then echo "$existing"; exit 0; fi
python3 -m venv "$dir" >&2
"$dir/bin/pip" install -q "nvidia-cuda-nvcc==13.0.88" "nvidia-cuda-crt==13.0.88" \
    "nvidia-cuda-runtime==13.0.96" "nvidia-nvvm==13.0.*" >&2
nvcc="$(find_nvcc)"
[ -n "$nvcc" ] || { echo "nvcc not found after install" >&2; exit 1; }
echo "$nvcc"
