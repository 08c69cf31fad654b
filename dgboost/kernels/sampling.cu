// Row sampling (twins: cpu.sample_magnitude_max, cpu.sample_keys, cpu.sample_rows) and its
// threshold's radix steps (cpu.bucket_counts, cpu.choose_bucket), all on the device: a tree's
// sample reads nothing back to the host. Compiled with --fmad=false: every float64 operation
// rounds as its twin's NumPy operation does.
#include "common.cuh"

#define MVS 0
#define GOSS 1
#define UNIFORM 2
#define REDUCE_THREADS 256

// A row's sampling magnitude (float64): sqrt(g^2 + 0.1 h^2) for MVS, |g h| for GOSS.
__device__ __forceinline__ double magnitude(const float2 pair, const int kind) {
    const double g = (double)pair.x, h = (double)pair.y;
    return kind == MVS ? sqrt(g * g + 0.1 * (h * h)) : fabs(g * h);
}

// The largest magnitude: a block's maximum, then atomicMax on its bits (non-negative doubles
// order as their bit patterns do) into `largest`, zeroed before.
extern "C" __global__ void sample_magnitude_max(const float* __restrict__ gpair, const i64 n, const int kind,
                                                u64* __restrict__ largest)
{
    __shared__ double block_max[REDUCE_THREADS];
    double best = 0.0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        best = fmax(best, magnitude(reinterpret_cast<const float2*>(gpair)[i], kind));
    block_max[threadIdx.x] = best;
    __syncthreads();
    for (int stride = REDUCE_THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) block_max[threadIdx.x] = fmax(block_max[threadIdx.x], block_max[threadIdx.x + stride]);
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicMax((unsigned long long*)largest, (unsigned long long)__double_as_longlong(block_max[0]));
}

// keys[i] = rint(magnitude * scale), scale = 2**(31 - e) where largest = m 2**e, m in [0.5, 1).
extern "C" __global__ void sample_keys(const float* __restrict__ gpair, const i64 n, const int kind,
                                       const double* __restrict__ largest, i64* __restrict__ keys)
{
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int exponent;
    frexp(largest[0], &exponent);
    const double scale = ldexp(1.0, 31 - exponent);
    keys[i] = (i64)rint(magnitude(reinterpret_cast<const float2*>(gpair)[i], kind) * scale);
}

// _hashing._splitmix64_int.
__device__ __forceinline__ u64 splitmix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// _hashing.uniform: splitmix64 of (global index + key), its top 53 bits scaled by 2**-53.
__device__ __forceinline__ double uniform_draw(const i64 global_index, const u64 key) {
    return (double)(splitmix64((u64)global_index + key) >> 11) * 1.1102230246251565e-16;  // 2**-53
}

// One thread a row (twin: cpu.sample_rows): its draw, whether it is drawn, its pair scaled
// (where `gpair` is given: without it, whether it is drawn alone, pairs taken as 1).
// The tree's key is `key`, or where `tree_at` is given (a tree index on the device, which a
// round replayed from a CUDA graph advances), stream_key's last mix of `key`, the stream's base.
extern "C" __global__ void sample_rows(
    const float* __restrict__ gpair, const i64* __restrict__ global_index, const i64 n, const u64 key,
    const int kind, const i64* __restrict__ keys, const i64* __restrict__ threshold,
    const double* __restrict__ largest, const double rate, const double weight, float* __restrict__ out,
    bool* __restrict__ drawn, const i64* __restrict__ tree_at)
{
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u64 tree_key = tree_at == nullptr ? key : splitmix64(key ^ (u64)tree_at[0]);
    const double u = uniform_draw(global_index[i], tree_key);
    const float2 pair = gpair == nullptr ? make_float2(1.0f, 1.0f) : reinterpret_cast<const float2*>(gpair)[i];
    bool keep;
    float g = pair.x, h = pair.y;
    if (kind == UNIFORM) {
        keep = u < rate;
    } else if (kind == MVS) {
        const double mu = (double)max(threshold[0], (i64)1);
        const double probability = largest[0] > 0.0 ? fmin(1.0, (double)keys[i] / mu) : 1.0;
        keep = u < probability;
        g = (float)((double)pair.x / probability);
        h = (float)((double)pair.y / probability);
    } else {
        const bool top = keys[i] >= threshold[0];
        keep = top || u < rate;
        const double w = top ? 1.0 : weight;
        g = (float)((double)pair.x * w);
        h = (float)((double)pair.y * w);
    }
    drawn[i] = keep;
    if (gpair == nullptr) return;
    out[2 * i] = keep ? g : 0.0f;
    out[2 * i + 1] = keep ? h : 0.0f;
}

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
