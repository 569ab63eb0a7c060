// Device-only field arithmetic on PTX carry chains: Montgomery multiplication,
// addition and subtraction modulo p for the N-limb fields of field.cuh.
//
// Why: the portable CIOS (field.cuh) keeps 64-bit accumulators, so every limb
// product costs a wide multiply-add plus the additions and shifts that move
// its carry (about 1.1K SASS instructions per 12-limb product on sm_90), and
// G1's bucket level is issue-bound on that (docs/gpu.md, run 16). With the
// carry flag of `add.cc`/`addc`/`mad*.cc`, a limb product is two instructions
// (its low word into one chain, its high word into the next) and the carry
// costs nothing.
//
// Each instruction is its own `asm volatile` statement: volatile statements
// stay in program order, so no other instruction lands between two links of a
// chain in the PTX, and ptxas keeps the carry flag across them (it schedules
// the SASS knowing the dependency). A chain is always written from its first
// `.cc` link to its last reader in one straight unrolled run.
//
// The host build never sees this file's code: field.cuh uses it only under
// __CUDA_ARCH__ and keeps the portable version for the host. One exception:
// kernels/tests/ptx_host checks this file's algorithms on the host, in C++
// with the carry flag emulated, against the portable code; it defines
// CUZK_PTX_EMULATED and its own stand-ins for the instructions below (the
// functions under the two #ifndef blocks).
#pragma once
#include <stdint.h>

