// The device's constraint evaluation (kernels/cuda/r1cs.cuh), run on the
// host: the same row functions the kernels call, over field.cuh's portable
// arithmetic, in the order the launches run them (every long row summed
// from its 32 lanes' shares, then every row of the domain, the block's
// shared copy of the first NSH coefficients as a separate array). So the
// layout the host writes (r1cs::Flattened) and the kernels' reading of it
// are checked against the host's evaluation on every CI run, without a GPU;
// the GPU tests check the compiled kernels themselves.
//
// Usage: r1cs_host IN OUT NSH. IN (little-endian, written by
// tests/r1cs_host.rs): ten u32 (m, inputs, n, variables, coefficients, neg,
// long_len, long rows, end words, terms), then the end words and the terms
// (u64 each), the coefficients (32 bytes each), the long rows (u32 each) and
// the assignment (32 bytes each). OUT: a, b and c (n elements each), then
// the first unsatisfied row (u32, ~0u when none).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "r1cs.cuh"
#include "../host/read_input.h"

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: r1cs_host IN OUT NSH\n");
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    if (!in) return 2;
    std::vector<uint32_t> h = read<uint32_t>(in, 10);
    uint32_t m = h[0], inputs = h[1], n = h[2], vars = h[3], ncoeffs = h[4], neg = h[5];
    uint32_t long_len = h[6], nlong = h[7], nends = h[8], nterms = h[9];
    std::vector<RowEnds> ends = read<RowEnds>(in, nends);
    std::vector<R1csTerm> terms = read<R1csTerm>(in, nterms);
    std::vector<Fr> coeffs = read<Fr>(in, ncoeffs);
    std::vector<uint32_t> long_rows = read<uint32_t>(in, nlong);
    std::vector<Fr> z = read<Fr>(in, vars);
    fclose(in);

    std::vector<Fr> out[3];
    for (auto& o : out) o.assign(n, Fr::zero());
    R1cs p = {ends.data(), terms.data(), coeffs.data(), neg, long_len, z.data(), m, inputs, n,
              {out[0].data(), out[1].data(), out[2].data()}};
    // k_r1cs_long: a warp per long row, lane 0 storing the lanes' sum.
    for (uint32_t e : long_rows) {
        Fr acc = Fr::zero();
        for (uint32_t lane = 0; lane < 32; lane++) acc = acc + r1cs_long_lane(p, e, lane);
        out[e >> R1CS_ROW_BITS][e & ((1u << R1CS_ROW_BITS) - 1)] = acc;
    }
    // k_r1cs_eval: the block's shared copy, then every row; atomicMin.
    uint32_t nsh = (uint32_t)atoi(argv[3]);
    if (nsh > ncoeffs) nsh = ncoeffs;
    std::vector<Fr> sh(coeffs.begin(), coeffs.begin() + nsh);
    uint32_t bad = ~0u;
    for (uint32_t i = 0; i < n; i++) {
        if (r1cs_row(p, i, sh.data(), nsh) && i < bad) bad = i;
    }

    FILE* o = fopen(argv[2], "wb");
    if (!o) return 2;
    for (auto& v : out) fwrite(v.data(), sizeof(Fr), n, o);
    fwrite(&bad, sizeof bad, 1, o);
    fclose(o);
    return 0;
}
