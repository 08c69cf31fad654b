// Split evaluation of a level's nodes (twin: cpu.evaluate_splits).
//
// Every float64 expression below is the twin's, operation for operation; the
// module is compiled with --fmad=false, so the gains and the chosen splits are
// the same bits on both. The integer sums (prefixes over bins) are exact.
#include "common.cuh"

#define BLOCK 256
#define WARPS (BLOCK / 32)
#define TABLE_COLUMNS 9  // cpu.SPLIT_TABLE_COLUMNS
#define RECORD_COLUMNS 9  // cpu.RECORD_COLUMNS

struct Rules {
    double reg_lambda, alpha, min_child_weight, max_delta_step;
};

__device__ __forceinline__ bool too_light(double h, const Rules& r) {
    return (h < r.min_child_weight) || (h <= 0.0);
}

__device__ __forceinline__ double soft_threshold(double g, const Rules& r) {
    if (r.alpha == 0.0) return g;
    const double sign = g > 0.0 ? 1.0 : (g < 0.0 ? -1.0 : 0.0);
    return sign * fmax(fabs(g) - r.alpha, 0.0);
}

__device__ __forceinline__ double node_weight(double g, double h, const Rules& r) {
    double denominator = h + r.reg_lambda;
    denominator = denominator > 0.0 ? denominator : 1.0;
    double weight = -soft_threshold(g, r) / denominator;
    if (r.max_delta_step > 0.0) weight = fmin(fmax(weight, -r.max_delta_step), r.max_delta_step);
    return too_light(h, r) ? 0.0 : weight;
}

__device__ __forceinline__ double node_gain(double g, double h, const Rules& r) {
    double gain;
    if (r.max_delta_step > 0.0) {
        const double w = node_weight(g, h, r);
        gain = -(((2.0 * g) * w + (h + r.reg_lambda) * (w * w)) + (2.0 * r.alpha) * fabs(w));
    } else {
        double denominator = h + r.reg_lambda;
        denominator = denominator > 0.0 ? denominator : 1.0;
        const double t = soft_threshold(g, r);
        gain = (t * t) / denominator;
    }
    return too_light(h, r) ? 0.0 : gain;
}

// A node's gain at a given weight: -(2 G w + (H + lambda) w^2 + 2 alpha |w|) (twin: split_loops._gain_at).
__device__ __forceinline__ double gain_at(double g, double h, double w, const Rules& r) {
    return -(((2.0 * g) * w + (h + r.reg_lambda) * (w * w)) + (2.0 * r.alpha) * fabs(w));
}

// By comparisons, as the twin: a -0.0 weight at a 0.0 bound stays -0.0.
__device__ __forceinline__ double clip(double w, double lower, double upper) {
    return w < lower ? lower : (w > upper ? upper : w);
}

// A node's gain at its weight clipped to [lower, upper] (twin: split_loops._bounded_gain).
__device__ __forceinline__ double bounded_gain(double g, double h, double lower, double upper, const Rules& r) {
    if (too_light(h, r)) return 0.0;
    return gain_at(g, h, clip(node_weight(g, h, r), lower, upper), r);
}

__device__ __forceinline__ double candidate_gain(double g, double h, const Rules& r) {
    if (r.max_delta_step > 0.0 || r.alpha > 0.0) return node_gain(g, h, r);
    return (g * g) / (h + r.reg_lambda);
}

// (gain, candidate) a beats b: larger gain, then the lower candidate index.
__device__ __forceinline__ bool better(double gain_a, int cand_a, double gain_b, int cand_b) {
    return gain_a > gain_b || (gain_a == gain_b && cand_a < cand_b);
}

// Warp-wide inclusive scan of (g, h) pairs, lane by lane (every lane of the warp calls it).
__device__ __forceinline__ void warp_scan_pairs(i64& g, i64& h) {
    const int lane = threadIdx.x & 31;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const i64 up_g = __shfl_up_sync(0xffffffffu, g, offset);
        const i64 up_h = __shfl_up_sync(0xffffffffu, h, offset);
        if (lane >= offset) { g += up_g; h += up_h; }
    }
}

// The sum of (g, h) pairs over a warp, on every lane (every lane of the warp calls it).
__device__ __forceinline__ void warp_sum_pairs(i64& g, i64& h) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        g += __shfl_xor_sync(0xffffffffu, g, offset);
        h += __shfl_xor_sync(0xffffffffu, h, offset);
    }
}

// Block-wide inclusive scan of (g, h) pairs; returns this thread's prefix, `total` gets the block sum.
__device__ void scan_pairs(i64& g, i64& h, i64* warp_g, i64* warp_h, i64& total_g, i64& total_h) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_scan_pairs(g, h);
    if (lane == 31) { warp_g[warp] = g; warp_h[warp] = h; }
    __syncthreads();
    i64 before_g = 0, before_h = 0;
    for (int w = 0; w < warp; ++w) { before_g += warp_g[w]; before_h += warp_h[w]; }
    total_g = 0; total_h = 0;
    for (int w = 0; w < WARPS; ++w) { total_g += warp_g[w]; total_h += warp_h[w]; }
    g += before_g; h += before_h;
    __syncthreads();
}

