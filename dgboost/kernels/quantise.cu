// The input matrix's kernels: find its first infinity (twin: cpu.first_infinite), then
// quantise and bit-pack it in one pass (twin: cpu.quantise_and_pack).
#include "common.cuh"

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
        u32 bin = (u32)missing_symbol;
        if (!isnan(x)) {
            i64 lo = cut_offsets[feature], hi = cut_offsets[feature + 1];
            const i64 first = lo;
            while (lo < hi) {  // first cut > x
                const i64 mid = lo + (hi - lo) / 2;
                if (cut_values[mid] <= x) lo = mid + 1; else hi = mid;
            }
            bin = (u32)(lo - first);
        }
        word |= bin << (cell * bits);
    }
    packed[item] = word;
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
