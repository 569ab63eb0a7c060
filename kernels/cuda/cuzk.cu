// The one compile unit: every kernel the host launches, with C names.
// The arithmetic lives in the family headers.
#include "field.cuh"
#include "curve.cuh"
#include "ntt.cuh"
#include "msm.cuh"
#include "groth16.cuh"
#include "r1cs.cuh"
#include "fixed_base.cuh"
#include "launch_params.h"

// The host's device types (kernels/src/cuda/gpu.rs) are word arrays of the
// sizes in launch_params.h; a layout change on either side stops the build.
static_assert(sizeof(Fr) == 8 * FR_WORDS, "Fr layout");
static_assert(sizeof(Fq) == 8 * FQ_WORDS, "Fq layout");
static_assert(sizeof(Fq2) == 8 * FQ2_WORDS, "Fq2 layout");
static_assert(sizeof(G1Affine) == 8 * G1_AFF_WORDS, "G1 affine layout");
static_assert(sizeof(G1Jac) == 8 * G1_JAC_WORDS, "G1 Jacobian layout");
static_assert(sizeof(G2Affine) == 8 * G2_AFF_WORDS, "G2 affine layout");
static_assert(sizeof(G2Jac) == 8 * G2_JAC_WORDS, "G2 Jacobian layout");
static_assert(sizeof(R1csTerm) == 8 * TERM_WORDS, "R1CS term layout");
static_assert(sizeof(RowEnds) == 8 * ROW_ENDS_WORDS, "R1CS row ends layout");

#define GRID_STRIDE_ID (blockIdx.x * blockDim.x + threadIdx.x)

// ---------- field tests: op 0 add, 1 sub, 2 mul, 3 sqr, 4 neg, 5 from_mont ----------
template <class F>
__device__ __forceinline__ F field_op(uint32_t op, const F& a, const F& b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a.sqr();
        case 4: return a.neg();
        default: return a.dbl();
    }
}
extern "C" __global__ void test_fr_op(uint32_t op, const Fr* a, const Fr* b, Fr* out, uint32_t n) {
    uint32_t i = GRID_STRIDE_ID;
    if (i >= n) return;
    out[i] = op == 5 ? a[i].from_mont() : field_op(op, a[i], b[i]);
}
extern "C" __global__ void test_fq_op(uint32_t op, const Fq* a, const Fq* b, Fq* out, uint32_t n) {
    uint32_t i = GRID_STRIDE_ID;
    if (i >= n) return;
    out[i] = field_op(op, a[i], b[i]);
}
extern "C" __global__ void test_fq2_op(uint32_t op, const Fq2* a, const Fq2* b, Fq2* out, uint32_t n) {
    uint32_t i = GRID_STRIDE_ID;
    if (i >= n) return;
    out[i] = field_op(op, a[i], b[i]);
}
// ---------- curve tests: out = 2a, a+b (mixed), (a+b)+a (jacobian) ----------
template <class F>
__device__ __forceinline__ void curve_test(const Affine<F>* a, const Affine<F>* b, Jacobian<F>* out, uint32_t n) {
    uint32_t i = GRID_STRIDE_ID;
    if (i >= n) return;
    Jacobian<F> pa = Jacobian<F>::from_affine(a[i]);
    out[3 * i] = pa.dbl();
    Jacobian<F> s = pa.add_affine(b[i]);
    out[3 * i + 1] = s;
    out[3 * i + 2] = s.add(pa);
}
extern "C" __global__ void test_g1_ops(const G1Affine* a, const G1Affine* b, G1Jac* out, uint32_t n) { curve_test(a, b, out, n); }
extern "C" __global__ void test_g2_ops(const G2Affine* a, const G2Affine* b, G2Jac* out, uint32_t n) { curve_test(a, b, out, n); }