// Scoring one feature's candidates in one node: what every candidate shares.
struct FeatureScore {
    Rules rules;
    int constraint;  // the feature's monotone direction
    bool monotone;  // scored at clipped weights (monotone constraints in force)
    double lower, upper;  // the node's weight bounds
    i64 missing_g, missing_h;  // the node's rows without the feature
    double inverse_g, inverse_h, least_hessian, total_gd, total_hd, parent_gain;
};

__device__ __forceinline__ FeatureScore feature_score(
    const Rules& rules, const signed char* __restrict__ monotone, const double* __restrict__ bounds,
    const double* __restrict__ scales, const i64* __restrict__ node_sums, const int node, const int feature,
    const i64 present_g, const i64 present_h)
{
    FeatureScore s;
    s.rules = rules;
    s.monotone = monotone != nullptr;
    s.constraint = monotone ? monotone[feature] : 0;
    s.lower = bounds ? bounds[2 * node] : -positive_infinity();
    s.upper = bounds ? bounds[2 * node + 1] : positive_infinity();
    const i64 node_g = node_sums[2 * node], node_h = node_sums[2 * node + 1];
    s.missing_g = node_g - present_g;
    s.missing_h = node_h - present_h;
    s.inverse_g = 1.0 / scales[0];
    s.inverse_h = 1.0 / scales[1];
    s.least_hessian = fmax(s.inverse_h, rules.min_child_weight);
    s.total_gd = (double)node_g * s.inverse_g;
    s.total_hd = (double)node_h * s.inverse_h;
    s.parent_gain = s.monotone ? bounded_gain(s.total_gd, s.total_hd, s.lower, s.upper, rules)
                               : node_gain(s.total_gd, s.total_hd, rules);
    return s;
}

// The best candidate a thread has seen: its gain, index (bin * 2 + missing left) and left sums.
struct Best {
    double gain;
    int cand;
    i64 g, h;
};

__device__ __forceinline__ Best no_candidate() { return Best{-positive_infinity(), 0x7fffffff, 0, 0}; }

// `best` updated with the two candidates after bin `bin` (g, h: the sums of the bins up to it),
// missing right, then left.
__device__ __forceinline__ void consider_bin(const FeatureScore& s, const i64 g, const i64 h, const i64 bin,
                                             Best& best)
{
    for (int direction = 0; direction < 2; ++direction) {
        const i64 left_g = direction ? g + s.missing_g : g;
        const i64 left_h = direction ? h + s.missing_h : h;
        const double gl = (double)left_g * s.inverse_g, hl = (double)left_h * s.inverse_h;
        const double gr = s.total_gd - gl, hr = s.total_hd - hl;
        double gain = -positive_infinity();
        if (hl >= s.least_hessian && hr >= s.least_hessian) {
            if (!s.monotone) {
                gain = (candidate_gain(gl, hl, s.rules) + candidate_gain(gr, hr, s.rules)) - s.parent_gain;
            } else {
                const double wl = clip(node_weight(gl, hl, s.rules), s.lower, s.upper);
                const double wr = clip(node_weight(gr, hr, s.rules), s.lower, s.upper);
                if (!((s.constraint > 0 && wl > wr) || (s.constraint < 0 && wl < wr)))
                    gain = (gain_at(gl, hl, wl, s.rules) + gain_at(gr, hr, wr, s.rules)) - s.parent_gain;
            }
        }
        const int cand = (int)(bin * 2 + direction);
        if (better(gain, cand, best.gain, best.cand)) best = Best{gain, cand, left_g, left_h};
    }
}

__device__ __forceinline__ void write_best(const Best& best, const i64 out, double* __restrict__ best_gain,
                                           int* __restrict__ best_candidate, i64* __restrict__ best_left)
{
    best_gain[out] = best.gain;
    best_candidate[out] = best.cand;
    best_left[2 * out] = best.g;
    best_left[2 * out + 1] = best.h;
}

// Block (feature, node): the best candidate of one feature of one node. `allowed` (n_nodes x
// n_features, or null: all) skips a feature, as choose_node_splits does; with `monotone` (by
// feature, or null) candidates are scored at the children's weights clipped to the node's
// `bounds` and rejected against the feature's direction (twin: split_loops._monotone_split_gain).
extern "C" __global__ void __launch_bounds__(BLOCK) evaluate_feature_splits(
    const i64* __restrict__ hist, const i64* __restrict__ node_sums, const i64* __restrict__ bin_offsets,
    const i64 n_bins_total, const double* __restrict__ scales, const double reg_lambda, const double alpha,
    const double min_child_weight, const double max_delta_step, const bool* __restrict__ allowed,
    const signed char* __restrict__ monotone, const double* __restrict__ bounds,
    double* __restrict__ best_gain, int* __restrict__ best_candidate, i64* __restrict__ best_left)
{
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    __shared__ i64 warp_g[WARPS], warp_h[WARPS];
    __shared__ Best reduced[BLOCK];
    const int feature = blockIdx.x, node = blockIdx.y, n_features = gridDim.x;
    if (allowed && !allowed[(i64)node * n_features + feature]) return;  // the whole block: no barrier passed
    const i64 first_bin = bin_offsets[feature], n_bins = bin_offsets[feature + 1] - first_bin;
    const i64* h_node = hist + ((i64)node * n_bins_total + first_bin) * 2;

    // This feature's total over its bins: the node's rows with the feature present.
    i64 present_g = 0, present_h = 0;
    for (i64 bin = threadIdx.x; bin < n_bins; bin += BLOCK) { present_g += h_node[2 * bin]; present_h += h_node[2 * bin + 1]; }
    {
        i64 total_g, total_h;
        scan_pairs(present_g, present_h, warp_g, warp_h, total_g, total_h);
        present_g = total_g; present_h = total_h;
    }
    const FeatureScore score = feature_score(rules, monotone, bounds, scales, node_sums, node, feature, present_g,
                                             present_h);
    Best best = no_candidate();
    i64 carry_g = 0, carry_h = 0;
    for (i64 base = 0; base < n_bins; base += BLOCK) {
        const i64 bin = base + threadIdx.x;
        i64 g = 0, h = 0;
        if (bin < n_bins) { g = h_node[2 * bin]; h = h_node[2 * bin + 1]; }
        i64 chunk_g, chunk_h;
        scan_pairs(g, h, warp_g, warp_h, chunk_g, chunk_h);
        g += carry_g; h += carry_h;
        carry_g += chunk_g; carry_h += chunk_h;
        if (bin < n_bins) consider_bin(score, g, h, bin, best);
    }
    reduced[threadIdx.x] = best;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            const Best other = reduced[threadIdx.x + stride];
            if (better(other.gain, other.cand, reduced[threadIdx.x].gain, reduced[threadIdx.x].cand))
                reduced[threadIdx.x] = other;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) write_best(reduced[0], (i64)node * n_features + feature, best_gain, best_candidate,
                                     best_left);
}

