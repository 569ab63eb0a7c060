// Radix-2 decimation-in-time NTT over Fr, natural order in and out, as a
// few passes that each run several stages in shared memory, so that the data
// crosses DRAM once per pass instead of once per 3 stages.
//
// A pass runs stages p..p+s-1. Those stages combine, for each `hi` and each
// `lo` < 2^p, the 2^s elements hi*2^(p+s) + j*2^p + lo (j < 2^s). A block
// takes 2^s such rows for 2^c consecutive `lo` (the columns): 2^(s+c)
// elements, read 2^c consecutive elements at a time, so that a warp's loads
// are contiguous runs of 2^c * 32 bytes and not single scattered elements.
// The first pass (p = 0, c = 0) gathers from bit-reversed positions (the
// permutation fused into its load) out of place into a scratch buffer; later
// passes work in place there, and the last one writes back to the data.
//
// One twiddle table serves every stage and both directions: tw[k] = W^k for
// k <= n/2, W the domain's generator (`twiddle`). Stage q's twiddle at
// position pos < 2^q is w_{2^(q+1)}^pos = W^(pos * 2^(logn-1-q)), so stage q
// reads every 2^(logn-1-q)-th entry: an element is 32 bytes, one DRAM
// sector, so the strided reads fetch the bytes that per-stage tables laid
// out contiguously did, in more requests. The inverse transform's W^-K is
// W^(n/2) W^(n/2-K) = -tw[n/2 - K] (entry n/2 is W^(n/2) = -1, so K = 0
// gives 1). At 2^27 the table is 2.1 GB where a table per stage and
// direction took 8.6 (issue 37: the device's memory at 32 GiB), at a
// measured 3-5% of the forward transform's time and 7-9% of the inverse's
// (docs/benchmarks.md, 2026-12-07). A scaling (1/n, coset powers)
// rides on the first pass's loads or the last pass's stores, one product per
// element there instead of a pass of its own over the data.
#pragma once
#include "field.cuh"
#include "launch_params.h"  // NTT_SCALE_* (generated)

__device__ __forceinline__ uint32_t bitrev32(uint32_t x, uint32_t logn) {
    return logn == 0 ? 0 : (__brev(x) >> (32 - logn));
}

// Shared memory holds a block's elements as two planes of 16-byte halves
// (half h of element i at sh[h*chunk + sw(i)]), so each shared access of an
// element is two 128-bit instructions, not eight 32-bit ones. A warp's
// 128-bit access runs as four phases of 8 lanes, conflict-free when those
// lanes hit distinct 16-byte slots (sw(i) mod 8). Consecutive elements do so
// with sw = identity, but a radix-4 step at k = c + r < 3 has its lanes on
// elements whose bits k and k+1 are zero and whose lane bits up to 2 land on
// bits 3-4 (the partner elements are these XOR eh, 2eh, 3eh): 2 or 4 lanes
// of a phase would share a slot. sw XORs bit 3 into slot bits 0-2 (7) and
// bit 4 into bits 0 and 2 (5): for every k <= 2 the two lost slot bits k,
// k+1 are spanned by those two vectors (and 7 covers the radix-2 step's one
// lost bit), so every step is conflict-free; it permutes elements within
// their 8-element group, so consecutive runs stay conflict-free too (a
// one-off enumeration of every step's lanes with ntt_pass's index formulas,
// n = 2^1..2^26, found no conflict). Measured: the 4x fewer instructions
// here and in the global accesses below made the NTT 16-26% faster; removing
// the conflicts alone did nothing (docs/gpu.md, runs 23-24).
__device__ __forceinline__ uint32_t sw(uint32_t i) {
    return i ^ ((0u - ((i >> 3) & 1)) & 7) ^ ((0u - ((i >> 4) & 1)) & 5);
}
__device__ __forceinline__ void sh_load(const uint4* sh, uint32_t chunk, uint32_t i, Fr& x) {
    i = sw(i);
    x = fr_of(sh[i], sh[chunk + i]);
}
__device__ __forceinline__ void sh_store(uint4* sh, uint32_t chunk, uint32_t i, const Fr& x) {
    i = sw(i);
    sh[i] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    sh[chunk + i] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}

// Stage q's twiddle at position idx < 2^q, forward or inverse (the table's
// layout above).
__device__ __forceinline__ Fr twiddle(const Fr* tw, uint32_t logn, uint32_t q, uint32_t idx, uint32_t inverse) {
    uint32_t k = idx << (logn - 1 - q);
    if (!inverse) return ld_fr_ro(tw + k);
    return Fr::zero() - ld_fr_ro(tw + ((1u << (logn - 1)) - k));
}

// Element i's factor: lo[i mod 2^logl] * hi[i >> logl], or lo[0] alone when
// hi is null (a constant: 1/n).
__device__ __forceinline__ Fr scale_factor(const Fr* lo, const Fr* hi, uint32_t logl, size_t i) {
    if (!hi) return ld_fr_ro(lo);
    return ld_fr_ro(lo + (i & ((1u << logl) - 1))) * ld_fr_ro(hi + (i >> logl));
}

