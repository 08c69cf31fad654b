// Row partitioning and routing (twins: cpu.partition_rows, cpu.place_rows, cpu.route_rows).
//
// ridx holds the rows grouped by node (every row, or a sample of them: n_places
// entries): node s of a level owns ridx[seg_begin[s]:seg_end[s]], the ranges in
// slot order (seg_begin does not decrease; padding slots hold empty ranges at
// n_places). Splitting a node splits
// its range in place, stably: its left rows first, in their old order, then
// its right rows. A thread finds its slot from the ranges. No row's node id is
// written while the tree grows (a scattered write a row a level): a node's range
// stays put once it stops splitting, and place_rows writes each row's leaf once.
#include "common.cuh"

// The slot whose range holds ridx index i, or -1 (a row of a leaf of an earlier level).
__device__ __forceinline__ int slot_of(int i, const int* __restrict__ seg_begin,
                                       const int* __restrict__ seg_end, int level_size) {
    if (level_size == 0 || seg_begin[0] > i) return -1;
    int lo = 0, hi = level_size;  // the last slot starting at or before i
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (seg_begin[mid] <= i) lo = mid; else hi = mid;
    }
    return i < seg_end[lo] ? lo : -1;
}

// Whether a row of bin `bin` goes left at slot `slot`'s split: goes_left's rule, but at a
// category-set split (split_bin -1, `categories` given: n_words uint32 a slot) left where the
// bin's (category's) bit is clear (twin: loops._goes_right).
__device__ __forceinline__ bool goes_left_at(int bin, int missing_symbol, int split_bin, bool default_left,
                                             const u32* __restrict__ categories, int n_category_words, i64 slot) {
    if (bin != missing_symbol && categories != nullptr && split_bin < 0) {
        return !(bin < n_category_words * 32 && ((categories[slot * n_category_words + (bin >> 5)] >> (bin & 31)) & 1u));
    }
    return goes_left(bin, missing_symbol, split_bin, default_left);
}

// A partition block's threads (the blocks of partition_flags and partition_scatter are the
// same: block b holds places [b * PARTITION_BLOCK, (b + 1) * PARTITION_BLOCK)).
#define PARTITION_BLOCK 256

// flags[i] = 1 where the row at ridx[i] sits in a splitting node of the level and goes left,
// and block_lefts[b] the flags set in block b (their scan gives each block the lefts before
// it: no scan over every place); also starts that scan's output: lefts_before[0] = 0.
// feature_bins: null for dense rows (see row_bin); categories: null without category-set
// splits (see goes_left_at).
extern "C" __global__ void __launch_bounds__(PARTITION_BLOCK) partition_flags(
    const u32* __restrict__ packed, const int n_words, const int bits, const int cells_per_word,
    const int missing_symbol, const i64* __restrict__ feature_bins, const int* __restrict__ ridx, const int n_places, const int level_size,
    const int* __restrict__ seg_begin, const int* __restrict__ seg_end, const int* __restrict__ split_feature,
    const int* __restrict__ split_bin, const bool* __restrict__ default_left,
    const int* __restrict__ left_child, const u32* __restrict__ categories, const int n_category_words,
    unsigned char* __restrict__ flags, int* __restrict__ block_lefts, int* __restrict__ lefts_before)
{
    const int i = blockIdx.x * PARTITION_BLOCK + threadIdx.x;
    int left = 0;
    if (i < n_places) {
        const int slot = slot_of(i, seg_begin, seg_end, level_size);
        if (slot >= 0 && left_child[slot] >= 0) {
            const int bin = row_bin(packed, ridx[i], n_words, split_feature[slot], bits, cells_per_word, feature_bins,
                                    missing_symbol);
            left = goes_left_at(bin, missing_symbol, split_bin[slot], default_left[slot], categories,
                                n_category_words, slot);
        }
        flags[i] = (unsigned char)left;
    }
    const int in_block = __syncthreads_count(left);
    if (threadIdx.x == 0) block_lefts[blockIdx.x] = in_block;
    if (i == 0) lefts_before[0] = 0;
}