// evaluate_feature_splits for features of few bins (a sparse matrix's one-hot columns): a warp
// a feature, WARPS features a block (blockIdx.x) of one node (blockIdx.y). The same candidates,
// scored by the same expressions, and the same best (ties: the lower candidate).
extern "C" __global__ void __launch_bounds__(BLOCK) evaluate_feature_splits_by_warp(
    const i64* __restrict__ hist, const i64* __restrict__ node_sums, const i64* __restrict__ bin_offsets,
    const i64 n_bins_total, const int n_features, const double* __restrict__ scales, const double reg_lambda,
    const double alpha, const double min_child_weight, const double max_delta_step,
    const bool* __restrict__ allowed, const signed char* __restrict__ monotone, const double* __restrict__ bounds,
    double* __restrict__ best_gain, int* __restrict__ best_candidate, i64* __restrict__ best_left)
{
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    const int lane = threadIdx.x & 31;
    const int feature = blockIdx.x * WARPS + (threadIdx.x >> 5), node = blockIdx.y;
    if (feature >= n_features || (allowed && !allowed[(i64)node * n_features + feature])) return;  // the warp
    const i64 first_bin = bin_offsets[feature], n_bins = bin_offsets[feature + 1] - first_bin;
    const i64* h_node = hist + ((i64)node * n_bins_total + first_bin) * 2;

    i64 present_g = 0, present_h = 0;
    for (i64 bin = lane; bin < n_bins; bin += 32) { present_g += h_node[2 * bin]; present_h += h_node[2 * bin + 1]; }
    warp_sum_pairs(present_g, present_h);
    const FeatureScore score = feature_score(rules, monotone, bounds, scales, node_sums, node, feature, present_g,
                                             present_h);
    Best best = no_candidate();
    i64 carry_g = 0, carry_h = 0;
    for (i64 base = 0; base < n_bins; base += 32) {
        const i64 bin = base + lane;
        i64 g = 0, h = 0;
        if (bin < n_bins) { g = h_node[2 * bin]; h = h_node[2 * bin + 1]; }
        warp_scan_pairs(g, h);
        g += carry_g; h += carry_h;
        carry_g = __shfl_sync(0xffffffffu, g, 31);
        carry_h = __shfl_sync(0xffffffffu, h, 31);
        if (bin < n_bins) consider_bin(score, g, h, bin, best);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        Best other;
        other.gain = __shfl_down_sync(0xffffffffu, best.gain, offset);
        other.cand = __shfl_down_sync(0xffffffffu, best.cand, offset);
        other.g = __shfl_down_sync(0xffffffffu, best.g, offset);
        other.h = __shfl_down_sync(0xffffffffu, best.h, offset);
        if (better(other.gain, other.cand, best.gain, best.cand)) best = other;
    }
    if (lane == 0) write_best(best, (i64)node * n_features + feature, best_gain, best_candidate, best_left);
}

