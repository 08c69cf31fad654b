// Learning to rank (twins: rank_loops.lambda_gradients, rank_loops.rank_scores): a block a
// query group. lambda_gradients: a thread a document, which sums its pairs over its partners
// in the order of their places, in float32 as XGBoost does; one thread sums what the group
// needs in order (MAP's running sums, the lambdas' total), so the float64 sums are the
// twin's. Compiled with --fmad=false.
#include "common.cuh"

#define NDCG 0
#define PAIRWISE 1
#define MAP 2

__device__ __forceinline__ double gain_of(float label, bool exp_gain) {
    return exp_gain ? ldexp(1.0, (int)label) - 1.0 : (double)label;
}

// One pair's (lambda, hessian), the documents at places high_place (the larger label) and low_place.
__device__ void pair_terms(int kind, i64 high, i64 low, i64 high_place, i64 low_place,
                           const float* __restrict__ score, const float* __restrict__ label, bool exp_gain,
                           bool normalise_scores, double inv_ideal, const double* __restrict__ discount,
                           const double* __restrict__ relevant, const double* __restrict__ precision_sum,
                           double n_relevant, bool unbiased, double* lam, double* hes, double* cost) {
    const float difference = score[high] - score[low];
    float exponent = -difference;
    if (exponent > 88.7f) exponent = 88.7f;
    const double sigmoid = 1.0 / (exp((double)exponent) + 1.0);
    double delta;
    if (kind == NDCG) {
        const double gain_high = gain_of(label[high], exp_gain), gain_low = gain_of(label[low], exp_gain);
        const double disc_high = discount[high_place], disc_low = discount[low_place];
        delta = (gain_high * disc_high + gain_low * disc_low - gain_low * disc_high - gain_high * disc_low) * inv_ideal;
    } else if (kind == MAP) {
        const i64 first = min(high_place, low_place), second = max(high_place, low_place);
        const float label_first = high_place < low_place ? label[high] : label[low];
        const float label_second = high_place < low_place ? label[low] : label[high];
        const double rank_first = (double)(first + 1), rank_second = (double)(second + 1);
        const double n = relevant[first], m = relevant[second];
        const double between = precision_sum[second - 1] - precision_sum[first];
        if (label_first < label_second)
            delta = (m / rank_second - (n + 1.0) / rank_first - between) / n_relevant;
        else
            delta = (n / rank_first - m / rank_second + between) / n_relevant;
    } else {
        delta = 1.0;
    }
    delta = fabs(delta);
    if (normalise_scores) delta = delta / (fabs((double)difference) + 0.01);
    *lam = (sigmoid - 1.0) * delta;
    double curvature = sigmoid * (1.0 - sigmoid);
    if (curvature < 1e-16) curvature = 1e-16;
    *hes = curvature * delta * 2.0;
    // log(1 / (1 - sigmoid)) written as log(1 + e**x) - x: finite however far apart the scores
    *cost = unbiased ? (log1p(exp((double)exponent)) - (double)exponent) * delta : 0.0;
}