// ---------- NTT ----------
extern "C" __global__ void __launch_bounds__(NTT_THREADS, 4) k_ntt_pass(const Fr* in, Fr* out, const Fr* tw, uint32_t inverse, uint32_t logn, uint32_t p, uint32_t s, uint32_t c, uint32_t gather, const Fr* lo, const Fr* hi, uint32_t logl, uint32_t scale_at) { ntt_pass(in, out, tw, inverse, logn, p, s, c, gather, lo, hi, logl, scale_at); }
extern "C" __global__ void k_h_pointwise(Fr* a, const Fr* b, const Fr* c, uint32_t n, const Fr* z_inv) { groth16_h_pointwise(a, b, c, n, z_inv); }

// ---------- R1CS evaluation (a, b, c from the compiled matrices) ----------
// 68 registers unbounded (3 blocks per SM); 64 with 4 blocks, 8 bytes
// spilled outside the row loop.
extern "C" __global__ void __launch_bounds__(R1CS_THREADS, 4) k_r1cs_eval(const RowEnds* ends, const R1csTerm* terms, const Fr* coeffs, uint32_t nshared, uint32_t neg, uint32_t long_len, const Fr* z, uint32_t m, uint32_t inputs, uint32_t n, Fr* a, Fr* b, Fr* c, uint32_t* bad) {
    R1cs p = {ends, terms, coeffs, neg, long_len, z, m, inputs, n, {a, b, c}};
    r1cs_eval(p, nshared, bad);
}
extern "C" __global__ void k_r1cs_long(const RowEnds* ends, const R1csTerm* terms, const Fr* coeffs, uint32_t neg, const Fr* z, uint32_t m, Fr* a, Fr* b, Fr* c, const uint32_t* rows, uint32_t count) {
    R1cs p = {ends, terms, coeffs, neg, 0, z, m, 0, 0, {a, b, c}};
    r1cs_long(p, rows, count);
}

// ---------- MSM ----------
extern "C" __global__ void k_msm_from_mont(const Fr* in, Fr* out, uint32_t n) { msm_from_mont(in, out, n); }
extern "C" __global__ void k_msm_gather(const Fr* in, const uint32_t* idx, Fr* out, uint32_t n) { msm_gather(in, idx, out, n); }
extern "C" __global__ void k_msm_histogram(const Fr* sc, uint32_t n, uint32_t c, uint32_t nwin, uint32_t* counts) { msm_histogram(sc, n, c, nwin, counts); }
extern "C" __global__ void k_msm_scatter(const Fr* sc, const uint32_t* map, uint32_t n, uint32_t c, uint32_t nwin, uint32_t* cursor, uint32_t* list) { msm_scatter(sc, map, n, c, nwin, cursor, list); }
extern "C" __global__ void k_msm_count_classes(const Fr* sc, uint32_t n, uint32_t* counts) { msm_count_classes(sc, n, counts); }
extern "C" __global__ void k_msm_split(const Fr* sc, uint32_t n, uint32_t* cursor, uint32_t* ones, uint32_t* others_idx, Fr* others_sc) { msm_split(sc, n, cursor, ones, others_idx, others_sc); }
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) k_scan_tiles(const uint32_t* in, uint32_t* out, uint32_t n, uint32_t* sums) { scan_tiles(in, out, n, sums); }
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) k_scan_sums(uint32_t* sums, uint32_t m) { scan_sums(sums, m); }
extern "C" __global__ void k_scan_add(uint32_t* out, uint32_t n, const uint32_t* sums) { scan_add(out, n, sums); }
extern "C" __global__ void k_msm_items(const uint32_t* cnt, uint32_t* items, uint32_t nb, uint32_t K, uint32_t* need) { msm_items(cnt, items, nb, K, need); }