// One block per node: the best allowed feature (ties: the lowest), written as a split-table row
// (a block, not a warp: a sparse matrix brings a hundred thousand features).
extern "C" __global__ void __launch_bounds__(BLOCK) choose_node_splits(
    const double* __restrict__ feature_gain, const int* __restrict__ feature_candidate,
    const i64* __restrict__ feature_left, const i64* __restrict__ node_sums, const bool* __restrict__ active,
    const bool* __restrict__ allowed, const i64* __restrict__ bin_offsets, const int n_features,
    const int n_nodes, const double gamma, const double min_split_gain, i64* __restrict__ table)
{
    __shared__ double warp_gain[WARPS];
    __shared__ int warp_feature[WARPS];
    const int node = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double gain = -positive_infinity();
    int feature = 0x7fffffff;
    for (int f = threadIdx.x; f < n_features; f += BLOCK) {
        if (bin_offsets[f + 1] == bin_offsets[f]) continue;  // no bins: no candidates
        if (allowed && !allowed[(i64)node * n_features + f]) continue;
        const double g = feature_gain[(i64)node * n_features + f];
        if (better(g, f, gain, feature)) { gain = g; feature = f; }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const double other_gain = __shfl_down_sync(0xffffffffu, gain, offset);
        const int other_feature = __shfl_down_sync(0xffffffffu, feature, offset);
        if (better(other_gain, other_feature, gain, feature)) { gain = other_gain; feature = other_feature; }
    }
    if (lane == 0) { warp_gain[warp] = gain; warp_feature[warp] = feature; }
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int w = 1; w < WARPS; ++w)
        if (better(warp_gain[w], warp_feature[w], gain, feature)) { gain = warp_gain[w]; feature = warp_feature[w]; }
    i64* row = table + (i64)node * TABLE_COLUMNS;
    if (feature == 0x7fffffff) {  // no allowed feature has bins
        for (int c = 0; c < TABLE_COLUMNS; ++c) row[c] = 0;
        row[4] = __double_as_longlong(-positive_infinity());
        row[7] = node_sums[2 * node]; row[8] = node_sums[2 * node + 1];
        return;
    }
    const i64 at = (i64)node * n_features + feature;
    const int cand = feature_candidate[at];
    if (!active[node]) gain = -positive_infinity();
    const i64 left_g = feature_left[2 * at], left_h = feature_left[2 * at + 1];
    row[0] = (gain > min_split_gain) && (gain >= gamma);
    row[1] = feature;
    row[2] = cand / 2;
    row[3] = cand % 2;
    row[4] = __double_as_longlong(gain);
    row[5] = left_g;
    row[6] = left_h;
    row[7] = node_sums[2 * node] - left_g;
    row[8] = node_sums[2 * node + 1] - left_h;
}

// A finished tree's per-node record (cpu.RECORD_COLUMNS) and leaf values
// (twin: cpu.tree_record): one thread a node id.
extern "C" __global__ void tree_record(
    const i64* __restrict__ node_sums, const bool* __restrict__ active, const i64* __restrict__ table,
    const int* __restrict__ left_child, const double* __restrict__ scales, const int n_ids,
    const double reg_lambda, const double alpha, const double min_child_weight, const double max_delta_step,
    const double eta, const double* __restrict__ bounds, double* __restrict__ record, float* __restrict__ leaf_value)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_ids) return;
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    const double g = (double)node_sums[2 * i] / scales[0];
    const double h = (double)node_sums[2 * i + 1] / scales[1];
    double weight = node_weight(g, h, rules);
    if (bounds) weight = clip(weight, bounds[2 * i], bounds[2 * i + 1]);
    const float value = (float)(eta * weight);
    const i64* split = table + (i64)i * TABLE_COLUMNS;
    double* out = record + (i64)i * RECORD_COLUMNS;
    out[0] = active[i] ? 1.0 : 0.0;
    out[1] = (double)split[0];  // valid
    out[2] = (double)split[1];  // feature
    out[3] = (double)split[2];  // bin
    out[4] = (double)split[3];  // default_left
    out[5] = (double)left_child[i];
    out[6] = __longlong_as_double(split[4]);  // gain, stored as its bits
    out[7] = h;  // cover
    out[8] = (double)value;
    leaf_value[i] = value;
}

// The next level's weight bounds under monotone constraints (twin: split_loops.child_bounds): one
// thread a parent rank; padding ranks (from n_split on) get none.
extern "C" __global__ void child_bounds(
    const i64* __restrict__ table, const int* __restrict__ slot_of_rank, const int* __restrict__ n_split,
    const double* __restrict__ bounds, const signed char* __restrict__ monotone, const double* __restrict__ scales,
    const int n_ranks, const double reg_lambda, const double alpha, const double min_child_weight,
    const double max_delta_step, double* __restrict__ child)
{
    const int rank = blockIdx.x * blockDim.x + threadIdx.x;
    if (rank >= n_ranks) return;
    double* left = child + 4 * (i64)rank;
    double* right = left + 2;
    if (rank >= n_split[0]) {
        left[0] = right[0] = -positive_infinity();
        left[1] = right[1] = positive_infinity();
        return;
    }
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    const int slot = slot_of_rank[rank];
    const double lower = bounds[2 * slot], upper = bounds[2 * slot + 1];
    left[0] = right[0] = lower;
    left[1] = right[1] = upper;
    const i64* split = table + (i64)slot * TABLE_COLUMNS;
    const int constraint = monotone[split[1]];
    if (constraint == 0) return;
    const double inverse_g = 1.0 / scales[0], inverse_h = 1.0 / scales[1];
    const double wl = clip(node_weight((double)split[5] * inverse_g, (double)split[6] * inverse_h, rules), lower, upper);
    const double wr = clip(node_weight((double)split[7] * inverse_g, (double)split[8] * inverse_h, rules), lower, upper);
    const double middle = (wl + wr) / 2.0;
    if (constraint > 0) { left[1] = middle; right[0] = middle; }
    else { left[0] = middle; right[1] = middle; }
}

