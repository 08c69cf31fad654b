// Prediction of raw float32 rows by every tree of a forest (twin: cpu.predict_margins).
//
// One thread per row walks the trees in model order and adds each leaf value to
// its margin with one float32 addition: the twin's additions, in its order.
#include "common.cuh"

extern "C" __global__ void predict_margins(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int* __restrict__ left,
    const int* __restrict__ right, const int* __restrict__ feature, const float* __restrict__ threshold,
    const bool* __restrict__ default_left, const float* __restrict__ value, const int* __restrict__ roots,
    const int* __restrict__ outputs, const int n_trees, const int n_outputs, float* __restrict__ margins)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    const float* x = X + row * n_features;
    float* margin = margins + row * n_outputs;
    for (int tree = 0; tree < n_trees; ++tree) {
        int node = roots[tree];
        while (left[node] >= 0) {
            const float v = x[feature[node]];
            const bool go_left = isnan(v) ? default_left[node] : v < threshold[node];
            node = go_left ? left[node] : right[node];
        }
        margin[outputs[tree]] += value[node];
    }
}