extern "C" __global__ void lambda_gradients(
    const i64* __restrict__ group_ptr, const i64* __restrict__ order, const float* __restrict__ score,
    const float* __restrict__ label, const int kind, const i64 top_k, const bool exp_gain,
    const bool score_normalization, const bool normalization, const double* __restrict__ inv_ideal,
    const double* __restrict__ discount, const i64* __restrict__ place, const i64* __restrict__ partner_ptr,
    const i64* __restrict__ partners, const bool topk, const int n_draws,
    const double* __restrict__ group_scale, const double* __restrict__ t_plus, const double* __restrict__ t_minus,
    const i64 n_bias, double* __restrict__ partial, double* __restrict__ relevant,
    double* __restrict__ precision_sum, float* __restrict__ gpair, double* __restrict__ bias_costs)
{
    const i64 group = blockIdx.x;
    const i64 start = group_ptr[group], count = group_ptr[group + 1] - start;
    __shared__ double n_relevant, norm;
    if (threadIdx.x == 0) {
        double hits = 0.0, total = 0.0;
        if (kind == MAP) {
            for (i64 p = 0; p < count; ++p) {
                const double y = (double)label[order[start + p]];
                hits += y;
                total += y / (double)(p + 1);
                relevant[start + p] = hits;
                precision_sum[start + p] = total;
            }
        }
        n_relevant = hits;
    }
    __syncthreads();
    const bool normalise_scores = score_normalization && score[order[start]] != score[order[start + count - 1]];
    for (i64 p = threadIdx.x; p < count; p += blockDim.x) {
        const i64 row = order[start + p];
        float gradient = 0.0f, hessian = 0.0f;
        double own = 0.0, cost_high = 0.0, cost_low = 0.0;
        // 'topk': the places before min(count, top_k), or all for a place among them; 'mean': the
        // row's partners (those it drew and those that drew it), by place, a partner drawn twice twice.
        const i64 n_partners = topk ? (p < top_k ? count : min(top_k, count)) : partner_ptr[row + 1] - partner_ptr[row];
        for (i64 e = 0; e < n_partners; ++e) {
            const i64 other = topk ? order[start + e] : partners[partner_ptr[row] + e];
            const i64 q = topk ? e : place[other];
            if (q == p || label[row] == label[other]) continue;
            double lam, hes, cost;
            const bool high = label[row] > label[other];
            const i64 high_row = high ? row : other, low_row = high ? other : row;
            pair_terms(kind, high_row, low_row, high ? p : q, high ? q : p, score, label, exp_gain, normalise_scores,
                       inv_ideal[group], discount, relevant + start, precision_sum + start, n_relevant, n_bias > 0,
                       &lam, &hes, &cost);
            // The position bias of unbiased LambdaMART, by the rows' places in the input (displayed) order.
            const i64 shown_high = high_row - start, shown_low = low_row - start;
            const bool tracked = n_bias > 0 && shown_high < n_bias && shown_low < n_bias;
            if (tracked && t_minus[shown_low] >= 1e-16 && t_plus[shown_high] >= 1e-16) {
                lam = lam / (t_plus[shown_high] * t_minus[shown_low]);
                hes = hes / (t_plus[shown_high] * t_minus[shown_low]);
            }
            const float pair_gradient = (float)lam, pair_hessian = (float)hes;
            if (high) {
                gradient = gradient + pair_gradient;
                if (tracked && t_minus[shown_low] >= 1e-16) cost_high += cost / t_minus[shown_low];
            } else {
                gradient = gradient - pair_gradient;
                if (tracked && t_plus[shown_high] >= 1e-16) cost_low += cost / t_plus[shown_high];
            }
            hessian = hessian + pair_hessian;
            if (p < q) own += -2.0 * (double)pair_gradient;
        }
        gpair[2 * row] = gradient;
        gpair[2 * row + 1] = hessian;
        partial[start + p] = own;
        if (n_bias > 0) {
            bias_costs[2 * row] = cost_high;
            bias_costs[2 * row + 1] = cost_low;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double scale = 1.0;
        if (normalization) {
            if (topk) {
                double total = 0.0;
                for (i64 p = 0; p < count; ++p) total += partial[start + p];
                if (total > 0) scale = log2(1.0 + total) / total;
            } else {
                scale = 1.0 / (double)n_draws;
            }
        }
        norm = scale * group_scale[group];
    }
    __syncthreads();
    for (i64 p = threadIdx.x; p < count; p += blockDim.x) {
        const i64 row = order[start + p];
        gpair[2 * row] = (float)((double)gpair[2 * row] * norm);
        gpair[2 * row + 1] = (float)((double)gpair[2 * row + 1] * norm);
    }
}

#define SCORE_NDCG 0
#define SCORE_MAP 1

// A thread a group: its metric over its first top_k places (rank_loops._group_score).
extern "C" __global__ void rank_scores(const int metric, const i64* __restrict__ group_ptr, const i64 n_groups,
                                       const i64* __restrict__ order, const i64* __restrict__ ideal,
                                       const float* __restrict__ label, const i64 top_k, const bool exp_gain,
                                       const bool minus, const double* __restrict__ discount,
                                       double* __restrict__ scores)
{
    const i64 group = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (group >= n_groups) return;
    const i64 start = group_ptr[group], count = group_ptr[group + 1] - start;
    const i64 n = min(top_k, count);
    const double empty = minus ? 0.0 : 1.0;
    double result;
    if (metric == SCORE_NDCG) {
        double best = 0.0, found = 0.0;
        for (i64 p = 0; p < n; ++p) best += discount[p] * gain_of(label[ideal[start + p]], exp_gain);
        if (!(best > 0)) {
            result = empty;
        } else {
            for (i64 p = 0; p < n; ++p) found += discount[p] * gain_of(label[order[start + p]], exp_gain);
            result = fmin(1.0, found / best);
        }
    } else if (metric == SCORE_MAP) {
        double hits = 0.0, total = 0.0, n_relevant = 0.0;
        for (i64 p = 0; p < count; ++p) n_relevant += (double)label[order[start + p]];
        for (i64 p = 0; p < n; ++p) {
            const double y = (double)label[order[start + p]];
            hits += y;
            total += hits / (double)(p + 1) * y;
        }
        result = n_relevant > 0 ? fmin(1.0, total / fmin(n_relevant, (double)top_k)) : empty;
    } else {
        double found = 0.0;
        for (i64 p = 0; p < n; ++p) found += (double)label[order[start + p]];
        result = fmin(1.0, found / (double)n);
    }
    scores[group] = result;
}