// Symmetric trees' split scores (twin: split_loops.level_candidates). Block (feature, chunk):
// a thread a bin of the feature's chunk of BLOCK bins; for each active node in order, the
// node's prefix at the bin (its sums of the bins before the chunk, then a block scan), and
// the node's score for missing right and left added to the thread's two totals, from 0.0:
// the twin's order. Features not `allowed` (by feature, or null: all) score -inf.
// A bin's two scores at one node (missing right, then left), added to the bin's totals: g, h
// the node's sums of the feature's bins up to it, present_g, present_h of all of them.
__device__ __forceinline__ void add_level_scores(const i64 g, const i64 h, const i64 node_g, const i64 node_h,
                                                 const i64 present_g, const i64 present_h, const double inverse_g,
                                                 const double inverse_h, const Rules& rules, double& total0,
                                                 double& total1) {
    const double node_gd = (double)node_g * inverse_g, node_hd = (double)node_h * inverse_h;
    const double parent = node_gain(node_gd, node_hd, rules);
    for (int direction = 0; direction < 2; ++direction) {
        const double gl = (double)(direction ? g + (node_g - present_g) : g) * inverse_g;
        const double hl = (double)(direction ? h + (node_h - present_h) : h) * inverse_h;
        const double score = (node_gain(gl, hl, rules) + node_gain(node_gd - gl, node_hd - hl, rules)) - parent;
        if (direction) total1 += score; else total0 += score;
    }
}

// Features of fewer than `least_bins` bins are level_candidates_by_warp's (0: none).
extern "C" __global__ void __launch_bounds__(BLOCK) level_candidates(
    const i64* __restrict__ hist, const i64* __restrict__ node_sums, const bool* __restrict__ active,
    const i64* __restrict__ bin_offsets, const i64 n_bins_total, const int n_nodes, const double* __restrict__ scales,
    const double reg_lambda, const double alpha, const double min_child_weight, const double max_delta_step,
    const bool* __restrict__ allowed, const i64 least_bins, double* __restrict__ totals)
{
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    __shared__ i64 warp_g[WARPS], warp_h[WARPS];
    const int feature = blockIdx.x;
    const i64 begin = bin_offsets[feature], n_bins = bin_offsets[feature + 1] - begin;
    const i64 chunk_start = (i64)blockIdx.y * BLOCK;
    if (chunk_start >= n_bins || n_bins < least_bins) return;  // the whole block
    const i64 local = chunk_start + threadIdx.x;
    const bool in_range = local < n_bins;
    if (allowed && !allowed[feature]) {
        if (in_range) totals[2 * (begin + local)] = totals[2 * (begin + local) + 1] = -positive_infinity();
        return;
    }
    const double inverse_g = 1.0 / scales[0], inverse_h = 1.0 / scales[1];
    double total0 = 0.0, total1 = 0.0;
    for (int node = 0; node < n_nodes; ++node) {
        if (!active[node]) continue;  // the same for the whole block
        const i64* h_node = hist + ((i64)node * n_bins_total + begin) * 2;
        const i64 node_g = node_sums[2 * node], node_h = node_sums[2 * node + 1];
        i64 present_g = 0, present_h = 0, before_g = 0, before_h = 0, total_g, total_h;
        for (i64 b = threadIdx.x; b < n_bins; b += BLOCK) { present_g += h_node[2 * b]; present_h += h_node[2 * b + 1]; }
        scan_pairs(present_g, present_h, warp_g, warp_h, total_g, total_h);
        present_g = total_g; present_h = total_h;
        for (i64 b = threadIdx.x; b < chunk_start; b += BLOCK) { before_g += h_node[2 * b]; before_h += h_node[2 * b + 1]; }
        scan_pairs(before_g, before_h, warp_g, warp_h, total_g, total_h);
        before_g = total_g; before_h = total_h;
        i64 g = in_range ? h_node[2 * local] : 0, h = in_range ? h_node[2 * local + 1] : 0;
        scan_pairs(g, h, warp_g, warp_h, total_g, total_h);
        if (!in_range) continue;
        add_level_scores(g + before_g, h + before_h, node_g, node_h, present_g, present_h, inverse_g, inverse_h,
                         rules, total0, total1);
    }
    if (in_range) { totals[2 * (begin + local)] = total0; totals[2 * (begin + local) + 1] = total1; }
}

// level_candidates for features of at most 32 bins (a sparse matrix's one-hot columns): a warp
// a feature, a lane a bin, WARPS features a block; wider features are left to the block kernel.
// The same scores, added over the nodes in the same order.
extern "C" __global__ void __launch_bounds__(BLOCK) level_candidates_by_warp(
    const i64* __restrict__ hist, const i64* __restrict__ node_sums, const bool* __restrict__ active,
    const i64* __restrict__ bin_offsets, const i64 n_bins_total, const int n_nodes, const int n_features,
    const double* __restrict__ scales, const double reg_lambda, const double alpha, const double min_child_weight,
    const double max_delta_step, const bool* __restrict__ allowed, double* __restrict__ totals)
{
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    const int lane = threadIdx.x & 31;
    const int feature = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (feature >= n_features) return;  // the warp
    const i64 begin = bin_offsets[feature], n_bins = bin_offsets[feature + 1] - begin;
    if (n_bins > 32) return;
    const bool in_range = lane < n_bins;
    if (allowed && !allowed[feature]) {
        if (in_range) totals[2 * (begin + lane)] = totals[2 * (begin + lane) + 1] = -positive_infinity();
        return;
    }
    const double inverse_g = 1.0 / scales[0], inverse_h = 1.0 / scales[1];
    double total0 = 0.0, total1 = 0.0;
    for (int node = 0; node < n_nodes; ++node) {
        if (!active[node]) continue;  // the same for the whole warp
        const i64* h_node = hist + ((i64)node * n_bins_total + begin) * 2;
        i64 g = in_range ? h_node[2 * lane] : 0, h = in_range ? h_node[2 * lane + 1] : 0;
        i64 present_g = g, present_h = h;
        warp_sum_pairs(present_g, present_h);
        warp_scan_pairs(g, h);  // the feature's bins up to this lane's
        if (in_range) add_level_scores(g, h, node_sums[2 * node], node_sums[2 * node + 1], present_g, present_h,
                                       inverse_g, inverse_h, rules, total0, total1);
    }
    if (in_range) { totals[2 * (begin + lane)] = total0; totals[2 * (begin + lane) + 1] = total1; }
}

