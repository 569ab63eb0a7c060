// Pippenger MSM with signed windows, for G1 and G2 (templated on the field).
//
// 1. scalars leave Montgomery form (msm_from_mont).
// 2. 0/1 fast path (chosen per call by the host from msm_count_classes):
//    msm_split puts the indices of scalars equal to 1 into one list, summed
//    directly by the bucket levels of step 4 as a single bucket (one mixed
//    addition per point), drops the zeros, and compacts the other scalars
//    with their indices; only those go through steps 3-5. Proving's aux
//    scalars are mostly bits, which the plain path would sort into one
//    contended bucket.
// 3. a scalar s above (r-1)/2 is replaced by r - s with its point negated
//    (msm_halve), so every scalar is below 2^254 and nwin = ceil(255/c)
//    signed windows hold it: 15 of 17 bits, where 255-bit scalars need 16.
//    Each is cut into nwin signed c-bit digits d in (-2^(c-1), 2^(c-1)];
//    bucket (w, |d|-1) gets point i (negated when d < 0, or, for a halved
//    scalar, when d > 0). Counting sort: msm_histogram (atomics), an
//    exclusive scan (scan_*), msm_scatter. The sorted lists depend only on
//    the scalars: A, B1 and B2 share one.
// 4. bucket accumulation: level 0 cuts the sorted list into work items of K
//    consecutive entries whatever the buckets' sizes (a segmented sum), so
//    every thread of a warp adds K points; a thread writes the sum of its
//    item's first bucket to its item's slot and that of every later bucket
//    (which starts inside the item) to the bucket's own slot. msm_spans then
//    folds a bucket's own slot into the next item's slot when the bucket
//    runs on, so that each bucket's partial sums are contiguous: ceil(m/K)
//    or one more for a bucket of m entries. Levels >= 1 reduce those in work
//    items of at most K partials of one bucket, until one is left. The host
//    bounds the levels by n (only the device knows the largest bucket); a
//    level that finds one partial per bucket copies (msm_items' `need`). A
//    bucket holding most points (all-ones scalars) is spread over many
//    threads at every level.
// 5. window reduction: sum_k k*B_k per window by running sums over segments of
//    16 buckets (plus (a-1)*segment sum), then blocks sum the segments: one
//    per window, or for long windows one per slice of 256 and then one per
//    window over its slices. The host combines the nwin window sums (Horner
//    in 2^c) and adds the sum of the ones.
#pragma once
#include "curve.cuh"
#include "launch_params.h"  // SCAN_THREADS, SCAN_PER_THREAD, MSM_SEG, MSM_SPLIT_ROUNDS (generated)

#define MSM_SIGN 0x80000000u

// (r-1)/2, little-endian limbs: the largest scalar msm_halve leaves alone.
CONSTMEM uint32_t FR_HALF[8] = {0x80000000, 0x7fffffff, 0x7fff2dff, 0xa9ded201,
                                0x04d0ec02, 0x199cec04, 0x94cebea4, 0x39f6d3a9};

// s := r - s when s > (r-1)/2; returns whether it did (the point is then
// negated: s P = (r - s)(-P)). Afterwards s < 2^254.
__device__ __forceinline__ bool msm_halve(Fr& s) {
    int64_t borrow = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int64_t d = (int64_t)FR_HALF[i] - (int64_t)s.v[i] + borrow;
        borrow = d >> 32;  // 0 or -1
    }
    if (borrow == 0) return false;
    s = s.neg();
    return true;
}

// Signed digit of window w, carry in/out.
__device__ __forceinline__ int32_t msm_digit(const Fr& s, uint32_t w, uint32_t c, uint32_t& carry) {
    uint32_t bit = w * c;
    uint32_t limb = bit >> 5, sh = bit & 31;
    uint64_t v = 0;
    if (limb < 8) v = s.v[limb];
    if (limb + 1 < 8) v |= (uint64_t)s.v[limb + 1] << 32;
    uint32_t d = (uint32_t)(v >> sh) & ((1u << c) - 1);
    d += carry;
    if (d > (1u << (c - 1))) {
        carry = 1;
        return (int32_t)d - (int32_t)(1u << c);
    }
    carry = 0;
    return (int32_t)d;
}