// Stages p..p+s-1 over 2^c columns; blockDim.x == max(2^(s+c-2), 1), c <= p,
// and 2^(s+c) * 32 bytes of dynamic shared memory. With `gather` (only for
// p = 0), element i is read from in[bitrev(i)]; `out` must then differ from
// `in` unless there is one block. Local element e = j*2^c + l (column l
// fastest), so consecutive threads load consecutive global elements. Each
// thread holds 4 elements (rows j0 + {0,1,2,3}*2^r of one column) through two
// stages at a time in registers: half the shared-memory round trips and
// __syncthreads of one stage per step, and two independent multiplications
// in flight per stage. An odd last stage runs as two radix-2 butterflies per
// thread. `inverse` picks the inverse transform's twiddles (`twiddle`).
// scale_at says whether this pass scales its loads or its stores by
// (sc_lo, sc_hi, sc_logl) (scale_factor).
__device__ __forceinline__ void ntt_pass(const Fr* in, Fr* out, const Fr* tw, uint32_t inverse, uint32_t logn,
                                         uint32_t p, uint32_t s, uint32_t c, uint32_t gather, const Fr* sc_lo,
                                         const Fr* sc_hi, uint32_t sc_logl, uint32_t scale_at) {
    extern __shared__ uint4 shw[];
    uint32_t t = threadIdx.x;
    uint32_t nt = blockDim.x;
    uint32_t chunk = 1u << (s + c);
    uint32_t cmask = (1u << c) - 1;
    uint32_t lo_blocks_log = p - c;
    uint32_t lob = blockIdx.x & ((1u << lo_blocks_log) - 1);
    size_t hi = blockIdx.x >> lo_blocks_log;
    // Global index of local (j, l): hi*2^(p+s) + j*2^p + lob*2^c + l.
    size_t base = (hi << (p + s)) + ((size_t)lob << c);
#pragma unroll
    for (uint32_t k = 0; k < 4; k++) {
        uint32_t e = t + k * nt;
        if (e >= chunk) break;
        size_t g = base + ((size_t)(e >> c) << p) + (e & cmask);
        size_t src = gather ? bitrev32((uint32_t)g, logn) : g;
        Fr x = ld_fr(in + src);
        if (scale_at == NTT_SCALE_LOAD) x = x * scale_factor(sc_lo, sc_hi, sc_logl, src);
        sh_store(shw, chunk, e, x);
    }
    __syncthreads();
    uint32_t l = t & cmask;
    uint32_t col = (lob << c) + l;
    uint32_t r = 0;
    for (; r + 2 <= s; r += 2) {
        uint32_t q = p + r;
        uint32_t h = 1u << r;
        uint32_t g = t >> c;
        uint32_t pj = g & (h - 1);
        uint32_t e0 = ((((g >> r) << (r + 2)) + pj) << c) | l;
        uint32_t eh = h << c;
        Fr a0, a1, a2, a3;
        sh_load(shw, chunk, e0, a0);
        sh_load(shw, chunk, e0 + eh, a1);
        sh_load(shw, chunk, e0 + 2 * eh, a2);
        sh_load(shw, chunk, e0 + 3 * eh, a3);
        // Stage q: pairs (0,1) and (2,3), both at position pj.
        if (q > 0) {
            Fr w = twiddle(tw, logn, q, (pj << p) + col, inverse);
            a1 = a1 * w;
            a3 = a3 * w;
        }
        Fr u = a0;
        a0 = u + a1;
        a1 = u - a1;
        u = a2;
        a2 = u + a3;
        a3 = u - a3;
        // Stage q+1: pairs (0,2) at position pj and (1,3) at pj + h.
        a2 = a2 * twiddle(tw, logn, q + 1, (pj << p) + col, inverse);
        a3 = a3 * twiddle(tw, logn, q + 1, ((pj + h) << p) + col, inverse);
        u = a0;
        a0 = u + a2;
        a2 = u - a2;
        u = a1;
        a1 = u + a3;
        a3 = u - a3;
        sh_store(shw, chunk, e0, a0);
        sh_store(shw, chunk, e0 + eh, a1);
        sh_store(shw, chunk, e0 + 2 * eh, a2);
        sh_store(shw, chunk, e0 + 3 * eh, a3);
        __syncthreads();
    }
    if (r < s) {
        uint32_t q = p + r;
        uint32_t h = 1u << r;
#pragma unroll
        for (uint32_t k = 0; k < 2; k++) {
            uint32_t b = t + k * nt;
            if (b >= (chunk >> 1)) break;
            uint32_t g = b >> c;
            uint32_t pj = g & (h - 1);
            uint32_t i = ((((g >> r) << (r + 1)) + pj) << c) | (b & cmask);
            uint32_t j = i + (h << c);
            Fr u, v;
            sh_load(shw, chunk, i, u);
            sh_load(shw, chunk, j, v);
            // Stage 0's only twiddle is 1.
            if (q > 0) v = v * twiddle(tw, logn, q, (pj << p) + (lob << c) + (b & cmask), inverse);
            sh_store(shw, chunk, i, u + v);
            sh_store(shw, chunk, j, u - v);
        }
        __syncthreads();
    }
#pragma unroll
    for (uint32_t k = 0; k < 4; k++) {
        uint32_t e = t + k * nt;
        if (e >= chunk) break;
        Fr x;
        sh_load(shw, chunk, e, x);
        size_t g = base + ((size_t)(e >> c) << p) + (e & cmask);
        if (scale_at == NTT_SCALE_STORE) x = x * scale_factor(sc_lo, sc_hi, sc_logl, g);
        st_fr(out + g, x);
    }
}
