// BLS12-381 prime fields Fr (scalar, 255 bits) and Fq (base, 381 bits) and the
// quadratic extension Fq2 = Fq[u]/(u^2 + 1).
//
// Elements are kept in arkworks' Montgomery form: an arkworks `Fp<_, N>` is a
// little-endian [u64; N] holding a*R mod p with R = 2^(64N); read as 2N
// little-endian u32 limbs it is the same number, and R = 2^(32*2N), so the
// bytes of an arkworks element are the bytes of ours. No conversion needed.
//
// Multiplication is CIOS Montgomery with 32-bit limbs. The device runs it, and
// addition and subtraction, on PTX carry chains (field_ptx.cuh); the portable
// C++ below (64-bit accumulators) is what the host compiles, which lets the
// arithmetic be checked without a GPU.
#pragma once
#include <stdint.h>
#ifdef __CUDA_ARCH__
#include "field_ptx.cuh"
#endif

#ifdef __CUDACC__
#define DEV __device__ __forceinline__
#define DEVI __device__ __noinline__
#define CONSTMEM __device__ __constant__
#else
#define DEV inline
#define DEVI inline
#define CONSTMEM static const
#endif

CONSTMEM uint32_t FQ_MOD[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
                                 0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
CONSTMEM uint32_t FQ_ONE[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857,
                                 0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
CONSTMEM uint32_t FR_MOD[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                                0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
CONSTMEM uint32_t FR_ONE[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                                0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};

struct FqParams {
    static const int N = 12;
    static const uint32_t INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    static const bool LOW_1_M1 = false;       // see FrParams
    static DEV uint32_t mod(int i) { return FQ_MOD[i]; }
    static DEV uint32_t one(int i) { return FQ_ONE[i]; }
};
struct FrParams {
    static const int N = 8;
    static const uint32_t INV = 0xffffffffu;
    // p's limbs 0 and 1 are 1 and 2^32 - 1, so the Montgomery reduction's
    // products of m by them, m and m * 2^32 - m, become word additions
    // (ptx::mont_rows).
    static const bool LOW_1_M1 = true;
    static DEV uint32_t mod(int i) { return FR_MOD[i]; }
    static DEV uint32_t one(int i) { return FR_ONE[i]; }
};

template <class P>
struct Fp;
// Fq multiplication is an out-of-line call on the device: inlining every
// 12-limb product into the point formulas made nvcc run for many minutes on
// 2 cores (G2 above all; G1 inline alone took > 6 min), and G1's MSM measured
// slower inlined, both with the portable product (run 15 in docs/gpu.md:
// spills) and with the PTX one (run 18: +6 to +9%, no spills). Fr (NTT)
// inlines it. The operands go by value: as const
// references the caller had to keep both in local memory (stack frames of
// 768 bytes in k_g1_level0 and 1760 in k_g2_level0, read and written around
// every product); by value they travel in registers (0 and 240 bytes).
DEVI Fp<FqParams> fq_mul_call(Fp<FqParams> a, Fp<FqParams> b);
// The Fq square, out of line likewise: on the device N(N+1)/2 limb
// products instead of N^2 (ptx::mont_sqr).
DEVI Fp<FqParams> fq_sqr_call(Fp<FqParams> a);
// a*b + c*d in Fq, out of line likewise: on the device one Montgomery
// reduction for both products (ptx::mont_dot).
DEVI Fp<FqParams> fq_dot_call(Fp<FqParams> a, Fp<FqParams> b, Fp<FqParams> c, Fp<FqParams> d);

template <class P>
struct Fp {
    static const int N = P::N;
    uint32_t v[N];

    static DEV Fp zero() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    static DEV Fp one() {
        Fp r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    DEV bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    DEV bool operator==(const Fp& o) const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }
    DEV bool operator!=(const Fp& o) const { return !(*this == o); }

    // r = x - p if x >= p (x < 2p, no overflow beyond N limbs)
    static DEV void reduce_once(Fp& x) {
        uint32_t t[N];
        int64_t borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            int64_t d = (int64_t)x.v[i] - (int64_t)P::mod(i) + borrow;
            t[i] = (uint32_t)d;
            borrow = d >> 32;  // 0 or -1
        }
        if (borrow == 0) {
#pragma unroll
            for (int i = 0; i < N; i++) x.v[i] = t[i];
        }
    }

    DEV Fp operator+(const Fp& o) const {
        Fp r;
#ifdef __CUDA_ARCH__
        ptx::add_mod<P>(r.v, v, o.v);
#else
        uint64_t c = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            c += (uint64_t)v[i] + o.v[i];
            r.v[i] = (uint32_t)c;
            c >>= 32;
        }
        reduce_once(r);  // both moduli leave spare top bits: no carry out
#endif
        return r;
    }
    DEV Fp operator-(const Fp& o) const {
        Fp r;
#ifdef __CUDA_ARCH__
        ptx::sub_mod<P>(r.v, v, o.v);
#else
        int64_t b = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            int64_t d = (int64_t)v[i] - (int64_t)o.v[i] + b;
            r.v[i] = (uint32_t)d;
            b = d >> 32;
        }
        if (b) {
            uint64_t c = 0;
#pragma unroll
            for (int i = 0; i < N; i++) {
                c += (uint64_t)r.v[i] + P::mod(i);
                r.v[i] = (uint32_t)c;
                c >>= 32;
            }
        }
#endif
        return r;
    }
    DEV Fp neg() const {
        if (is_zero()) return *this;
        Fp r;
        int64_t b = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            int64_t d = (int64_t)P::mod(i) - (int64_t)v[i] + b;
            r.v[i] = (uint32_t)d;
            b = d >> 32;
        }
        return r;
    }
    DEV Fp dbl() const { return *this + *this; }

    DEV Fp operator*(const Fp& b) const {
        if constexpr (N == 12) return fq_mul_call(*this, b);
        else return mul_inline(b);
    }

    // CIOS Montgomery multiplication: a*b*2^(-32N) mod p.
    DEV Fp mul_inline(const Fp& b) const {
        Fp r;
#ifdef __CUDA_ARCH__
        ptx::mont_mul<P>(r.v, v, b.v);
#else
        uint32_t t[N + 2];
#pragma unroll
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t c = 0;
#pragma unroll
            for (int j = 0; j < N; j++) {
                c = (uint64_t)t[j] + (uint64_t)v[j] * b.v[i] + (c >> 32);
                t[j] = (uint32_t)c;
            }
            c = (uint64_t)t[N] + (c >> 32);
            t[N] = (uint32_t)c;
            t[N + 1] = (uint32_t)(c >> 32);
            uint32_t m = t[0] * P::INV;
            c = (uint64_t)t[0] + (uint64_t)m * P::mod(0);
#pragma unroll
            for (int j = 1; j < N; j++) {
                c = (uint64_t)t[j] + (uint64_t)m * P::mod(j) + (c >> 32);
                t[j - 1] = (uint32_t)c;
            }
            c = (uint64_t)t[N] + (c >> 32);
            t[N - 1] = (uint32_t)c;
            t[N] = t[N + 1] + (uint32_t)(c >> 32);
        }
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = t[i];
        reduce_once(r);