// The level's split table from level_candidates' totals (twin: split_loops.level_table), one
// block: the first candidate of the largest total (NaN and -inf never win), then a thread a
// node for its row: its own sums at the candidate and its own score.
extern "C" __global__ void level_table(
    const i64* __restrict__ hist, const i64* __restrict__ node_sums, const bool* __restrict__ active,
    const int* __restrict__ feature_of_bin, const i64* __restrict__ bin_offsets, const i64 n_bins_total,
    const int n_nodes, const double* __restrict__ scales, const double reg_lambda, const double alpha,
    const double min_child_weight, const double max_delta_step, const double gamma, const double min_split_gain,
    const double* __restrict__ totals, i64* __restrict__ table)
{
    const Rules rules = {reg_lambda, alpha, min_child_weight, max_delta_step};
    __shared__ double red_total[BLOCK];
    __shared__ i64 red_cand[BLOCK];
    double best = -positive_infinity();
    i64 best_cand = -1;
    for (i64 c = threadIdx.x; c < 2 * n_bins_total; c += BLOCK)  // ascending: the first strictly larger wins
        if (totals[c] > best) { best = totals[c]; best_cand = c; }
    red_total[threadIdx.x] = best; red_cand[threadIdx.x] = best_cand;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            const double t = red_total[threadIdx.x + stride];
            const i64 c = red_cand[threadIdx.x + stride];
            const i64 mine = red_cand[threadIdx.x];
            if (c >= 0 && (mine < 0 || t > red_total[threadIdx.x] || (t == red_total[threadIdx.x] && c < mine))) {
                red_total[threadIdx.x] = t; red_cand[threadIdx.x] = c;
            }
        }
        __syncthreads();
    }
    best = red_total[0]; best_cand = red_cand[0];
    const bool make = (best > min_split_gain) && (best >= gamma);
    const i64 best_bin = best_cand / 2;
    const int direction = (int)(best_cand % 2);
    const int feature = best_cand >= 0 ? feature_of_bin[best_bin] : 0;
    const i64 begin = bin_offsets[feature], end = bin_offsets[feature + 1];
    const double inverse_g = 1.0 / scales[0], inverse_h = 1.0 / scales[1];
    for (int node = threadIdx.x; node < n_nodes; node += BLOCK) {
        i64* row = table + (i64)node * TABLE_COLUMNS;
        const i64 node_g = node_sums[2 * node], node_h = node_sums[2 * node + 1];
        if (best_cand < 0) {
            for (int c = 0; c < 7; ++c) row[c] = 0;
            row[4] = __double_as_longlong(-positive_infinity());
            row[7] = node_g; row[8] = node_h;
            continue;
        }
        const i64* h_node = hist + (i64)node * n_bins_total * 2;
        i64 present_g = 0, present_h = 0, left_g = 0, left_h = 0;
        for (i64 b = begin; b < end; ++b) {
            present_g += h_node[2 * b]; present_h += h_node[2 * b + 1];
            if (b <= best_bin) { left_g += h_node[2 * b]; left_h += h_node[2 * b + 1]; }
        }
        left_g += direction * (node_g - present_g);
        left_h += direction * (node_h - present_h);
        const double node_gd = (double)node_g * inverse_g, node_hd = (double)node_h * inverse_h;
        const double gl = (double)left_g * inverse_g, hl = (double)left_h * inverse_h;
        const double score = (node_gain(gl, hl, rules) + node_gain(node_gd - gl, node_hd - hl, rules))
                             - node_gain(node_gd, node_hd, rules);
        row[0] = active[node] && make;
        row[1] = feature;
        row[2] = best_bin - begin;
        row[3] = direction;
        row[4] = __double_as_longlong(active[node] ? score : -positive_infinity());
        row[5] = left_g; row[6] = left_h;
        row[7] = node_g - left_g; row[8] = node_h - left_h;
    }
}

// ---- category-set splits (twin: split_loops.category_splits, merge_category_splits) ----