namespace ptx {

#ifndef CUZK_PTX_EMULATED
// One PTX instruction on two words, as a function: the links of the carry
// chains below (`.cc` sets the carry flag, the `c` forms consume it).
#define PTX_WORD_OP(name, insn)                                              \
    __device__ __forceinline__ uint32_t name(uint32_t a, uint32_t b) {      \
        uint32_t r;                                                          \
        asm volatile(insn " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));        \
        return r;                                                            \
    }
PTX_WORD_OP(add_cc, "add.cc.u32")
PTX_WORD_OP(addc_cc, "addc.cc.u32")
PTX_WORD_OP(addc, "addc.u32")
PTX_WORD_OP(sub_cc, "sub.cc.u32")
PTX_WORD_OP(subc_cc, "subc.cc.u32")
PTX_WORD_OP(subc, "subc.u32")
#undef PTX_WORD_OP
#endif

// r = x - p if x >= p, else x (x < 2p). The borrow of x - p, spread to a
// whole word by `subc 0, 0`, selects without a branch.
template <class P>
__device__ __forceinline__ void reduce_once(uint32_t* x) {
    const int N = P::N;
    uint32_t d[N];
    d[0] = sub_cc(x[0], P::mod(0));
#pragma unroll
    for (int j = 1; j < N; j++) d[j] = subc_cc(x[j], P::mod(j));
    uint32_t borrow = subc(0, 0);  // 0 or 0xffffffff
#pragma unroll
    for (int j = 0; j < N; j++) x[j] = borrow ? x[j] : d[j];
}

// r = a + b mod p. Both moduli leave spare top bits, so a + b < 2p fits.
template <class P>
__device__ __forceinline__ void add_mod(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    const int N = P::N;
    r[0] = add_cc(a[0], b[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) r[j] = addc_cc(a[j], b[j]);
    r[N - 1] = addc(a[N - 1], b[N - 1]);
    reduce_once<P>(r);
}

// r = a - b mod p: the borrow of a - b, as a mask, adds p back.
template <class P>
__device__ __forceinline__ void sub_mod(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    const int N = P::N;
    r[0] = sub_cc(a[0], b[0]);
#pragma unroll
    for (int j = 1; j < N; j++) r[j] = subc_cc(a[j], b[j]);
    uint32_t mask = subc(0, 0);
    r[0] = add_cc(r[0], P::mod(0) & mask);
#pragma unroll
    for (int j = 1; j < N - 1; j++) r[j] = addc_cc(r[j], P::mod(j) & mask);
    r[N - 1] = addc(r[N - 1], P::mod(N - 1) & mask);
}

#ifndef CUZK_PTX_EMULATED
// One limb product a*b added into the word pair c (low word first) inside a
// carry chain: `madc.lo.cc` on the low word, `madc.hi.cc` on the high one.
// As a 64-bit operand the pair sits in an aligned register pair, which lets
// ptxas emit the two as one IMAD.WIDE.U32.X (32x32+64 multiply-add with carry
// in and out); given two unrelated 32-bit registers it splits them into three
// or four instructions. mad_wide_cc starts a chain (no carry in), madc_wide
// ends one (no carry out).
#define PTX_PAIR_OP(name, lo_insn, hi_insn)                                   \
    __device__ __forceinline__ uint64_t name(uint32_t a, uint32_t b, uint64_t c) { \
        uint64_t r;                                                              \
        asm volatile("{\n\t.reg .u32 lo, hi;\n\tmov.b64 {lo, hi}, %3;\n\t"       \
                     lo_insn " lo, %1, %2, lo;\n\t" hi_insn " hi, %1, %2, hi;\n\t" \
                     "mov.b64 %0, {lo, hi};\n\t}"                                \
                     : "=l"(r) : "r"(a), "r"(b), "l"(c));                        \
        return r;                                                                \
    }
PTX_PAIR_OP(mad_wide_cc, "mad.lo.cc.u32", "madc.hi.cc.u32")
PTX_PAIR_OP(madc_wide_cc, "madc.lo.cc.u32", "madc.hi.cc.u32")
PTX_PAIR_OP(madc_wide, "madc.lo.cc.u32", "madc.hi.u32")
#undef PTX_PAIR_OP
// The carry added into the word pair x inside a chain (no product): where a
// squaring's row has no limb product on a pair that the carry must cross.
__device__ __forceinline__ uint64_t addc_wide_cc(uint64_t x) {
    uint64_t r;
    asm volatile("{\n\t.reg .u32 lo, hi;\n\tmov.b64 {lo, hi}, %1;\n\t"
                 "addc.cc.u32 lo, lo, 0;\n\taddc.cc.u32 hi, hi, 0;\n\t"
                 "mov.b64 %0, {lo, hi};\n\t}"
                 : "=l"(r) : "l"(x));
    return r;
}
#endif
__device__ __forceinline__ uint32_t lo32(uint64_t x) { return (uint32_t)x; }
__device__ __forceinline__ uint32_t hi32(uint64_t x) { return (uint32_t)(x >> 32); }
__device__ __forceinline__ uint64_t pair(uint32_t lo, uint32_t hi) {
    return (uint64_t)hi << 32 | lo;
}

// Montgomery multiplication r = a*b*2^(-32N) mod p, a, b < p, N even
// (mont_mul), squaring r = a*a*2^(-32N) mod p (mont_sqr), and the sum of two
// products r = (a*b + c*d)*2^(-32N) mod p, a, b, c, d < p (mont_dot).
//
// Layout: the running value is T = E + W*O (W = 2^32), both as word pairs: E
// holds positions 0..N+1 (pair k = positions 2k, 2k+1), O positions 1..N
// (pair k = positions 2k+1, 2k+2). A limb product u[j]*b_i covers positions
// j and j+1: those with j even go into E's pair j/2, those with j odd into O's
// pair (j-1)/2, one madc_wide_cc each, so every limb product is a single SASS
// instruction and E and O are two independent carry chains (two products in
// flight per thread).
//
// A row (one word b_i of b, then one CIOS reduction step), from the previous
// row's pairs A (its O) and B (its E):
//   e0 = A[0] + B[1]      position 0 (word B[1] is E's position 1, now 0);
//                         its carry enters O's chain at position 1
//   O  = odd products + B's pairs 1..H (positions 1..N; B's top pair is
//        (E[N], 0))
//   E  = even products + A, with (e0, A's word 1) as pair 0; E[N] = carry
//   m  = E[0] * (-p^-1 mod W); E += m * p_even, O += m * p_odd: E[0] = 0
// T / W is then O at positions 0..N-1 plus E at positions 1..N (E[0] = 0),
// which is again "A at 0 and B, starting at position 1": the next row's
// addend pairs are the pairs this row wrote, no words move.
//
// The multiplicand u of row i: a for a product. For a square,
// a^2 = sum_i a_i W^i (a_i W^i + 2 sum_{j>i} a_j W^j), so row i multiplies
// b_i = a_i by U_i = a_i at j = i and the limbs of 2(a >> 32(i+1)) above:
// the low word of 2a_{i+1} at j = i + 1, limb j of 2a (d_j) from i + 2, and
// nothing below i: those pairs only pass the carry on (O) or keep their
// addend (E, whose chain then starts at the row's first product). That is
// N(N+1)/2 limb products instead of N^2 (78 of 144 for Fq), the reduction
// unchanged.
//
// The sum of two products a*b + c*d (mont_rows' a2, b2 are c, d) adds c*d_i
// into the same pairs after a*b_i (two more chains, no more reduction
// steps): one Montgomery reduction for both, where two products take two.
// The 12-limb reduction is 156 of a product's 300 wide multiply-adds, so
// XYZZ's Y3 = R(Q - X3) - Y1 PPP as R(Q - X3) + (p - Y1) PPP saves about 5%
// of a mixed addition's.
//
// Bounds: with T < 4p before a row, a_i U_i < 2pW (U_i <= 2a) and m*p < pW,
// so the row's sum is below 4pW, within positions 0..N when 4p < W^N, and
// T < 4p after it (a product's rows: T < 2p throughout; a sum of two: the
// row adds a*b_i + c*d_i + m*p < 3pW, so again T < 4p and the sum below
// 4pW). Fq has 3 spare bits; Fr (p > 2^254) has one, so only Fq squares or
// sums this way. E and O hold parts of the row's sum, so neither overflows
// its pairs. After N rows r = (a*b [+ c*d] + M*p) / W^N < (2p^2 + W^N p) /
// W^N < 2p in every case (p < W^N / 8), and one conditional subtraction
// ends it.
template <class P, bool SQR, bool DOT>
__device__ __forceinline__ void mont_rows(uint32_t* r, const uint32_t* a, const uint32_t* b, const uint32_t* a2,
                                          const uint32_t* b2) {
    const int N = P::N, H = N / 2;
    static_assert(N % 2 == 0, "limb pairs");
    static_assert(!SQR || N == 12, "squaring rows need 4p < W^N: Fq only");
    static_assert(!DOT || (N == 12 && !SQR), "sums of products need 4p < W^N: Fq only");
    uint64_t A[H], B[H + 1], E[H + 1], O[H];
    uint32_t d[N];  // squaring: the limbs of 2a (a < p < 2^(32N-2))
    if (SQR) {
        d[0] = a[0] << 1;
#pragma unroll
        for (int j = 1; j < N; j++) d[j] = __funnelshift_l(a[j - 1], a[j], 1);
    }
#pragma unroll
    for (int k = 0; k < H; k++) A[k] = B[k] = 0;
    B[H] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t bi = b[i];
        // Row i's multiplicand limb j, for j >= i when squaring.
        auto u = [&](int j) -> uint32_t { return !SQR ? a[j] : j == i ? a[i] : j == i + 1 ? a[j] << 1 : d[j]; };
        const uint32_t e0 = add_cc(lo32(A[0]), hi32(B[0]));
#pragma unroll
        for (int k = 0; k < H - 1; k++) {
            if (!SQR || 2 * k + 1 >= i) O[k] = madc_wide_cc(u(2 * k + 1), bi, B[k + 1]);
            else O[k] = addc_wide_cc(B[k + 1]);
        }
        O[H - 1] = madc_wide(u(N - 1), bi, B[H]);  // j = N - 1 >= i in every row
        // E's chain starts at its first product pair k0.
        const int k0 = SQR ? (i + 1) / 2 : 0;
        const uint64_t e_pair0 = pair(e0, hi32(A[0]));
        if (k0 > 0) E[0] = e_pair0;
#pragma unroll
        for (int k = 1; k < H; k++) {
            if (k < k0) E[k] = A[k];
        }
        if (k0 < H) {
            E[k0] = mad_wide_cc(u(2 * k0), bi, k0 == 0 ? e_pair0 : A[k0]);
#pragma unroll
            for (int k = k0 + 1; k < H; k++) E[k] = madc_wide_cc(u(2 * k), bi, A[k]);
            E[H] = addc(0, 0);
        } else {
            E[H] = 0;  // no product in E: no carry to take
        }
        if (DOT) {
            // c*d_i into the same pairs: O's chain, then E's.
            const uint32_t di = b2[i];
            O[0] = mad_wide_cc(a2[1], di, O[0]);
#pragma unroll
            for (int k = 1; k < H - 1; k++) O[k] = madc_wide_cc(a2[2 * k + 1], di, O[k]);
            O[H - 1] = madc_wide(a2[N - 1], di, O[H - 1]);
            E[0] = mad_wide_cc(a2[0], di, E[0]);
#pragma unroll
            for (int k = 1; k < H; k++) E[k] = madc_wide_cc(a2[2 * k], di, E[k]);
            E[H] = addc(lo32(E[H]), 0);
        }
        // Reduction: E[0] + lo(m * p[0]) = 0 mod W.
        const uint32_t t0 = lo32(E[0]);
        const uint32_t m = t0 * P::INV;
        // p[0] = 1, p[1] = W - 1 (Fr): m * p[0] = m; m * p[1] = mW - m,
        // whose low word is -m = t0 and whose high word h1 is m - 1, or 0
        // when m = 0. Word additions instead of two of the row's wide
        // multiply-adds (112 per Fr product instead of 128), the pipe that
        // ncu found busiest in the NTT (docs/gpu.md, run 52); measured: iNTT
        // and coset NTT -1 to -1.5%, the forward NTT unchanged (run 56). h1
        // is formed outside the chains.
        const uint32_t h1 = t0 ? m - 1 : 0;
        if (P::LOW_1_M1) {
            const uint32_t e_lo = add_cc(t0, m);
            const uint32_t e_hi = addc_cc(hi32(E[0]), 0);
            E[0] = pair(e_lo, e_hi);
        } else {
            E[0] = mad_wide_cc(m, P::mod(0), E[0]);
        }
#pragma unroll
        for (int k = 1; k < H; k++) E[k] = madc_wide_cc(m, P::mod(2 * k), E[k]);
        E[H] = addc(lo32(E[H]), 0);
        if (P::LOW_1_M1) {
            const uint32_t o_lo = add_cc(lo32(O[0]), t0);
            const uint32_t o_hi = addc_cc(hi32(O[0]), h1);
            O[0] = pair(o_lo, o_hi);
        } else {
            O[0] = mad_wide_cc(m, P::mod(1), O[0]);
        }
#pragma unroll
        for (int k = 1; k < H - 1; k++) O[k] = madc_wide_cc(m, P::mod(2 * k + 1), O[k]);
        O[H - 1] = madc_wide(m, P::mod(N - 1), O[H - 1]);
#pragma unroll
        for (int k = 0; k < H; k++) A[k] = O[k];
#pragma unroll
        for (int k = 0; k <= H; k++) B[k] = E[k];
    }
    // r = A + (B from position 1): word j of B's part is B's word j + 1.
    uint32_t x[N];
#pragma unroll
    for (int k = 0; k < H; k++) {
        x[2 * k] = hi32(B[k]);
        x[2 * k + 1] = lo32(B[k + 1]);
    }
    r[0] = add_cc(lo32(A[0]), x[0]);
    r[1] = addc_cc(hi32(A[0]), x[1]);
#pragma unroll
    for (int k = 1; k < H - 1; k++) {
        r[2 * k] = addc_cc(lo32(A[k]), x[2 * k]);
        r[2 * k + 1] = addc_cc(hi32(A[k]), x[2 * k + 1]);
    }
    r[N - 2] = addc_cc(lo32(A[H - 1]), x[N - 2]);
    r[N - 1] = addc(hi32(A[H - 1]), x[N - 1]);
    reduce_once<P>(r);
}

template <class P>
__device__ __forceinline__ void mont_mul(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    mont_rows<P, false, false>(r, a, b, a, b);
}

template <class P>
__device__ __forceinline__ void mont_sqr(uint32_t* r, const uint32_t* a) {
    mont_rows<P, true, false>(r, a, a, a, a);
}

template <class P>
__device__ __forceinline__ void mont_dot(uint32_t* r, const uint32_t* a, const uint32_t* b, const uint32_t* c,
                                         const uint32_t* d) {
    mont_rows<P, false, true>(r, a, b, c, d);
}

}  // namespace ptx
