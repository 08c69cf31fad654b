// Row sampling's radix steps (twin: cpu.bucket_counts).
#include "common.cuh"

// Of the keys whose bits above shift + bits equal `prefix`, by bucket of their bits
// [shift, shift + bits): how many (counts) and their sum (sums), added in. Each block
// counts into its own histogram in shared memory (2 << bits unsigned 64-bit words), then
// adds it to the global one: the keys crowd into few buckets, and global atomics on one
// word serialise. Integer sums: exact in any order.
extern "C" __global__ void bucket_counts(const i64* __restrict__ keys, const i64 n, const int shift, const int bits,
                                         const i64 prefix, u64* __restrict__ counts, u64* __restrict__ sums)
{
    extern __shared__ u64 block_totals[];  // counts, then sums
    const int n_buckets = 1 << bits;
    for (int b = threadIdx.x; b < 2 * n_buckets; b += blockDim.x) block_totals[b] = 0;
    __syncthreads();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const i64 key = keys[i];
        if ((key >> (shift + bits)) != prefix) continue;
        const int bucket = (int)((key >> shift) & (n_buckets - 1));
        atomicAdd(&block_totals[bucket], 1ull);
        atomicAdd(&block_totals[n_buckets + bucket], (u64)key);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < n_buckets; b += blockDim.x) {
        if (block_totals[b] != 0) {
            atomicAdd(&counts[b], block_totals[b]);
            atomicAdd(&sums[b], block_totals[n_buckets + b]);
        }
    }
}
