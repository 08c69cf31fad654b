"""Monotone constraints: split evaluation under them by hand and against a plain loop, the
children's bounds, clipped leaf values, monotone models (a property), XGBoost's accuracy,
bad input, and the same model over Dask workers."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dgboost
from dgboost.kernels import (MIN_SPLIT_GAIN, Regularisation, child_bounds, evaluate_splits, node_gains,
                             node_weights, tree_record)
from dgboost.tree.split import SplitTable

from test_kernels import _random_level

NO_REG = Regularisation(reg_lambda=0.0, alpha=0.0, min_child_weight=0.0, max_delta_step=0.0, gamma=0.0)
UNBOUNDED = np.array([[-np.inf, np.inf]])


def _evaluate(hist, node_sums, rules=NO_REG, bin_offsets=(0, 3, 6), **constraints):
    hist = np.asarray(hist, np.int64)
    bin_offsets = np.asarray(bin_offsets, np.int64)
    feature_of_bin = np.repeat(np.arange(len(bin_offsets) - 1), np.diff(bin_offsets)).astype(np.int32)
    return SplitTable(evaluate_splits(hist, np.asarray(node_sums, np.int64), np.ones(len(hist), bool),
                                      feature_of_bin, bin_offsets, np.ones(2), rules, **constraints))


# Feature 0 sends g = +1 rows (weight -1) left and g = -1 rows (weight +1) right: its best
# split has the left weight below the right, as an increasing feature wants. Feature 1
# splits the other way round, less well.
HIST = [[[2, 2], [2, 2], [-4, 4], [-1, 3], [1, 3], [0, 2]]]
SUMS = [[0, 8]]


def test_an_increasing_feature_keeps_its_split_a_decreasing_one_loses_it():
    free = _evaluate(HIST, SUMS)
    assert free.valid[0] and free.feature[0] == 0 and free.bin[0] == 1
    up = _evaluate(HIST, SUMS, monotone=np.array([1, 0], np.int8), bounds=UNBOUNDED)
    assert up.valid[0] and up.feature[0] == 0 and up.bin[0] == 1 and up.gain[0] == free.gain[0]
    down = _evaluate(HIST, SUMS, monotone=np.array([-1, 0], np.int8), bounds=UNBOUNDED)
    assert down.valid[0] and down.feature[0] == 1  # feature 0 may not split so: feature 1 wins
    # Feature 1 increasing keeps only its split at bin 1 (weights 0 and 0), which gains nothing.
    both = _evaluate(HIST, SUMS, monotone=np.array([-1, 1], np.int8), bounds=UNBOUNDED)
    assert not both.valid[0] and both.feature[0] == 1 and both.bin[0] == 1 and both.gain[0] == 0.0


def test_bounds_clip_the_weights_a_candidate_is_scored_at():
    # Node weight 0; its children's weights -1 and +1 clipped to [-0.25, 0.25]: each child
    # gains -(2 g w + h w^2) = -(2 * 4 * -0.25 + 4 * 0.0625) = 1.75 instead of 4.
    out = _evaluate(HIST, SUMS, monotone=np.array([1, 0], np.int8), bounds=np.array([[-0.25, 0.25]]))
    assert out.valid[0] and out.feature[0] == 0 and out.gain[0] == 2 * 1.75


def test_features_not_allowed_are_not_split_on():
    out = _evaluate(HIST, SUMS, allowed=np.array([[False, True]]))
    assert out.feature[0] == 1
    none = _evaluate(HIST, SUMS, allowed=np.array([[False, False]]))
    assert not none.valid[0] and none.gain[0] == -np.inf
    np.testing.assert_array_equal(none.table[0, [1, 2, 3, 5, 6, 7, 8]], [0, 0, 0, 0, 0, 0, 8])


def _naive_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, allowed, monotone, bounds):
    """Split evaluation as a plain loop over candidates in (feature, bin, direction) order, the
    gains from the array programs node_weights and node_gains: the reference of the
    compiled loop with an allowed mask and monotone constraints."""
    inverse = 1.0 / np.asarray(scales, np.float64)
    least = inverse[1] if inverse[1] >= rules.min_child_weight else rules.min_child_weight

    def weight(g, h, lower, upper):
        w = float(node_weights(np.array([g]), np.array([h]), rules)[0])
        return lower if w < lower else (upper if w > upper else w)

    def gain_at(g, h, w):
        return -(2.0 * g * w + (h + rules.reg_lambda) * (w * w) + 2.0 * rules.alpha * abs(w))

    def gain_of(g, h):
        return float(node_gains(np.array([g]), np.array([h]), rules)[0])

    rows = []
    for node in range(len(hist)):
        node_g, node_h = int(node_sums[node, 0]), int(node_sums[node, 1])
        total_g, total_h = node_g * inverse[0], node_h * inverse[1]
        lower, upper = bounds[node] if bounds is not None else (-math.inf, math.inf)
        too_light = total_h < rules.min_child_weight or total_h <= 0
        if monotone is None:
            parent = gain_of(total_g, total_h)
        else:
            parent = 0.0 if too_light else gain_at(total_g, total_h, weight(total_g, total_h, lower, upper))
        best = None
        for feature in range(len(bin_offsets) - 1):
            if allowed is not None and not allowed[node, feature]:
                continue
            begin, end = bin_offsets[feature], bin_offsets[feature + 1]
            present = hist[node, begin:end].sum(axis=0)
            missing = (node_g - int(present[0]), node_h - int(present[1]))
            prefix = [0, 0]
            for bin_id in range(begin, end):
                prefix = [prefix[0] + int(hist[node, bin_id, 0]), prefix[1] + int(hist[node, bin_id, 1])]
                for direction in range(1 if missing == (0, 0) else 2):
                    left = (prefix[0] + direction * missing[0], prefix[1] + direction * missing[1])
                    g_left, h_left = left[0] * inverse[0], left[1] * inverse[1]
                    g_right, h_right = total_g - g_left, total_h - h_left
                    gain = -math.inf
                    if h_left >= least and h_right >= least:
                        if monotone is None and (rules.max_delta_step > 0 or rules.alpha > 0):
                            gain = (gain_of(g_left, h_left) + gain_of(g_right, h_right)) - parent
                        elif monotone is None:
                            gain = ((g_left * g_left) / (h_left + rules.reg_lambda)
                                    + (g_right * g_right) / (h_right + rules.reg_lambda) - parent)
                        else:
                            w_left, w_right = weight(g_left, h_left, lower, upper), weight(g_right, h_right, lower, upper)
                            c = monotone[feature]
                            if not ((c > 0 and w_left > w_right) or (c < 0 and w_left < w_right)):
                                gain = (gain_at(g_left, h_left, w_left) + gain_at(g_right, h_right, w_right)) - parent
                    if best is None or gain > best[0]:
                        best = (max(gain, -math.inf), bin_id, direction, *left)
        if best is None:
            rows.append([0, 0, 0, 0, np.float64(-np.inf).view(np.int64), 0, 0, node_g, node_h])
            continue
        gain, bin_id, direction, left_g, left_h = best
        gain = gain if active[node] else -math.inf
        feature = int(feature_of_bin[bin_id])
        rows.append([int(gain > MIN_SPLIT_GAIN and gain >= rules.gamma), feature, bin_id - bin_offsets[feature],
                     direction, np.float64(gain).view(np.int64), left_g, left_h, node_g - left_g, node_h - left_h])
    return np.array(rows, np.int64).reshape(len(hist), 9)


_RULES = [Regularisation(reg_lambda, alpha, min_child_weight, max_delta_step, 0.0)
          for reg_lambda in (0.0, 1.0) for alpha in (0.0, 0.75) for min_child_weight in (0.0, 3.0)
          for max_delta_step in (0.0, 0.5)]


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6), st.sampled_from(_RULES), st.booleans(), st.booleans(),
       st.sampled_from([(1.0, 1.0), (0.25, 2.0)]), st.randoms(use_true_random=False))
def test_constrained_split_table_equals_a_plain_loop(n_nodes, n_features, rules, masked, constrained, scales,
                                                      random):
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    level = *_random_level(rng, n_nodes, n_features), np.asarray(scales)
    allowed = rng.random((n_nodes, n_features)) < 0.6 if masked else None
    monotone = rng.integers(-1, 2, n_features).astype(np.int8) if constrained else None
    lower = np.where(rng.random(n_nodes) < 0.5, -np.inf, rng.random(n_nodes) - 0.7)
    upper = np.where(rng.random(n_nodes) < 0.3, np.inf, np.maximum(lower, 0) + rng.random(n_nodes))
    bounds = np.stack([lower, upper], axis=1) if constrained else None
    expected = _naive_splits(*level, rules, allowed, monotone, bounds)
    np.testing.assert_array_equal(evaluate_splits(*level, rules, allowed, monotone, bounds), expected)


def test_children_are_bounded_by_the_mean_of_their_weights():
    # Slot 0 splits on increasing feature 0: children's weights -4/4 = -1 and 4/4 = +1 (no
    # regularisation): mean 0 caps the left child and floors the right. Slot 1 splits on
    # decreasing feature 1 within [-0.5, 2]: weights 0.5 and -0.5, clipped to the same, mean
    # 0 floors the left child and caps the right. Slot 2 splits on a free feature: its
    # children keep its bounds.
    table = np.zeros((3, 9), np.int64)
    table[:, 0] = 1
    table[:, 1] = [0, 1, 2]
    table[0, 5:9] = [4, 4, -4, 4]
    table[1, 5:9] = [-1, 2, 1, 2]
    table[2, 5:9] = [3, 1, -3, 1]
    bounds = np.array([[-np.inf, np.inf], [-0.5, 2.0], [-1.0, 1.0]])
    child = child_bounds(table, np.array([0, 1, 2, 0], np.int32), np.array([3], np.int32), bounds,
                         np.array([1, -1, 0], np.int8), np.ones(2), NO_REG)
    np.testing.assert_array_equal(child, [[-np.inf, 0.0], [0.0, np.inf], [0.0, 2.0], [-0.5, 0.0],
                                          [-1.0, 1.0], [-1.0, 1.0], [-np.inf, np.inf], [-np.inf, np.inf]])


def test_leaf_values_are_clipped_to_their_bounds():
    node_sums = np.array([[-8, 4], [8, 4], [0, 4]])  # weights 2, -2, 0 (-0.0: -g / h with g = 0)
    table = np.zeros((3, 9), np.int64)
    left_child = np.full(3, -1, np.int32)
    bounds = np.array([[-1.0, 1.0], [-np.inf, -3.0], [0.0, 1.0]])
    _, leaf = tree_record(node_sums, np.ones(3, bool), table, left_child, np.ones(2), NO_REG, 0.5, bounds)
    np.testing.assert_array_equal(leaf, np.float32([0.5, -1.5, 0.0]))
    assert np.signbit(leaf[2])  # -0.0 at a 0.0 bound stays -0.0, by comparisons, as on the GPU


def _monotone_data(rng, n_rows, n_features):
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(2 * X[:, 0] - np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3]) + 0.3 * rng.standard_normal(n_rows)
    return X, y.astype(np.float32)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from([-1, 0, 1]), min_size=4, max_size=4), st.integers(0, 2**31 - 1),
       st.sampled_from([{}, {"alpha": 0.5}, {"max_delta_step": 0.3}, {"lambda": 0.0, "min_child_weight": 0.0}]))
def test_predictions_are_monotone_along_each_constrained_feature(constraints, seed, extra):
    rng = np.random.default_rng(seed)
    X, y = _monotone_data(rng, 2000, 4)
    booster = dgboost.train({"max_depth": 5, "eta": 0.5, "monotone_constraints": constraints, **extra}, X, y,
                            num_boost_round=8)
    grid = np.linspace(-3.5, 3.5, 60, dtype=np.float32)
    for feature, direction in enumerate(constraints):
        if direction == 0:
            continue
        rows = np.repeat(X[rng.choice(len(X), 8)], len(grid), axis=0)  # other features at a row's values
        rows[:, feature] = np.tile(grid, 8)
        steps = np.diff(booster.predict(rows).reshape(8, len(grid)), axis=1)
        assert np.all(direction * steps >= 0), (feature, direction)


def test_as_accurate_as_xgboost_with_the_same_constraints():
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(3)
    X, y = _monotone_data(rng, 20_000, 4)
    X_test, y_test = _monotone_data(rng, 5_000, 4)
    params = {"max_depth": 6, "eta": 0.3, "monotone_constraints": "(1,-1,0,0)"}
    ours = dgboost.train(params, X, y, num_boost_round=40).predict(X_test)
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), 40).predict(xgb.DMatrix(X_test))
    rmse = lambda p: float(np.sqrt(np.mean((p - y_test) ** 2)))  # noqa: E731
    assert abs(rmse(ours) - rmse(theirs)) < 0.01 * rmse(theirs), (rmse(ours), rmse(theirs))


def test_constraints_by_name_and_by_position_give_one_model():
    pd = pytest.importorskip("pandas")
    X, y = _monotone_data(np.random.default_rng(1), 1000, 4)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    by_name = dgboost.train({"monotone_constraints": {"b": -1, "a": 1}}, frame, y, num_boost_round=5)
    by_position = dgboost.train({"monotone_constraints": (1, -1, 0, 0)}, frame, y, num_boost_round=5)
    assert [t.to_dict() for t in by_name.trees] == [t.to_dict() for t in by_position.trees]


@pytest.mark.parametrize("value, message", [
    ((1, 0), "has 2 values but X has 4 features"),
    ({"e": 1}, "names feature 'e', which is not one of X's features"),
    ((1, 0, 2, 0), r"monotone_constraints\[2\]=2 must be -1"),
    ("1,0,0,0", "XGBoost's string form"),
    ({0: 1}, "a dict's keys are feature names"),
])
def test_bad_constraints_are_refused_before_any_work(value, message, monkeypatch):
    pd = pytest.importorskip("pandas")
    from dgboost import training

    monkeypatch.setattr(training, "build_matrix", lambda *a, **k: pytest.fail("work started"))
    X, y = _monotone_data(np.random.default_rng(1), 100, 4)
    with pytest.raises((ValueError, TypeError), match=message):
        dgboost.train({"monotone_constraints": value}, pd.DataFrame(X, columns=list("abcd")), y)


def test_a_model_with_constraints_saves_and_loads(tmp_path):
    X, y = _monotone_data(np.random.default_rng(2), 500, 4)
    for value in ((1, 0, -1, 0), "(1,0,-1,0)"):
        booster = dgboost.train({"monotone_constraints": value}, X, y, num_boost_round=3)
        booster.save_model(tmp_path / "m.json")
        loaded = dgboost.Booster.load_model(tmp_path / "m.json")
        assert loaded.params.monotone_constraints == (1, 0, -1, 0)
        np.testing.assert_array_equal(loaded.predict(X), booster.predict(X))


# ---- on a GPU: the CUDA kernels equal their twins, and the models the CPU's ----------------


def _cupy():
    return pytest.importorskip("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(6))
def test_constrained_split_kernels_equal_their_twins_on_a_gpu(seed):
    cp = _cupy()
    from dgboost.kernels import cpu, cuda

    rng = np.random.default_rng(seed)
    n_nodes, n_features = 40, 7
    level = *_random_level(rng, n_nodes, n_features), np.array([0.25, 2.0])
    allowed = rng.random((n_nodes, n_features)) < 0.6
    allowed[0] = False  # a node with no feature allowed
    monotone = rng.integers(-1, 2, n_features).astype(np.int8)
    lower = np.where(rng.random(n_nodes) < 0.5, -np.inf, rng.random(n_nodes) - 0.7)
    bounds = np.stack([lower, np.where(rng.random(n_nodes) < 0.3, np.inf, np.maximum(lower, 0) + rng.random(n_nodes))],
                      axis=1)
    for rules in _RULES:
        for constraints in ((allowed, None, None), (None, monotone, bounds), (allowed, monotone, bounds)):
            expected = cpu.evaluate_splits(*level, rules, *constraints)
            got = cuda.evaluate_splits(*(cp.asarray(a) for a in level), rules,
                                       *(None if a is None else cp.asarray(a) for a in constraints))
            np.testing.assert_array_equal(got.get(), expected, err_msg=f"{rules} {[a is None for a in constraints]}")
        table = expected
        slot_of_rank = rng.permutation(n_nodes)[:n_nodes // 2].astype(np.int32)
        n_split = np.array([n_nodes // 3], np.int32)
        host = cpu.child_bounds(table, slot_of_rank, n_split, bounds, monotone, level[5], rules)
        device = cuda.child_bounds(*(cp.asarray(a) for a in (table, slot_of_rank, n_split, bounds, monotone,
                                                              level[5])), rules)
        np.testing.assert_array_equal(device.get(), host)
        record, leaf = cpu.tree_record(level[1], level[2], table, np.full(n_nodes, -1, np.int32), level[5], rules,
                                       0.3, bounds)
        record_gpu, leaf_gpu = cuda.tree_record(*(cp.asarray(a) for a in (level[1], level[2], table,
                                                                           np.full(n_nodes, -1, np.int32),
                                                                           level[5])), rules, 0.3, cp.asarray(bounds))
        np.testing.assert_array_equal(record_gpu.get(), record)
        np.testing.assert_array_equal(leaf_gpu.get(), leaf)


@pytest.mark.gpu
def test_a_constrained_squarederror_model_file_is_identical_to_the_cpus(tmp_path):
    cp = _cupy()
    X, y = _monotone_data(np.random.default_rng(5), 20_000, 4)
    params = {"max_depth": 6, "eta": 0.3, "monotone_constraints": (1, -1, 0, 1), "max_delta_step": 0.5}
    dgboost.train(params, X, y, num_boost_round=20).save_model(tmp_path / "cpu.json")
    dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y),
                  num_boost_round=20).save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()


# ---- interaction constraints ------------------------------------------------------------


def test_paths_allow_what_xgboost_allows():
    from dgboost.tree.constraints import Paths

    sets = np.zeros((2, 6), bool)
    sets[0, [0, 1, 2]] = True
    sets[1, [2, 3]] = True
    root = Paths.root(sets)
    assert root.allowed(sets).tolist() == [[True] * 6]  # any feature at the root
    table = np.zeros((1, 9), np.int64)
    for feature, allowed in ((0, [0, 1, 2]), (2, [0, 1, 2, 3]), (3, [2, 3]), (5, [5])):
        table[0, 1] = feature
        children = root.children(sets, table, np.array([0], np.int32))
        expected = np.isin(np.arange(6), allowed)
        np.testing.assert_array_equal(children.allowed(sets), [expected, expected])
    # A path through 2 then 0 (the right child of the split on 2 splitting) leaves set 0 alone.
    table[0, 1] = 2
    after_2 = root.children(sets, table, np.array([0], np.int32))
    level = np.zeros((2, 9), np.int64)
    level[1, 1] = 0
    np.testing.assert_array_equal(after_2.children(sets, level, np.array([1], np.int32)).allowed(sets)[0],
                                  np.isin(np.arange(6), [0, 1, 2]))


def _paths(tree):
    """The sets of features of every root-to-leaf path of a tree."""
    out = []

    def walk(node, used):
        if tree.left[node] < 0:
            out.append(used)
            return
        walk(tree.left[node], used | {int(tree.feature[node])})
        walk(tree.right[node], used | {int(tree.feature[node])})

    walk(0, frozenset())
    return out


@settings(max_examples=10, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True), min_size=0, max_size=3),
       st.integers(0, 2**31 - 1))
def test_no_path_uses_features_of_two_sets(sets, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((1500, 6)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + X[:, 2] * X[:, 3] - X[:, 4] * X[:, 5] + 0.2 * rng.standard_normal(1500)).astype(np.float32)
    booster = dgboost.train({"max_depth": 5, "interaction_constraints": sets}, X, y, num_boost_round=6)
    for tree in booster.trees:
        for used in _paths(tree):
            assert len(used) <= 1 or any(used <= set(s) for s in sets), (used, sets)


def test_interaction_constraints_by_name_string_and_index_give_one_model():
    pd = pytest.importorskip("pandas")
    X, y = _monotone_data(np.random.default_rng(4), 1000, 4)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    models = [dgboost.train({"interaction_constraints": value, "max_depth": 4}, frame, y, num_boost_round=5)
              for value in ([["a", "b"], ["c", "d"]], "[[0, 1], [2, 3]]", [[0, 1], [2, 3]])]
    assert models[0].trees and all([t.to_dict() for t in m.trees] == [t.to_dict() for t in models[0].trees]
                                   for m in models)


def test_interaction_constraints_as_accurate_as_xgboost():
    xgb = pytest.importorskip("xgboost")
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    truth = lambda X: X[:, 0] + X[:, 1] * X[:, 2] - X[:, 3] + 0.5 * X[:, 4] * X[:, 0]  # noqa: E731
    X, X_test = rng.standard_normal((20_000, 8)).astype(np.float32), rng.standard_normal((5_000, 8)).astype(np.float32)
    y = (truth(X) + 0.3 * rng.standard_normal(len(X)) > 0).astype(np.float32)
    y_test = (truth(X_test) > 0).astype(np.float32)
    sets = [[0, 1, 2], [3, 4]]
    params = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.2}
    ours = dgboost.train({**params, "interaction_constraints": sets}, X, y, num_boost_round=50).predict(X_test)
    theirs = xgb.train({**params, "tree_method": "hist", "interaction_constraints": str(sets)}, xgb.DMatrix(X, y),
                       50).predict(xgb.DMatrix(X_test))
    assert abs(roc_auc_score(y_test, ours) - roc_auc_score(y_test, theirs)) < 0.005


@pytest.mark.parametrize("value, message", [
    ([[0, 9]], r"interaction_constraints\[0\] names feature index 9, but X has 4 features"),
    ([["a", "e"]], r"interaction_constraints\[0\] names feature 'e'"),
    ([[0, -1]], "indices are >= 0"),
    ([0, 1], "must be a list of lists"),
    ("[[0, 1]", "XGBoost's string form"),
])
def test_bad_interaction_constraints_are_refused_before_any_work(value, message, monkeypatch):
    pd = pytest.importorskip("pandas")
    from dgboost import training

    monkeypatch.setattr(training, "build_matrix", lambda *a, **k: pytest.fail("work started"))
    X, y = _monotone_data(np.random.default_rng(1), 100, 4)
    with pytest.raises((ValueError, TypeError), match=message):
        dgboost.train({"interaction_constraints": value}, pd.DataFrame(X, columns=list("abcd")), y)


@pytest.mark.gpu
def test_interaction_constrained_model_file_is_identical_to_the_cpus(tmp_path):
    cp = _cupy()
    X, y = _monotone_data(np.random.default_rng(6), 20_000, 4)
    params = {"max_depth": 6, "eta": 0.3, "interaction_constraints": [[0, 1], [1, 2, 3]],
              "monotone_constraints": (0, 1, 0, -1)}
    dgboost.train(params, X, y, num_boost_round=20).save_model(tmp_path / "cpu.json")
    dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y),
                  num_boost_round=20).save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()
