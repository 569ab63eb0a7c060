// The host harnesses' input reader (tests/r1cs_host, tests/fixed_base_host):
// n elements of T from the input file, or exit 2 when it is short.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include <vector>

template <class T>
static std::vector<T> read(FILE* f, size_t n) {
    std::vector<T> v(n);
    if (n && fread(v.data(), sizeof(T), n, f) != n) {
        fprintf(stderr, "short input\n");
        exit(2);
    }
    return v;
}