// A candidate's score from its left child's fixed-point sums (twin: split_loops._split_gain).
__device__ __forceinline__ double left_sums_gain(i64 sum_g, i64 sum_h, double inverse_g, double inverse_h,
                                                 double total_g, double total_h, double parent_gain,
                                                 double least_hessian, const Rules& r) {
    const double g_left = (double)sum_g * inverse_g, h_left = (double)sum_h * inverse_h;
    const double g_right = total_g - g_left, h_right = total_h - h_left;
    if (!(h_left >= least_hessian && h_right >= least_hessian)) return -positive_infinity();
    if (r.max_delta_step > 0.0 || r.alpha > 0.0) return (node_gain(g_left, h_left, r) + node_gain(g_right, h_right, r)) - parent_gain;
    return ((g_left * g_left) / (h_left + r.reg_lambda) + (g_right * g_right) / (h_right + r.reg_lambda)) - parent_gain;
}

// The best category-set split of one (node, categorical feature) pair, a block each (blockIdx.x
// the pair: node * n_categorical + k): the categories present in the node ordered by weight,
// ties by code (by code alone for a one-hot feature), then one thread scans as the twin does. With n_sort > 0 (a power of two, at
// least any feature's categories: the shared memory's room) the block sorts (weight, code) pairs
// of its feature's categories, padded to a power of two, in shared memory (bitonic; the absent
// categories and the padding last); else each thread ranks
// some categories against all in global memory (`keys`, `order`: scratch of max_categories a
// pair; O(K^2), for features too wide for shared memory). found: (kind, k or code, direction,
// left g, left h), kind -1 where there is no candidate; bits: n_words int64 words a pair.
extern "C" __global__ void __launch_bounds__(BLOCK) category_splits(
    const i64* __restrict__ hist, const i64* __restrict__ node_sums, const i64* __restrict__ bin_offsets,
    const long long n_bins_total, const int* __restrict__ features, const int n_categorical,
    const double* __restrict__ scales, const double reg_lambda, const double alpha, const double min_child_weight,
    const double max_delta_step, const bool* __restrict__ allowed, const int n_features, const int max_onehot,
    const int max_threshold, const int max_categories, const int n_words, double* __restrict__ keys,
    int* __restrict__ order, const int n_sort, double* __restrict__ found_gain, i64* __restrict__ found,
    i64* __restrict__ bits)
{
    extern __shared__ double sort_keys[];  // n_sort weights, then n_sort codes (with n_sort > 0)
    __shared__ int n_present;
    const Rules r{reg_lambda, alpha, min_child_weight, max_delta_step};
    const i64 item = blockIdx.x;
    const int node = (int)(item / n_categorical);
    const int feature = features[item % n_categorical];
    const i64 begin = bin_offsets[feature], end = bin_offsets[feature + 1];
    const int n_categories = (int)(end - begin);
    const i64* h = hist + ((i64)node * n_bins_total + begin) * 2;
    double* key = keys + item * max_categories;
    int* sorted = n_sort > 0 ? (int*)(sort_keys + n_sort) : order + item * max_categories;
    i64* out = found + item * 5;
    i64* set = bits + item * n_words;
    for (int w = threadIdx.x; w < n_words; w += BLOCK) set[w] = 0;
    if (threadIdx.x == 0) { n_present = 0; out[0] = -1; found_gain[item] = -positive_infinity(); }
    if (allowed && !allowed[(i64)node * n_features + feature]) return;
    const double inverse_g = 1.0 / scales[0], inverse_h = 1.0 / scales[1];
    const bool one_hot = n_categories < max_onehot;  // its categories in code order: every key 0
    int present_here = 0;
    if (n_sort > 0) {
        int width = 1;  // this feature's categories, padded to a power of two (at most n_sort)
        while (width < n_categories) width <<= 1;
        for (int i = threadIdx.x; i < width; i += BLOCK) {
            const bool present = i < n_categories && (h[2 * i] != 0 || h[2 * i + 1] != 0);
            // +0.0: a -0.0 weight sorts as 0.0, as in the twin; absent ones and padding after every code
            sort_keys[i] = !present ? positive_infinity() : one_hot ? 0.0
                           : node_weight((double)h[2 * i] * inverse_g, (double)h[2 * i + 1] * inverse_h, r) + 0.0;
            sorted[i] = present ? i : (1 << 30) + i;
            present_here += present;
        }
        if (present_here) atomicAdd(&n_present, present_here);
        __syncthreads();
        for (int size = 2; size <= width; size <<= 1) {
            for (int stride = size >> 1; stride > 0; stride >>= 1) {
                for (int i = threadIdx.x; i < width; i += BLOCK) {
                    const int other = i ^ stride;
                    if (other <= i) continue;
                    const bool after = sort_keys[i] > sort_keys[other]
                                       || (sort_keys[i] == sort_keys[other] && sorted[i] > sorted[other]);
                    if (after == ((i & size) == 0)) {  // out of this run's order (ascending where i & size is 0)
                        const double k = sort_keys[i]; sort_keys[i] = sort_keys[other]; sort_keys[other] = k;
                        const int c = sorted[i]; sorted[i] = sorted[other]; sorted[other] = c;
                    }
                }
                __syncthreads();
            }
        }
    } else {
        for (int c = threadIdx.x; c < n_categories; c += BLOCK) {  // +0.0: as above
            key[c] = one_hot ? 0.0
                     : node_weight((double)h[2 * c] * inverse_g, (double)h[2 * c + 1] * inverse_h, r) + 0.0;
        }
        __syncthreads();
        for (int c = threadIdx.x; c < n_categories; c += BLOCK) {
            if (h[2 * c] == 0 && h[2 * c + 1] == 0) continue;
            present_here += 1;
            int rank = 0;
            for (int o = 0; o < n_categories; ++o) {
                if (h[2 * o] == 0 && h[2 * o + 1] == 0) continue;
                rank += (key[o] < key[c]) || (key[o] == key[c] && o < c);
            }
            sorted[rank] = c;
        }
        if (present_here) atomicAdd(&n_present, present_here);
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    const int present = n_present;
    const i64 node_g = node_sums[2 * node], node_h = node_sums[2 * node + 1];
    i64 present_g = 0, present_h = 0;
    for (int c = 0; c < n_categories; ++c) { present_g += h[2 * c]; present_h += h[2 * c + 1]; }
    const i64 missing_g = node_g - present_g, missing_h = node_h - present_h;
    const int n_directions = (missing_g == 0 && missing_h == 0) ? 1 : 2;
    const double total_g = (double)node_g * inverse_g, total_h = (double)node_h * inverse_h;
    const double parent_gain = node_gain(total_g, total_h, r);
    const double least_hessian = inverse_h >= min_child_weight ? inverse_h : min_child_weight;
    // The twin's one scan: one category alone (kind 0), or the first k (kind 1) and last k (kind 2)
    // of the ranked categories, each with missing values right, then left.
    const int first_kind = one_hot ? 0 : 1, last_kind = one_hot ? 0 : 2;
    const int n_steps = one_hot ? present : min(present - 1, max_threshold);
    double best_gain = -positive_infinity();
    int best_kind = -1, best_at = 0, best_direction = 0;
    i64 best_g = 0, best_h = 0;
    for (int kind = first_kind; kind <= last_kind; ++kind) {
        i64 right_g = 0, right_h = 0;
        for (int step = 0; step < n_steps; ++step) {
            const int c = sorted[kind == 2 ? present - 1 - step : step];
            if (kind == 0) { right_g = 0; right_h = 0; }  // one category alone
            right_g += h[2 * c]; right_h += h[2 * c + 1];
            for (int d = 0; d < n_directions; ++d) {
                const i64 sum_g = present_g - right_g + d * missing_g, sum_h = present_h - right_h + d * missing_h;
                const double gain = left_sums_gain(sum_g, sum_h, inverse_g, inverse_h, total_g, total_h, parent_gain,
                                                   least_hessian, r);
                if (gain > best_gain || best_kind < 0) {
                    best_gain = gain > best_gain ? gain : best_gain;
                    best_kind = kind; best_at = step + 1; best_direction = d; best_g = sum_g; best_h = sum_h;
                }
            }
        }
    }
    for (int step = best_kind == 0 ? best_at - 1 : 0; step < best_at; ++step) {  // the set: its step's, or its steps'
        const int c = sorted[best_kind == 2 ? present - 1 - step : step];
        set[c >> 6] |= 1LL << (c & 63);
    }
    found_gain[item] = best_gain;
    out[0] = best_kind; out[1] = best_at; out[2] = best_direction; out[3] = best_g; out[4] = best_h;
}

// Each node's split table row (`table`, TABLE_COLUMNS + n_words int64 a row) from the numeric
// table `numeric` (TABLE_COLUMNS a row) and category_splits's: the first largest gain in
// feature order (twin: split_loops.merge_category_splits). One thread a node.
extern "C" __global__ void merge_category_splits(
    const i64* __restrict__ numeric, const int* __restrict__ features, const int n_categorical,
    const double* __restrict__ found_gain, const i64* __restrict__ found, const i64* __restrict__ bits,
    const i64* __restrict__ node_sums, const bool* __restrict__ active, const int n_nodes, const int n_words,
    const double gamma, const double min_split_gain, i64* __restrict__ table)
{
    const int node = blockIdx.x * blockDim.x + threadIdx.x;
    if (node >= n_nodes) return;
    const int width = TABLE_COLUMNS + n_words;
    i64* row = table + (i64)node * width;
    const i64* from = numeric + (i64)node * TABLE_COLUMNS;
    for (int c = 0; c < TABLE_COLUMNS; ++c) row[c] = from[c];
    for (int w = 0; w < n_words; ++w) row[TABLE_COLUMNS + w] = 0;
    i64 best = -1;
    for (int k = 0; k < n_categorical; ++k) {
        const i64 item = (i64)node * n_categorical + k;
        if (found[5 * item] >= 0 && (best < 0 || found_gain[item] > found_gain[best])) best = item;
    }
    if (best < 0) return;
    const double gain = active[node] ? found_gain[best] : -positive_infinity();
    const double numeric_gain = __longlong_as_double(row[4]);
    const int feature = features[best - (i64)node * n_categorical];
    if (!(gain > numeric_gain || (gain == numeric_gain && feature < row[1]))) return;
    row[0] = (gain > min_split_gain) && (gain >= gamma);
    row[1] = feature;
    row[2] = -1;
    row[3] = found[5 * best + 2];
    row[4] = __double_as_longlong(gain);
    row[5] = found[5 * best + 3];
    row[6] = found[5 * best + 4];
    row[7] = node_sums[2 * node] - found[5 * best + 3];
    row[8] = node_sums[2 * node + 1] - found[5 * best + 4];
    for (int w = 0; w < n_words; ++w) row[TABLE_COLUMNS + w] = bits[(i64)best * n_words + w];
}
