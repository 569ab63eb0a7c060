// Device-only field arithmetic on PTX carry chains: Montgomery multiplication,
// addition and subtraction modulo p for the N-limb fields of field.cuh, and the
// quadratic extension's product with lazy reduction (wide products, REDC).
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
// __CUDA_ARCH__ and keeps the portable version for the host, which is how the
// host-side checks of the field code run.
#pragma once
#include <stdint.h>

namespace ptx {

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
__device__ __forceinline__ uint32_t lo32(uint64_t x) { return (uint32_t)x; }
__device__ __forceinline__ uint32_t hi32(uint64_t x) { return (uint32_t)(x >> 32); }
__device__ __forceinline__ uint64_t pair(uint32_t lo, uint32_t hi) {
    return (uint64_t)hi << 32 | lo;
}

// Montgomery multiplication r = a*b*2^(-32N) mod p, a, b < p, N even.
//
// Layout: the running value is T = E + W*O (W = 2^32), both as word pairs: E
// holds positions 0..N+1 (pair k = positions 2k, 2k+1), O positions 1..N
// (pair k = positions 2k+1, 2k+2). A limb product a[j]*b_i covers positions
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
// Bounds: with T < 2p before a row, T + a*b_i + m*p < 2p*W, so E fits
// positions 0..N, O's chain never carries out of position N, and T < 2p after
// the row; after N rows r = A + B < 2p and one conditional subtraction ends
// it.
template <class P>
__device__ __forceinline__ void mont_mul(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    const int N = P::N, H = N / 2;
    static_assert(N % 2 == 0, "limb pairs");
    uint64_t A[H], B[H + 1], E[H + 1], O[H];
#pragma unroll
    for (int k = 0; k < H; k++) A[k] = B[k] = 0;
    B[H] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t bi = b[i];
        const uint32_t e0 = add_cc(lo32(A[0]), hi32(B[0]));
#pragma unroll
        for (int k = 0; k < H - 1; k++) O[k] = madc_wide_cc(a[2 * k + 1], bi, B[k + 1]);
        O[H - 1] = madc_wide(a[N - 1], bi, B[H]);
        E[0] = mad_wide_cc(a[0], bi, pair(e0, hi32(A[0])));
#pragma unroll
        for (int k = 1; k < H; k++) E[k] = madc_wide_cc(a[2 * k], bi, A[k]);
        E[H] = addc(0, 0);
        // Reduction: E[0] + lo(m * p[0]) = 0 mod W.
        const uint32_t m = lo32(E[0]) * P::INV;
        E[0] = mad_wide_cc(m, P::mod(0), E[0]);
#pragma unroll
        for (int k = 1; k < H; k++) E[k] = madc_wide_cc(m, P::mod(2 * k), E[k]);
        E[H] = addc(lo32(E[H]), 0);
        O[0] = mad_wide_cc(m, P::mod(1), O[0]);
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

// Wide product t = a*b (2N words, no reduction), a, b < 2^(32N). The limb
// products go into two accumulators of word pairs, as in mont_mul: Ev (pair k
// = positions 2k, 2k+1) and Od (pair k = positions 2k+1, 2k+2), so each limb
// product is one IMAD.WIDE.U32.X. Row i puts a[j]*b_i at position i+j: into Ev
// when i+j is even, Od when odd; each row is two chains of six products, and
// each chain's carry lands in the pair above it (s+6), which holds at most an
// earlier row's carry bit, so adding it to the low word cannot overflow. Ev
// and Od are each at most the whole product (< 2^(64N)), so the chains that
// reach the top pair (Ev's for i = N-1) never carry out, and Od's word 2N is 0.
template <int N>
__device__ __forceinline__ void mul_wide(uint32_t* t, const uint32_t* a, const uint32_t* b) {
    const int H = N / 2;
    static_assert(N % 2 == 0, "limb pairs");
    uint64_t Ev[N], Od[N];
#pragma unroll
    for (int k = 0; k < N; k++) Ev[k] = Od[k] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t bi = b[i];
        // Chain 1: the a[j] with j even (position parity = i's).
        // Chain 2: the a[j] with j odd.
        uint64_t* X = (i % 2 == 0) ? Ev : Od;  // where the even j land
        uint64_t* Y = (i % 2 == 0) ? Od : Ev;  // where the odd j land
        const int sx = i / 2, sy = (i % 2 == 0) ? i / 2 : (i + 1) / 2;
        X[sx] = mad_wide_cc(a[0], bi, X[sx]);
#pragma unroll
        for (int k = 1; k < H; k++) X[sx + k] = madc_wide_cc(a[2 * k], bi, X[sx + k]);
        X[sx + H] = pair(addc(lo32(X[sx + H]), 0), hi32(X[sx + H]));
        if (sy + H < N) {
            Y[sy] = mad_wide_cc(a[1], bi, Y[sy]);
#pragma unroll
            for (int k = 1; k < H; k++) Y[sy + k] = madc_wide_cc(a[2 * k + 1], bi, Y[sy + k]);
            Y[sy + H] = pair(addc(lo32(Y[sy + H]), 0), hi32(Y[sy + H]));
        } else {  // Ev's chain of the last row reaches the top pair: no carry out
            Y[sy] = mad_wide_cc(a[1], bi, Y[sy]);
#pragma unroll
            for (int k = 1; k < H - 1; k++) Y[sy + k] = madc_wide_cc(a[2 * k + 1], bi, Y[sy + k]);
            Y[sy + H - 1] = madc_wide(a[N - 1], bi, Y[sy + H - 1]);
        }
    }
    // t = Ev + W*Od.
    t[0] = lo32(Ev[0]);
    t[1] = add_cc(hi32(Ev[0]), lo32(Od[0]));
#pragma unroll
    for (int k = 1; k < N; k++) {
        t[2 * k] = addc_cc(lo32(Ev[k]), hi32(Od[k - 1]));
        t[2 * k + 1] = (k < N - 1) ? addc_cc(hi32(Ev[k]), lo32(Od[k])) : addc(hi32(Ev[k]), lo32(Od[k]));
    }
}

// Montgomery reduction r = t*2^(-32N) mod p for a wide t < p*2^(32N), r < p.
//
// The rows are mont_mul's without the product (same layout, same names):
// starting from T = t's low half, N rows of m = T[0] * (-p^-1), T = (T + m*p)
// / W give (t_lo + M*p) / 2^(32N) <= p; t's high half (< p, as t < p*2^(32N))
// is added at the end, so r < 2p before the one conditional subtraction.
// Adding the high words inside the rows instead would let the sum reach
// 2^(32(N+1)) in a row, past what O's chain can hold. Bounds in the rows:
// T < 2^(32N) + p, so T + m*p < 2^(32N) * W fits E's positions 0..N+1 and O's
// chain never carries out of position N.
template <class P>
__device__ __forceinline__ void redc(uint32_t* r, const uint32_t* t) {
    const int N = P::N, H = N / 2;
    uint64_t A[H], B[H + 1], E[H + 1], O[H];
#pragma unroll
    for (int k = 0; k < H; k++) {
        A[k] = pair(t[2 * k], t[2 * k + 1]);
        B[k] = 0;
    }
    B[H] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t e0 = add_cc(lo32(A[0]), hi32(B[0]));
#pragma unroll
        for (int k = 0; k < H - 1; k++) {
            const uint32_t lo = addc_cc(lo32(B[k + 1]), 0);
            O[k] = pair(lo, addc_cc(hi32(B[k + 1]), 0));
        }
        {
            const uint32_t lo = addc_cc(lo32(B[H]), 0);
            O[H - 1] = pair(lo, addc(hi32(B[H]), 0));
        }
        E[0] = pair(e0, hi32(A[0]));
#pragma unroll
        for (int k = 1; k < H; k++) E[k] = A[k];
        const uint32_t m = lo32(E[0]) * P::INV;
        E[0] = mad_wide_cc(m, P::mod(0), E[0]);
#pragma unroll
        for (int k = 1; k < H; k++) E[k] = madc_wide_cc(m, P::mod(2 * k), E[k]);
        E[H] = addc(0, 0);
        O[0] = mad_wide_cc(m, P::mod(1), O[0]);
#pragma unroll
        for (int k = 1; k < H - 1; k++) O[k] = madc_wide_cc(m, P::mod(2 * k + 1), O[k]);
        O[H - 1] = madc_wide(m, P::mod(N - 1), O[H - 1]);
#pragma unroll
        for (int k = 0; k < H; k++) A[k] = O[k];
#pragma unroll
        for (int k = 0; k <= H; k++) B[k] = E[k];
    }
    // r = A + (B from position 1) + t's high half.
    uint32_t x[N];
#pragma unroll
    for (int k = 0; k < H; k++) {
        x[2 * k] = hi32(B[k]);
        x[2 * k + 1] = lo32(B[k + 1]);
    }
    uint32_t y[N];
#pragma unroll
    for (int k = 0; k < H; k++) {
        y[2 * k] = lo32(A[k]);
        y[2 * k + 1] = hi32(A[k]);
    }
    r[0] = add_cc(y[0], x[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) r[j] = addc_cc(y[j], x[j]);
    r[N - 1] = addc(y[N - 1], x[N - 1]);
    r[0] = add_cc(r[0], t[N]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) r[j] = addc_cc(r[j], t[N + j]);
    r[N - 1] = addc(r[N - 1], t[2 * N - 1]);
    reduce_once<P>(r);
}

// Fq2 product (u^2 = -1) with lazy reduction: c0 = REDC(a0*b0 - a1*b1), c1 =
// REDC((a0+a1)(b0+b1) - a0*b0 - a1*b1): three wide products and two
// reductions, 5N^2 limb products instead of three mont_mul's 6N^2 (720
// against 864 for Fq). a0+a1 and b0+b1 stay unreduced (< 2p < 2^(32N)).
// Bounds for redc (input < p*2^(32N)): c1's wide value is a0*b1 + a1*b0
// < 2p^2, never negative; c0's is in (-p^2, p^2): when the subtraction
// borrows, adding p*2^(32N) (p into the high half, dropping the carry out of
// 2^(64N)) makes it T0 - T1 + p*2^(32N), in (p*2^(32N) - p^2, p*2^(32N)).
// Order: c0 is finished before the third product, so at most two wide values
// (D and S) are live beside the operands.
template <class P>
__device__ __forceinline__ void fp2_mul(uint32_t* r0, uint32_t* r1, const uint32_t* a0, const uint32_t* a1,
                                        const uint32_t* b0, const uint32_t* b1) {
    const int N = P::N;
    uint32_t sa[N], sb[N];
    sa[0] = add_cc(a0[0], a1[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) sa[j] = addc_cc(a0[j], a1[j]);
    sa[N - 1] = addc(a0[N - 1], a1[N - 1]);
    sb[0] = add_cc(b0[0], b1[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) sb[j] = addc_cc(b0[j], b1[j]);
    sb[N - 1] = addc(b0[N - 1], b1[N - 1]);
    uint32_t t0[2 * N], t1[2 * N], d[2 * N], s[2 * N];
    mul_wide<N>(t0, a0, b0);
    mul_wide<N>(t1, a1, b1);
    // d = t0 - t1 (+ p*2^(32N) on a borrow), s = t0 + t1 (< 2p^2, no carry out).
    d[0] = sub_cc(t0[0], t1[0]);
#pragma unroll
    for (int j = 1; j < 2 * N; j++) d[j] = subc_cc(t0[j], t1[j]);
    const uint32_t mask = subc(0, 0);
    d[N] = add_cc(d[N], P::mod(0) & mask);
#pragma unroll
    for (int j = 1; j < N - 1; j++) d[N + j] = addc_cc(d[N + j], P::mod(j) & mask);
    d[2 * N - 1] = addc(d[2 * N - 1], P::mod(N - 1) & mask);
    s[0] = add_cc(t0[0], t1[0]);
#pragma unroll
    for (int j = 1; j < 2 * N - 1; j++) s[j] = addc_cc(t0[j], t1[j]);
    s[2 * N - 1] = addc(t0[2 * N - 1], t1[2 * N - 1]);
    redc<P>(r0, d);
    // t0 = (a0+a1)(b0+b1) - s = a0*b1 + a1*b0 >= 0: no borrow out.
    mul_wide<N>(t0, sa, sb);
    t0[0] = sub_cc(t0[0], s[0]);
#pragma unroll
    for (int j = 1; j < 2 * N - 1; j++) t0[j] = subc_cc(t0[j], s[j]);
    t0[2 * N - 1] = subc(t0[2 * N - 1], s[2 * N - 1]);
    redc<P>(r1, t0);
}

// Fq2 squaring with lazy reduction: c0 = REDC((a0+a1)(a0+p-a1)), c1 =
// REDC(a0*(2a1)), every sum unreduced (< 2p). The same 4N^2 limb products as
// two mont_mul's; what it saves is a call: the G2 kernels then call only the
// Fq2 routines, and each Fq call's saves of the caller's registers grew with
// fp2_mul's (ptxas: 80 -> 180 bytes per call in k_g2_level0). Bounds for
// redc: (a0+a1)(a0+p-a1) < 4p^2 < p*2^(32N) as 4p < 2^383, a0*2a1 < 2p^2.
template <class P>
__device__ __forceinline__ void fp2_sqr(uint32_t* r0, uint32_t* r1, const uint32_t* a0, const uint32_t* a1) {
    const int N = P::N;
    uint32_t s[N], d[N], t[2 * N];
    s[0] = add_cc(a0[0], a1[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) s[j] = addc_cc(a0[j], a1[j]);
    s[N - 1] = addc(a0[N - 1], a1[N - 1]);
    d[0] = sub_cc(P::mod(0), a1[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) d[j] = subc_cc(P::mod(j), a1[j]);
    d[N - 1] = subc(P::mod(N - 1), a1[N - 1]);
    d[0] = add_cc(d[0], a0[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) d[j] = addc_cc(d[j], a0[j]);
    d[N - 1] = addc(d[N - 1], a0[N - 1]);
    mul_wide<N>(t, s, d);
    redc<P>(r0, t);
    s[0] = add_cc(a1[0], a1[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) s[j] = addc_cc(a1[j], a1[j]);
    s[N - 1] = addc(a1[N - 1], a1[N - 1]);
    mul_wide<N>(t, a0, s);
    redc<P>(r1, t);
}

}  // namespace ptx
