// Row sampling's radix steps (twins: cpu.bucket_counts, cpu.choose_bucket), all on the device:
// a threshold search reads nothing back to the host.
#include "common.cuh"

// Of the keys whose bits above shift + bits equal the prefix (state[0]), by bucket of their bits
// [shift, shift + bits): how many (counts) and their sum (sums), added in. Each block
// counts into its own histogram in shared memory (2 << bits unsigned 64-bit words), then
// adds it to the global one: the keys crowd into few buckets, and global atomics on one
// word serialise. Integer sums: exact in any order.
extern "C" __global__ void bucket_counts(const i64* __restrict__ keys, const i64 n, const int shift, const int bits,
                                         const i64* __restrict__ state, u64* __restrict__ counts,
                                         u64* __restrict__ sums)
{
    const i64 prefix = state[0];
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

// An unsigned 128-bit integer: exact products of 64-bit counts, sums and rule constants.
struct U128 {
    u64 high, low;
};

__device__ __forceinline__ U128 multiply(const u64 a, const u64 b) { return U128{__umul64hi(a, b), a * b}; }

__device__ __forceinline__ bool at_least(const U128& a, const U128& b) {
    return a.high > b.high || (a.high == b.high && a.low >= b.low);
}

// choose_bucket's rule at t (kind 0: (above t + below) denominator >= numerator t, numerator =
// high 2**62 + low; kind 1: above >= numerator).
__device__ __forceinline__ bool rule_holds(const int kind, const u64 t, const u64 above, const u64 below,
                                           const u64 high, const u64 low, const u64 denominator) {
    if (kind == 1) return above >= low + (high << 62);
    const U128 left = multiply(above * t + below, denominator);
    const U128 low_part = multiply(low, t);
    const u64 high_t = high * t;  // below 2**61: numerator below 2**92, t below 2**31
    U128 right = {low_part.high + (high_t >> 2), low_part.low + (high_t << 62)};
    if (right.low < low_part.low) ++right.high;  // the carry
    return at_least(left, right);
}

// One thread: the radix search's step after the all-reduce of bucket_counts (twin:
// cpu.choose_bucket). The bucket counts' suffix sums and sums' prefix sums go to shared
// memory, then a binary search for the last bucket whose start holds the rule.
#define MAX_SEARCH_BUCKETS 2048
extern "C" __global__ void choose_bucket(const i64* __restrict__ totals, i64* __restrict__ state, const int shift,
                                         const int bits, const int kind, const i64 least, const i64 high,
                                         const i64 low, const i64 denominator)
{
    __shared__ u64 above[MAX_SEARCH_BUCKETS + 1], below[MAX_SEARCH_BUCKETS + 1];
    if (threadIdx.x != 0) return;
    const int n_buckets = 1 << bits;
    const i64 prefix = state[0];
    above[n_buckets] = (u64)state[1];
    for (int b = n_buckets - 1; b >= 0; --b) above[b] = above[b + 1] + (u64)totals[b];
    below[0] = (u64)state[2];
    for (int b = 0; b < n_buckets; ++b) below[b + 1] = below[b] + (u64)totals[n_buckets + b];
    const i64 start = prefix << (shift + bits);
    const int first = start < least ? 1 : 0;
    int lo = first - 1, hi = n_buckets;  // the rule holds at lo (or lo = first - 1), fails at hi
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        const u64 t = (u64)(start + ((i64)mid << shift));
        if (rule_holds(kind, t, above[mid], below[mid], (u64)high, (u64)low, (u64)denominator)) lo = mid;
        else hi = mid;
    }
    int bucket = lo;
    if (bucket < first) {
        if (shift == 0) {
            state[0] = least - 1; state[1] = 0; state[2] = 0;
            return;
        }
        bucket = 0;
    }
    state[0] = (prefix << bits) | bucket;
    state[1] = (i64)above[bucket + 1];
    state[2] = (i64)below[bucket];
}
