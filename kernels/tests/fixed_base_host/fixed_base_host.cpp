// The device's fixed-base multiplication (kernels/cuda/fixed_base.cuh), run
// on the host: the same fb_mul and fb_to_affine the kernels call, over
// field.cuh's portable arithmetic, thread by thread as the launches run them.
// So the signed digits, the table's indexing, the inversion and the batched
// affine conversion are checked against arkworks on every CI run, without a
// GPU; the GPU tests check what nvcc made of them.
//
// Usage: fixed_base_host IN OUT STRIDE. IN (little-endian, written by
// tests/host/fixed_base_host.rs): four u32 (group 1 or 2, c, windows, n), the
// table (windows * 2^(c-1) affine points in the kernels' layout), then n
// plain scalars (32 bytes each). OUT: the n products, affine, in the
// kernels' layout. STRIDE: the threads of the affine conversion.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "fixed_base.cuh"
#include "../host/read_input.h"

template <class F>
static void run(FILE* in, FILE* out, uint32_t c, uint32_t nwin, uint32_t n, uint32_t stride) {
    std::vector<Affine<F>> table = read<Affine<F>>(in, (size_t)nwin << (c - 1));
    std::vector<Fr> scalars = read<Fr>(in, n);
    std::vector<Jacobian<F>> jac(n);
    for (uint32_t i = 0; i < n; i++) jac[i] = fb_mul(scalars[i], table.data(), c, nwin);
    std::vector<Affine<F>> aff(n);
    for (uint32_t t = 0; t < stride; t++) fb_to_affine(jac.data(), aff.data(), n, t, stride);
    if (n && fwrite(aff.data(), sizeof(Affine<F>), n, out) != n) exit(3);
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: fixed_base_host IN OUT STRIDE\n");
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    FILE* out = fopen(argv[2], "wb");
    if (!in || !out) return 2;
    std::vector<uint32_t> h = read<uint32_t>(in, 4);
    uint32_t stride = (uint32_t)strtoul(argv[3], 0, 10);
    if (h[0] == 1) run<Fq>(in, out, h[1], h[2], h[3], stride);
    else run<Fq2>(in, out, h[1], h[2], h[3], stride);
    fclose(in);
    return fclose(out) == 0 ? 0 : 3;
}
