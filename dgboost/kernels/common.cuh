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

// The bin of `feature` in `row`. A dense row (feature_bins null) holds it in cell `feature`;
// a sparse row holds its entries' global bins ascending, then the null symbol (the total of
// bins): the bin is its one cell in [feature_bins[feature], feature_bins[feature + 1]),
// found by a binary search, less the feature's first, or `null_symbol` where it has none.
__device__ __forceinline__ int row_bin(const u32* __restrict__ packed, i64 row, int n_words, int feature,
                                       int bits, int cells_per_word, const i64* __restrict__ feature_bins,
                                       int null_symbol) {
    if (feature_bins == nullptr) return read_bin(packed, row, n_words, feature, bits, cells_per_word);
    const i64 first = feature_bins[feature], stop = feature_bins[feature + 1];
    const int n_cells = n_words * cells_per_word;
    int lo = 0, hi = n_cells;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (read_bin(packed, row, n_words, mid, bits, cells_per_word) < first) lo = mid + 1; else hi = mid;
    }
    if (lo < n_cells) {
        const int found = read_bin(packed, row, n_words, lo, bits, cells_per_word);
        if (found < stop) return (int)(found - first);
    }
    return null_symbol;
}

// Whether a row goes left at a split on `split_bin`, its missing values going left if `default_left`.
__device__ __forceinline__ bool goes_left(int bin, int missing_symbol, int split_bin, bool default_left) {
    return bin == missing_symbol ? default_left : bin <= split_bin;
}

// +inf as a double (NVRTC has no <cmath> INFINITY).
__device__ __forceinline__ double positive_infinity() { return __longlong_as_double(0x7ff0000000000000LL); }
