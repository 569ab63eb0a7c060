// Generated (see docs/gpu.md): Montgomery multiplication with PTX carry
// chains, device only. Row i of CIOS as four carry chains: t += lo(a*b_i),
// t[1..] += hi(a*b_i), t += lo(m*p), t[1..] += hi(m*p), then a one-word shift.
// Bounds: t < 2p between rows; t + a*b_i + m*p < p*(2^33 + 2) fits N+1 words
// for both moduli (r ~ 2^254.9, p ~ 2^380.7), so t[N+1] is never needed.
#pragma once
#include <stdint.h>
#ifdef __CUDA_ARCH__
// PTX carry-chain CIOS for 8 limbs (t has N+1 words; see field.cuh).
__device__ __forceinline__ void mont_mul_ptx8(uint32_t* r, const uint32_t* a, const uint32_t* b, const uint32_t* p, uint32_t inv) {
    uint32_t t[9];
#pragma unroll
    for (int j = 0; j < 9; j++) t[j] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        uint32_t bi = b[i];
        asm("mad.lo.cc.u32 %0, %9, %17, %0; madc.lo.cc.u32 %1, %10, %17, %1; madc.lo.cc.u32 %2, %11, %17, %2; madc.lo.cc.u32 %3, %12, %17, %3; madc.lo.cc.u32 %4, %13, %17, %4; madc.lo.cc.u32 %5, %14, %17, %5; madc.lo.cc.u32 %6, %15, %17, %6; madc.lo.cc.u32 %7, %16, %17, %7; addc.u32 %8, %8, 0;" : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(bi));
        asm("mad.hi.cc.u32 %0, %8, %16, %0; madc.hi.cc.u32 %1, %9, %16, %1; madc.hi.cc.u32 %2, %10, %16, %2; madc.hi.cc.u32 %3, %11, %16, %3; madc.hi.cc.u32 %4, %12, %16, %4; madc.hi.cc.u32 %5, %13, %16, %5; madc.hi.cc.u32 %6, %14, %16, %6; madc.hi.u32 %7, %15, %16, %7;" : "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(bi));
        uint32_t m = t[0] * inv;
        asm("mad.lo.cc.u32 %0, %9, %17, %0; madc.lo.cc.u32 %1, %10, %17, %1; madc.lo.cc.u32 %2, %11, %17, %2; madc.lo.cc.u32 %3, %12, %17, %3; madc.lo.cc.u32 %4, %13, %17, %4; madc.lo.cc.u32 %5, %14, %17, %5; madc.lo.cc.u32 %6, %15, %17, %6; madc.lo.cc.u32 %7, %16, %17, %7; addc.u32 %8, %8, 0;" : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]) : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]), "r"(p[5]), "r"(p[6]), "r"(p[7]), "r"(m));
        asm("mad.hi.cc.u32 %0, %8, %16, %0; madc.hi.cc.u32 %1, %9, %16, %1; madc.hi.cc.u32 %2, %10, %16, %2; madc.hi.cc.u32 %3, %11, %16, %3; madc.hi.cc.u32 %4, %12, %16, %4; madc.hi.cc.u32 %5, %13, %16, %5; madc.hi.cc.u32 %6, %14, %16, %6; madc.hi.u32 %7, %15, %16, %7;" : "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]) : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]), "r"(p[5]), "r"(p[6]), "r"(p[7]), "r"(m));
#pragma unroll
        for (int j = 0; j < 8; j++) t[j] = t[j + 1];
        t[8] = 0;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) r[j] = t[j];
}

