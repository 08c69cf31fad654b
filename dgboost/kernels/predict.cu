// Prediction of raw float32 rows by every tree of a forest (twin: cpu.predict_margins).
//
// One thread per row walks the trees in model order and adds each leaf value to
// its margin with one float32 addition: the twin's additions, in its order.
// A node is one 16-byte record, read with one load: {left child (-1 at a
// leaf; the right child is left + 1), feature | category set << 30 | default_left << 31,
// threshold bits (a category-set split: its set's row), value bits}.
//
// A row's features are read once per level of every tree. The _staged kernels
// first copy their block's rows into shared memory with coalesced loads (row
// stride `stride`, odd, so that the threads of a warp read distinct banks); the
// plain ones read them from global memory, for rows too wide to stage; the _csr ones read a
// CSR matrix's rows.
#include "common.cuh"

// The block's rows copied into shared memory `rows` (row stride `stride`) with coalesced
// loads; this thread's row there, or nullptr for a thread past the last row. Every thread
// of the block must call it (it synchronises the block).
__device__ __forceinline__ const float* stage_rows(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int stride, float* rows)
{
    const i64 first = (i64)blockIdx.x * blockDim.x;
    const int n_here = (int)min((i64)blockDim.x, n_rows - first);
    const float* block_X = X + first * n_features;
    for (int i = threadIdx.x; i < n_here * n_features; i += blockDim.x) {
        rows[(i / n_features) * stride + i % n_features] = block_X[i];
    }
    __syncthreads();
    return threadIdx.x < n_here ? rows + threadIdx.x * stride : nullptr;
}

// A row of a CSR matrix (indices ascending within a row): a feature's value by a binary
// search of the row's entries, NaN where it has none (twin: loops._value).
struct SparseRow {
    const float* __restrict__ data;
    const int* __restrict__ indices;
    i64 begin, end;

    __device__ __forceinline__ float operator[](const int feature) const {
        i64 lo = begin, hi = end;
        while (lo < hi) {
            const i64 mid = (lo + hi) / 2;
            if (indices[mid] < feature) lo = mid + 1; else hi = mid;
        }
        return lo < end && indices[lo] == feature ? data[lo] : __int_as_float(0x7fc00000);
    }
};

// The category sets of a forest's category-set splits: a node whose feature word has bit 30
// set holds its set's row of `words` (n_words uint32 a set) in place of its threshold.
struct CategorySets {
    const u32* __restrict__ words;
    int n_words;
};

// Whether a present value goes left at a category-set split: where its code's bit is clear; a
// code beyond the words is in no set: left, as training sends it (twin: loops._value_goes_right).
__device__ __forceinline__ bool category_left(float v, int4 node, const CategorySets& sets) {
    if (!(v >= 0.0f && v < (float)(sets.n_words * 32))) return true;
    const int code = (int)v;
    return ((__ldg(sets.words + (i64)node.z * sets.n_words + (code >> 5)) >> (code & 31)) & 1u) == 0;
}

template <class Row>
__device__ __forceinline__ void predict_row(
    const Row& x, const int4* __restrict__ nodes, const int* __restrict__ roots,
    const int* __restrict__ outputs, const int n_trees, const int n_outputs, float* margin,
    const CategorySets& sets)
{
    float single = n_outputs == 1 ? margin[0] : 0.0f;
    for (int tree = 0; tree < n_trees; ++tree) {
        int4 node = __ldg(nodes + roots[tree]);
        while (node.x >= 0) {
            const float v = x[node.y & 0x3fffffff];
            const bool go_left = isnan(v) ? (node.y < 0)
                                 : (node.y & 0x40000000) ? category_left(v, node, sets) : v < __int_as_float(node.z);
            node = __ldg(nodes + node.x + (go_left ? 0 : 1));
        }
        const float value = __int_as_float(node.w);
        if (n_outputs == 1) single += value; else margin[outputs[tree]] += value;
    }
    if (n_outputs == 1) margin[0] = single;
}

extern "C" __global__ void predict_margins(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int4* __restrict__ nodes,
    const int* __restrict__ roots, const int* __restrict__ outputs, const int n_trees, const int n_outputs,
    float* __restrict__ margins, const u32* __restrict__ category_words, const int n_category_words)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    predict_row(X + row * n_features, nodes, roots, outputs, n_trees, n_outputs, margins + row * n_outputs,
                CategorySets{category_words, n_category_words});
}

