// sppark-bench: times sppark 0.1.16 (the library inside supraseal-c2) on
// BLS12-381 with its data already on the GPU, so that cuzk's gpu_bench and
// sppark run in the same device call (issue 12 compares the two; the
// machines are too noisy for figures from different sessions). Prints
// gpu_bench's table rows, "| name | 2^k | median ms | runs |":
//   - Fr NTT and iNTT (natural order in and out: sppark's bit reversal then
//     its CT passes, what NTT::Base runs for NN), 5 timed runs after one
//     warm-up per size and direction (the warm-up builds sppark's twiddle
//     tables), each timed with CUDA events on sppark's stream. gpu_bench's
//     NTT times are host wall-clock around the whole call (lease, launches,
//     synchronize): a comparison that leans, by the call's host overhead,
//     against cuzk.
//   - G1 and G2 MSM (msm_t::invoke with device pointers for the points and
//     the scalars, both uploaded once before the timing). invoke synchronizes
//     its streams and finishes the window sums on the host's thread pool
//     before it returns, so CUDA events would miss part of the call: these
//     rows are host wall clock around invoke ("(wall)" in the row name), as
//     gpu_bench's own MSM rows are. One warm-up, then the median of 5 (G1)
//     or 3 (G2).
// The MSM points come from points.cpp (blst), 2^min(k,20) distinct points
// repeated on the device to fill 2^k; the scalars are xorshift words below r.
// Usage: sppark-bench [--ntt 20,22,24,26] [--g1 20,22,24,26] [--g2 20,22]
// (log2 sizes; a missing flag skips that op; no flags: these defaults).
#include <cuda_runtime.h>
// The fp2 header brings in bls12-381.hpp (fp_t, fr_t) and adds fp2_t, so G1,
// G2 and the NTT share one translation unit, as supraseal-c2's does.
#include <ff/bls12-381-fp2.hpp>
typedef bls12_381::fr_t fr_t;
#include <util/gpu_t.cuh>
#include <ntt/ntt.cuh>
#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>
// pippenger.cuh instantiates its kernels for global bucket_t/affine_t/
// scalar_t typedefs unless told not to; two curves need the instantiations
// that msm_t's uses imply instead.
#define SPPARK_DONT_INSTANTIATE_TEMPLATES
#include <msm/pippenger.cuh>
#include "points.hpp"
#include <vector>
#include <string>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// The same xorshift64 as the NTT's data: the values only have to look
// random to the sort and the bucket sums.
static inline uint64_t xorshift(uint64_t& x) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return x;
}

// n field elements of 8 words each, the top word masked to 28 bits so that
// each is below r (r's top word is 0x73eda753).
static std::vector<uint32_t> random_fr_words(size_t n, uint64_t seed) {
    std::vector<uint32_t> host(n * 8);
    uint64_t x = seed;
    for (size_t i = 0; i < host.size(); i++) {
        xorshift(x);
        host[i] = (uint32_t)x & ((i % 8 == 7) ? 0x0fffffffu : 0xffffffffu);
    }
    return host;
}

static void check_cuda(const char* what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        printf("cuda error %s (%s)\n", cudaGetErrorString(e), what);
        exit(1);
    }
}

