// Times sppark 0.1.16's Fr NTT and inverse NTT (BLS12-381, natural order in
// and out: sppark's bit reversal then its CT passes, what NTT::Base runs for
// NN) on data already on the GPU, so that cuzk's gpu_bench and sppark run in
// the same device call (issue 12 compares the two; the machines are too noisy
// for figures from different sessions). Prints gpu_bench's table rows:
// "| sppark NTT | 2^k | median ms | runs |". Sizes: the arguments (log2 n),
// default 20 22 24 26; 5 timed runs after one warm-up per size and direction
// (the warm-up builds sppark's twiddle tables). gpu_bench's NTT times are
// host wall-clock around the whole call (lease, launches, synchronize),
// these are CUDA events on sppark's stream: a comparison that leans, by the
// call's host overhead, against cuzk.
#include <cuda_runtime.h>
#include <ff/bls12-381.hpp>
typedef bls12_381::fr_t fr_t;
#include <util/gpu_t.cuh>
#include <ntt/ntt.cuh>
#include <vector>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    const gpu_t& gpu = select_gpu(0);
    const int runs = 5;
    std::vector<int> logs;
    for (int i = 1; i < argc; i++) logs.push_back(atoi(argv[i]));
    if (logs.empty()) logs = {20, 22, 24, 26};
    for (int lg : logs) {
        size_t n = (size_t)1 << lg;
        // Pseudo-random elements (xorshift), top word masked so each is
        // below r: the timing does not depend on the values.
        std::vector<uint32_t> host(n * 8);
        uint64_t x = 0x9e3779b97f4a7c15ull ^ lg;
        for (size_t i = 0; i < host.size(); i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            host[i] = (uint32_t)x & ((i % 8 == 7) ? 0x0fffffffu : 0xffffffffu);
        }
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
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) { printf("cuda error %s\n", cudaGetErrorString(e)); return 1; }
        cudaEventDestroy(a); cudaEventDestroy(b);
        cudaFree(d);
    }
    return 0;
}
