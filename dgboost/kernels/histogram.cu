// Fixed-point gradient histograms of a level's nodes (twin: cpu.build_histograms), of dense
// rows, and of sparse ones (build_sparse_histograms).
//
// The rows of node s are ridx[seg_begin[s] : seg_begin[s] + length(s)]. The
// row's words are cut into feature groups whose bins fit a block's shared
// memory. Group g owns blocks [group_blocks[g], group_blocks[g + 1]) of a
// one-dimensional grid sized to what the device runs at once (one wave), and
// its blocks split the level's rows, laid end to end, into equal ranges. The
// level's row count is read here, on the device, so every level's blocks
// finish together whatever its size; a group's block count follows its cells,
// so blocks of every group do the same work. A range may span several nodes:
// each piece is summed into the block's shared-memory histogram and then added
// to the node's histogram in global memory. Where a group's bins do not fit in
// shared memory (use_shared == 0) the cells go straight to global memory.
//
// Gradient pairs arrive as float32 and are made fixed point here, as
// fixed_point.to_fixed does: rint((double)value * scale) as int64. Sums are
// int64: exact whatever order the atomics land in.
#include "common.cuh"

// The last slot whose rows start at or before `pos`, the slots' rows laid end to end.
__device__ __forceinline__ int slot_at(const i64 pos, const i64* __restrict__ seg_cum, const int n_slots) {
    int lo = 0, hi = n_slots;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (seg_cum[mid] <= pos) lo = mid; else hi = mid;
    }
    return lo;
}

// Zero a block's shared histogram of n_bins (gradient, hessian) pairs; a barrier after.
__device__ __forceinline__ void clear_shared(i64* shared_hist, const i64 n_bins) {
    for (i64 i = threadIdx.x; i < 2 * n_bins; i += blockDim.x) shared_hist[i] = 0;
    __syncthreads();
}

// Add a block's shared histogram into a node's in global memory; barriers before and after.
__device__ __forceinline__ void flush_shared(const i64* shared_hist, i64* __restrict__ node_hist, const i64 n_bins) {
    __syncthreads();
    for (i64 i = threadIdx.x; i < 2 * n_bins; i += blockDim.x) {
        const i64 v = shared_hist[i];
        if (v != 0) atomicAdd((u64*)&node_hist[i], (u64)v);
    }
    __syncthreads();
}

// Row `row`'s gradient pair in fixed point, as fixed_point.to_fixed: rint((double)value * scale).
__device__ __forceinline__ void fixed_pair(const float* __restrict__ gpair, const i64 row, const double scale_g,
                                           const double scale_h, u64& g, u64& h) {
    const float2 pair = reinterpret_cast<const float2*>(gpair)[row];
    g = (u64)(i64)rint((double)pair.x * scale_g);
    h = (u64)(i64)rint((double)pair.y * scale_h);
}

extern "C" __global__ void build_histograms(
    const u32* __restrict__ packed, const int n_words, const int bits, const int cells_per_word,
    const int n_features, const int missing_symbol, const i64* __restrict__ bin_offsets,
    const int* __restrict__ group_words, const int* __restrict__ group_blocks, const float* __restrict__ gpair,
    const double* __restrict__ scales, const int* __restrict__ ridx,
    const int* __restrict__ seg_begin, const i64* __restrict__ seg_cum, const int n_slots,
    const int use_shared, i64* __restrict__ hist, const i64 n_bins_total)
{
    extern __shared__ i64 shared_hist[];
    int group = 0;
    while ((int)blockIdx.x >= group_blocks[group + 1]) ++group;
    const i64 block = (i64)blockIdx.x - group_blocks[group];
    const i64 n_blocks = group_blocks[group + 1] - group_blocks[group];
    const i64 total = seg_cum[n_slots];
    i64 pos = total * block / n_blocks;
    const i64 stop = total * (block + 1) / n_blocks;
    if (pos >= stop) return;
    const int word_lo = group_words[group];
    const int n_group_words = group_words[group + 1] - word_lo;
    const int feature_lo = word_lo * cells_per_word;
    const int feature_hi = min(feature_lo + n_group_words * cells_per_word, n_features);
    const i64 bin_lo = bin_offsets[feature_lo];
    const i64 n_group_bins = bin_offsets[feature_hi] - bin_lo;
    const double scale_g = scales[0], scale_h = scales[1];

    int seg = slot_at(pos, seg_cum, n_slots);
    while (pos < stop) {
        while (seg_cum[seg + 1] <= pos) ++seg;  // skip nodes without rows
        const i64 piece_stop = min(stop, seg_cum[seg + 1]);
        i64* node_hist = hist + ((i64)seg * n_bins_total + bin_lo) * 2;
        i64* acc = use_shared ? shared_hist : node_hist;
        if (use_shared) clear_shared(shared_hist, n_group_bins);
        const i64 first = (i64)seg_begin[seg] + (pos - seg_cum[seg]);
        const i64 n_items = (piece_stop - pos) * n_group_words;
        for (i64 item = threadIdx.x; item < n_items; item += blockDim.x) {
            const i64 r = item / n_group_words;
            const int word_index = word_lo + (int)(item - r * n_group_words);
            const i64 row = ridx[first + r];
            const u32 word = packed[row * n_words + word_index];
            u64 g, h;
            fixed_pair(gpair, row, scale_g, scale_h, g, h);
            int feature = word_index * cells_per_word;
            for (int cell = 0; cell < cells_per_word && feature < n_features; ++cell, ++feature) {
                const int bin = cell_bin(word, cell, bits);
                const i64 index = bin_offsets[feature] - bin_lo + bin;
                if (bin == missing_symbol || index >= bin_offsets[feature + 1] - bin_lo) continue;
                atomicAdd((u64*)&acc[2 * index], g);
                atomicAdd((u64*)&acc[2 * index + 1], h);
            }
        }
        if (use_shared) flush_shared(shared_hist, node_hist, n_group_bins);
        pos = piece_stop;
    }
}