// A query's scalars picked from the assignment (Filecoin's keys hold only
// the variables a query uses): out[i] = in[idx[i]], on the device, so that
// the host neither gathers them nor copies them up (run 45, docs/gpu.md).
__device__ __forceinline__ void msm_gather(const Fr* in, const uint32_t* idx, Fr* out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[idx[i]];
}

__device__ __forceinline__ void msm_from_mont(const Fr* in, Fr* out, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i].from_mont();
}

__device__ __forceinline__ void msm_histogram(const Fr* sc, uint32_t n, uint32_t c, uint32_t nwin, uint32_t* counts) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr s = sc[i];
    msm_halve(s);
    uint32_t carry = 0;
    uint32_t nb = 1u << (c - 1);
    for (uint32_t w = 0; w < nwin; w++) {
        int32_t d = msm_digit(s, w, c, carry);
        if (d != 0) {
            uint32_t b = (uint32_t)(d < 0 ? -d : d) - 1;
            atomicAdd(&counts[w * nb + b], 1u);
        }
    }
}

// `map` (may be null) gives each scalar's point index: the compacted scalars
// of the 0/1 split keep their original bases.
__device__ __forceinline__ void msm_scatter(const Fr* sc, const uint32_t* map, uint32_t n, uint32_t c, uint32_t nwin,
                                            uint32_t* cursor, uint32_t* list) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr s = sc[i];
    bool neg = msm_halve(s);
    uint32_t carry = 0;
    uint32_t nb = 1u << (c - 1);
    for (uint32_t w = 0; w < nwin; w++) {
        int32_t d = msm_digit(s, w, c, carry);
        if (d != 0) {
            uint32_t b = (uint32_t)(d < 0 ? -d : d) - 1;
            uint32_t pos = atomicAdd(&cursor[w * nb + b], 1u);
            list[pos] = (map ? map[i] : i) | ((d < 0) != neg ? MSM_SIGN : 0u);
        }
    }
}

// ---- the 0/1 split ----
// Class of a plain scalar: 0, 1, or 2 for any other value.
__device__ __forceinline__ uint32_t msm_class(const Fr& s) {
    uint32_t high = 0;
#pragma unroll
    for (int i = 1; i < 8; i++) high |= s.v[i];
    return high == 0 && s.v[0] <= 1 ? s.v[0] : 2;
}

// counts[0] += scalars equal to 1, counts[1] += scalars other than 0 and 1.
// Grid-stride, summed per block, so the two counters see one atomic per block.
__device__ __forceinline__ void msm_count_classes(const Fr* sc, uint32_t n, uint32_t* counts) {
    __shared__ uint32_t sh[2][32];
    uint32_t ones = 0, others = 0;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t k = msm_class(sc[i]);
        ones += k == 1;
        others += k == 2;
    }
#pragma unroll
    for (uint32_t off = 16; off > 0; off >>= 1) {
        ones += __shfl_down_sync(0xffffffffu, ones, off);
        others += __shfl_down_sync(0xffffffffu, others, off);
    }
    uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sh[0][warp] = ones;
        sh[1][warp] = others;
    }
    __syncthreads();
    if (threadIdx.x < 2) {
        uint32_t total = 0;
        for (uint32_t w = 0; w < (blockDim.x + 31) / 32; w++) total += sh[threadIdx.x][w];
        if (total) atomicAdd(&counts[threadIdx.x], total);
    }
}

