// A tree's gradient pairs, reduced before its root (twins: cpu.gradient_bounds,
// cpu.gradient_sums). Each is one launch over (n_rows, 2) float32 pairs: a
// grid-stride loop, a warp reduction, one atomic per warp.
#include "common.cuh"

__device__ __forceinline__ u32 warp_max(u32 v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ i64 warp_sum(i64 v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// bounds[c] = max over rows of |gpair[:, c]|, as float32 bits: non-negative floats
// order as their bits, and a NaN's bits exceed infinity's, so a NaN wins as in
// numpy's max. `bounds` starts at 0.
extern "C" __global__ void gradient_bounds(const float* __restrict__ gpair, const i64 n_rows,
                                           u32* __restrict__ bounds)
{
    u32 g = 0, h = 0;
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += (i64)gridDim.x * blockDim.x) {
        const float2 pair = reinterpret_cast<const float2*>(gpair)[r];
        g = max(g, __float_as_uint(fabsf(pair.x)));
        h = max(h, __float_as_uint(fabsf(pair.y)));
    }
    g = warp_max(g);
    h = warp_max(h);
    if ((threadIdx.x & 31) == 0) {
        atomicMax(&bounds[0], g);
        atomicMax(&bounds[1], h);
    }
}

// sums[c] = sum over rows of rint((double)gpair[r, c] * scales[c]) as int64
// (fixed_point.to_fixed); integer sums, so exact in any order. `sums` starts at 0.
extern "C" __global__ void gradient_sums(const float* __restrict__ gpair, const i64 n_rows,
                                         const double* __restrict__ scales, i64* __restrict__ sums)
{
    const double scale_g = scales[0], scale_h = scales[1];
    i64 g = 0, h = 0;
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < n_rows; r += (i64)gridDim.x * blockDim.x) {
        const float2 pair = reinterpret_cast<const float2*>(gpair)[r];
        g += (i64)rint((double)pair.x * scale_g);
        h += (i64)rint((double)pair.y * scale_h);
    }
    g = warp_sum(g);
    h = warp_sum(h);
    if ((threadIdx.x & 31) == 0) {
        atomicAdd((u64*)&sums[0], (u64)g);
        atomicAdd((u64*)&sums[1], (u64)h);
    }
}
