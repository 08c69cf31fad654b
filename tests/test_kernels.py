"""Kernels: hand-computed exact cases, then properties on random data.

These run on numpy everywhere; tests/test_gpu.py runs the same checks on cupy.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dgboost.tree import histogram
from dgboost.kernels import (MIN_SPLIT_GAIN, SPLIT_TABLE_COLUMNS, Regularisation, build_histograms, evaluate_splits,
                             next_frontier, node_gains, node_weights, number_children, partition_rows, place_rows,
                             quantise_and_pack, route_rows)
from dgboost.tree.split import SplitTable

NO_REG = Regularisation(reg_lambda=0.0, alpha=0.0, min_child_weight=0.0, max_delta_step=0.0, gamma=0.0)


def _packed(bins, missing_symbol=3, bits=2):
    """Pack small bin matrices exactly: cuts at k + 0.5."""
    bins = np.asarray(bins)
    n_features = bins.shape[1]
    X = np.where(bins == missing_symbol, np.nan, bins).astype(np.float32)
    cuts = np.tile(np.arange(missing_symbol - 1, dtype=np.float32) + 0.5, n_features)
    offsets = (np.arange(n_features + 1) * (missing_symbol - 1)).tolist()
    cpw = 32 // bits
    return quantise_and_pack(X, cuts, offsets, bits, cpw, -(-n_features // cpw), missing_symbol)


def grouped(row_slot, n_slots):
    """(ridx, seg_begin, seg_end) holding the rows of each slot; -1 rows are left out."""
    row_slot = np.asarray(row_slot, np.int64)
    ridx = np.argsort(np.where(row_slot < 0, n_slots, row_slot), kind="stable").astype(np.int32)
    counts = np.bincount(row_slot[row_slot >= 0], minlength=n_slots)
    end = np.cumsum(counts).astype(np.int32)
    return ridx, (end - counts).astype(np.int32), end


def _hist(packed, bin_offsets, gpair, row_slot, n_slots, n_features=2, missing_symbol=3, bits=2):
    """Histograms of integer gradient pairs, exact in float32, at fixed-point scale 1."""
    pairs = np.asarray(gpair, np.float32)
    assert np.array_equal(pairs.astype(np.int64), np.asarray(gpair, np.int64)), "not exact in float32"
    return build_histograms(packed, bits, 32 // bits, n_features, missing_symbol,
                            np.asarray(bin_offsets, np.int64), pairs, np.ones(2), *grouped(row_slot, n_slots))


def _large_pairs(rng, n_rows, bits):
    """Integer pairs up to 2**bits in magnitude, exact in float32 (24 significant bits)."""
    return rng.integers(-2**23, 2**23, size=(n_rows, 2)) << (bits - 23)


def test_histogram_by_hand():
    # 4 rows, 2 features of 3 bins each; symbol 3 is missing.
    bins = [[0, 2], [1, 3], [0, 1], [2, 2]]
    gpair = [[1, 10], [2, 20], [4, 40], [8, 80]]
    hist = _hist(_packed(bins), [0, 3, 6], gpair, [0, 0, 1, 0], n_slots=2)
    # slot 0 holds rows 0, 1, 3; slot 1 holds row 2.
    expected_g = [[1 + 0, 2, 8, 0, 0, 1 + 8], [4, 0, 0, 0, 4, 0]]
    np.testing.assert_array_equal(hist[..., 0], expected_g)
    np.testing.assert_array_equal(hist[..., 1], np.array(expected_g) * 10)


def test_skipped_rows_and_missing_cells_add_nothing():
    hist = _hist(_packed([[3, 3], [0, 0]]), [0, 3, 6], [[5, 5], [7, 7]], [0, -1], n_slots=1)
    assert hist.sum() == 0


def test_gain_and_weight_by_hand():
    rules = Regularisation(reg_lambda=1.0, alpha=0.0, min_child_weight=0.0, max_delta_step=0.0, gamma=0.0)
    g, h = np.array([3.0, -2.0]), np.array([2.0, 4.0])
    np.testing.assert_allclose(node_gains(g, h, rules), [9 / 3, 4 / 5])
    np.testing.assert_allclose(node_weights(g, h, rules), [-1.0, 0.4])
    l1 = rules._replace(alpha=1.0)  # soft threshold: |G| - alpha
    np.testing.assert_allclose(node_gains(g, h, l1), [4 / 3, 1 / 5])
    np.testing.assert_allclose(node_weights(g, h, l1), [-2 / 3, 0.2])
    clipped = rules._replace(max_delta_step=0.5)  # w clipped to -0.5: -(2 G w + (H + l) w^2)
    np.testing.assert_allclose(node_weights(g, h, clipped), [-0.5, 0.4])
    np.testing.assert_allclose(node_gains(g, h, clipped), [-(2 * 3 * -0.5 + 3 * 0.25), 4 / 5])
    both = rules._replace(max_delta_step=0.5, alpha=1.0)  # w = -T(3)/3 = -2/3, clipped to -0.5
    np.testing.assert_allclose(node_gains(g[:1], h[:1], both), [-(2 * 3 * -0.5 + 3 * 0.25 + 2 * 1.0 * 0.5)])
    heavy = rules._replace(min_child_weight=3.0)
    np.testing.assert_allclose(node_weights(g, h, heavy), [0.0, 0.4])


def _evaluate(hist, node_sums, rules=NO_REG, bin_offsets=(0, 3, 6), scales=(1.0, 1.0)):
    hist = np.asarray(hist, np.int64)
    bin_offsets = np.asarray(bin_offsets, np.int64)
    feature_of_bin = np.repeat(np.arange(len(bin_offsets) - 1), np.diff(bin_offsets)).astype(np.int32)
    return SplitTable(evaluate_splits(hist, np.asarray(node_sums, np.int64), np.ones(len(hist), bool),
                                             feature_of_bin, bin_offsets, np.asarray(scales, np.float64), rules))


def test_one_split_by_hand():
    # Feature 0 separates g = +1 (bins 0, 1) from g = -1 (bin 2); feature 1 is noise.
    hist = [[[2, 2], [2, 2], [-4, 4], [0, 3], [0, 3], [0, 2]]]
    out = _evaluate(hist, [[0, 8]])
    assert out.valid[0] and out.feature[0] == 0 and out.bin[0] == 1
    # gain = 4^2/4 + (-4)^2/4 - 0 = 8
    assert out.gain[0] == 8.0
    np.testing.assert_array_equal(out.left_sum[0], [4, 4])
    np.testing.assert_array_equal(out.right_sum[0], [-4, 4])


def test_missing_values_go_the_better_way():
    # Feature 0: bins hold g = +2 | -1 | -1, and missing rows (node total minus bins) hold g = +3.
    hist = [[[2, 1], [-1, 1], [-1, 1], [0, 0], [0, 0], [0, 0]]]
    out = _evaluate(hist, [[3, 5]])  # missing: g = 3, h = 2
    # Best: {bin 0, missing} vs {bins 1, 2}: missing goes left with bin 0.
    assert out.feature[0] == 0 and out.bin[0] == 0 and out.default_left[0]
    np.testing.assert_array_equal(out.left_sum[0], [5, 3])
    # Mirror the missing gradient: now missing belongs with bins 1 and 2, on the right.
    out = _evaluate(hist, [[-3, 5]])
    assert out.bin[0] == 0 and not out.default_left[0]
    np.testing.assert_array_equal(out.right_sum[0], [-5, 4])


def test_split_on_missingness_alone():
    # One bin of values (g = -1 each) and missing rows (g = +1 each): the only split
    # sends every value left and the missing values right.
    hist = [[[-2, 2], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0]]]
    out = _evaluate(hist, [[2, 6]], bin_offsets=(0, 1, 6))
    assert out.valid[0] and out.feature[0] == 0 and out.bin[0] == 0
    assert not out.default_left[0]


def test_ties_go_to_lowest_feature_then_bin_then_missing_right():
    # Two identical features: the split on feature 0 wins; no missing values, so both
    # directions tie and missing goes right (as XGBoost sends it).
    column = [[1, 1], [-1, 1], [0, 0]]
    out = _evaluate([column + column], [[0, 2]])
    assert out.feature[0] == 0 and out.bin[0] == 0 and not out.default_left[0]


def test_no_split_below_gamma_or_min_child_weight():
    hist = [[[2, 2], [2, 2], [-4, 4], [0, 3], [0, 3], [0, 2]]]
    assert not _evaluate(hist, [[0, 8]], NO_REG._replace(gamma=8.5)).valid[0]
    assert _evaluate(hist, [[0, 8]], NO_REG._replace(gamma=7.5)).valid[0]
    assert not _evaluate(hist, [[0, 8]], NO_REG._replace(min_child_weight=4.5)).valid[0]


def test_fixed_point_scale_is_applied():
    hist = [[[2, 2], [2, 2], [-4, 4], [0, 3], [0, 3], [0, 2]]]
    out = _evaluate(hist, [[0, 8]], scales=(2.0, 4.0))  # real g halves, real h quarters
    assert out.gain[0] == (2**2 / 1) * 2


def _naive_evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules):
    """The NumPy array program evaluate_splits was before it was compiled, kept as the
    reference of the compiled loop (all nodes at once rather than in chunks)."""
    prefix = np.cumsum(hist, axis=1)
    before = np.concatenate([np.zeros_like(prefix[:, :1]), prefix[:, :-1]], axis=1)
    start_sums = before[:, bin_offsets[:-1]]
    present_sums = prefix[:, bin_offsets[1:] - 1] - start_sums
    left_present = prefix - start_sums[:, feature_of_bin]
    missing = node_sums[:, None, :] - present_sums[:, feature_of_bin]
    inverse_scale = 1.0 / scales
    least_hessian = np.maximum(inverse_scale[1], rules.min_child_weight)
    n_nodes, n_bins = left_present.shape[:2]
    node_real = node_sums.astype(np.float64) * inverse_scale
    parent_gain = node_gains(node_real[:, 0], node_real[:, 1], rules)[:, None]

    def candidate_gain(g, h):
        if rules.max_delta_step > 0 or rules.alpha > 0:
            return node_gains(g, h, rules)
        return (g * g) / (h + rules.reg_lambda)

    directions = [left_present]
    if bool((missing != 0).any()):
        directions.append(left_present + missing)
    gains = []
    for left in directions:  # missing right, then missing left
        left = left.astype(np.float64) * inverse_scale
        g_left, h_left = left[..., 0], left[..., 1]
        g_right, h_right = node_real[:, None, 0] - g_left, node_real[:, None, 1] - h_left
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = candidate_gain(g_left, h_left) + candidate_gain(g_right, h_right)
        allowed = (h_left >= least_hessian) & (h_right >= least_hessian)
        gains.append(np.where(allowed, gain - parent_gain, -np.inf))
    gain = gains[0] if len(gains) == 1 else np.stack(gains, axis=2).reshape(n_nodes, -1)
    best_gain = gain.max(axis=1)
    candidate = np.arange(gain.shape[1], dtype=np.int32)
    best = np.where(gain == best_gain[:, None], candidate, gain.shape[1]).min(axis=1)
    if len(gains) == 1:
        best = best * 2
    best_gain = np.where(active, best_gain, -np.inf)
    best = np.minimum(best, 2 * n_bins - 1)
    best_bin, missing_left = best // 2, best % 2 == 1
    rows = np.arange(n_nodes)
    feature = feature_of_bin[best_bin]
    left_sum = left_present[rows, best_bin] + np.where(missing_left[:, None], missing[rows, best_bin], 0)
    valid = (best_gain > MIN_SPLIT_GAIN) & (best_gain >= rules.gamma)
    columns = [valid, feature, best_bin - bin_offsets[feature], missing_left, best_gain.view(np.int64)]
    return np.concatenate([np.stack([c.astype(np.int64) for c in columns], axis=1),
                           left_sum, node_sums - left_sum], axis=1)


def _random_level(rng, n_nodes, n_features):
    """Histograms of a level's nodes from random rows: small integer pairs (many exact ties)
    or, for some levels, pairs up to 2**30 (gains that round); features of 1 to 6 bins
    (every feature has one more bin than cuts), some copies of feature 0 (ties between
    features); some nodes without missing values, some inactive."""
    n_bins = rng.integers(1, 7, size=n_features)
    bin_offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    feature_of_bin = np.repeat(np.arange(n_features), n_bins).astype(np.int32)
    hist = np.zeros((n_nodes, bin_offsets[-1], 2), np.int64)
    node_sums = np.zeros((n_nodes, 2), np.int64)
    copies = [f for f in range(1, n_features) if n_bins[f] == n_bins[0] and rng.random() < 0.5]
    largest = rng.choice([3, 2**30], p=[0.7, 0.3])
    for node in range(n_nodes):
        n_rows = rng.integers(0, 40)
        pairs = np.stack([rng.integers(-largest, largest + 1, n_rows), rng.integers(0, largest, n_rows)], axis=1)
        node_sums[node] = pairs.sum(axis=0)
        missing_rate = rng.choice([0.0, 0.0, 0.2, 0.6])
        for feature in range(n_features):
            source = 0 if feature in copies else feature
            bins = np.random.default_rng([node, source]).integers(0, n_bins[feature], n_rows)
            present = np.random.default_rng([node, source, 1]).random(n_rows) >= missing_rate
            np.add.at(hist[node], bin_offsets[feature] + bins[present], pairs[present])
    return hist, node_sums, rng.random(n_nodes) < 0.85, feature_of_bin, bin_offsets


_SPLIT_RULES = [Regularisation(reg_lambda, alpha, min_child_weight, max_delta_step, gamma)
                for reg_lambda in (0.0, 1.0) for alpha in (0.0, 0.75) for min_child_weight in (0.0, 3.0)
                for max_delta_step in (0.0, 0.5) for gamma in (0.0, 0.5)]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 7), st.sampled_from(_SPLIT_RULES),
       st.sampled_from([(1.0, 1.0), (0.25, 2.0), (4.0, 0.5)]), st.randoms(use_true_random=False))
def test_split_table_equals_the_naive_reference(n_nodes, n_features, rules, scales, random):
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    level = *_random_level(rng, n_nodes, n_features), np.asarray(scales)
    expected = _naive_evaluate_splits(*level, rules)
    assert np.array_equal(evaluate_splits(*level, rules), expected)


@pytest.mark.parametrize("n_threads", [1, 2, 3, 7])
def test_split_table_does_not_depend_on_threads(n_threads, monkeypatch):
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(cpu, "_CANDIDATES_PER_THREAD", 1)
    rng = np.random.default_rng(n_threads)
    for rules in _SPLIT_RULES[::5]:
        for n_nodes in (1, 2, 13):  # fewer nodes than threads: each node's features in groups
            level = *_random_level(rng, n_nodes, 6), np.array([0.5, 2.0])
            assert np.array_equal(evaluate_splits(*level, rules), _naive_evaluate_splits(*level, rules))


@pytest.mark.parametrize("n_threads", [1, 3, 7])
def test_nan_split_gains_do_not_depend_on_threads(n_threads, monkeypatch):
    """The first NaN gain, in feature order, wins whatever feature group found it."""
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(cpu, "_CANDIDATES_PER_THREAD", 1)
    rules = Regularisation(reg_lambda=np.inf, alpha=0.0, min_child_weight=0.0, max_delta_step=0.5, gamma=0.0)
    level = *_random_level(np.random.default_rng(7), 2, 5), np.ones(2)
    with np.errstate(invalid="ignore"):
        expected = _naive_evaluate_splits(*level, rules)
    assert np.array_equal(evaluate_splits(*level, rules), expected)


def test_split_gains_that_are_nan_pick_the_last_bin_as_numpy_did():
    # lambda = inf with max_delta_step: every allowed candidate scores inf * 0 = NaN.
    rules = Regularisation(reg_lambda=np.inf, alpha=0.0, min_child_weight=0.0, max_delta_step=0.5, gamma=0.0)
    level = *_random_level(np.random.default_rng(5), 9, 4), np.ones(2)
    with np.errstate(invalid="ignore"):
        expected = _naive_evaluate_splits(*level, rules)
    assert np.array_equal(evaluate_splits(*level, rules), expected)
    active = level[2]
    assert np.isnan(SplitTable(expected).gain[active]).all() and not SplitTable(expected).valid.any()


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("n_rows", [0, 1, 8191, 50_001])
def test_gradient_reductions_equal_the_array_programs(n_rows, n_threads, monkeypatch):
    """The compiled max |pair| and fixed-point sums against the NumPy expressions they
    replaced, on runs of rows of any thread count; a NaN wins the max."""
    from dgboost.backend import column_max_abs
    from dgboost.fixed_point import fixed_column_sums
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1)
    rng = np.random.default_rng(n_rows)
    gpair = (rng.standard_normal((n_rows, 2)) * 1e3).astype(np.float32)
    gpair[:, 1] = np.abs(gpair[:, 1])
    scales = np.array([2.0**4, 2.0**-3])  # products with fractions: rint rounds them
    bounds = column_max_abs(gpair).astype(np.float64) if n_rows else np.zeros(2)
    assert np.array_equal(cpu.gradient_bounds(gpair), bounds)
    assert np.array_equal(cpu.gradient_sums(gpair, scales), fixed_column_sums(gpair, scales))
    if n_rows:
        gpair[n_rows // 2, 0], gpair[0, 1] = np.nan, -np.inf
        got = cpu.gradient_bounds(gpair)
        assert np.isnan(got[0]) and got[1] == np.inf


def test_partition_by_hand():
    packed = _packed([[0, 2], [2, 3], [1, 0], [2, 1]])
    ridx = np.array([0, 1, 2, 3], dtype=np.int32)  # node 1 owns ridx[0:2], node 2 ridx[2:3]; row 3 is elsewhere
    new_ridx, n_left = partition_rows(
        packed, 2, 16, 3, ridx, seg_begin=np.array([0, 2], np.int32),
        seg_end=np.array([2, 3], np.int32), split_feature=np.array([1, 0], np.int32),
        split_bin=np.array([1, 0], np.int32), default_left=np.array([True, False]),
        left_child=np.array([3, -1], np.int32))
    # Node 1 splits on feature 1 at bin 1: row 0 (bin 2) right, row 1 (missing) left.
    np.testing.assert_array_equal(new_ridx, [1, 0, 2, 3])  # left rows first
    np.testing.assert_array_equal(n_left, [1, 0])
    # Then node 2 stops, and node 1's children 3 (ridx[0:1]) and 4 (ridx[1:2]) too: each row at
    # its leaf, row 3 (elsewhere) untouched.
    positions = np.full(4, 9, np.int32)
    place_rows(new_ridx, np.array([2, 0, 1], np.int32), np.array([3, 1, 2], np.int32), np.array([2, 3, 4], np.int32),
               positions)
    np.testing.assert_array_equal(positions, [4, 3, 2, 9])


def test_place_rows_by_hand():
    ridx = np.array([4, 0, 3, 1, 2, 5], np.int32)
    positions = np.array([9, 9, 9, 9, 9, 9], np.int32)
    begin, end, node = np.array([0, 3, 5], np.int32), np.array([2, 3, 6], np.int32), np.array([7, 8, 6], np.int32)
    place_rows(ridx, begin, end, node, positions)  # places 0-1 (rows 4, 0) to 7, none to 8, place 5 (row 5) to 6
    np.testing.assert_array_equal(positions, [7, 9, 9, 9, 7, 6])


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_first_infinite_is_the_least_index_whatever_thread_finds_one(threads, monkeypatch):
    """Chunks of the cells shared by threads: the first infinity in row-major order, the
    chunks after it holding others too; -1 without one; every cell looked at."""
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(cpu, "_INFINITE_CHUNK_CELLS", 100)  # 31 chunks, the last short
    X = np.random.default_rng(threads).standard_normal((1001, 3)).astype(np.float32)
    with loops.using_threads(threads):
        assert cpu.first_infinite(X) == -1
        X[1000, 2] = np.inf  # the very last cell
        assert cpu.first_infinite(X) == 3002
        X[[40, 700], [1, 0]] = -np.inf, np.inf
        X[512, :] = np.nan  # not infinite
        assert cpu.first_infinite(X) == 121
        assert cpu.first_infinite(X[:0]) == -1


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_place_rows_on_threads_equals_each_range_in_turn(threads, monkeypatch):
    """Ranges of a few places and of most of them, empty ones, in no order, shared by the
    threads: every place of a range gets its node, rows of no range keep theirs."""
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1000)  # threads even for these few rows
    rng = np.random.default_rng(threads)
    ridx = rng.permutation(30_000).astype(np.int32)
    cut = np.array([0, 1, 1, 3, 20_000, 20_001, 26_000, 29_000], np.int32)
    begin, end = cut[:-1], cut[1:]
    order = rng.permutation(len(begin))
    begin, end, node = begin[order], end[order], rng.integers(0, 500, len(begin)).astype(np.int32)
    expected = np.full(30_000, -1, np.int32)
    for first, stop, at in zip(begin, end, node):
        expected[ridx[first:stop]] = at
    with loops.using_threads(threads):
        positions = np.full(30_000, -1, np.int32)
        assert place_rows(ridx, begin, end, node, positions) is positions
    np.testing.assert_array_equal(positions, expected)
    with pytest.raises(TypeError, match="positions must be a C-contiguous int32 array"):
        place_rows(ridx, begin, end, node, positions.astype(np.int64))


def test_partition_of_leaves_with_other_leaves_between_equals_one_leaf_at_a_time():
    """A lossguide batch: the slots are leaves' ranges in range order, other leaves' rows
    between them (and an empty range); the same moves as each leaf alone."""
    rng = np.random.default_rng(5)
    n_rows = 60
    packed = _packed(rng.integers(0, 4, size=(n_rows, 3)))
    ridx = rng.permutation(n_rows).astype(np.int32)  # leaves of 20, 10 (not in the batch), 12 and 18 rows
    seg_begin, seg_end = np.array([0, 30, 42, 42], np.int32), np.array([20, 42, 42, 60], np.int32)
    feature, split_bin = np.array([0, 2, 1, 1], np.int32), np.array([1, 2, 0, 0], np.int32)
    default_left, left_child = np.array([True, False, True, True]), np.array([13, 15, 17, -1], np.int32)
    new_ridx, n_left = partition_rows(packed, 2, 16, 3, ridx, seg_begin, seg_end, feature, split_bin, default_left,
                                      left_child)
    expected_ridx = ridx.copy()
    for s in range(4):
        span = slice(seg_begin[s], seg_end[s])
        moved, lefts = partition_rows(packed, 2, 16, 3, ridx[span], np.array([0], np.int32),
                                      np.array([seg_end[s] - seg_begin[s]], np.int32), feature[s:s + 1],
                                      split_bin[s:s + 1], default_left[s:s + 1], left_child[s:s + 1])
        expected_ridx[span] = moved
        assert n_left[s] == lefts[0]
    np.testing.assert_array_equal(new_ridx, expected_ridx)
    np.testing.assert_array_equal(new_ridx[20:30], ridx[20:30])
    np.testing.assert_array_equal(new_ridx[42:], ridx[42:])  # the leaf that does not split
    assert 0 < n_left[:2].min() and not (new_ridx[:20] == ridx[:20]).all() and n_left[2:].max() == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 5), st.randoms(use_true_random=False))
def test_partition_is_a_stable_split_of_each_node(n_rows, n_nodes, random):
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    bins = rng.integers(0, 4, size=(n_rows, 3))
    packed = _packed(bins)
    node = rng.integers(0, n_nodes + 1, size=n_rows)  # n_nodes: a row of another level
    ridx, seg_begin, seg_end = grouped(np.where(node < n_nodes, node, -1), n_nodes)
    feature = rng.integers(0, 3, size=n_nodes).astype(np.int32)
    split_bin = rng.integers(0, 3, size=n_nodes).astype(np.int32)
    default_left = rng.random(n_nodes) < 0.5
    left_child = np.where(rng.random(n_nodes) < 0.7, 20 + 2 * np.arange(n_nodes), -1).astype(np.int32)
    new_ridx, n_left = partition_rows(packed, 2, 16, 3, ridx, seg_begin, seg_end, feature, split_bin, default_left,
                                      left_child)
    in_slots = np.zeros(n_rows, bool)
    for s in range(n_nodes):
        rows = ridx[seg_begin[s]:seg_end[s]]
        in_slots[seg_begin[s]:seg_end[s]] = True
        if left_child[s] < 0:
            np.testing.assert_array_equal(new_ridx[seg_begin[s]:seg_end[s]], rows)
            assert n_left[s] == 0
            continue
        cell = bins[rows, feature[s]]
        left = np.where(cell == 3, default_left[s], cell <= split_bin[s])
        expected = np.concatenate([rows[left], rows[~left]])  # stable: old order within each side
        np.testing.assert_array_equal(new_ridx[seg_begin[s]:seg_end[s]], expected)
        assert n_left[s] == left.sum()
    np.testing.assert_array_equal(new_ridx[~in_slots], ridx[~in_slots])  # rows of another level stay


def test_route_by_hand():
    packed = _packed([[0, 2], [2, 3], [1, 2]])
    # Node 0 splits on feature 0 at bin 0 (missing right); node 2 on feature 1 at bin 1 (missing left).
    leaf = route_rows(packed, 2, 16, 3, split_feature=np.array([0, 0, 1, 0, 0], np.int32),
                      split_bin=np.array([0, 0, 1, 0, 0], np.int32),
                      default_left=np.array([False, False, True, False, False]),
                      left_child=np.array([1, -1, 3, -1, -1], np.int32), depth=2)
    np.testing.assert_array_equal(leaf, [1, 3, 4])


def _partition_reference(packed, bits, cells_per_word, missing_symbol, ridx, seg_begin, seg_end, split_feature,
                         split_bin, default_left, left_child):
    """cpu.partition_rows as a NumPy array program (its body before the compiled loop): a
    naive reference kept only for tests. Each place finds its slot from the ranges."""
    n_places, n_level = int(ridx.shape[0]), int(left_child.shape[0])
    slot = np.full(n_places, -1)
    for s in range(n_level):
        slot[seg_begin[s]:seg_end[s]] = s
    in_level = slot >= 0
    slot = np.where(in_level, slot, 0)
    splitting = in_level & (left_child[slot] >= 0)
    feature = split_feature[slot]
    words = packed[ridx, feature // cells_per_word]
    bins = (words >> ((feature % cells_per_word) * bits).astype(np.uint32)) & np.uint32((1 << bits) - 1)
    go_left = np.where(bins == missing_symbol, default_left[slot], bins <= split_bin[slot]) & splitting
    left_before = np.concatenate([[0], np.cumsum(go_left)])
    begin, end = seg_begin[slot], seg_end[slot]
    base = left_before[begin]
    n_left_here = left_before[end] - base
    lefts_before = left_before[:n_places] - base
    at = np.arange(n_places)
    destination = np.where(go_left, begin + lefts_before, begin + n_left_here + (at - begin - lefts_before))
    destination = np.where(splitting, destination, at)
    new_ridx = np.empty_like(ridx)
    new_ridx[destination] = ridx
    return new_ridx, (left_before[seg_end] - left_before[seg_begin]).astype(np.int32)


def _route_reference(packed, bits, cells_per_word, missing_symbol, split_feature, split_bin, default_left,
                     left_child, depth):
    """cpu.route_rows row by row in Python: a naive reference kept only for tests."""
    leaf = np.zeros(packed.shape[0], np.int32)
    for row in range(packed.shape[0]):
        node = 0
        for _ in range(depth):
            if left_child[node] < 0:
                break
            feature = int(split_feature[node])
            cell = int(packed[row, feature // cells_per_word]) >> (feature % cells_per_word * bits) & (1 << bits) - 1
            left = default_left[node] if cell == missing_symbol else cell <= split_bin[node]
            node = left_child[node] + (0 if left else 1)
        leaf[row] = node
    return leaf


@pytest.mark.parametrize("bits", [2, 5, 8, 9, 16])
@pytest.mark.parametrize("n_threads", [1, 3])
def test_compiled_partition_and_route_equal_their_references(bits, n_threads, monkeypatch):
    """Many slots, empty ones, padding slots at n_rows, rows of other levels between the
    slots' ranges, missing cells sent either way; whole-byte and shifted cells; the
    thread count (route runs on threads) changes nothing."""
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1000)  # threads even for these few rows
    rng = np.random.default_rng(bits)
    n_rows, n_features, missing_symbol = 30_000, 7, (1 << bits) - 1
    bins = rng.integers(0, missing_symbol + 1, size=(n_rows, n_features))  # missing_symbol: missing
    bins[rng.random(bins.shape) < 0.1] = missing_symbol
    packed = _packed(bins, missing_symbol, bits)
    cells_per_word = 32 // bits
    n_slots, n_padding = 200, 20
    # Each row's slot, or -1 for a row of another level (a leaf of an earlier one).
    row_slot = np.where(rng.random(n_rows) < 0.2, -1, rng.integers(0, n_slots // 2, n_rows) * 2)  # odd: empty
    # Sort keys: 2 s + 1 for slot s, even keys for other rows (before slot 0, between slots, after the last).
    key = np.where(row_slot < 0, 2 * rng.integers(0, n_slots + 1, n_rows), 2 * row_slot + 1)
    order = np.lexsort((rng.random(n_rows), key))
    ridx = order.astype(np.int32)  # grouped by slot, other levels' rows before, between and after the slots
    at = np.empty(n_rows, np.int64)
    at[ridx] = np.arange(n_rows)
    seg_begin = np.full(n_slots + n_padding, n_rows, np.int32)
    seg_end = np.full(n_slots + n_padding, n_rows, np.int32)
    for slot in range(n_slots):
        where = np.sort(at[row_slot == slot])
        if where.size:
            seg_begin[slot], seg_end[slot] = where[0], where[-1] + 1
        else:  # an empty range at the end of the previous slot's
            seg_begin[slot] = seg_end[slot] = seg_end[slot - 1] if slot else 0
    n_level = n_slots + n_padding
    split_feature = rng.integers(0, n_features, n_level).astype(np.int32)
    split_bin = rng.integers(0, missing_symbol, n_level).astype(np.int32)
    default_left = rng.random(n_level) < 0.5
    left_child = np.where(rng.random(n_level) < 0.8, 1000 + 2 * np.arange(n_level), -1).astype(np.int32)
    arguments = (split_feature, split_bin, default_left, left_child)
    expected = _partition_reference(packed, bits, cells_per_word, missing_symbol, ridx, seg_begin, seg_end, *arguments)
    got = partition_rows(packed, bits, cells_per_word, missing_symbol, ridx, seg_begin, seg_end, *arguments)
    for g, e in zip(got, expected):
        assert g.dtype == np.int32
        np.testing.assert_array_equal(g, e)
    assert 0 < got[1].sum() < n_rows

    # A few slots' places alone (a lossguide step's span of ridx); the same moves.
    first, stop = 10, 16
    lo, hi = seg_begin[first], seg_end[stop - 1]
    window = (ridx[lo:hi].copy(), seg_begin[first:stop] - lo, seg_end[first:stop] - lo,
              *(a[first:stop] for a in arguments))
    expected = _partition_reference(packed, bits, cells_per_word, missing_symbol, *window)
    got = partition_rows(packed, bits, cells_per_word, missing_symbol, *window)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)

    n_nodes, depth = 63, 5  # leaves at every depth: some nodes of the upper levels do not split
    rng = np.random.default_rng(100 + bits)  # the tree's own draws
    split = rng.random(n_nodes) < 0.85
    split[:3] = True  # the root and its children: rows reach several depths
    left_child = np.full(n_nodes, -1, np.int32)
    next_id = 1
    for node in range(n_nodes):
        if split[node] and next_id + 1 < n_nodes:
            left_child[node], next_id = next_id, next_id + 2
    arguments = (rng.integers(0, n_features, n_nodes).astype(np.int32),
                 rng.integers(0, missing_symbol, n_nodes).astype(np.int32), rng.random(n_nodes) < 0.5, left_child)
    expected = _route_reference(packed, bits, cells_per_word, missing_symbol, *arguments, depth)
    got = route_rows(packed, bits, cells_per_word, missing_symbol, *arguments, depth)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(got)) > 5  # rows reach many leaves, at several depths


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200), st.integers(1, 6), st.integers(1, 4), st.randoms(use_true_random=False))
def test_subtraction_equals_direct_build(n_rows, n_features, n_parents, random):
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    bins = rng.integers(0, 4, size=(n_rows, n_features))  # 3 is missing
    packed = _packed(bins)
    offsets = np.arange(n_features + 1) * 3
    gpair = _large_pairs(rng, n_rows, 40)
    child = rng.integers(0, 2 * n_parents, size=n_rows).astype(np.int32)  # each row's child slot
    parent = _hist(packed, offsets, gpair, child // 2, n_parents, n_features)
    direct = _hist(packed, offsets, gpair, child, 2 * n_parents, n_features)
    build_left = rng.random(n_parents) < 0.5
    built_slot = np.where((child % 2 == 0) == build_left[child // 2], child // 2, -1)
    built = _hist(packed, offsets, gpair, built_slot, n_parents, n_features)
    # The parents sit at shuffled slots of a wider level, as a level's splitting nodes do.
    slot_of_rank = rng.permutation(n_parents + 2)[:n_parents].astype(np.int32)
    level = np.zeros((n_parents + 2, *parent.shape[1:]), dtype=parent.dtype)
    level[slot_of_rank] = parent
    np.testing.assert_array_equal(histogram.children(level, slot_of_rank, built, build_left), direct)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 300), st.randoms(use_true_random=False))
def test_row_order_does_not_change_histograms(n_rows, random):
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    bins = rng.integers(0, 4, size=(n_rows, 3))
    gpair = _large_pairs(rng, n_rows, 45)
    slot = rng.integers(-1, 2, size=n_rows)
    order = rng.permutation(n_rows)
    offsets = [0, 3, 6, 9]
    first = _hist(_packed(bins), offsets, gpair, slot, 2, 3)
    second = _hist(_packed(bins[order]), offsets, gpair[order], slot[order], 2, 3)
    np.testing.assert_array_equal(first, second)
    expected = np.zeros((2, 9, 2), np.int64)
    for row in range(n_rows):
        for feature in range(3):
            if slot[row] >= 0 and bins[row, feature] != 3:
                expected[slot[row], 3 * feature + bins[row, feature]] += gpair[row]
    np.testing.assert_array_equal(first, expected)


@pytest.mark.parametrize("n_rows", [1, 7, 1000])
def test_histogram_of_awkward_sizes(n_rows):
    rng = np.random.default_rng(n_rows)
    bins = rng.integers(0, 4, size=(n_rows, 2))
    gpair = rng.integers(-100, 100, size=(n_rows, 2))
    hist = _hist(_packed(bins), [0, 3, 6], gpair, np.zeros(n_rows), 1)
    present = bins[:, 0] != 3
    assert hist[0, :3, 0].sum() == gpair[present, 0].sum()


def test_children_numbered_in_slot_order_by_hand():
    table = np.zeros((4, len(SPLIT_TABLE_COLUMNS)), dtype=np.int64)
    table[[1, 3], 0] = 1  # slots 1 and 3 split
    table[1, 5:9] = [1, 2, 3, 4]
    table[3, 5:9] = [5, 9, 7, 6]
    left_child, slot_of_rank, n_split = number_children(table, start=3, n_parents=3)  # room for one more
    np.testing.assert_array_equal(left_child, [-1, 7, -1, 9])
    np.testing.assert_array_equal(slot_of_rank, [1, 3, 0])
    assert n_split.tolist() == [2]
    seg_begin, seg_end, n_left = np.array([0, 2, 5, 6]), np.array([2, 5, 6, 9]), np.array([0, 1, 0, 3])
    sums, active, begin, end, build_left, build_begin, build_end = next_frontier(
        table, slot_of_rank, n_split, seg_begin, seg_end, n_left, n_rows=9)
    np.testing.assert_array_equal(sums, [[1, 2], [3, 4], [5, 9], [7, 6], [0, 0], [0, 0]])
    np.testing.assert_array_equal(active, [True, True, True, True, False, False])
    np.testing.assert_array_equal(begin, [2, 3, 6, 9, 9, 9])
    np.testing.assert_array_equal(end, [3, 5, 9, 9, 9, 9])
    np.testing.assert_array_equal(build_left, [True, False, True])  # lighter hessian; ties build left
    np.testing.assert_array_equal(build_begin, [2, 9, 9])
    np.testing.assert_array_equal(build_end, [3, 9, 9])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=9), st.integers(0, 100))
def test_histogram_feature_groups_are_the_fewest_and_most_even(sizes, extra):
    """The histogram kernel's feature groups (runs of a row's words): as few as fit the shared
    memory budget, and of those the split whose largest group is least (checked by brute force)."""
    import itertools

    from dgboost.kernels.cuda import _even_groups, _fewest_groups

    budget = max(sizes) + extra
    n_groups = _fewest_groups(sizes, budget)
    starts = _even_groups(sizes, n_groups)
    assert starts[0] == 0 and starts[-1] == len(sizes) and starts == sorted(set(starts))
    largest = max(sum(sizes[a:b]) for a, b in zip(starts, starts[1:]))
    assert len(starts) - 1 <= n_groups and largest <= budget

    def splits(k):  # every way to cut the words into k runs
        for cuts in itertools.combinations(range(1, len(sizes)), k - 1):
            bounds = (0, *cuts, len(sizes))
            yield max(sum(sizes[a:b]) for a, b in zip(bounds, bounds[1:]))

    assert all(best > budget for k in range(1, n_groups) for best in [min(splits(k))])
    assert largest == min(splits(n_groups))


# ---- the compiled loops against naive references kept only for these tests -----------------------

def _naive_pack(X, cut_values, cut_offsets, bits, cells_per_word, n_words, missing_symbol):
    packed = np.zeros((X.shape[0], n_words), np.uint32)
    for feature in range(X.shape[1]):
        cuts = cut_values[cut_offsets[feature]:cut_offsets[feature + 1]]
        bins = np.where(np.isnan(X[:, feature]), missing_symbol, np.searchsorted(cuts, X[:, feature], side="right"))
        word, cell = divmod(feature, cells_per_word)
        packed[:, word] |= bins.astype(np.uint32) << np.uint32(cell * bits)
    return packed


def _naive_histograms(packed, bits, cells_per_word, n_features, missing_symbol, bin_offsets, gpair, scales,
                      ridx, seg_begin, seg_end):
    hist = np.zeros((len(seg_begin), bin_offsets[-1], 2), np.int64)
    fixed = np.rint(gpair.astype(np.float64) * scales).astype(np.int64)
    for slot, (begin, end) in enumerate(zip(seg_begin, seg_end)):
        for row in ridx[begin:end]:
            for feature in range(n_features):
                word, cell = divmod(feature, cells_per_word)
                bin_id = (int(packed[row, word]) >> (cell * bits)) & ((1 << bits) - 1)
                if bin_id != missing_symbol:
                    hist[slot, bin_offsets[feature] + bin_id] += fixed[row]
    return hist


def _naive_margins(X, left, right, feature, threshold, default_left, value, roots, outputs, margins):
    margins = margins.copy()
    for row in range(X.shape[0]):
        for tree, root in enumerate(roots):
            node = root
            while left[node] >= 0:
                x = X[row, feature[node]]
                node = left[node] if (default_left[node] if np.isnan(x) else x < threshold[node]) else right[node]
            margins[row, outputs[tree]] = np.float32(margins[row, outputs[tree]] + value[node])
    return margins


@pytest.mark.parametrize("max_bin, n_features", [(256, 11), (32, 9), (40_000, 3), (3, 7)])
@pytest.mark.parametrize("threads", [1, 3, 7])
def test_compiled_matrix_and_histograms_equal_naive_loops(max_bin, n_features, threads, monkeypatch):
    """Quantise-and-pack and the histograms (bits 8, 5, 16, 2; whole-byte cells read
    directly, others shifted out), on any thread count, equal plain loops: runs of rows
    that share slots, a slot shared by every run, empty slots, slots of one row."""
    from dgboost.data.ellpack import EllpackLayout
    from dgboost.kernels import cpu, loops
    from dgboost.data.sketch import Sample, compute_cuts

    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1000)  # threads even for these few rows
    rng = np.random.default_rng(max_bin + n_features)
    X = rng.standard_normal((20_000, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:50, 0] = 0.0  # values equal to a cut land right of it
    cuts = compute_cuts(Sample(np.arange(len(X)), X, np.ones(len(X), np.float32)), max_bin)
    layout = EllpackLayout.for_cuts(cuts)
    shape = (layout.bits, layout.cells_per_word, layout.n_words, layout.missing_symbol)
    with loops.using_threads(threads):
        packed = cpu.quantise_and_pack(X, cuts.values, cuts.offsets.tolist(), *shape)
        np.testing.assert_array_equal(packed, _naive_pack(X, cuts.values, cuts.offsets, *shape))
        ridx = rng.permutation(len(X))[:15_000].astype(np.int32)
        gpair = rng.standard_normal((len(X), 2)).astype(np.float32)
        scales = np.array([2.0**20, 2.0**21])
        bounds = [[0, 4000, 4000, 9000, 15_000], [0, 15_000], [0, 1, 2, 2, 3, 7000, 7001, 15_000, 15_000]]
        for bound in bounds:
            seg_begin, seg_end = np.array(bound[:-1], np.int32), np.array(bound[1:], np.int32)
            arguments = (packed, layout.bits, layout.cells_per_word, n_features, layout.missing_symbol,
                         cuts.bin_offsets, gpair, scales, ridx, seg_begin, seg_end)
            np.testing.assert_array_equal(cpu.build_histograms(*arguments), _naive_histograms(*arguments))


@pytest.mark.parametrize("threads", [1, 3])
def test_compiled_prediction_equals_a_naive_walk(threads, monkeypatch):
    """Each row's float32 additions, in model order, for a forest of uneven trees and
    several outputs, on any thread count."""
    import dgboost
    from dgboost.kernels import cpu, loops
    from dgboost.tree.predict import Forest

    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1000)  # threads even for these few rows
    rng = np.random.default_rng(5)
    X = rng.standard_normal((12_000, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    y = np.digitize(np.nan_to_num(X[:, 0]) + 0.3 * rng.standard_normal(len(X)), [-0.5, 0.5]).astype(np.float32)
    booster = dgboost.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 5}, X, y, num_boost_round=4)
    forest = Forest.from_trees(booster.trees, booster.tree_outputs, np)
    nodes = (forest.left, forest.right, forest.feature, forest.threshold, forest.default_left, forest.value,
             forest.roots, forest.outputs_device)
    start = rng.standard_normal((len(X), 3)).astype(np.float32)
    with loops.using_threads(threads):
        got = cpu.predict_margins(X, *nodes[:7], forest.outputs_device, forest.depth, start.copy())
    np.testing.assert_array_equal(got, _naive_margins(X, *nodes, start))


def test_the_loops_intrinsics_equal_their_plain_python():
    """loops._add_pair, compiled (one two-lane vector add), writes what its plain Python does
    (two adds), at any even or odd place and with negative values; loops._prefetch_row,
    compiled, changes nothing it is pointed at (the rows of a strided view)."""
    import numba

    from dgboost.kernels import loops

    add_pair, prefetch_row = loops._add_pair.machine_code(), loops._prefetch_row.machine_code()

    @numba.njit
    def compiled(array, rows, places, firsts, seconds):
        for row in range(rows.shape[0]):
            prefetch_row(rows, row)
        for k in range(places.shape[0]):
            add_pair(array, places[k], firsts[k], seconds[k])

    rng = np.random.default_rng(5)
    places = rng.integers(0, 99, 500)
    firsts, seconds = rng.integers(-(2**40), 2**40, (2, 500))
    rows = rng.standard_normal((30, 17)).astype(np.float32)[::3]  # every third row: a stride of 3 rows
    before = rows.copy()
    expected, got = np.arange(100, dtype=np.int64), np.arange(100, dtype=np.int64)
    for k in range(500):
        loops._add_pair(expected, places[k], firsts[k], seconds[k])
        loops._prefetch_row(rows, k % len(rows))
    compiled(got, rows, places, firsts, seconds)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(rows, before)