// Places before `i` whose flag is set: the blocks' before it (lefts_before, an exclusive scan
// of block_lefts with the total last) and its own block's up to it.
__device__ __forceinline__ int flags_before(int i, const unsigned char* __restrict__ flags,
                                            const int* __restrict__ lefts_before) {
    const int block = i / PARTITION_BLOCK;
    int count = lefts_before[block];
    for (int k = block * PARTITION_BLOCK; k < i; ++k) count += flags[k];
    return count;
}

// Each slot's first place's lefts before it (base) and its rows sent left (n_left).
extern "C" __global__ void segment_lefts(
    const unsigned char* __restrict__ flags, const int* __restrict__ lefts_before,
    const int* __restrict__ seg_begin, const int* __restrict__ seg_end, const int level_size,
    int* __restrict__ base, int* __restrict__ n_left)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= level_size) return;
    const int first = flags_before(seg_begin[s], flags, lefts_before);
    base[s] = first;
    n_left[s] = flags_before(seg_end[s], flags, lefts_before) - first;
}

// Moves each row of a splitting node to its place in the node's range: its left rows first,
// then its right rows, each side in its old order. A place's lefts before it: its block's
// (lefts_before) and, within the block, a warp ballot of the flags and the warps' counts.
extern "C" __global__ void __launch_bounds__(PARTITION_BLOCK) partition_scatter(
    const int* __restrict__ ridx, const unsigned char* __restrict__ flags,
    const int* __restrict__ lefts_before, const int n_places, const int level_size,
    const int* __restrict__ seg_begin, const int* __restrict__ seg_end,
    const int* __restrict__ left_child, const int* __restrict__ base, const int* __restrict__ n_left,
    int* __restrict__ new_ridx)
{
    __shared__ int warp_lefts[PARTITION_BLOCK / 32];
    const int i = blockIdx.x * PARTITION_BLOCK + threadIdx.x;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const bool left = i < n_places && flags[i] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, left);
    if (lane == 0) warp_lefts[warp] = __popc(ballot);
    __syncthreads();
    if (i >= n_places) return;
    int before = lefts_before[blockIdx.x] + __popc(ballot & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) before += warp_lefts[w];
    const int row = ridx[i];
    const int slot = slot_of(i, seg_begin, seg_end, level_size);
    if (slot < 0 || left_child[slot] < 0) { new_ridx[i] = row; return; }
    const int begin = seg_begin[slot];
    const int lefts_here = before - base[slot];  // the slot's places before i sent left
    new_ridx[left ? begin + lefts_here : begin + n_left[slot] + (i - begin - lefts_here)] = row;
}

// positions[ridx[i]] = node[k] for each place i of range k, [begin[k], end[k]): each row at its
// leaf, once a tree is grown. Block row y takes ranges y, y + gridDim.y, ...; x strides over
// a range's places.
extern "C" __global__ void place_rows(
    const int* __restrict__ ridx, const int* __restrict__ begin, const int* __restrict__ end,
    const int* __restrict__ node, const int n_ranges, int* __restrict__ positions)
{
    for (int k = blockIdx.y; k < n_ranges; k += gridDim.y) {
        const int at = node[k];
        for (int i = begin[k] + blockIdx.x * blockDim.x + threadIdx.x; i < end[k]; i += gridDim.x * blockDim.x) {
            positions[ridx[i]] = at;
        }
    }
}

// Leaf id of every row of a packed matrix in one tree (node arrays by node id); feature_bins
// and categories (by node id) as for partition_flags.
extern "C" __global__ void route_rows(
    const u32* __restrict__ packed, const int n_rows, const int n_words, const int bits,
    const int cells_per_word, const int missing_symbol, const i64* __restrict__ feature_bins,
    const int* __restrict__ split_feature, const int* __restrict__ split_bin, const bool* __restrict__ default_left,
    const int* __restrict__ left_child, const u32* __restrict__ categories, const int n_category_words,
    const int depth, int* __restrict__ leaf)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    int node = 0;
    for (int d = 0; d < depth; ++d) {
        const int child = left_child[node];
        if (child < 0) break;
        const int bin = row_bin(packed, row, n_words, split_feature[node], bits, cells_per_word, feature_bins,
                                missing_symbol);
        node = child + (goes_left_at(bin, missing_symbol, split_bin[node], default_left[node], categories,
                                     n_category_words, node) ? 0 : 1);
    }
    leaf[row] = node;
}
