// Shared by every kernel source: fixed-width names and the cell reader.
#pragma once

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

// The bin id in cell `cell` of a packed word (ellpack.py: cells never straddle a word).
__device__ __forceinline__ int cell_bin(u32 word, int cell, int bits) {
    const u32 mask = bits >= 32 ? 0xffffffffu : ((1u << bits) - 1u);
    return (int)((word >> (cell * bits)) & mask);
}

// The bin id of `feature` in `row` of a packed matrix.
__device__ __forceinline__ int read_bin(const u32* __restrict__ packed, i64 row, int n_words, int feature,
                                        int bits, int cells_per_word) {
    const u32 word = packed[row * n_words + feature / cells_per_word];
    return cell_bin(word, feature % cells_per_word, bits);
}

// Whether a row goes left at a split on `split_bin`, its missing values going left if `default_left`.
__device__ __forceinline__ bool goes_left(int bin, int missing_symbol, int split_bin, bool default_left) {
    return bin == missing_symbol ? default_left : bin <= split_bin;
}

// +inf as a double (NVRTC has no <cmath> INFINITY).
__device__ __forceinline__ double positive_infinity() { return __longlong_as_double(0x7ff0000000000000LL); }
