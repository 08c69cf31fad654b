// The input matrix's kernels: find its first infinity (twin: cpu.first_infinite), count its
// rows' present values (twin: cpu.most_present), then quantise and bit-pack it in one pass
// (twins: cpu.quantise_and_pack, and cpu.quantise_sparse for a CSR matrix's entries).
#include "common.cuh"

// How many of a feature's cuts are <= x (numpy's searchsorted side="right").
__device__ __forceinline__ u32 bin_of(const float x, const float* __restrict__ cut_values, i64 lo, i64 hi) {
    const i64 first = lo;
    while (lo < hi) {  // first cut > x
        const i64 mid = lo + (hi - lo) / 2;
        if (cut_values[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return (u32)(lo - first);
}

// One thread per (row, word). A cell's bin is the number of the feature's cuts
// <= x (numpy's searchsorted side="right"); NaN is the missing symbol.
extern "C" __global__ void quantise_and_pack(
    const float* __restrict__ X, const i64 n_rows, const int n_features,
    const float* __restrict__ cut_values, const i64* __restrict__ cut_offsets,
    const int bits, const int cells_per_word, const int n_words, const int missing_symbol,
    u32* __restrict__ packed)
{
    const i64 item = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (item >= n_rows * n_words) return;
    const i64 row = item / n_words;
    const int word_index = (int)(item - row * n_words);
    u32 word = 0;
    int feature = word_index * cells_per_word;
    for (int cell = 0; cell < cells_per_word && feature < n_features; ++cell, ++feature) {
        const float x = X[row * n_features + feature];
        const u32 bin = isnan(x) ? (u32)missing_symbol : bin_of(x, cut_values, cut_offsets[feature],
                                                              cut_offsets[feature + 1]);
        word |= bin << (cell * bits);
    }
    packed[item] = word;
}

// One thread per row of a CSR matrix (indices ascending within a row). Dense rows
// (global_bins == 0): cell f holds feature f's bin, `symbol` (missing) where the row has no
// entry of it, 0 past the last feature (as quantise_and_pack). Sparse rows: cell k holds the
// k-th entry's global bin, bin_offsets[f] + bin, then `symbol` (null) to the row's end.
// Cells are visited in order, each word written once.
extern "C" __global__ void quantise_sparse(
    const float* __restrict__ data, const int* __restrict__ indices, const i64* __restrict__ indptr,
    const i64 n_rows, const int n_features, const float* __restrict__ cut_values, const i64* __restrict__ cut_offsets,
    const i64* __restrict__ bin_offsets, const int bits, const int cells_per_word, const int n_words,
    const int symbol, const int global_bins, u32* __restrict__ packed)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    i64 entry = indptr[row];
    const i64 end = indptr[row + 1];
    for (int word_index = 0; word_index < n_words; ++word_index) {
        u32 word = 0;
        for (int cell = 0; cell < cells_per_word; ++cell) {
            const int place = word_index * cells_per_word + cell;
            u32 value = global_bins || place < n_features ? (u32)symbol : 0u;
            if (entry < end && (global_bins || indices[entry] == place)) {
                const int feature = indices[entry];
                value = bin_of(data[entry], cut_values, cut_offsets[feature], cut_offsets[feature + 1]);
                if (global_bins) value += (u32)bin_offsets[feature];
                ++entry;
            }
            word |= value << (cell * bits);
        }
        packed[row * n_words + word_index] = word;
    }
}

// The most present (not NaN) values of any row: one thread a row, atomicMax into `most`.
extern "C" __global__ void most_present(const float* __restrict__ X, const i64 n_rows, const int n_features,
                                        int* __restrict__ most)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    int count = 0;
    for (int feature = 0; feature < n_features; ++feature) count += !isnan(X[row * n_features + feature]);
    atomicMax(most, count);
}

// The least flat index of a +-inf cell, by atomicMin over a grid-stride pass (`first` starts
// at n_cells, meaning none). A thread stops at its first infinity: later ones of its own are larger.
extern "C" __global__ void first_infinite(const float* __restrict__ X, const i64 n_cells, u64* __restrict__ first)
{
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 cell = (i64)blockIdx.x * blockDim.x + threadIdx.x; cell < n_cells; cell += stride) {
        if (isinf(X[cell])) {
            atomicMin(first, (u64)cell);
            return;
        }
    }
}
