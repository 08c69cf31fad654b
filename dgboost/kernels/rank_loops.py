"""Learning to rank's compiled loops: the bodies of cpu.lambda_gradients and
cpu.rank_scores, a run a range of query groups; ranking.cu's kernels are their CUDA
twins, operation by operation (a block a group there, a thread a document).

A document's gradient is summed over its partners in the order of their places in the
model's ranking of the group, in float32, as XGBoost sums it; each pair is scored by both
its documents, so no two threads write one sum and the result depends on no schedule.
"""

from __future__ import annotations

import math

import numpy as np

from .loops import compiled, over_runs

#: The metric whose change a pair is weighted by (cpu.lambda_gradients' ``kind``).
NDCG, PAIRWISE, MAP = 0, 1, 2
#: rank_scores' metrics.
SCORE_NDCG, SCORE_MAP, SCORE_PRECISION = 0, 1, 2


@compiled
def _gain(label, exp_gain):
    """NDCG's gain of a relevance: ``2**label - 1`` (an integer label), or the label."""
    if exp_gain:
        return math.ldexp(1.0, int(label)) - 1.0
    return np.float64(label)


@compiled
def _pair(kind, high, low, high_place, low_place, score, label, exp_gain, normalise_scores, inv_ideal,
          discount, relevant, precision_sum, n_relevant, unbiased):
    """One pair's (lambda, hessian, cost) in float64, XGBoost's LambdaGrad: the documents at
    places ``high_place`` (the larger label) and ``low_place``; the cost (its loss, for the
    position bias) only where ``unbiased``."""
    difference = score[high] - score[low]  # float32, as the scores
    exponent = -difference
    if exponent > np.float32(88.7):
        exponent = np.float32(88.7)
    sigmoid = 1.0 / (math.exp(np.float64(exponent)) + 1.0)
    if kind == NDCG:
        gain_high, gain_low = _gain(label[high], exp_gain), _gain(label[low], exp_gain)
        disc_high, disc_low = discount[high_place], discount[low_place]
        delta = (gain_high * disc_high + gain_low * disc_low - gain_low * disc_high - gain_high * disc_low) * inv_ideal
    elif kind == MAP:
        first, second = min(high_place, low_place), max(high_place, low_place)
        label_first = label[high] if high_place < low_place else label[low]
        label_second = label[low] if high_place < low_place else label[high]
        rank_first, rank_second = np.float64(first + 1), np.float64(second + 1)
        n = relevant[first]
        m = relevant[second]
        between = precision_sum[second - 1] - precision_sum[first]
        if label_first < label_second:
            delta = (m / rank_second - (n + 1.0) / rank_first - between) / n_relevant
        else:
            delta = (n / rank_first - m / rank_second + between) / n_relevant
    else:
        delta = 1.0
    delta = abs(delta)
    if normalise_scores:
        delta = delta / (abs(np.float64(difference)) + 0.01)
    lam = (sigmoid - 1.0) * delta
    curvature = sigmoid * (1.0 - sigmoid)
    if curvature < 1e-16:
        curvature = 1e-16
    # log(1 / (1 - sigmoid)) written as log(1 + e**x) - x: finite however far apart the scores
    cost = (math.log1p(math.exp(np.float64(exponent))) - np.float64(exponent)) * delta if unbiased else 0.0
    return lam, curvature * delta * 2.0, cost


