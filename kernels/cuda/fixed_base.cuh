// Fixed-base scalar multiplication: many scalars times one generator, as the
// Groth16 setup needs it (about 4 x 130 M G1 and 130 M G2 products for a
// 32 GiB PoRep key), ending in affine points.
//
// The host computes the generator's window table once (kernels/src/
// fixed_base.rs): for window w of c bits and magnitude d in 1..2^(c-1), entry
// w * 2^(c-1) + d - 1 is d * 2^(c*w) * G in affine form. A scalar is cut into
// signed digits (in -2^(c-1)..2^(c-1), the carry moving up), so the table
// holds half the magnitudes and a negative digit negates the entry's y. Each
// thread sums its scalar's windows with mixed additions (`fb_mul`): no
// doubling at all, and at c = 13 the table (20 x 4096 points, 7.9 MB for G1,
// 15.7 MB for G2) stays in L2.
//
// The Jacobian results become affine by Montgomery's simultaneous inversion
// (`fb_to_affine`): a thread takes every stride-th point, keeps the running
// product of their Z in the output's x slots, inverts the total once (Fermat:
// a^(p-2)) and walks back, so one inversion serves a segment of points and
// neighbouring threads touch neighbouring points.
//
// Everything here is plain C++ over field.cuh and curve.cuh, so the host
// compiles and checks it (kernels/tests/fixed_base_host); cuzk.cu's kernels
// only supply the thread index.
#pragma once
#include "curve.cuh"

// Bits at..at+c-1 (c <= 16) of a plain scalar's 8 little-endian limbs; bits
// beyond 256 read as zero.
DEV uint32_t fb_bits(const Fr& s, uint32_t at, uint32_t c) {
    uint32_t limb = at >> 5;
    if (limb >= 8) return 0;
    uint64_t w = s.v[limb];
    if (limb + 1 < 8) w |= (uint64_t)s.v[limb + 1] << 32;
    return (uint32_t)(w >> (at & 31)) & ((1u << c) - 1);
}

// s * G for a plain scalar s, from G's table of nwin windows of c bits.
// nwin * c must exceed the scalar's 255 bits by one, so the last window
// never carries out.
template <class F>
DEV Jacobian<F> fb_mul(const Fr& s, const Affine<F>* table, uint32_t c, uint32_t nwin) {
    const uint32_t half = 1u << (c - 1);
    Jacobian<F> acc = Jacobian<F>::inf();
    uint32_t carry = 0;
    for (uint32_t w = 0; w < nwin; w++) {
        uint32_t d = fb_bits(s, w * c, c) + carry;
        // A digit above half is d - 2^c: its magnitude 2^c - d, negated,
        // and one more in the next window (d = 2^c is the digit 0).
        bool neg = d > half;
        carry = neg;
        uint32_t mag = neg ? (1u << c) - d : d;
        if (mag == 0) continue;
        Affine<F> p = table[w * half + mag - 1];
        if (neg) p.y = p.y.neg();
        acc = acc.add_affine(p);
    }
    return acc;
}

// a^-1 in Fq as a^(p-2) (a != 0): 381 squarings, a product per set bit.
DEV Fq fb_inv(const Fq& a) {
    Fq r = Fq::one();
    for (int i = 11; i >= 0; i--) {
        uint32_t e = FqParams::mod(i) - (i == 0 ? 2u : 0u);  // p's low limb is odd: no borrow
        for (int b = 31; b >= 0; b--) {
            r = r.sqr();
            if ((e >> b) & 1) r = r * a;
        }
    }
    return r;
}

// a^-1 in Fq2: conj(a) / norm(a), norm = c0^2 + c1^2 (u^2 = -1).
DEV Fq2 fb_inv(const Fq2& a) {
    Fq t = fb_inv(a.c0.sqr() + a.c1.sqr());
    Fq2 r;
    r.c0 = a.c0 * t;
    r.c1 = (a.c1 * t).neg();
    return r;
}

// Points first, first + stride, ... (< n) of `in` in affine form into `out`
// (the identity as zeros), with one inversion for all of them. `out`'s x
// slots hold the running products of the Z before them until the walk back
// overwrites them.
template <class F>
DEV void fb_to_affine(const Jacobian<F>* in, Affine<F>* out, uint32_t n, uint32_t first, uint32_t stride) {
    if (first >= n) return;
    F acc = F::one();
    uint32_t last = first;
    for (uint32_t i = first; i < n; i += stride) {
        out[i].x = acc;
        if (!in[i].is_inf()) acc = acc * in[i].Z;
        last = i;
    }
    F inv = fb_inv(acc);  // the product of the non-zero Z: never zero
    for (uint32_t i = last;; i -= stride) {
        Jacobian<F> p = in[i];
        if (p.is_inf()) {
            out[i].x = F::zero();
            out[i].y = F::zero();
        } else {
            F zinv = inv * out[i].x;  // 1/Z: the inverse of the products so far, times those before
            inv = inv * p.Z;
            F z2 = zinv.sqr();
            out[i].x = p.X * z2;
            out[i].y = p.Y * (z2 * zinv);
        }
        if (i == first) break;
    }
}