// Histograms of sparse rows (twin: cpu.build_sparse_histograms): each cell holds a global bin,
// null (n_bins_total) past the row's entries. The blocks split the slots' rows, laid end to
// end, into equal ranges, as build_histograms's blocks of one group; a block sums each node's
// piece in shared memory where every bin fits there (use_shared), else straight into the
// node's histogram in global memory. A thread takes SPARSE_ITEM_WORDS words of a row at a
// time: one read of the row's id and gradient pair for several cells.
#define SPARSE_ITEM_WORDS 4

extern "C" __global__ void build_sparse_histograms(
    const u32* __restrict__ packed, const int n_words, const int bits, const int cells_per_word,
    const float* __restrict__ gpair, const double* __restrict__ scales, const int* __restrict__ ridx,
    const int* __restrict__ seg_begin, const i64* __restrict__ seg_cum, const int n_slots,
    const int use_shared, i64* __restrict__ hist, const i64 n_bins_total)
{
    extern __shared__ i64 shared_hist[];
    const i64 total = seg_cum[n_slots];
    i64 pos = total * blockIdx.x / gridDim.x;
    const i64 stop = total * (blockIdx.x + 1) / gridDim.x;
    if (pos >= stop) return;
    const double scale_g = scales[0], scale_h = scales[1];
    int seg = slot_at(pos, seg_cum, n_slots);
    while (pos < stop) {
        while (seg_cum[seg + 1] <= pos) ++seg;  // skip nodes without rows
        const i64 piece_stop = min(stop, seg_cum[seg + 1]);
        i64* node_hist = hist + (i64)seg * n_bins_total * 2;
        i64* acc = use_shared ? shared_hist : node_hist;
        if (use_shared) clear_shared(shared_hist, n_bins_total);
        const i64 first = (i64)seg_begin[seg] + (pos - seg_cum[seg]);
        const int row_items = (n_words + SPARSE_ITEM_WORDS - 1) / SPARSE_ITEM_WORDS;
        const i64 n_items = (piece_stop - pos) * row_items;
        for (i64 item = threadIdx.x; item < n_items; item += blockDim.x) {
            const i64 r = item / row_items;
            const int first_word = (int)(item - r * row_items) * SPARSE_ITEM_WORDS;
            const i64 row = ridx[first + r];
            if (cell_bin(packed[row * n_words + first_word], 0, bits) >= n_bins_total) continue;  // past its entries
            u64 g, h;
            fixed_pair(gpair, row, scale_g, scale_h, g, h);
            const int stop_word = min(first_word + SPARSE_ITEM_WORDS, n_words);
            for (int word_index = first_word; word_index < stop_word; ++word_index) {
                const u32 word = packed[row * n_words + word_index];
                int cell = 0;
                for (; cell < cells_per_word; ++cell) {
                    const int bin = cell_bin(word, cell, bits);
                    if (bin >= n_bins_total) break;  // null: the row's entries are done
                    atomicAdd((u64*)&acc[2 * bin], g);
                    atomicAdd((u64*)&acc[2 * bin + 1], h);
                }
                if (cell < cells_per_word) break;
            }
        }
        if (use_shared) flush_shared(shared_hist, node_hist, n_bins_total);
        pos = piece_stop;
    }
}

#define OFFSET_THREADS 256

// seg_cum[0] = 0, seg_cum[s + 1] = seg_cum[s] + (seg_end[s] - seg_begin[s]): where each
// slot's rows start when the slots' rows are laid end to end. One block: each
// thread sums a contiguous run of slots, then the block scans the runs.
extern "C" __global__ void segment_offsets(
    const int* __restrict__ seg_begin, const int* __restrict__ seg_end, const int n_slots,
    i64* __restrict__ seg_cum)
{
    __shared__ i64 before[OFFSET_THREADS + 1];
    const int per_thread = (n_slots + OFFSET_THREADS - 1) / OFFSET_THREADS;
    const int lo = min(n_slots, (int)threadIdx.x * per_thread), hi = min(n_slots, lo + per_thread);
    i64 count = 0;
    for (int s = lo; s < hi; ++s) count += seg_end[s] - seg_begin[s];
    before[threadIdx.x + 1] = count;
    if (threadIdx.x == 0) before[0] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int t = 1; t <= OFFSET_THREADS; ++t) before[t] += before[t - 1];
        seg_cum[0] = 0;
    }
    __syncthreads();
    i64 run = before[threadIdx.x];
    for (int s = lo; s < hi; ++s) {
        run += seg_end[s] - seg_begin[s];
        seg_cum[s + 1] = run;
    }
}

// Children of n parents in sibling pairs (twin: cpu.sibling_histograms): the
// built child as summed, its sibling as the parent (hist[slot_of_rank[p]]) minus
// it. One thread per int64 of a parent's histogram (pair_size of them a parent).
extern "C" __global__ void sibling_histograms(
    const i64* __restrict__ hist, const int* __restrict__ slot_of_rank, const i64* __restrict__ built,
    const bool* __restrict__ build_left, const i64 n_parents, const i64 pair_size, i64* __restrict__ children)
{
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_parents * pair_size) return;
    const i64 p = i / pair_size, j = i - p * pair_size;
    const i64 b = built[i], sibling = hist[(i64)slot_of_rank[p] * pair_size + j] - b;
    const bool left = build_left[p];
    children[(2 * p) * pair_size + j] = left ? b : sibling;
    children[(2 * p + 1) * pair_size + j] = left ? sibling : b;
}
