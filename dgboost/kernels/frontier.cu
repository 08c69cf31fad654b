// A level's bookkeeping between its splits and the next level (twins:
// cpu.number_children, cpu.next_frontier). Two launches in place of a few
// dozen small array operations per level.
//
// `table` is the level's split table (SPLIT_TABLE_COLUMNS, one row of 9 int64
// per slot): column 0 says whether the node splits, columns 5..8 hold its
// children's (gradient, hessian) sums.
#include "common.cuh"

#define TABLE_COLUMNS 9
#define NUMBER_THREADS 1024

// The r-th splitting slot (in slot order) gets children start + n_slots + 2r and
// + 1; slot_of_rank[r] names it, and ranks past the last split point at slot 0.
// One block: each thread counts a contiguous run of slots, then the block scans.
extern "C" __global__ void number_children(
    const i64* __restrict__ table, const int n_slots, const int start, const int n_parents,
    int* __restrict__ left_child, int* __restrict__ slot_of_rank, int* __restrict__ n_split)
{
    __shared__ int before[NUMBER_THREADS + 1];
    const int per_thread = (n_slots + NUMBER_THREADS - 1) / NUMBER_THREADS;
    const int lo = min(n_slots, (int)threadIdx.x * per_thread), hi = min(n_slots, lo + per_thread);
    int count = 0;
    for (int s = lo; s < hi; ++s) count += table[(i64)s * TABLE_COLUMNS] != 0;
    before[threadIdx.x + 1] = count;
    if (threadIdx.x == 0) before[0] = 0;
    __syncthreads();
    if (threadIdx.x == 0) {  // NUMBER_THREADS sums: a serial scan is not the bottleneck here
        for (int t = 1; t <= NUMBER_THREADS; ++t) before[t] += before[t - 1];
        *n_split = before[NUMBER_THREADS];
    }
    __syncthreads();
    int rank = before[threadIdx.x];
    for (int s = lo; s < hi; ++s) {
        if (table[(i64)s * TABLE_COLUMNS] != 0) {
            left_child[s] = start + n_slots + 2 * rank;
            if (rank < n_parents) slot_of_rank[rank] = s;
            ++rank;
        } else {
            left_child[s] = -1;
        }
    }
    for (int r = before[NUMBER_THREADS] + threadIdx.x; r < n_parents; r += NUMBER_THREADS) slot_of_rank[r] = 0;
}

// The next level's slots: two per parent rank r (left, right). Ranks past the
// last split are padding: inactive, zero sums, empty ranges at n_rows.
extern "C" __global__ void next_frontier(
    const i64* __restrict__ table, const int* __restrict__ slot_of_rank, const int* __restrict__ n_split,
    const int* __restrict__ seg_begin, const int* __restrict__ seg_end, const int* __restrict__ n_left,
    const int n_parents, const int n_rows, i64* __restrict__ node_sums, bool* __restrict__ active,
    int* __restrict__ next_begin, int* __restrict__ next_end, bool* __restrict__ build_left,
    int* __restrict__ build_begin, int* __restrict__ build_end)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_parents) return;
    const bool real = r < *n_split;
    const int s = slot_of_rank[r];
    const i64* row = table + (i64)s * TABLE_COLUMNS;
    const i64 left_g = real ? row[5] : 0, left_h = real ? row[6] : 0;
    const i64 right_g = real ? row[7] : 0, right_h = real ? row[8] : 0;
    const int begin = real ? seg_begin[s] : n_rows;
    const int middle = real ? begin + n_left[s] : n_rows;
    const int end = real ? seg_end[s] : n_rows;
    node_sums[4 * r] = left_g;
    node_sums[4 * r + 1] = left_h;
    node_sums[4 * r + 2] = right_g;
    node_sums[4 * r + 3] = right_h;
    active[2 * r] = real;
    active[2 * r + 1] = real;
    next_begin[2 * r] = begin;
    next_end[2 * r] = middle;
    next_begin[2 * r + 1] = middle;
    next_end[2 * r + 1] = end;
    const bool left = left_h <= right_h;  // the lighter child is built; its sibling by subtraction
    build_left[r] = left;
    build_begin[r] = left ? begin : middle;
    build_end[r] = left ? middle : end;
}