// Unchanged in behaviour and output from the former bench/sppark-ntt tool.
static void run_ntt(const std::vector<int>& logs) {
    if (logs.empty()) return;
    const gpu_t& gpu = select_gpu(0);
    const int runs = 5;
    for (int lg : logs) {
        size_t n = (size_t)1 << lg;
        std::vector<uint32_t> host = random_fr_words(n, 0x9e3779b97f4a7c15ull ^ lg);
        fr_t* d;
        cudaMalloc(&d, n * sizeof(fr_t));
        cudaMemcpy(d, host.data(), n * sizeof(fr_t), cudaMemcpyHostToDevice);
        stream_t& s = gpu[0];
        cudaEvent_t a, b;
        cudaEventCreate(&a); cudaEventCreate(&b);
        for (int dir = 0; dir < 2; dir++) {
            auto direction = dir ? NTT::Direction::inverse : NTT::Direction::forward;
            NTT::Base_dev_ptr(s, d, lg, NTT::InputOutputOrder::NN, direction, NTT::Type::standard);
            s.sync();
            std::vector<float> ms;
            for (int r = 0; r < runs; r++) {
                cudaEventRecord(a, s);
                NTT::Base_dev_ptr(s, d, lg, NTT::InputOutputOrder::NN, direction, NTT::Type::standard);
                cudaEventRecord(b, s);
                cudaEventSynchronize(b);
                float t; cudaEventElapsedTime(&t, a, b); ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            printf("| sppark %s | 2^%d | %.3f | %d |\n", dir ? "iNTT" : "NTT", lg, ms[runs / 2], runs);
            fflush(stdout);
        }
        check_cuda("NTT");
        cudaEventDestroy(a); cudaEventDestroy(b);
        cudaFree(d);
    }
}

// The point types of each group, and its host-side point generator
// (points.cpp, with blst).
struct G1 {
    typedef jacobian_t<fp_t> point_t;
    typedef xyzz_t<fp_t> bucket_t;
    typedef bucket_t::affine_t affine_t;
    static const size_t blst_affine_bytes = G1_AFFINE_BYTES;
    static const char* name() { return "G1"; }
    static void make(void* dst, size_t m, uint64_t seed) { make_g1_points(dst, m, seed); }
};
struct G2 {
    typedef jacobian_t<fp2_t> point_t;
    typedef xyzz_t<fp2_t> bucket_t;
    typedef bucket_t::affine_t affine_t;
    static const size_t blst_affine_bytes = G2_AFFINE_BYTES;
    static const char* name() { return "G2"; }
    static void make(void* dst, size_t m, uint64_t seed) { make_g2_points(dst, m, seed); }
};

template<class C>
static void run_msm(const std::vector<int>& logs, int runs) {
    typedef typename C::affine_t affine_t;
    // blst's affine coordinates are Montgomery-form Fp (Fp2 as c0, c1), the
    // layout of the affine points sppark reads from memory (Affine_t::mem_t;
    // on the device an fp2_t register holds one half, a lane pair the
    // whole); this catches a mismatch in size at least.
    static_assert(sizeof(typename affine_t::mem_t) == C::blst_affine_bytes,
                  "sppark and blst affine sizes differ");
    const size_t psz = C::blst_affine_bytes;
    if (logs.empty()) return;
    const int tile_log = 20;
    int max_log = *std::max_element(logs.begin(), logs.end());
    // One chain serves every size: 2^min(k,20) distinct points, repeated.
    size_t tile = (size_t)1 << std::min(max_log, tile_log);
    std::vector<uint8_t> pts(tile * psz);
    C::make(pts.data(), tile, 0x2545f4914f6cdd1dull);
    for (int lg : logs) {
        size_t n = (size_t)1 << lg;
        size_t t = std::min(n, tile);
        uint8_t* d_points = nullptr;
        fr_t* d_scalars = nullptr;
        cudaError_t me = cudaMalloc(&d_points, n * psz);
        if (me == cudaSuccess) me = cudaMalloc(&d_scalars, n * sizeof(fr_t));
        if (me != cudaSuccess) {
            // Skip the larger sizes of this group; the next group may fit.
            printf("| sppark %s MSM (wall) | 2^%d | error: %s | |\n", C::name(), lg,
                   cudaGetErrorString(me));
            fflush(stdout);
            cudaGetLastError();
            cudaFree(d_points);
            cudaFree(d_scalars);
            return;
        }
        // The tile goes up once, then repeats on the device: the points
        // repeat every 2^20.
        cudaMemcpy(d_points, pts.data(), t * psz, cudaMemcpyHostToDevice);
        for (size_t off = t; off < n; off += t)
            cudaMemcpy(d_points + off * psz, d_points, t * psz, cudaMemcpyDeviceToDevice);
        {
            std::vector<uint32_t> sc = random_fr_words(n, 0xd1b54a32d192ed03ull ^ lg);
            cudaMemcpy(d_scalars, sc.data(), n * sizeof(fr_t), cudaMemcpyHostToDevice);
        }
        check_cuda("MSM upload");
        std::vector<double> ms;
        // msm_t's constructor throws cuda_error when its allocation fails
        // (invoke returns its errors instead).
        try {
            // Constructed without points (sized for n: it picks the window
            // width and allocates the buckets once, outside the timing); the
            // dev_ptr_t arguments make invoke use the resident arrays instead
            // of copying from the host (is_device_ptr in util/gpu_t.cuh).
            // dev_ptr_t made from a raw pointer does not own it.
            msm_t<typename C::bucket_t, typename C::point_t, affine_t, fr_t> msm{nullptr, n};
            typename C::point_t out;
            // mont = true: the scalars are read as Montgomery forms and
            // converted on the GPU, as supraseal-c2's calls and cuzk's
            // MSM do.
            for (int r = 0; r <= runs; r++) {
                cudaDeviceSynchronize();
                auto t0 = std::chrono::steady_clock::now();
                RustError e = msm.invoke(out, dev_ptr_t<affine_t>{(affine_t*)d_points}, n,
                                         dev_ptr_t<fr_t>{d_scalars}, true);
                auto t1 = std::chrono::steady_clock::now();
                if (e.code != 0) {
                    // sppark's CUDA_OK stores the CUDA error negated.
                    int c = e.code < 0 ? -e.code : e.code;
                    printf("| sppark %s MSM (wall) | 2^%d | error: %s | |\n", C::name(), lg,
                           cudaGetErrorString((cudaError_t)c));
                    fflush(stdout);
                    exit(1);
                }
                if (r > 0)   // r == 0 is the warm-up
                    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            }
        } catch (const cuda_error& e) {
            printf("| sppark %s MSM (wall) | 2^%d | error: %s | |\n", C::name(), lg, e.what());
            fflush(stdout);
            exit(1);
        }
        std::sort(ms.begin(), ms.end());
        printf("| sppark %s MSM (wall) | 2^%d | %.2f | %d |\n", C::name(), lg, ms[runs / 2], runs);
        fflush(stdout);
        check_cuda("MSM");
        cudaFree(d_points);
        cudaFree(d_scalars);
    }
}

static std::vector<int> parse_list(const char* s) {
    std::vector<int> out;
    std::string str(s);
    size_t pos = 0;
    while (pos <= str.size()) {
        size_t comma = str.find(',', pos);
        if (comma == std::string::npos) comma = str.size();
        std::string tok = str.substr(pos, comma - pos);
        if (!tok.empty()) {
            char* end;
            long v = strtol(tok.c_str(), &end, 10);
            if (*end || v < 1 || v > 31) {
                fprintf(stderr, "bad log2 size '%s'\n", tok.c_str());
                exit(2);
            }
            out.push_back((int)v);
        }
        pos = comma + 1;
    }
    return out;
}

int main(int argc, char** argv) {
    std::vector<int> ntt, g1, g2;
    if (argc == 1) {
        ntt = {20, 22, 24, 26};
        g1 = {20, 22, 24, 26};
        g2 = {20, 22};
    }
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc || (a != "--ntt" && a != "--g1" && a != "--g2")) {
            fprintf(stderr, "usage: %s [--ntt 20,22,24,26] [--g1 20,22,24,26] [--g2 20,22]\n", argv[0]);
            return 2;
        }
        std::vector<int> v = parse_list(argv[++i]);
        (a == "--ntt" ? ntt : a == "--g1" ? g1 : g2) = v;
    }
    run_ntt(ntt);
    run_msm<G1>(g1, 5);
    run_msm<G2>(g2, 3);
    return 0;
}
