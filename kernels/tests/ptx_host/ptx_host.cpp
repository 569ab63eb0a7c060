// The device's field arithmetic on PTX carry chains (kernels/cuda/
// field_ptx.cuh), run on the host: each PTX instruction it uses becomes a C++
// function over an emulated carry flag, and every result is compared with
// the portable CIOS of field.cuh, which the host compiles as it is. So the
// chains' structure and bounds (a carry dropped where none may occur, a link
// missing, a reduction step too few) are checked on every CI run, without a
// GPU; the GPU tests check the compiled instructions themselves.
//
// Usage: ptx_host SEED CASES. Exit status 0 when every case agrees and no
// chain that must not carry out did.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <random>

#include "field.cuh"

#define CUZK_PTX_EMULATED
#define __device__
#define __forceinline__ inline

// The funnel shift the squaring uses to form 2a: the high word of
// (hi:lo) << s.
static inline uint32_t __funnelshift_l(uint32_t lo, uint32_t hi, uint32_t s) {
    return (uint32_t)(((((uint64_t)hi) << 32) | lo) << s >> 32);
}

namespace ptx {
// The carry flag the `.cc` instructions set and the `c` forms read.
static uint32_t carry_flag = 0;
// Carries lost by the chain ends that have no carry out (madc_wide): each
// would be a wrong result on the device.
static uint64_t lost_carries = 0;

static inline uint32_t add_cc(uint32_t a, uint32_t b) {
    uint64_t r = (uint64_t)a + b;
    carry_flag = (uint32_t)(r >> 32);
    return (uint32_t)r;
}
static inline uint32_t addc_cc(uint32_t a, uint32_t b) {
    uint64_t r = (uint64_t)a + b + carry_flag;
    carry_flag = (uint32_t)(r >> 32);
    return (uint32_t)r;
}
static inline uint32_t addc(uint32_t a, uint32_t b) { return a + b + carry_flag; }
static inline uint32_t sub_cc(uint32_t a, uint32_t b) {
    carry_flag = a < b;
    return a - b;
}
static inline uint32_t subc_cc(uint32_t a, uint32_t b) {
    uint64_t r = (uint64_t)a - b - carry_flag;
    carry_flag = (uint32_t)(r >> 63);
    return (uint32_t)r;
}
static inline uint32_t subc(uint32_t a, uint32_t b) { return a - b - carry_flag; }

// madc.lo(.cc) then madc.hi(.cc) on the word pair c: the low word of a*b
// into c's low word, the high word into its high word, the carry between.
static inline uint64_t pair_op(uint32_t a, uint32_t b, uint64_t c, bool carry_in, bool carry_out) {
    uint64_t p = (uint64_t)a * b;
    uint64_t lo = (uint64_t)(uint32_t)c + (uint32_t)p + (carry_in ? carry_flag : 0);
    carry_flag = (uint32_t)(lo >> 32);
    uint64_t hi = (c >> 32) + (p >> 32) + carry_flag;
    if (carry_out) carry_flag = (uint32_t)(hi >> 32);
    else if (hi >> 32) lost_carries++;
    return (hi << 32) | (uint32_t)lo;
}
static inline uint64_t mad_wide_cc(uint32_t a, uint32_t b, uint64_t c) { return pair_op(a, b, c, false, true); }
static inline uint64_t madc_wide_cc(uint32_t a, uint32_t b, uint64_t c) { return pair_op(a, b, c, true, true); }
static inline uint64_t madc_wide(uint32_t a, uint32_t b, uint64_t c) { return pair_op(a, b, c, true, false); }
static inline uint64_t addc_wide_cc(uint64_t x) { return pair_op(0, 0, x, true, true); }
}  // namespace ptx

#include "field_ptx.cuh"

static std::mt19937_64 rng;

// A value below p: random (some with a short top limb), or an edge: 0, 1,
// p - 1, p - 2 or p minus a small random number.
template <class P>
static Fp<P> draw() {
    Fp<P> r = Fp<P>::zero();
    switch (rng() % 16) {
        case 0: return r;
        case 1: r.v[0] = 1; return r;
        case 2:
        case 3:
        case 4: {
            uint32_t d = (uint32_t)(rng() % 4 == 0 ? 1 + rng() % 2 : 1 + rng() % 65536);
            for (int i = 0; i < P::N; i++) r.v[i] = P::mod(i);
            // p has a non-zero low limb in both fields, above 65536 for Fq;
            // Fr's is 1, so subtract with a borrow.
            int64_t borrow = -(int64_t)d;
            for (int i = 0; i < P::N && borrow; i++) {
                int64_t x = (int64_t)r.v[i] + borrow;
                r.v[i] = (uint32_t)x;
                borrow = x < 0 ? -1 : 0;
            }
            return r;
        }
        case 5:
            r.v[0] = (uint32_t)rng();
            r.v[1] = (uint32_t)rng();
            return r;
        default:
            for (;;) {
                for (int i = 0; i < P::N; i++) r.v[i] = (uint32_t)rng();
                r.v[P::N - 1] >>= 1 + rng() % 3;
                Fp<P> t = r;
                Fp<P>::reduce_once(t);
                if (t == r) return r;
            }
    }
}

static long failures = 0;

template <class P>
static void expect(const char* op, const Fp<P>& got, const Fp<P>& want, const Fp<P>* in, int n_in) {
    if (got == want) return;
    if (failures++ < 5) {
        printf("MISMATCH %s (%d limbs):", op, P::N);
        for (int k = 0; k < n_in; k++) {
            printf(" in%d=", k);
            for (int i = P::N - 1; i >= 0; i--) printf("%08x", in[k].v[i]);
        }
        printf("\n");
    }
}

// The operations both fields have: product, sum, difference.
template <class P>
static void common_ops(long cases) {
    for (long c = 0; c < cases; c++) {
        Fp<P> in[2] = {draw<P>(), draw<P>()};
        Fp<P> r;
        ptx::mont_mul<P>(r.v, in[0].v, in[1].v);
        expect("mont_mul", r, in[0].mul_inline(in[1]), in, 2);
        ptx::add_mod<P>(r.v, in[0].v, in[1].v);
        expect("add_mod", r, in[0] + in[1], in, 2);
        ptx::sub_mod<P>(r.v, in[0].v, in[1].v);
        expect("sub_mod", r, in[0] - in[1], in, 2);
    }
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: ptx_host SEED CASES\n");
        return 2;
    }
    rng.seed(strtoull(argv[1], nullptr, 10));
    long cases = strtol(argv[2], nullptr, 10);
    common_ops<FqParams>(cases);
    common_ops<FrParams>(cases);
    // Fq only: the squaring's rows and the sum of two products need 4p < 2^384.
    for (long c = 0; c < cases; c++) {
        Fq in[4] = {draw<FqParams>(), draw<FqParams>(), draw<FqParams>(), draw<FqParams>()};
        Fq r;
        ptx::mont_sqr<FqParams>(r.v, in[0].v);
        expect("mont_sqr", r, in[0].mul_inline(in[0]), in, 1);
        ptx::mont_dot<FqParams>(r.v, in[0].v, in[1].v, in[2].v, in[3].v);
        expect("mont_dot", r, in[0].mul_inline(in[1]) + in[2].mul_inline(in[3]), in, 4);
    }
    printf("seed %s: %ld cases per operation, %ld mismatches, %llu carries lost\n", argv[1], cases, failures,
           (unsigned long long)ptx::lost_carries);
    return failures == 0 && ptx::lost_carries == 0 ? 0 : 1;
}
