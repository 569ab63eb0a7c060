// The Groth16 H step's pointwise part: on the coset, h = (a*b - c) / Z(g).
// The NTTs around it are ntt.cuh's; the host sequences them:
//   a, b, c: inverse NTT, scale by g^i / n, forward NTT
//   a = (a*b - c) * z_inv
//   a: inverse NTT, scale by g^-i / n
#pragma once
#include "field.cuh"

__device__ __forceinline__ void groth16_h_pointwise(Fr* a, const Fr* b, const Fr* c, uint32_t n, const Fr* z_inv) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    a[i] = (a[i] * b[i] - c[i]) * z_inv[0];
}
