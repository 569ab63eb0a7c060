// Constraint evaluation on the device: a partition's a, b and c as its
// circuit's compiled R1CS matrices (kernels/src/r1cs.rs) times its
// assignment z, the input constraints appended after the last row (A = x_i,
// B = C = 0) and zeros to the domain, exactly as `Matrices::evaluate` does
// on the host; every row is checked (a * b = c) and the first one that
// fails is reported. A sparse matrix times a vector over Fr: memory-bound,
// an 8-byte term and its 32-byte gathered value each.
//
// Layout (`Flattened` in kernels/src/r1cs.rs): the 3m rows A's, B's, C's
// one after another, row r holding terms [end(r - 1), end(r)) of one term
// array (end(-1) = 0), the ends as u32 two to a RowEnds; a term is a
// variable and an index into the coefficient table, whose index 0 is one
// (an addition) and whose index `neg` is minus one (a subtraction; ~0u
// when the table has none); any other coefficient is a product. Rows are
// short (about 1.9 terms per row at 32 GiB PoRep), so a thread takes a row
// of each matrix; rows of more than `long_len` terms (bit packings of a
// few hundred) are summed first by a warp each (r1cs_long), and the row's
// thread reads their value back for the check.
//
// The row functions are plain C++ over field.cuh's portable arithmetic on
// the host too, so tests/r1cs_host runs them against the host's evaluation
// without a GPU; the kernels' own parts (shared memory, the warp's sum, the
// atomic) are device-only.
#pragma once
#include "field.cuh"

struct R1csTerm {
    uint32_t var, coeff;
};
struct RowEnds {
    uint32_t e[2];
};

// What the evaluation reads and writes.
struct R1cs {
    const RowEnds* ends;
    const R1csTerm* terms;
    const Fr* coeffs;
    uint32_t neg;       // index of minus one in coeffs, or ~0u
    uint32_t long_len;  // rows longer than this are r1cs_long's
    const Fr* z;        // the assignment, Montgomery form
    uint32_t m;         // rows per matrix
    uint32_t inputs;    // input constraints after row m - 1
    uint32_t n;         // the domain
    Fr* out[3];         // a, b, c (n each)
};

// A long row's entry: matrix k in the top two bits, the row below.
#define R1CS_ROW_BITS 30u

DEV Fr r1cs_ld(const Fr* p) {
#ifdef __CUDA_ARCH__
    return ld_fr_ro(p);
#else
    return *p;
#endif
}
DEV void r1cs_st(Fr* p, const Fr& x) {
#ifdef __CUDA_ARCH__
    st_fr(p, x);
#else
    *p = x;
#endif
}
DEV R1csTerm r1cs_term(const R1csTerm* t) {
#ifdef __CUDA_ARCH__
    uint2 w = __ldg(reinterpret_cast<const uint2*>(t));
    R1csTerm r = {w.x, w.y};
    return r;
#else
    return *t;
#endif
}

DEV uint32_t r1cs_end(const RowEnds* ends, uint32_t r) { return ends[r >> 1].e[r & 1]; }
DEV uint32_t r1cs_start(const RowEnds* ends, uint32_t r) { return r == 0 ? 0 : r1cs_end(ends, r - 1); }

// Terms lo, lo + step, ... below hi of the flat array against z. The first
// `nsh` coefficients come from `sh` (the block's copy in shared memory), the
// others from the table.
DEV Fr r1cs_terms(const R1cs& p, uint32_t lo, uint32_t hi, uint32_t step, const Fr* sh, uint32_t nsh) {
    Fr acc = Fr::zero();
    for (uint32_t t = lo; t < hi; t += step) {
        R1csTerm term = r1cs_term(p.terms + t);
        Fr v = r1cs_ld(p.z + term.var);
        if (term.coeff == 0) {
            acc = acc + v;
        } else if (term.coeff == p.neg) {
            acc = acc - v;
        } else {
            Fr c = term.coeff < nsh ? sh[term.coeff] : r1cs_ld(p.coeffs + term.coeff);
            acc = acc + v * c;
        }
    }
    return acc;
}

// Lane `lane`'s share (every 32nd term) of long row `entry`.
DEV Fr r1cs_long_lane(const R1cs& p, uint32_t entry, uint32_t lane) {
    uint32_t r = (entry >> R1CS_ROW_BITS) * p.m + (entry & ((1u << R1CS_ROW_BITS) - 1));
    return r1cs_terms(p, r1cs_start(p.ends, r) + lane, r1cs_end(p.ends, r), 32, nullptr, 0);
}

// Row i of the domain: a, b and c of constraint i < m (a long row's value
// already in place, read back), input x_(i - m) in a for the next `inputs`
// rows, zeros after; true when constraint i does not hold.
DEV bool r1cs_row(const R1cs& p, uint32_t i, const Fr* sh, uint32_t nsh) {
    Fr v[3];
    if (i < p.m) {
#pragma unroll
        for (uint32_t k = 0; k < 3; k++) {
            uint32_t r = k * p.m + i;
            uint32_t lo = r1cs_start(p.ends, r), hi = r1cs_end(p.ends, r);
            if (hi - lo > p.long_len) {
#ifdef __CUDA_ARCH__
                v[k] = ld_fr(p.out[k] + i);
#else
                v[k] = p.out[k][i];
#endif
            } else {
                v[k] = r1cs_terms(p, lo, hi, 1, sh, nsh);
                r1cs_st(p.out[k] + i, v[k]);
            }
        }
        return v[0] * v[1] != v[2];
    }
    v[0] = i - p.m < p.inputs ? r1cs_ld(p.z + (i - p.m)) : Fr::zero();
    r1cs_st(p.out[0] + i, v[0]);
    r1cs_st(p.out[1] + i, Fr::zero());
    r1cs_st(p.out[2] + i, Fr::zero());
    return false;
}

#ifdef __CUDACC__
// Every row of the domain, grid-stride, after the block copied the first
// `nsh` coefficients into its dynamic shared memory (nsh * 32 bytes): the
// table is read by every block, a copy per block amortized over the rows
// its threads take. `bad` ends at the first unsatisfied row (its initial
// value, ~0u, when none is).
__device__ __forceinline__ void r1cs_eval(const R1cs& p, uint32_t nsh, uint32_t* bad) {
    extern __shared__ uint4 r1cs_sh[];
    Fr* sh = reinterpret_cast<Fr*>(r1cs_sh);
    for (uint32_t k = threadIdx.x; k < nsh; k += blockDim.x) sh[k] = ld_fr_ro(p.coeffs + k);
    __syncthreads();
    uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        if (r1cs_row(p, i, sh, nsh)) atomicMin(bad, i);
    }
}

// The long rows `rows[0..count)`, a warp each (blockDim a multiple of 32):
// each lane sums every 32nd term, the warp adds the lanes' sums, lane 0
// stores the row's value.
__device__ __forceinline__ void r1cs_long(const R1cs& p, const uint32_t* rows, uint32_t count) {
    uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= count) return;
    uint32_t entry = rows[warp];
    Fr acc = r1cs_long_lane(p, entry, lane);
#pragma unroll
    for (uint32_t off = 16; off > 0; off /= 2) {
        Fr other;
#pragma unroll
        for (int w = 0; w < Fr::N; w++) other.v[w] = __shfl_down_sync(0xffffffffu, acc.v[w], off);
        acc = acc + other;
    }
    if (lane == 0) st_fr(p.out[entry >> R1CS_ROW_BITS] + (entry & ((1u << R1CS_ROW_BITS) - 1)), acc);
}
#endif