// G1's level kernels need about 172 registers, which leaves room for only 2
// blocks of 128 threads per SM (65536 registers); bounded to 3 blocks
// (168 registers), for a third more warps in flight on the multiply chains.
extern "C" __global__ void __launch_bounds__(MSM_LEVEL_THREADS, 3) k_g1_level0(const G1Affine* bases, const uint32_t* list, const uint32_t* off, uint32_t nb, uint32_t K, uint32_t items, G1Jac* out) { msm_level0<XYZZ<Fq>>(bases, list, off, nb, K, items, out); }
extern "C" __global__ void k_g1_spans(G1Jac* pts, const uint32_t* off, uint32_t nb, uint32_t K, uint32_t items, uint32_t* off2, uint32_t* cnt2) { msm_spans(pts, off, nb, K, items, off2, cnt2); }
extern "C" __global__ void __launch_bounds__(MSM_LEVEL_THREADS, 3) k_g1_level_n(const G1Jac* in, const uint32_t* off, const uint32_t* cnt, const uint32_t* item_off, uint32_t nb, uint32_t K, uint32_t compact, const uint32_t* need, G1Jac* out) { msm_levelN(in, off, cnt, item_off, nb, K, compact, need, out); }
extern "C" __global__ void k_g1_segments(const G1Jac* pts, const uint32_t* off, const uint32_t* cnt, uint32_t nbw, uint32_t nwin, G1Jac* seg) { msm_segments(pts, off, cnt, nbw, nwin, seg); }
extern "C" __global__ void k_g1_window_sum(const G1Jac* seg, uint32_t segs, G1Jac* out) { msm_window_sum(seg, segs, out); }

extern "C" __global__ void k_g2_level0(const G2Affine* bases, const uint32_t* list, const uint32_t* off, uint32_t nb, uint32_t K, uint32_t items, G2Jac* out) { msm_level0<G2Jac>(bases, list, off, nb, K, items, out); }
extern "C" __global__ void k_g2_spans(G2Jac* pts, const uint32_t* off, uint32_t nb, uint32_t K, uint32_t items, uint32_t* off2, uint32_t* cnt2) { msm_spans(pts, off, nb, K, items, off2, cnt2); }
extern "C" __global__ void k_g2_level_n(const G2Jac* in, const uint32_t* off, const uint32_t* cnt, const uint32_t* item_off, uint32_t nb, uint32_t K, uint32_t compact, const uint32_t* need, G2Jac* out) { msm_levelN(in, off, cnt, item_off, nb, K, compact, need, out); }
extern "C" __global__ void k_g2_segments(const G2Jac* pts, const uint32_t* off, const uint32_t* cnt, uint32_t nbw, uint32_t nwin, G2Jac* seg) { msm_segments(pts, off, cnt, nbw, nwin, seg); }
extern "C" __global__ void k_g2_window_sum(const G2Jac* seg, uint32_t segs, G2Jac* out) { msm_window_sum(seg, segs, out); }

// ---------- fixed-base multiplication (the setup's generators) ----------
// out[i] = sc[i] * G (plain scalars) from G's window table; then the results
// in affine form, thread t taking points t, t + stride, ... (stride threads).
extern "C" __global__ void k_g1_fixed_base(const Fr* sc, const G1Affine* table, uint32_t c, uint32_t nwin, uint32_t n, G1Jac* out) { uint32_t i = GRID_STRIDE_ID; if (i < n) out[i] = fb_mul(ld_fr(sc + i), table, c, nwin); }
extern "C" __global__ void k_g1_to_affine(const G1Jac* in, G1Affine* out, uint32_t n, uint32_t stride) { uint32_t i = GRID_STRIDE_ID; if (i < stride) fb_to_affine(in, out, n, i, stride); }
extern "C" __global__ void k_g2_fixed_base(const Fr* sc, const G2Affine* table, uint32_t c, uint32_t nwin, uint32_t n, G2Jac* out) { uint32_t i = GRID_STRIDE_ID; if (i < n) out[i] = fb_mul(ld_fr(sc + i), table, c, nwin); }
extern "C" __global__ void k_g2_to_affine(const G2Jac* in, G2Affine* out, uint32_t n, uint32_t stride) { uint32_t i = GRID_STRIDE_ID; if (i < stride) fb_to_affine(in, out, n, i, stride); }

// ---------- utilities ----------
extern "C" __global__ void k_fill_u32(uint32_t* p, uint32_t n, uint32_t v) { uint32_t i = GRID_STRIDE_ID; if (i < n) p[i] = v; }
extern "C" __global__ void k_copy_u32(const uint32_t* src, uint32_t* dst, uint32_t n) { uint32_t i = GRID_STRIDE_ID; if (i < n) dst[i] = src[i]; }