// Compaction: the indices of scalars equal to 1 into `ones`, the other
// non-zero scalars and their indices into `others_sc`/`others_idx`; zeros are
// dropped. A block takes MSM_SPLIT_ROUNDS * blockDim consecutive scalars
// (blockDim a multiple of 32, at most 1024), ranks them within the block by
// warp ballots and reserves its ranges with one atomic per list on
// cursor[0] (ones) and cursor[1] (others): ordered within a block, blocks in
// any order (a sum does not care).
__device__ __forceinline__ void msm_split(const Fr* sc, uint32_t n, uint32_t* cursor, uint32_t* ones,
                                          uint32_t* others_idx, Fr* others_sc) {
    __shared__ uint32_t pre[2][MSM_SPLIT_ROUNDS * 32];
    __shared__ uint32_t base[2];
    uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    uint32_t below = (1u << lane) - 1;
    uint32_t tile = blockIdx.x * blockDim.x * MSM_SPLIT_ROUNDS;
    uint32_t is_one[MSM_SPLIT_ROUNDS], is_other[MSM_SPLIT_ROUNDS];
#pragma unroll
    for (uint32_t r = 0; r < MSM_SPLIT_ROUNDS; r++) {
        uint32_t i = tile + r * blockDim.x + threadIdx.x;
        uint32_t k = i < n ? msm_class(sc[i]) : 0;
        is_one[r] = __ballot_sync(0xffffffffu, k == 1);
        is_other[r] = __ballot_sync(0xffffffffu, k == 2);
        if (lane == 0) {
            pre[0][r * warps + warp] = __popc(is_one[r]);
            pre[1][r * warps + warp] = __popc(is_other[r]);
        }
    }
    __syncthreads();
    if (threadIdx.x < 2) {  // thread 0 ranks the ones, thread 1 the others
        uint32_t* p = pre[threadIdx.x];
        uint32_t acc = 0;
        for (uint32_t j = 0; j < MSM_SPLIT_ROUNDS * warps; j++) {
            uint32_t x = p[j];
            p[j] = acc;
            acc += x;
        }
        base[threadIdx.x] = acc ? atomicAdd(&cursor[threadIdx.x], acc) : 0;
    }
    __syncthreads();
#pragma unroll
    for (uint32_t r = 0; r < MSM_SPLIT_ROUNDS; r++) {
        uint32_t i = tile + r * blockDim.x + threadIdx.x;
        uint32_t j = r * warps + warp;
        if ((is_one[r] >> lane) & 1) {
            ones[base[0] + pre[0][j] + __popc(is_one[r] & below)] = i;
        } else if ((is_other[r] >> lane) & 1) {
            uint32_t pos = base[1] + pre[1][j] + __popc(is_other[r] & below);
            others_idx[pos] = i;
            others_sc[pos] = sc[i];
        }
    }
}

// ---- exclusive scan of u32 (3 phases) ----
#define SCAN_TILE (SCAN_THREADS * SCAN_PER_THREAD)

__device__ __forceinline__ uint32_t block_excl_scan(uint32_t x, uint32_t* sh, uint32_t& total) {
    uint32_t t = threadIdx.x;
    sh[t] = x;
    __syncthreads();
    for (uint32_t off = 1; off < blockDim.x; off <<= 1) {
        uint32_t y = t >= off ? sh[t - off] : 0;
        __syncthreads();
        sh[t] += y;
        __syncthreads();
    }
    uint32_t incl = sh[t];
    total = sh[blockDim.x - 1];
    __syncthreads();
    return incl - x;
}

// out[i] = sum of in[0..i) within the tile; sums[tile] = tile total.
__device__ __forceinline__ void scan_tiles(const uint32_t* in, uint32_t* out, uint32_t n, uint32_t* sums) {
    __shared__ uint32_t sh[SCAN_THREADS];
    uint32_t base = blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_PER_THREAD;
    uint32_t v[SCAN_PER_THREAD];
    uint32_t acc = 0;
#pragma unroll
    for (int k = 0; k < SCAN_PER_THREAD; k++) {
        v[k] = base + k < n ? in[base + k] : 0;
        acc += v[k];
    }
    uint32_t total;
    uint32_t pre = block_excl_scan(acc, sh, total);
#pragma unroll
    for (int k = 0; k < SCAN_PER_THREAD; k++) {
        if (base + k < n) out[base + k] = pre;
        pre += v[k];
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// One block: exclusive scan of the tile sums in place (any count).
__device__ __forceinline__ void scan_sums(uint32_t* sums, uint32_t m) {
    __shared__ uint32_t sh[SCAN_THREADS];
    uint32_t carry = 0;
    for (uint32_t start = 0; start < m; start += blockDim.x) {
        uint32_t i = start + threadIdx.x;
        uint32_t x = i < m ? sums[i] : 0;
        uint32_t total;
        uint32_t pre = block_excl_scan(x, sh, total);
        if (i < m) sums[i] = pre + carry;
        carry += total;
    }
}

__device__ __forceinline__ void scan_add(uint32_t* out, uint32_t n, const uint32_t* sums) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] += sums[i / SCAN_TILE];
}