#endif
        return r;
    }
    DEV Fp sqr() const {
        if constexpr (N == 12) return fq_sqr_call(*this);
        else return mul_inline(*this);
    }
    // a*b + c*d.
    static DEV Fp dot(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
        if constexpr (N == 12) return fq_dot_call(a, b, c, d);
        else return a * b + c * d;
    }

    // Montgomery form -> plain integer (multiply by 1 and reduce).
    DEV Fp from_mont() const {
        Fp one_raw = zero();
        one_raw.v[0] = 1;
        return *this * one_raw;
    }
};

typedef Fp<FqParams> Fq;
typedef Fp<FrParams> Fr;

#ifdef __CUDACC__
// An Fr element of global memory as two 128-bit accesses (Fr is 4-byte
// aligned as a type, so a plain copy compiles to eight 32-bit loads: four
// times the load instructions and L1 requests). Every Fr array the kernels
// touch starts on a cuMemAlloc boundary and DevPtr offsets are whole
// elements, so the addresses are 32-byte aligned. `ld_fr_ro` reads through
// the read-only cache (tables, twiddles, an assignment's gathered values).
__device__ __forceinline__ Fr fr_of(uint4 a, uint4 b) {
    Fr x;
    x.v[0] = a.x; x.v[1] = a.y; x.v[2] = a.z; x.v[3] = a.w;
    x.v[4] = b.x; x.v[5] = b.y; x.v[6] = b.z; x.v[7] = b.w;
    return x;
}
__device__ __forceinline__ Fr ld_fr(const Fr* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    return fr_of(q[0], q[1]);
}
__device__ __forceinline__ Fr ld_fr_ro(const Fr* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    return fr_of(__ldg(q), __ldg(q + 1));
}
__device__ __forceinline__ void st_fr(Fr* p, const Fr& x) {
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    q[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}
#endif

DEVI Fq fq_mul_call(Fq a, Fq b) { return a.mul_inline(b); }
DEVI Fq fq_sqr_call(Fq a) {
#ifdef __CUDA_ARCH__
    Fq r;
    ptx::mont_sqr<FqParams>(r.v, a.v);
    return r;
#else
    return a.mul_inline(a);
#endif
}
DEVI Fq fq_dot_call(Fq a, Fq b, Fq c, Fq d) {
#ifdef __CUDA_ARCH__
    Fq r;
    ptx::mont_dot<FqParams>(r.v, a.v, b.v, c.v, d.v);
    return r;
#else
    return a.mul_inline(b) + c.mul_inline(d);
#endif
}

// Fq2 = Fq[u]/(u^2+1); arkworks' layout: c0 then c1.
struct Fq2 {
    Fq c0, c1;
    static DEV Fq2 zero() { Fq2 r; r.c0 = Fq::zero(); r.c1 = Fq::zero(); return r; }
    static DEV Fq2 one() { Fq2 r; r.c0 = Fq::one(); r.c1 = Fq::zero(); return r; }
    DEV bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    DEV bool operator==(const Fq2& o) const { return c0 == o.c0 && c1 == o.c1; }
    DEV bool operator!=(const Fq2& o) const { return !(*this == o); }
    DEV Fq2 operator+(const Fq2& o) const { Fq2 r; r.c0 = c0 + o.c0; r.c1 = c1 + o.c1; return r; }
    DEV Fq2 operator-(const Fq2& o) const { Fq2 r; r.c0 = c0 - o.c0; r.c1 = c1 - o.c1; return r; }
    DEV Fq2 neg() const { Fq2 r; r.c0 = c0.neg(); r.c1 = c1.neg(); return r; }
    DEV Fq2 dbl() const { Fq2 r; r.c0 = c0.dbl(); r.c1 = c1.dbl(); return r; }
    DEV Fq2 operator*(const Fq2& o) const {
        Fq a = fq_mul_call(c0, o.c0);
        Fq b = fq_mul_call(c1, o.c1);
        Fq s = fq_mul_call(c0 + c1, o.c0 + o.c1);
        Fq2 r;
        r.c0 = a - b;
        r.c1 = s - a - b;
        return r;
    }
    // a*b + c*d: Karatsuba's three products for both pairs at once, each
    // a sum of two Fq products with one reduction (fq_dot_call): 3 Fq
    // reductions where two Fq2 products take 6.
    static DEV Fq2 dot(const Fq2& a, const Fq2& b, const Fq2& c, const Fq2& d) {
        Fq p = fq_dot_call(a.c0, b.c0, c.c0, d.c0);
        Fq q = fq_dot_call(a.c1, b.c1, c.c1, d.c1);
        Fq s = fq_dot_call(a.c0 + a.c1, b.c0 + b.c1, c.c0 + c.c1, d.c0 + d.c1);
        Fq2 r;
        r.c0 = p - q;
        r.c1 = s - p - q;
        return r;
    }
    DEV Fq2 sqr() const {
        Fq a = fq_mul_call(c0 + c1, c0 - c1);
        Fq b = fq_mul_call(c0, c1);
        Fq2 r;
        r.c0 = a;
        r.c1 = b.dbl();
        return r;
    }
};
