#!/usr/bin/env bash
# Builds sppark-bench (sppark_bench.cu against sppark 0.1.16 and blst 0.3.17,
# the versions bench/supraseal's Cargo.lock pins) on a machine without a GPU,
# and writes the stripped binary to <repo>/.device/sppark/sppark-bench. The
# sources come from cargo's registry (fetched through bench/supraseal's lock
# when missing); the CUDA runtime is linked statically, so the binary needs
# only the driver on the GPU machine. sm_90 only (the H200). blst is compiled
# here too: the tool makes its MSM points with it, and sppark's host-side
# field types (blst_t.hpp, used when msm_t sums the windows) call its
# Montgomery routines.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
nvcc="$("$repo/scripts/install-cuda-toolchain.sh")"
cuda_root="$(cd "$(dirname "$nvcc")/.." && pwd)"   # .../nvidia/cu13 in the pip layout
# cooperative_groups (sppark's NTT kernels) includes <nv/target>, which the
# pip layout keeps in the separate CCCL package (nvidia-cuda-cccl==13.0.85, to
# match the pinned nvcc).
if [ ! -e "$cuda_root/include/nv/target" ]; then
    pip="$repo/.cuda-toolchain/bin/pip"
    [ -x "$pip" ] || { echo "no nv/target under $cuda_root and no $pip to install CCCL" >&2; exit 1; }
    "$pip" install -q "nvidia-cuda-cccl==13.0.85" >&2
fi
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
find_src() { find "$registry" -maxdepth 2 -type d -name "$1" 2>/dev/null | head -n1; }
sppark="$(find_src sppark-0.1.16)"
blst="$(find_src blst-0.3.17)"
if [ -z "$sppark" ] || [ -z "$blst" ]; then
    (cd "$repo/bench/supraseal" && cargo fetch --locked) >&2
    sppark="$(find_src sppark-0.1.16)"
    blst="$(find_src blst-0.3.17)"
fi
[ -n "$sppark" ] && [ -n "$blst" ] || { echo "sppark-0.1.16 or blst-0.3.17 not in $registry" >&2; exit 1; }
out="$repo/.device/sppark"
mkdir -p "$out"
# blst as its own build script would make it (C plus the assembly that picks
# ADX code at run time), without that script's dependence on a cargo build.
cc="${CC:-cc}"
"$cc" -O2 -fno-builtin -fPIC -c "$blst/blst/src/server.c" -o "$out/blst_server.o"
"$cc" -O2 -fPIC -c "$blst/blst/build/assembly.S" -o "$out/blst_assembly.o"
"$nvcc" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -DFEATURE_BLS12_381 \
    -I "$sppark/sppark" -I "$blst/blst/src" -I "$blst/blst/bindings" \
    "$here/sppark_bench.cu" "$here/points.cpp" "$sppark/sppark/util/all_gpus.cpp" \
    "$out/blst_server.o" "$out/blst_assembly.o" \
    -L "$cuda_root/lib" -o "$out/sppark-bench"
rm -f "$out/blst_server.o" "$out/blst_assembly.o"
strip "$out/sppark-bench"
echo "$out/sppark-bench"
