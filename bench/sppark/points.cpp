// Host-side point generation for sppark-bench's MSMs, with blst. In its own
// file because blst.h and sppark's host field types (which include blst's
// internal vect.h) declare limb_t differently and cannot share a translation
// unit.
#include "points.hpp"
#include <blst.h>
#include <algorithm>
#include <cstring>
#include <vector>

namespace {

uint64_t xorshift(uint64_t& x) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return x;
}

// blst's G1 and G2 entry points behind one name each, so that the chain
// below is written once.
struct G1 {
    typedef blst_p1 jac;
    typedef blst_p1_affine aff;
    static const jac* gen() { return blst_p1_generator(); }
    static void mult(jac* o, const jac* p, const byte* s, size_t bits) { blst_p1_mult(o, p, s, bits); }
    static void add(jac* o, const jac* a, const jac* b) { blst_p1_add_or_double(o, a, b); }
    static void to_affine(aff* o, const jac* const* p, size_t n) { blst_p1s_to_affine(o, p, n); }
};
struct G2 {
    typedef blst_p2 jac;
    typedef blst_p2_affine aff;
    static const jac* gen() { return blst_p2_generator(); }
    static void mult(jac* o, const jac* p, const byte* s, size_t bits) { blst_p2_mult(o, p, s, bits); }
    static void add(jac* o, const jac* a, const jac* b) { blst_p2_add_or_double(o, a, b); }
    static void to_affine(aff* o, const jac* const* p, size_t n) { blst_p2s_to_affine(o, p, n); }
};

// P_0 = a*G, then P_{i+1} = P_i + R with R = b*G: one addition per point
// instead of a scalar multiplication each, and the points stay distinct
// (the chain would need r steps to repeat). Converted to affine in batches,
// where blst shares one field inversion per batch.
template<class C>
void chain(void* dst, size_t m, uint64_t seed) {
    typedef typename C::jac jac;
    typedef typename C::aff aff;
    uint64_t x = seed;
    byte sa[32], sb[32];
    for (int i = 0; i < 32; i += 8) {
        uint64_t va = xorshift(x), vb = xorshift(x);
        memcpy(sa + i, &va, 8);
        memcpy(sb + i, &vb, 8);
    }
    sa[31] &= 0x3f; sb[31] &= 0x3f;   // little-endian 254-bit scalars: below r
    jac p, r;
    C::mult(&p, C::gen(), sa, 254);
    C::mult(&r, C::gen(), sb, 254);
    aff* out = static_cast<aff*>(dst);
    const size_t batch = 1 << 14;
    std::vector<jac> buf(batch);
    std::vector<const jac*> ptrs(batch);
    for (size_t off = 0; off < m; off += batch) {
        size_t len = std::min(batch, m - off);
        for (size_t i = 0; i < len; i++) {
            buf[i] = p;
            ptrs[i] = &buf[i];
            C::add(&p, &p, &r);
        }
        C::to_affine(out + off, ptrs.data(), len);
    }
}

}  // namespace

void make_g1_points(void* dst, size_t m, uint64_t seed) { chain<G1>(dst, m, seed); }
void make_g2_points(void* dst, size_t m, uint64_t seed) { chain<G2>(dst, m, seed); }