// items[b] = ceil(cnt[b] / K); items[nb] = 0 so that the scan's last entry
// is the total. need[0] (zeroed before) becomes nonzero when some bucket has
// more than one partial, i.e. when the level that reads these items adds
// anything (one atomic per warp that finds one). blockDim a multiple of 32.
__device__ __forceinline__ void msm_items(const uint32_t* cnt, uint32_t* items, uint32_t nb, uint32_t K,
                                          uint32_t* need) {
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t c = b < nb ? cnt[b] : 0;
    if (b <= nb) items[b] = (c + K - 1) / K;
    if (__any_sync(0xffffffffu, c > 1) && (threadIdx.x & 31) == 0) atomicOr(need, 1u);
}

// The bucket whose range holds id, given its buckets' exclusive scan `off`
// (of entry counts at level 0, of item counts above): the last b < nb with
// off[b] <= id, which skips the empty buckets before it.
__device__ __forceinline__ uint32_t msm_find_bucket(const uint32_t* off, uint32_t nb, uint32_t id) {
    uint32_t lo = 0, hi = nb;  // answer in [lo, hi)
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) >> 1;
        if (off[mid] <= id) lo = mid; else hi = mid;
    }
    return lo;
}

// Level 0: work item t sums entries [tK, tK + K) of the sorted point-index
// list (all `off[nb]` entries of the nb buckets, `off` their exclusive scan),
// affine bases, in the accumulator coordinates Acc (Jacobian<F> or XYZZ<F>:
// cuzk.cu says which each group uses). The sum of the item's first bucket
// goes to out[t]; every later bucket starts inside the item, and its sum
// (whole, or its head when it runs past the item) goes to out[items + b].
template <class Acc, class F>
__device__ __forceinline__ void msm_level0(const Affine<F>* bases, const uint32_t* list, const uint32_t* off,
                                           uint32_t nb, uint32_t K, uint32_t items, Jacobian<F>* out) {
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t total = off[nb];
    uint32_t start = t * K;
    if (start >= total) return;
    uint32_t end = min(start + K, total);
    uint32_t b = msm_find_bucket(off, nb, start);
    uint32_t bend = off[b + 1];
    uint32_t slot = t;
    Acc acc = Acc::inf();
    for (uint32_t e = start; e < end; e++) {
        if (e == bend) {
            out[slot] = acc.to_jacobian();
            acc = Acc::inf();
            // The next bucket with entries: usually b + 1.
            b++;
            if (off[b + 1] <= e) b = msm_find_bucket(off, nb, e);
            bend = off[b + 1];
            slot = items + b;
        }
        uint32_t idx = list[e];
        Affine<F> p = bases[idx & ~MSM_SIGN];
        if (idx & MSM_SIGN) p.y = p.y.neg();
        acc = acc.add_affine(p);
    }
    out[slot] = acc.to_jacobian();
}

// Thread per bucket, after level 0: where its partial sums lie in `pts`
// (off2, cnt2), for the levels >= 1. A bucket of entries [s, s + m) touches
// items s/K .. (s+m-1)/K. Starting on an item's first entry, its partials
// are those items' slots. Starting inside item t, its head is at
// pts[items + b]: the whole sum when it ends inside t, else added into item
// t+1's slot (whose first bucket it is), so its partials are the slots
// t+1 .. (s+m-1)/K.
template <class F>
__device__ __forceinline__ void msm_spans(Jacobian<F>* pts, const uint32_t* off, uint32_t nb, uint32_t K,
                                          uint32_t items, uint32_t* off2, uint32_t* cnt2) {
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    uint32_t s = off[b], m = off[b + 1] - s;
    if (m == 0) {
        off2[b] = 0;
        cnt2[b] = 0;
        return;
    }
    uint32_t lo = s / K, hi = (s + m - 1) / K;
    if (s == lo * K) {
        off2[b] = lo;
        cnt2[b] = hi - lo + 1;
    } else if (lo == hi) {
        off2[b] = items + b;
        cnt2[b] = 1;
    } else {
        pts[lo + 1] = pts[items + b].add(pts[lo + 1]);
        off2[b] = lo + 1;
        cnt2[b] = hi - lo;
    }
}

