// The interface between sppark_bench.cu and points.cpp (kept apart because
// blst.h and sppark's host field headers cannot share a translation unit).
#pragma once
#include <cstddef>
#include <cstdint>

// Writes m distinct affine points (blst_p1_affine: 96 bytes each; or
// blst_p2_affine: 192 bytes), Montgomery-form coordinates, to dst.
void make_g1_points(void* dst, size_t m, uint64_t seed);
void make_g2_points(void* dst, size_t m, uint64_t seed);

constexpr size_t G1_AFFINE_BYTES = 96;
constexpr size_t G2_AFFINE_BYTES = 192;
