// Radix-2 decimation-in-time NTT over Fr, natural order in and out. The
// first min(log n, 10) stages run in shared memory on chunks of 2^s elements
// gathered from bit-reversed positions (the permutation fused into the load,
// out of place into a scratch buffer); the rest run up to 3 stages per launch
// with 8 elements per thread in registers (a radix-8 pass), strided so that a
// warp reads consecutive elements; the last pass writes back to the data.
//
// tw[k] = w^k for k < n/2, w the domain's generator (or its inverse for the
// inverse transform). Stage q (butterfly span 2^q) uses w_{2^(q+1)}^pos =
// tw[pos * (n >> (q+1))]. Scalings (1/n, coset powers) are separate passes.
#pragma once
#include "field.cuh"

__device__ __forceinline__ uint32_t bitrev32(uint32_t x, uint32_t logn) {
    return logn == 0 ? 0 : (__brev(x) >> (32 - logn));
}

// Stages 0..s-1 on chunks of 2^s elements; blockDim.x == 2^(s-1).
// With `gather`, the chunk is read from bit-reversed positions of `in` (the
// bit-reversal permutation fused into this pass) and written to `out`, which
// must differ from `in` unless there is one block. Shared memory holds the
// words of the chunk as 8 planes (word w of element i at sh[w*chunk + i]),
// so a warp touching consecutive elements hits 32 distinct banks.
__device__ __forceinline__ void sh_load(const uint32_t* sh, uint32_t chunk, uint32_t i, Fr& x) {
#pragma unroll
    for (int w = 0; w < 8; w++) x.v[w] = sh[w * chunk + i];
}
__device__ __forceinline__ void sh_store(uint32_t* sh, uint32_t chunk, uint32_t i, const Fr& x) {
#pragma unroll
    for (int w = 0; w < 8; w++) sh[w * chunk + i] = x.v[w];
}

__device__ __forceinline__ void ntt_shared(const Fr* in, Fr* out, const Fr* tw, uint32_t n, uint32_t logn, uint32_t s,
                                           uint32_t gather) {
    extern __shared__ uint32_t shw[];
    uint32_t t = threadIdx.x;
    uint32_t chunk = 1u << s;
    uint32_t h = chunk >> 1;
    uint32_t base = blockIdx.x * chunk;
    uint32_t i0 = base + t, i1 = base + t + h;
    Fr x0 = in[gather ? bitrev32(i0, logn) : i0];
    Fr x1 = in[gather ? bitrev32(i1, logn) : i1];
    sh_store(shw, chunk, t, x0);
    sh_store(shw, chunk, t + h, x1);
    __syncthreads();
    for (uint32_t q = 0; q < s; q++) {
        uint32_t half = 1u << q;
        uint32_t pos = t & (half - 1);
        uint32_t i = ((t >> q) << (q + 1)) + pos;
        uint32_t j = i + half;
        Fr u, v;
        sh_load(shw, chunk, i, u);
        sh_load(shw, chunk, j, v);
        if (q > 0) v = v * tw[(size_t)pos * (n >> (q + 1))];
        sh_store(shw, chunk, i, u + v);
        sh_store(shw, chunk, j, u - v);
        __syncthreads();
    }
    sh_load(shw, chunk, t, x0);
    sh_load(shw, chunk, t + h, x1);
    out[i0] = x0;
    out[i1] = x1;
}

// Stages p..p+LOGT-1; one thread per group of 2^LOGT elements at stride 2^p.
template <int LOGT>
__device__ __forceinline__ void ntt_radix(const Fr* in, Fr* data, const Fr* tw, uint32_t n, uint32_t p) {
    const int T = 1 << LOGT;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= (n >> LOGT)) return;
    uint32_t lo = (uint32_t)(tid & ((1u << p) - 1));
    size_t hi = tid >> p;
    size_t base = (hi << (p + LOGT)) + lo;
    Fr x[T];
#pragma unroll
    for (int j = 0; j < T; j++) x[j] = in[base + ((size_t)j << p)];
#pragma unroll
    for (int r = 0; r < LOGT; r++) {
        uint32_t q = p + r;
        const int hj = 1 << r;
#pragma unroll
        for (int j = 0; j < T; j++) {
            if (j & hj) continue;
            uint32_t pos = ((uint32_t)(j & (hj - 1)) << p) + lo;
            Fr w = tw[(size_t)pos * (n >> (q + 1))];
            Fr u = x[j];
            Fr v = x[j + hj] * w;
            x[j] = u + v;
            x[j + hj] = u - v;
        }
    }
#pragma unroll
    for (int j = 0; j < T; j++) data[base + ((size_t)j << p)] = x[j];
}

// data[i] *= lo[i & (L-1)] * hi[i >> logl]  (coset powers, with 1/n folded in)
__device__ __forceinline__ void fr_scale_lohi(Fr* data, uint32_t n, const Fr* lo, const Fr* hi, uint32_t logl) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr f = lo[i & ((1u << logl) - 1)] * hi[i >> logl];
    data[i] = data[i] * f;
}

__device__ __forceinline__ void fr_scale_const(Fr* data, uint32_t n, const Fr* k) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    data[i] = data[i] * k[0];
}