// Level >= 1: the same over Jacobian partial sums. When no bucket has more
// than one partial (`need` from msm_items) and the input is compact (`off`
// the scan of `cnt`, as every level after the first leaves it), each item is
// the partial in its own slot: a straight copy without the bucket search.
// The host bounds the levels by n, so at 2^22-2^26 three of four levels are
// such copies: 0.57 ms each for G2 at 2^22 with the search (run 47), still
// 0.54 without it (run 55), where a point per thread made a warp's 4-byte
// accesses 288 bytes apart. So the copy moves 16-byte words, consecutive
// threads taking consecutive words (buffers are separate allocations, so
// 256-byte aligned): G2 MSM at 2^22 -1%, G1 at 2^20 -3% (run 56).
template <class F>
__device__ __forceinline__ void msm_levelN(const Jacobian<F>* in, const uint32_t* off, const uint32_t* cnt,
                                           const uint32_t* item_off, uint32_t nb, uint32_t K, uint32_t compact,
                                           const uint32_t* need, Jacobian<F>* out) {
    uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
    if (compact && !*need) {
        static_assert(sizeof(Jacobian<F>) % sizeof(uint4) == 0, "points are whole 16-byte words");
        const uint4* src = (const uint4*)in;
        uint4* dst = (uint4*)out;
        size_t words = (size_t)item_off[nb] * (sizeof(Jacobian<F>) / sizeof(uint4));
        for (size_t w = id; w < words; w += (size_t)gridDim.x * blockDim.x) dst[w] = src[w];
        return;
    }
    if (id >= item_off[nb]) return;
    uint32_t b = msm_find_bucket(item_off, nb, id);
    uint32_t j = id - item_off[b];
    uint32_t start = off[b] + j * K;
    uint32_t end = min(off[b] + cnt[b], start + K);
    Jacobian<F> acc = in[start];
    for (uint32_t e = start + 1; e < end; e++) acc = acc.add(in[e]);
    out[id] = acc;
}

// Thread per (window, segment of MSM_SEG buckets): sum_{k in seg} k * B_k.
// Buckets hold cnt <= 1 partials after the last level.
template <class F>
__device__ __forceinline__ void msm_segments(const Jacobian<F>* pts, const uint32_t* off, const uint32_t* cnt,
                                             uint32_t nbw, uint32_t nwin, Jacobian<F>* seg_out) {
    uint32_t segs = (nbw + MSM_SEG - 1) / MSM_SEG;
    uint32_t id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= segs * nwin) return;
    uint32_t w = id / segs, s = id % segs;
    uint32_t first = s * MSM_SEG;                     // bucket index; value first+1
    uint32_t last = min(first + MSM_SEG, nbw);        // exclusive
    Jacobian<F> run = Jacobian<F>::inf(), acc = Jacobian<F>::inf();
    for (uint32_t k = last; k-- > first;) {
        uint32_t b = w * nbw + k;
        if (cnt[b]) run = run.add(pts[off[b]]);
        acc = acc.add(run);
    }
    // acc = sum (k - first + 1) B_k over values; add first * run (value a-1 =
    // first). acc waits in memory meanwhile: held in registers beside run and
    // the multiple, it spilled (G2: 4 KB of spill stores in this kernel).
    // The empty asm with a memory clobber makes the compiler reload acc
    // instead of keeping the stored value live.
    seg_out[id] = acc;
    if (first) {
        Jacobian<F> m = run.mul_small(first);
        asm volatile("" ::: "memory");
        seg_out[id] = m.add(seg_out[id]);
    }
}

// Block b (blockDim 128): the sum of seg[b * segs .. (b + 1) * segs), a
// window's segments or one slice of them (then a second launch sums each
// window's slices).
template <class F>
__device__ __forceinline__ void msm_window_sum(const Jacobian<F>* seg, uint32_t segs, Jacobian<F>* win_out) {
    extern __shared__ unsigned char smem[];
    Jacobian<F>* sh = (Jacobian<F>*)smem;
    uint32_t w = blockIdx.x, t = threadIdx.x;
    Jacobian<F> acc = Jacobian<F>::inf();
    for (uint32_t s = t; s < segs; s += blockDim.x) acc = acc.add(seg[(size_t)w * segs + s]);
    sh[t] = acc;
    __syncthreads();
    for (uint32_t half = blockDim.x >> 1; half > 0; half >>= 1) {
        if (t < half) sh[t] = sh[t].add(sh[t + half]);
        __syncthreads();
    }
    if (t == 0) win_out[w] = sh[0];
}
