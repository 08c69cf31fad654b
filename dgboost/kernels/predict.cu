// Prediction of raw float32 rows by every tree of a forest (twin: cpu.predict_margins).
//
// One thread per row walks the trees in model order and adds each leaf value to
// its margin with one float32 addition: the twin's additions, in its order.
// A node is one 16-byte record, read with one load: {left child (-1 at a
// leaf; the right child is left + 1), feature | default_left << 31, threshold
// bits, value bits}.
#include "common.cuh"

extern "C" __global__ void predict_margins(
    const float* __restrict__ X, const i64 n_rows, const int n_features, const int4* __restrict__ nodes,
    const int* __restrict__ roots, const int* __restrict__ outputs, const int n_trees, const int n_outputs,
    float* __restrict__ margins)
{
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    const float* x = X + row * n_features;
    float* margin = margins + row * n_outputs;
    float single = n_outputs == 1 ? margin[0] : 0.0f;
    for (int tree = 0; tree < n_trees; ++tree) {
        int4 node = nodes[roots[tree]];
        while (node.x >= 0) {
            const int feature = node.y & 0x7fffffff;
            const float v = x[feature];
            const bool go_left = isnan(v) ? (node.y < 0) : v < __int_as_float(node.z);
            node = nodes[node.x + (go_left ? 0 : 1)];
        }
        const float value = __int_as_float(node.w);
        if (n_outputs == 1) single += value; else margin[outputs[tree]] += value;
    }
    if (n_outputs == 1) margin[0] = single;
}