// PTX carry-chain CIOS for 12 limbs (t has N+1 words; see field.cuh).
__device__ __forceinline__ void mont_mul_ptx12(uint32_t* r, const uint32_t* a, const uint32_t* b, const uint32_t* p, uint32_t inv) {
    uint32_t t[13];
#pragma unroll
    for (int j = 0; j < 13; j++) t[j] = 0;
#pragma unroll
    for (int i = 0; i < 12; i++) {
        uint32_t bi = b[i];
        asm("mad.lo.cc.u32 %0, %13, %25, %0; madc.lo.cc.u32 %1, %14, %25, %1; madc.lo.cc.u32 %2, %15, %25, %2; madc.lo.cc.u32 %3, %16, %25, %3; madc.lo.cc.u32 %4, %17, %25, %4; madc.lo.cc.u32 %5, %18, %25, %5; madc.lo.cc.u32 %6, %19, %25, %6; madc.lo.cc.u32 %7, %20, %25, %7; madc.lo.cc.u32 %8, %21, %25, %8; madc.lo.cc.u32 %9, %22, %25, %9; madc.lo.cc.u32 %10, %23, %25, %10; madc.lo.cc.u32 %11, %24, %25, %11; addc.u32 %12, %12, 0;" : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]), "+r"(t[9]), "+r"(t[10]), "+r"(t[11]), "+r"(t[12]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(a[8]), "r"(a[9]), "r"(a[10]), "r"(a[11]), "r"(bi));
        asm("mad.hi.cc.u32 %0, %12, %24, %0; madc.hi.cc.u32 %1, %13, %24, %1; madc.hi.cc.u32 %2, %14, %24, %2; madc.hi.cc.u32 %3, %15, %24, %3; madc.hi.cc.u32 %4, %16, %24, %4; madc.hi.cc.u32 %5, %17, %24, %5; madc.hi.cc.u32 %6, %18, %24, %6; madc.hi.cc.u32 %7, %19, %24, %7; madc.hi.cc.u32 %8, %20, %24, %8; madc.hi.cc.u32 %9, %21, %24, %9; madc.hi.cc.u32 %10, %22, %24, %10; madc.hi.u32 %11, %23, %24, %11;" : "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]), "+r"(t[9]), "+r"(t[10]), "+r"(t[11]), "+r"(t[12]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(a[8]), "r"(a[9]), "r"(a[10]), "r"(a[11]), "r"(bi));
        uint32_t m = t[0] * inv;
        asm("mad.lo.cc.u32 %0, %13, %25, %0; madc.lo.cc.u32 %1, %14, %25, %1; madc.lo.cc.u32 %2, %15, %25, %2; madc.lo.cc.u32 %3, %16, %25, %3; madc.lo.cc.u32 %4, %17, %25, %4; madc.lo.cc.u32 %5, %18, %25, %5; madc.lo.cc.u32 %6, %19, %25, %6; madc.lo.cc.u32 %7, %20, %25, %7; madc.lo.cc.u32 %8, %21, %25, %8; madc.lo.cc.u32 %9, %22, %25, %9; madc.lo.cc.u32 %10, %23, %25, %10; madc.lo.cc.u32 %11, %24, %25, %11; addc.u32 %12, %12, 0;" : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]), "+r"(t[9]), "+r"(t[10]), "+r"(t[11]), "+r"(t[12]) : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]), "r"(p[5]), "r"(p[6]), "r"(p[7]), "r"(p[8]), "r"(p[9]), "r"(p[10]), "r"(p[11]), "r"(m));
        asm("mad.hi.cc.u32 %0, %12, %24, %0; madc.hi.cc.u32 %1, %13, %24, %1; madc.hi.cc.u32 %2, %14, %24, %2; madc.hi.cc.u32 %3, %15, %24, %3; madc.hi.cc.u32 %4, %16, %24, %4; madc.hi.cc.u32 %5, %17, %24, %5; madc.hi.cc.u32 %6, %18, %24, %6; madc.hi.cc.u32 %7, %19, %24, %7; madc.hi.cc.u32 %8, %20, %24, %8; madc.hi.cc.u32 %9, %21, %24, %9; madc.hi.cc.u32 %10, %22, %24, %10; madc.hi.u32 %11, %23, %24, %11;" : "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "+r"(t[8]), "+r"(t[9]), "+r"(t[10]), "+r"(t[11]), "+r"(t[12]) : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]), "r"(p[5]), "r"(p[6]), "r"(p[7]), "r"(p[8]), "r"(p[9]), "r"(p[10]), "r"(p[11]), "r"(m));
#pragma unroll
        for (int j = 0; j < 12; j++) t[j] = t[j + 1];
        t[12] = 0;
    }
#pragma unroll
    for (int j = 0; j < 12; j++) r[j] = t[j];
}
#endif