@over_runs
def lambda_gradients(run, n_runs, group_ptr, order, score, label, kind, top_k, exp_gain, score_normalization,
                     normalization, inv_ideal, discount, place, partner_ptr, partners, n_draws, group_scale, t_plus,
                     t_minus, partial, relevant, precision_sum, gpair, bias_costs):
    """The gradient pairs of the groups of run ``run`` (cpu.lambda_gradients says what
    each argument holds); ``partial``, ``relevant`` and ``precision_sum`` are scratch of
    one float64 a row."""
    n_groups = group_ptr.shape[0] - 1
    for group in range(n_groups * run // n_runs, n_groups * (run + 1) // n_runs):
        start, stop = group_ptr[group], group_ptr[group + 1]
        _group_gradients(start, stop - start, group, order, score, label, kind, top_k, exp_gain,
                         score_normalization, normalization, inv_ideal, discount, place, partner_ptr, partners,
                         n_draws, group_scale, t_plus, t_minus, partial, relevant, precision_sum, gpair, bias_costs)


@compiled
def _group_gradients(start, count, group, order, score, label, kind, top_k, exp_gain, score_normalization,
                     normalization, inv_ideal, discount, place, partner_ptr, partners, n_draws, group_scale, t_plus,
                     t_minus, partial, relevant, precision_sum, gpair, bias_costs):
    n_relevant = 0.0
    if kind == MAP:  # the model order's running relevant count and precision sum
        hits, total = 0.0, 0.0
        for p in range(count):
            y = np.float64(label[order[start + p]])
            hits += y
            total += y / np.float64(p + 1)
            relevant[start + p] = hits
            precision_sum[start + p] = total
        n_relevant = hits
    normalise_scores = score_normalization and score[order[start]] != score[order[start + count - 1]]
    topk = partner_ptr.shape[0] == 0
    n_bias = t_plus.shape[0]  # positions of the position bias (0: none)
    for p in range(count):
        row = order[start + p]
        gradient, hessian = np.float32(0), np.float32(0)
        own, cost_high, cost_low = 0.0, 0.0, 0.0
        # 'topk': the places before min(count, top_k), or all for a place among them; 'mean': the
        # row's partners (those it drew and those that drew it), by place, a partner drawn twice twice.
        n_partners = (count if p < top_k else min(top_k, count)) if topk else partner_ptr[row + 1] - partner_ptr[row]
        for e in range(n_partners):
            other = order[start + e] if topk else partners[partner_ptr[row] + e]
            q = e if topk else place[other]
            if q == p or label[row] == label[other]:
                continue
            is_high = label[row] > label[other]
            high, low = (row, other) if is_high else (other, row)
            high_place, low_place = (p, q) if is_high else (q, p)
            lam, hes, cost = _pair(kind, high, low, high_place, low_place, score, label, exp_gain, normalise_scores,
                                   inv_ideal[group], discount, relevant[start:], precision_sum[start:], n_relevant,
                                   n_bias > 0)
            # The position bias of unbiased LambdaMART, by the rows' places in the input (displayed) order.
            shown_high, shown_low = high - start, low - start
            tracked = n_bias > 0 and shown_high < n_bias and shown_low < n_bias
            if tracked and t_minus[shown_low] >= 1e-16 and t_plus[shown_high] >= 1e-16:
                lam = lam / (t_plus[shown_high] * t_minus[shown_low])
                hes = hes / (t_plus[shown_high] * t_minus[shown_low])
            pair_gradient, pair_hessian = np.float32(lam), np.float32(hes)
            if is_high:
                gradient = gradient + pair_gradient
                if tracked and t_minus[shown_low] >= 1e-16:
                    cost_high += cost / t_minus[shown_low]
            else:
                gradient = gradient - pair_gradient
                if tracked and t_plus[shown_high] >= 1e-16:
                    cost_low += cost / t_plus[shown_high]
            hessian = hessian + pair_hessian
            if p < q:
                own += -2.0 * np.float64(pair_gradient)
        gpair[row, 0] = gradient
        gpair[row, 1] = hessian
        partial[start + p] = own
        if n_bias > 0:  # a row's costs as the higher of its pairs (eq. 30), and as the lower (eq. 31)
            bias_costs[row, 0] = cost_high
            bias_costs[row, 1] = cost_low
    norm = 1.0
    if normalization:
        if topk:
            total = 0.0
            for p in range(count):
                total += partial[start + p]
            if total > 0:
                norm = math.log2(1.0 + total) / total
        else:
            norm = 1.0 / np.float64(n_draws)
    scale = norm * group_scale[group]
    for p in range(count):
        row = order[start + p]
        gpair[row, 0] = np.float32(np.float64(gpair[row, 0]) * scale)
        gpair[row, 1] = np.float32(np.float64(gpair[row, 1]) * scale)


@over_runs
def rank_scores(run, n_runs, metric, group_ptr, order, ideal, label, top_k, exp_gain, minus, discount, scores):
    """Each group's score of run ``run`` (cpu.rank_scores)."""
    n_groups = group_ptr.shape[0] - 1
    for group in range(n_groups * run // n_runs, n_groups * (run + 1) // n_runs):
        start, stop = group_ptr[group], group_ptr[group + 1]
        scores[group] = _group_score(metric, start, stop - start, order, ideal, label, top_k, exp_gain, minus,
                                     discount)


@compiled
def _group_score(metric, start, count, order, ideal, label, top_k, exp_gain, minus, discount):
    n = min(top_k, count)
    empty = 0.0 if minus else 1.0
    if metric == SCORE_NDCG:
        best = 0.0
        for p in range(n):
            best += discount[p] * _gain(label[ideal[start + p]], exp_gain)
        if not best > 0:
            return empty
        found = 0.0
        for p in range(n):
            found += discount[p] * _gain(label[order[start + p]], exp_gain)
        return min(1.0, found / best)
    if metric == SCORE_MAP:
        hits, total, n_relevant = 0.0, 0.0, 0.0
        for p in range(count):
            n_relevant += np.float64(label[order[start + p]])
        for p in range(n):
            y = np.float64(label[order[start + p]])
            hits += y
            total += hits / np.float64(p + 1) * y
        if not n_relevant > 0:
            return empty
        return min(1.0, total / min(n_relevant, np.float64(top_k)))
    found = 0.0
    for p in range(n):
        found += np.float64(label[order[start + p]])
    return min(1.0, found / np.float64(n))