extern "C" __global__ void predict_margins_staged(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int stride,
    const int4* __restrict__ nodes, const int* __restrict__ roots, const int* __restrict__ outputs,
    const int n_trees, const int n_outputs, float* __restrict__ margins, const u32* __restrict__ category_words,
    const int n_category_words)
{
    extern __shared__ float rows[];  // blockDim.x rows of `stride` floats
    const float* x = stage_rows(X, n_rows, n_features, stride, rows);
    if (x == nullptr) return;
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    predict_row(x, nodes, roots, outputs, n_trees, n_outputs, margins + row * n_outputs,
                CategorySets{category_words, n_category_words});
}

// Oblivious trees (symmetric growth; twin: cpu.predict_oblivious): a tree is `depth` levels
// of one split each, {feature | default_left << 31, threshold bits}, and a row's leaf the
// bits of its sides, the first level's the highest. The comparisons do not wait on one
// another, as a walk's node reads do.
template <class Row>
__device__ __forceinline__ void predict_oblivious_row(
    const Row& x, const int2* __restrict__ levels, const float* __restrict__ leaf_value,
    const int* __restrict__ outputs, const int n_trees, const int depth, const int n_outputs, float* margin)
{
    float single = n_outputs == 1 ? margin[0] : 0.0f;
    for (int tree = 0; tree < n_trees; ++tree) {
        const int2* split = levels + (i64)tree * depth;
        int leaf = 0;
        for (int d = 0; d < depth; ++d) {
            const int2 s = __ldg(split + d);
            const float v = x[s.x & 0x7fffffff];
            const int right = isnan(v) ? (s.x >= 0) : !(v < __int_as_float(s.y));
            leaf = (leaf << 1) | right;
        }
        const float value = __ldg(leaf_value + ((i64)tree << depth) + leaf);
        if (n_outputs == 1) single += value; else margin[outputs[tree]] += value;
    }
    if (n_outputs == 1) margin[0] = single;
}

extern "C" __global__ void predict_oblivious_staged(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int stride,
    const int2* __restrict__ levels, const float* __restrict__ leaf_value, const int* __restrict__ outputs,
    const int n_trees, const int depth, const int n_outputs, float* __restrict__ margins)
{
    extern __shared__ float rows[];  // blockDim.x rows of `stride` floats
    const float* x = stage_rows(X, n_rows, n_features, stride, rows);
    if (x == nullptr) return;
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    predict_oblivious_row(x, levels, leaf_value, outputs, n_trees, depth, n_outputs, margins + row * n_outputs);
}

extern "C" __global__ void predict_oblivious(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int2* __restrict__ levels,
    const float* __restrict__ leaf_value, const int* __restrict__ outputs, const int n_trees, const int depth,
    const int n_outputs, float* __restrict__ margins)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    predict_oblivious_row(X + row * n_features, levels, leaf_value, outputs, n_trees, depth, n_outputs,
                          margins + row * n_outputs);
}

// The rows of a CSR matrix, one thread a row (no staging: a row's entries are searched).
extern "C" __global__ void predict_margins_csr(
    const float* __restrict__ data, const int* __restrict__ indices, const i64* __restrict__ indptr,
    const i64 n_rows, const int4* __restrict__ nodes, const int* __restrict__ roots, const int* __restrict__ outputs,
    const int n_trees, const int n_outputs, float* __restrict__ margins, const u32* __restrict__ category_words,
    const int n_category_words)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    const SparseRow x{data, indices, indptr[row], indptr[row + 1]};
    predict_row(x, nodes, roots, outputs, n_trees, n_outputs, margins + row * n_outputs,
                CategorySets{category_words, n_category_words});
}

extern "C" __global__ void predict_oblivious_csr(
    const float* __restrict__ data, const int* __restrict__ indices, const i64* __restrict__ indptr,
    const i64 n_rows, const int2* __restrict__ levels, const float* __restrict__ leaf_value,
    const int* __restrict__ outputs, const int n_trees, const int depth, const int n_outputs,
    float* __restrict__ margins)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    const SparseRow x{data, indices, indptr[row], indptr[row + 1]};
    predict_oblivious_row(x, levels, leaf_value, outputs, n_trees, depth, n_outputs, margins + row * n_outputs);
}
