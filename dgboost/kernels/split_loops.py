"""Split evaluation's compiled loops (the bodies of cpu.evaluate_splits and
cpu.child_bounds), and the scalar gain and weight helpers they share; the machinery that
compiles and runs them is loops.py's (``@compiled``, ``@over_runs``)."""

from __future__ import annotations

import numpy as np

from .loops import compiled, over_runs


@compiled(inline=False)  # a call: split scoring needs it only with alpha or max_delta_step
def _node_gain(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """cpu.node_gains of one node (node_weights inside it), in the same float operations,
    for a node's finite sums. cpu.node_gains and cpu.node_weights stay the array programs
    of tree_record and the tests: change them together."""
    if hessian < min_child_weight or hessian <= 0:  # too light: the array program's mask
        return 0.0
    if max_delta_step > 0:
        weight = _weight(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
        return _gain_at(gradient, hessian, weight, reg_lambda, alpha)
    thresholded = _soft_threshold(gradient, alpha)
    return (thresholded * thresholded) / _denominator(hessian, reg_lambda)


@compiled
def _weight(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """cpu.node_weights of one node, in the same float operations: ``-T(G) / (H + lambda)``
    clipped to max_delta_step, 0 for a node too light."""
    if hessian < min_child_weight or hessian <= 0:
        return 0.0
    weight = -_soft_threshold(gradient, alpha) / _denominator(hessian, reg_lambda)
    if max_delta_step > 0:
        if weight < -max_delta_step:
            weight = -max_delta_step
        elif weight > max_delta_step:
            weight = max_delta_step
    return weight


@compiled
def _soft_threshold(gradient, alpha):
    if alpha == 0:
        return gradient
    sign = 1.0 if gradient > 0 else (-1.0 if gradient < 0 else 0.0)
    shrunk = abs(gradient) - alpha
    return sign * (shrunk if shrunk > 0.0 else 0.0)


@compiled
def _denominator(hessian, reg_lambda):
    denominator = hessian + reg_lambda
    return denominator if denominator > 0 else 1.0


@compiled
def _gain_at(gradient, hessian, weight, reg_lambda, alpha):
    """A node's gain at a given weight: ``-(2 G w + (H + lambda) w**2 + 2 alpha |w|)``."""
    return -(2.0 * gradient * weight + (hessian + reg_lambda) * (weight * weight) + 2.0 * alpha * abs(weight))


@compiled
def _clip(weight, lower, upper):
    """``weight`` within [lower, upper], by comparisons (so a -0.0 weight at a 0.0 bound stays
    -0.0, as on the GPU)."""
    return lower if weight < lower else (upper if weight > upper else weight)


@compiled
def _bounded_gain(gradient, hessian, lower, upper, reg_lambda, alpha, min_child_weight, max_delta_step):
    """A node's gain at its weight clipped to [lower, upper] (monotone constraints), 0 for a
    node too light."""
    if hessian < min_child_weight or hessian <= 0:
        return 0.0
    weight = _clip(_weight(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
    return _gain_at(gradient, hessian, weight, reg_lambda, alpha)


@compiled
def _missing_sums(hist, node, begin, end, node_gradient, node_hessian):
    """The fixed-point sums of ``node``'s rows missing the feature of bins [begin, end): its
    totals less those of the feature's bins."""
    present_gradient = np.int64(0)
    present_hessian = np.int64(0)
    for bin_idx in range(begin, end):
        present_gradient += hist[node, bin_idx, 0]
        present_hessian += hist[node, bin_idx, 1]
    return node_gradient - present_gradient, node_hessian - present_hessian


@compiled
def _split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian, total_gradient, total_hessian,
                parent_gain, least_hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """A candidate's score from its left child's fixed-point sums: the children's gains
    less the parent's, or -inf where a child is too light."""
    g_left = np.float64(sum_gradient) * inverse_gradient
    h_left = np.float64(sum_hessian) * inverse_hessian
    g_right = total_gradient - g_left
    h_right = total_hessian - h_left
    if not (h_left >= least_hessian and h_right >= least_hessian):
        return -np.inf
    if max_delta_step > 0 or alpha > 0:
        return (_node_gain(g_left, h_left, reg_lambda, alpha, min_child_weight, max_delta_step)
                + _node_gain(g_right, h_right, reg_lambda, alpha, min_child_weight, max_delta_step)) - parent_gain
    return (g_left * g_left) / (h_left + reg_lambda) + (g_right * g_right) / (h_right + reg_lambda) - parent_gain


@over_runs
def splits(run, n_runs, hist, node_sums, bin_offsets, scales, rules, allowed, monotone, bounds, n_groups,
           found_gain, found):
    """The split table rows of the nodes (see cpu.evaluate_splits); ``rules``: float64
    (reg_lambda, alpha, min_child_weight, max_delta_step, gamma, min_split_gain);
    ``allowed``, ``monotone`` and ``bounds`` as evaluate_splits takes them, or None.

    Each node's features are cut into ``n_groups`` equal groups, and the (node, group)
    pairs into ``n_runs`` runs, this call's ``run`` of them: a level of few nodes (the
    root) is spread over the threads too. A group's best candidate goes to
    ``found_gain`` and ``found`` (rows ``node * n_groups + group``, see _group_best);
    then node_best, on the calling thread, takes each node's groups in order, a later
    group winning only with a larger gain. Per node and feature: the feature's total,
    so its missing sums; then a prefix scan of its bins in int64 (per-feature sums stay under 2**52, see
    fixed_point.py, so they and their float64 images are exact), each prefix scored
    with missing values right, then left (left only where the feature has missing
    values: without them both score the same and right wins the tie). The best is the
    first largest gain in (feature, bin, direction) order, whatever the groups. A NaN
    gain (lambda or alpha infinite, with max_delta_step) makes the node's gain the
    first NaN and its candidate the last bin, missing left, as the array program this
    loop replaced chose (numpy's max, then the first candidate equal to it: none).
    """
    n_items = hist.shape[0] * n_groups
    for item in range(n_items * run // n_runs, n_items * (run + 1) // n_runs):
        _group_best(hist, node_sums, bin_offsets, scales, rules, allowed, monotone, bounds, item // n_groups,
                    item % n_groups, n_groups, found_gain[item], found[item])


@compiled(inline=False)  # a call a (node, group): inlined into splits, numba took 1.5 s more to compile it
def _group_best(hist, node_sums, bin_offsets, scales, rules, allowed, monotone, bounds, node, group, n_groups,
                found_gain, found):
    """The first best candidate of ``node`` among the allowed features of ``group``:
    ``found_gain`` its gain and the first NaN gain (NaN itself where none), ``found`` its
    bin (-1 where the group has no allowed feature with bins), direction, left gradient
    and hessian sums, and whether a NaN gain was seen. Where no candidate has a gain above
    -inf, the first candidate (missing right) is the group's, at -inf.

    With ``monotone`` (int8 by feature, or None) a candidate is scored at its children's
    weights clipped to the node's ``bounds`` (XGBoost's rule), and one whose left weight
    lies above its right where the feature must increase (below where it must decrease)
    scores -inf."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    n_features = bin_offsets.shape[0] - 1
    (inverse_gradient, inverse_hessian, least_hessian, node_gradient, node_hessian, total_gradient,
     total_hessian) = _node_terms(node_sums, node, scales, min_child_weight)
    lower, upper = -np.inf, np.inf
    if bounds is not None:
        lower, upper = bounds[node, 0], bounds[node, 1]
    if monotone is None:
        parent_gain = _node_gain(total_gradient, total_hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
    else:
        parent_gain = _bounded_gain(total_gradient, total_hessian, lower, upper, reg_lambda, alpha,
                                    min_child_weight, max_delta_step)
    best_gain = -np.inf
    best_bin = -1
    best_direction = 0
    left_gradient = np.int64(0)
    left_hessian = np.int64(0)
    seen_nan = False
    nan_gain = np.nan  # the first NaN gain
    for feature in range(n_features * group // n_groups, n_features * (group + 1) // n_groups):
        if allowed is not None and not allowed[node, feature]:
            continue
        begin = bin_offsets[feature]
        end = bin_offsets[feature + 1]
        constraint = 0 if monotone is None else monotone[feature]
        missing_gradient, missing_hessian = _missing_sums(hist, node, begin, end, node_gradient, node_hessian)
        n_directions = 1 if missing_gradient == 0 and missing_hessian == 0 else 2
        prefix_gradient = np.int64(0)
        prefix_hessian = np.int64(0)
        for bin_idx in range(begin, end):
            prefix_gradient += hist[node, bin_idx, 0]
            prefix_hessian += hist[node, bin_idx, 1]
            for direction in range(n_directions):  # missing right, then missing left
                sum_gradient = prefix_gradient + direction * missing_gradient
                sum_hessian = prefix_hessian + direction * missing_hessian
                if monotone is None:
                    gain = _split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian,
                                       total_gradient, total_hessian, parent_gain, least_hessian, reg_lambda, alpha,
                                       min_child_weight, max_delta_step)
                else:
                    gain = _monotone_split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian,
                                                total_gradient, total_hessian, parent_gain, least_hessian, lower,
                                                upper, constraint, reg_lambda, alpha, min_child_weight,
                                                max_delta_step)
                if gain > best_gain or best_bin < 0:  # the first candidate is the default
                    best_gain = gain if gain > best_gain else best_gain
                    best_bin = bin_idx
                    best_direction = direction
                    left_gradient = sum_gradient
                    left_hessian = sum_hessian
                if np.isnan(gain) and not seen_nan:
                    seen_nan = True
                    nan_gain = gain
    found_gain[0] = best_gain
    found_gain[1] = nan_gain
    found[0] = best_bin
    found[1] = best_direction
    found[2] = left_gradient
    found[3] = left_hessian
    found[4] = seen_nan


@compiled
def _node_terms(node_sums, node, scales, min_child_weight):
    """What scoring a node's candidates starts from: the fixed-point scales' inverses, the least
    hessian a child may have, the node's fixed-point sums and their real values."""
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    # Hessians are multiples of 1 / scale, so "h > 0 and h >= min_child_weight" is one test.
    least_hessian = inverse_hessian if inverse_hessian >= min_child_weight else min_child_weight
    node_gradient = node_sums[node, 0]
    node_hessian = node_sums[node, 1]
    return (inverse_gradient, inverse_hessian, least_hessian, node_gradient, node_hessian,
            np.float64(node_gradient) * inverse_gradient, np.float64(node_hessian) * inverse_hessian)


@compiled
def _monotone_split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian, total_gradient,
                         total_hessian, parent_gain, least_hessian, lower, upper, constraint, reg_lambda, alpha,
                         min_child_weight, max_delta_step):
    """_split_gain under monotone constraints: the children's gains at their weights clipped
    to [lower, upper], less the parent's (likewise clipped); -inf where a child is too light
    or the weights go against ``constraint`` (1: left <= right, -1: left >= right)."""
    g_left = np.float64(sum_gradient) * inverse_gradient
    h_left = np.float64(sum_hessian) * inverse_hessian
    g_right = total_gradient - g_left
    h_right = total_hessian - h_left
    if not (h_left >= least_hessian and h_right >= least_hessian):
        return -np.inf
    w_left = _clip(_weight(g_left, h_left, reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
    w_right = _clip(_weight(g_right, h_right, reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
    if (constraint > 0 and w_left > w_right) or (constraint < 0 and w_left < w_right):
        return -np.inf
    return (_gain_at(g_left, h_left, w_left, reg_lambda, alpha)
            + _gain_at(g_right, h_right, w_right, reg_lambda, alpha)) - parent_gain


@compiled
def node_best(node_sums, active, feature_of_bin, bin_offsets, rules, n_groups, found_gain, found, table, gains):
    """Each node's split table row from its groups' best candidates (see ``splits``), and
    ``gains[node]`` its gain. A node with no allowed feature with bins gets no split:
    feature 0, bin 0, missing right, gain -inf, every row right."""
    gamma, min_split_gain = rules[4], rules[5]
    n_bins_total = feature_of_bin.shape[0]
    for node in range(node_sums.shape[0]):
        node_gradient = node_sums[node, 0]
        node_hessian = node_sums[node, 1]
        best = -1
        seen_nan = False
        nan_gain = np.nan
        for item in range(node * n_groups, (node + 1) * n_groups):
            if found[item, 0] >= 0 and (best < 0 or found_gain[item, 0] > found_gain[best, 0]):
                best = item
            if found[item, 4] != 0 and not seen_nan:
                seen_nan = True
                nan_gain = found_gain[item, 1]
        if best < 0:
            table[node, 0:5] = 0
            table[node, 5] = 0
            table[node, 6] = 0
            table[node, 7] = node_gradient
            table[node, 8] = node_hessian
            gains[node] = -np.inf
            continue
        best_gain = found_gain[best, 0]
        best_bin = found[best, 0]
        best_direction = found[best, 1]
        left_gradient = found[best, 2]
        left_hessian = found[best, 3]
        if seen_nan:  # the last bin's prefix plus its feature's missing sums: the whole node
            best_gain = nan_gain
            best_bin = n_bins_total - 1
            best_direction = 1
            left_gradient = node_gradient
            left_hessian = node_hessian
        if not active[node]:
            best_gain = -np.inf
        best_feature = feature_of_bin[best_bin]
        table[node, 0] = best_gain > min_split_gain and best_gain >= gamma
        table[node, 1] = best_feature
        table[node, 2] = best_bin - bin_offsets[best_feature]
        table[node, 3] = best_direction
        table[node, 5] = left_gradient
        table[node, 6] = left_hessian
        table[node, 7] = node_gradient - left_gradient
        table[node, 8] = node_hessian - left_hessian
        gains[node] = best_gain


@compiled
def child_bounds(table, slot_of_rank, n_split, bounds, monotone, scales, rules, child):
    """The next level's weight bounds (see cpu.child_bounds) into ``child`` (2 n_ranks, 2):
    each splitting parent's children inherit its [lower, upper]; where its feature is
    constrained, the mean of the children's weights (clipped to the parent's bounds, as
    split evaluation scored them) caps the child that must stay below it and floors the
    other. Padding ranks (from ``n_split`` on) get no bounds."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    for rank in range(slot_of_rank.shape[0]):
        left, right = 2 * rank, 2 * rank + 1
        if rank >= n_split:
            child[left, 0] = child[right, 0] = -np.inf
            child[left, 1] = child[right, 1] = np.inf
            continue
        slot = slot_of_rank[rank]
        lower, upper = bounds[slot, 0], bounds[slot, 1]
        child[left, 0] = child[right, 0] = lower
        child[left, 1] = child[right, 1] = upper
        constraint = monotone[table[slot, 1]]
        if constraint == 0:
            continue
        w_left = _clip(_weight(np.float64(table[slot, 5]) * inverse_gradient, np.float64(table[slot, 6]) * inverse_hessian,
                               reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
        w_right = _clip(_weight(np.float64(table[slot, 7]) * inverse_gradient,
                                np.float64(table[slot, 8]) * inverse_hessian, reg_lambda, alpha, min_child_weight,
                                max_delta_step), lower, upper)
        middle = (w_left + w_right) / 2.0
        if constraint > 0:
            child[left, 1] = middle
            child[right, 0] = middle
        else:
            child[left, 0] = middle
            child[right, 1] = middle


@over_runs
def level_candidates(run, n_runs, hist, node_sums, active, bin_offsets, scales, rules, allowed, totals):
    """Symmetric trees' split scores (see cpu.evaluate_level_split), run ``run`` of ``n_runs``
    equal runs of the features: into ``totals`` (n_bins_total, 2) float64, for each
    candidate (bin, direction: missing right, then left) of the run's features, the sum over
    the level's active nodes, in node order from 0.0, of each node's score: its children's
    gains less its own, every gain that of node_gains (0 for a node too light). A feature
    not ``allowed`` (bool by feature, or None) scores -inf."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    n_features = bin_offsets.shape[0] - 1
    for feature in range(n_features * run // n_runs, n_features * (run + 1) // n_runs):
        begin, end = bin_offsets[feature], bin_offsets[feature + 1]
        score = -np.inf if allowed is not None and not allowed[feature] else 0.0
        for bin_idx in range(begin, end):
            totals[bin_idx, 0] = score
            totals[bin_idx, 1] = score
        if score != 0.0:
            continue
        for node in range(hist.shape[0]):
            if not active[node]:
                continue
            node_gradient, node_hessian = node_sums[node, 0], node_sums[node, 1]
            total_gradient = np.float64(node_gradient) * inverse_gradient
            total_hessian = np.float64(node_hessian) * inverse_hessian
            parent = _node_gain(total_gradient, total_hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
            missing_gradient, missing_hessian = _missing_sums(hist, node, begin, end, node_gradient, node_hessian)
            prefix_gradient = np.int64(0)
            prefix_hessian = np.int64(0)
            for bin_idx in range(begin, end):
                prefix_gradient += hist[node, bin_idx, 0]
                prefix_hessian += hist[node, bin_idx, 1]
                for direction in range(2):
                    g_left = np.float64(prefix_gradient + direction * missing_gradient) * inverse_gradient
                    h_left = np.float64(prefix_hessian + direction * missing_hessian) * inverse_hessian
                    totals[bin_idx, direction] += (
                        _node_gain(g_left, h_left, reg_lambda, alpha, min_child_weight, max_delta_step)
                        + _node_gain(total_gradient - g_left, total_hessian - h_left, reg_lambda, alpha,
                                     min_child_weight, max_delta_step)) - parent


@compiled
def level_table(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, totals, table, gains):
    """The level's split table from level_candidates's ``totals``: the first candidate of the
    largest total (in (bin, direction) order; NaN totals never win) is every active node's
    split, made where the total exceeds min_split_gain and gamma; each row holds its node's
    own sums at it and, in ``gains``, its node's own score. With no candidate above -inf, no
    node splits: feature 0, bin 0, missing right, every row right, gain -inf."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    gamma, min_split_gain = rules[4], rules[5]
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    best = -1
    best_total = -np.inf
    for candidate in range(2 * totals.shape[0]):
        total = totals[candidate // 2, candidate % 2]
        if total > best_total:
            best, best_total = candidate, total
    make = best_total > min_split_gain and best_total >= gamma
    best_bin, direction = best // 2, best % 2
    feature = feature_of_bin[best_bin] if best >= 0 else 0
    begin = bin_offsets[feature]
    for node in range(node_sums.shape[0]):
        node_gradient, node_hessian = node_sums[node, 0], node_sums[node, 1]
        if best < 0:
            table[node, 0:7] = 0
            table[node, 7] = node_gradient
            table[node, 8] = node_hessian
            gains[node] = -np.inf
            continue
        present_gradient = np.int64(0)
        present_hessian = np.int64(0)
        left_gradient = np.int64(0)
        left_hessian = np.int64(0)
        for bin_idx in range(begin, bin_offsets[feature + 1]):
            present_gradient += hist[node, bin_idx, 0]
            present_hessian += hist[node, bin_idx, 1]
            if bin_idx <= best_bin:
                left_gradient += hist[node, bin_idx, 0]
                left_hessian += hist[node, bin_idx, 1]
        left_gradient += direction * (node_gradient - present_gradient)
        left_hessian += direction * (node_hessian - present_hessian)
        total_gradient = np.float64(node_gradient) * inverse_gradient
        total_hessian = np.float64(node_hessian) * inverse_hessian
        g_left = np.float64(left_gradient) * inverse_gradient
        h_left = np.float64(left_hessian) * inverse_hessian
        parent = _node_gain(total_gradient, total_hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
        score = (_node_gain(g_left, h_left, reg_lambda, alpha, min_child_weight, max_delta_step)
                 + _node_gain(total_gradient - g_left, total_hessian - h_left, reg_lambda, alpha, min_child_weight,
                              max_delta_step)) - parent
        table[node, 0] = active[node] and make
        table[node, 1] = feature
        table[node, 2] = best_bin - begin
        table[node, 3] = direction
        table[node, 5] = left_gradient
        table[node, 6] = left_hessian
        table[node, 7] = node_gradient - left_gradient
        table[node, 8] = node_hessian - left_hessian
        gains[node] = score if active[node] else -np.inf


@over_runs
def category_splits(run, n_runs, hist, node_sums, bin_offsets, features, scales, rules, allowed, max_onehot,
                    max_threshold, found_gain, found, found_bits):
    """The best category-set split of each (node, categorical feature) pair (see
    cpu.evaluate_splits), run ``run`` of ``n_runs`` equal runs of the pairs, pair ``node *
    len(features) + k`` for the node's ``k``-th categorical feature ``features[k]``: into
    ``found_gain`` its gain, ``found`` (kind, k or code, direction, left gradient, left hessian),
    kind -1 where the pair has no candidate, and ``found_bits`` the categories sent right."""
    n_features = features.shape[0]
    n_items = hist.shape[0] * n_features
    for item in range(n_items * run // n_runs, n_items * (run + 1) // n_runs):
        node = item // n_features
        feature = features[item % n_features]
        found[item, 0] = -1
        found_gain[item] = -np.inf
        for word in range(found_bits.shape[1]):
            found_bits[item, word] = 0
        if allowed is not None and not allowed[node, feature]:
            continue
        _category_best(hist, node_sums, bin_offsets[feature], bin_offsets[feature + 1], node, scales, rules,
                       max_onehot, max_threshold, found_gain[item:item + 1], found[item], found_bits[item])


@compiled(inline=False)
def _category_best(hist, node_sums, begin, end, node, scales, rules, max_onehot, max_threshold, found_gain, found,
                   bits):
    """One (node, categorical feature)'s best split, its categories the bins [begin, end) (see
    category_splits). Categories without rows in the node take no part (they go left). Fewer
    than ``max_onehot`` categories: each category alone right (kind 0), in code order. Else the
    categories ordered by weight (node_weights of their sums; ties by code), and the sets of the
    first ``k`` (kind 1) and of the last ``k`` (kind 2) sent right, ``k`` up to ``max_threshold``
    and below the categories present. Each with missing values right, then left (left only where
    the node has missing values); the first of the largest gain wins. ``found``: (kind, its step
    k from 1, direction, left gradient, left hessian)."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    (inverse_gradient, inverse_hessian, least_hessian, node_gradient, node_hessian, total_gradient,
     total_hessian) = _node_terms(node_sums, node, scales, min_child_weight)
    parent_gain = _node_gain(total_gradient, total_hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
    missing_gradient, missing_hessian = _missing_sums(hist, node, begin, end, node_gradient, node_hessian)
    present_gradient = node_gradient - missing_gradient
    present_hessian = node_hessian - missing_hessian
    n_directions = 1 if missing_gradient == 0 and missing_hessian == 0 else 2
    n_categories = end - begin
    ranked = np.empty(n_categories, np.int64)  # the categories present, ascending, then as scanned
    n_present = 0
    for code in range(n_categories):
        if hist[node, begin + code, 0] != 0 or hist[node, begin + code, 1] != 0:
            ranked[n_present] = code
            n_present += 1
    if n_categories < max_onehot:
        first_kind, last_kind, n_steps = 0, 0, n_present
    else:
        keys = np.empty(n_present, np.float64)
        for index in range(n_present):
            keys[index] = _weight(np.float64(hist[node, begin + ranked[index], 0]) * inverse_gradient,
                                  np.float64(hist[node, begin + ranked[index], 1]) * inverse_hessian, reg_lambda,
                                  alpha, min_child_weight, max_delta_step) + 0.0  # -0.0 as 0.0, as on the GPU
        ranked[:n_present] = ranked[:n_present][np.argsort(keys, kind="mergesort")]  # stable: ties in code order
        first_kind, last_kind, n_steps = 1, 2, min(n_present - 1, max_threshold)
    best_gain = -np.inf
    best_kind = -1
    best_at = 0
    best_direction = 0
    best_gradient = np.int64(0)
    best_hessian = np.int64(0)
    for kind in range(first_kind, last_kind + 1):
        right_gradient = np.int64(0)
        right_hessian = np.int64(0)
        for step in range(n_steps):
            code = ranked[n_present - 1 - step] if kind == 2 else ranked[step]
            if kind == 0:  # one category alone
                right_gradient = np.int64(0)
                right_hessian = np.int64(0)
            right_gradient += hist[node, begin + code, 0]
            right_hessian += hist[node, begin + code, 1]
            for direction in range(n_directions):  # missing right, then missing left
                sum_gradient = present_gradient - right_gradient + direction * missing_gradient
                sum_hessian = present_hessian - right_hessian + direction * missing_hessian
                gain = _split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian, total_gradient,
                                   total_hessian, parent_gain, least_hessian, reg_lambda, alpha, min_child_weight,
                                   max_delta_step)
                if gain > best_gain or best_kind < 0:
                    best_gain = gain if gain > best_gain else best_gain
                    best_kind, best_at, best_direction = kind, step + 1, direction
                    best_gradient, best_hessian = sum_gradient, sum_hessian
    for step in range(best_at - 1 if best_kind == 0 else 0, best_at):  # the set: its step's, or its steps'
        code = ranked[n_present - 1 - step] if best_kind == 2 else ranked[step]
        bits[code >> 6] |= np.int64(1) << (code & 63)
    found_gain[0] = best_gain
    found[0] = best_kind
    found[1] = best_at
    found[2] = best_direction
    found[3] = best_gradient
    found[4] = best_hessian


@compiled
def merge_category_splits(features, found_gain, found, found_bits, node_sums, active, rules, table, gains):
    """Each node's split table row (``table``, its category bits from column 9) and ``gains``:
    the best of its numeric split (already there) and its categorical features' (category_splits's,
    in feature order), the first largest gain in feature order winning."""
    gamma, min_split_gain = rules[4], rules[5]
    n_features = features.shape[0]
    for node in range(table.shape[0]):
        best = -1
        for k in range(n_features):
            item = node * n_features + k
            if found[item, 0] >= 0 and (best < 0 or found_gain[item] > found_gain[best]):
                best = item
        if best < 0:
            continue
        gain = found_gain[best] if active[node] else -np.inf
        feature = features[best - node * n_features]
        if not (gain > gains[node] or (gain == gains[node] and feature < table[node, 1])):
            continue
        table[node, 0] = gain > min_split_gain and gain >= gamma
        table[node, 1] = feature
        table[node, 2] = -1  # a category-set split
        table[node, 3] = found[best, 2]
        table[node, 5] = found[best, 3]
        table[node, 6] = found[best, 4]
        table[node, 7] = node_sums[node, 0] - found[best, 3]
        table[node, 8] = node_sums[node, 1] - found[best, 4]
        for word in range(found_bits.shape[1]):
            table[node, 9 + word] = found_bits[best, word]
        gains[node] = gain
