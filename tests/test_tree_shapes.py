"""Tree shapes: max_leaves on depthwise trees (and, as they land, lossguide and symmetric
growth): leaf counts, XGBoost's order, and the same model on the GPU."""

import numpy as np
import pytest

import dgboost


def _data(rng, n_rows=4000, n_features=6):
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0] * X[:, 1] + np.sin(X[:, 2]) - X[:, 3]) + 0.2 * rng.standard_normal(n_rows)
    return X, y.astype(np.float32)


@pytest.mark.parametrize("max_leaves", [2, 3, 7, 20, 1000])
def test_max_leaves_caps_depthwise_trees(max_leaves):
    X, y = _data(np.random.default_rng(0))
    booster = dgboost.train({"max_depth": 6, "max_leaves": max_leaves}, X, y, num_boost_round=6)
    unlimited = dgboost.train({"max_depth": 6}, X, y, num_boost_round=1).trees[0]
    for tree in booster.trees:
        assert int(tree.is_leaf.sum()) <= max_leaves
    # The first tree is the unlimited tree cut: its first max_leaves - 1 splits in breadth-first order.
    first = booster.trees[0]
    n_splits = min(max_leaves - 1, int((~unlimited.is_leaf).sum()))
    assert int((~first.is_leaf).sum()) == n_splits
    np.testing.assert_array_equal(first.feature[~first.is_leaf], unlimited.feature[~unlimited.is_leaf][:n_splits])


def test_max_leaves_must_be_a_count():
    X, y = _data(np.random.default_rng(1), 100)
    with pytest.raises(ValueError, match=r"max_leaves=-1 is out of range"):
        dgboost.train({"max_leaves": -1}, X, y)


@pytest.mark.gpu
def test_capped_model_file_is_identical_to_the_cpus(tmp_path):
    cp = pytest.importorskip("cupy")
    X, y = _data(np.random.default_rng(2), 20_000)
    params = {"max_depth": 8, "max_leaves": 37, "eta": 0.3}
    dgboost.train(params, X, y, num_boost_round=15).save_model(tmp_path / "cpu.json")
    dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y),
                  num_boost_round=15).save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()


# ---- symmetric (oblivious) trees ---------------------------------------------------------

from dgboost.kernels import MIN_SPLIT_GAIN, Regularisation, evaluate_level_split, node_gains  # noqa: E402

NO_REG = Regularisation(0.0, 0.0, 0.0, 0.0, 0.0)


def test_level_split_by_hand():
    # Two nodes, two features of two bins. Feature 0 splits both nodes well: node 0 into
    # (2, 2) and (-2, 2), gain 2 + 2 - 0 = 4; node 1 into (1, 1) and (-3, 3), 1 + 3 - 1 = 3;
    # total 7. Feature 1 scores 0 + (0.5 + 4.5 - 1) = 4. Every node splits on feature 0.
    hist = np.array([[[2, 2], [-2, 2], [0, 1], [0, 3]],
                     [[1, 1], [-3, 3], [1, 2], [-3, 2]]], np.int64)
    table = evaluate_level_split(hist, np.array([[0, 4], [-2, 4]]), np.ones(2, bool), np.array([0, 0, 1, 1], np.int32),
                                 np.array([0, 2, 4]), np.ones(2), NO_REG)
    np.testing.assert_array_equal(table[:, [0, 1, 2, 3]], [[1, 0, 0, 0], [1, 0, 0, 0]])
    np.testing.assert_array_equal(table[:, 4].view(np.float64), [4.0, 3.0])  # each node's own score
    np.testing.assert_array_equal(table[:, 5:], [[2, 2, -2, 2], [1, 1, -3, 3]])
    only_1 = evaluate_level_split(hist, np.array([[0, 4], [-2, 4]]), np.ones(2, bool), np.array([0, 0, 1, 1], np.int32),
                                  np.array([0, 2, 4]), np.ones(2), NO_REG, np.array([False, True]))
    assert (only_1[:, 1] == 1).all() and (only_1[:, 0] == 1).all()
    none = evaluate_level_split(hist, np.array([[0, 4], [-2, 4]]), np.ones(2, bool), np.array([0, 0, 1, 1], np.int32),
                                np.array([0, 2, 4]), np.ones(2), NO_REG, np.array([False, False]))
    assert not none[:, 0].any() and np.all(none[:, 4].view(np.float64) == -np.inf)


def _naive_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, allowed):
    """Symmetric split evaluation as plain loops, every gain from the array program node_gains."""
    inverse = 1.0 / np.asarray(scales, np.float64)
    gain = lambda g, h: float(node_gains(np.array([g]), np.array([h]), rules)[0])  # noqa: E731
    n_nodes, n_bins = hist.shape[:2]
    totals = np.zeros((n_bins, 2))
    left_of = np.zeros((n_nodes, n_bins, 2, 2), np.int64)
    for feature in range(len(bin_offsets) - 1):
        begin, end = bin_offsets[feature], bin_offsets[feature + 1]
        if allowed is not None and not allowed[feature]:
            totals[begin:end] = -np.inf
            continue
        for node in range(n_nodes):
            missing = node_sums[node] - hist[node, begin:end].sum(axis=0)
            prefix = np.cumsum(hist[node, begin:end], axis=0)
            for b in range(begin, end):
                for d in range(2):
                    left = prefix[b - begin] + d * missing
                    left_of[node, b, d] = left
                    if not active[node]:
                        continue
                    g, h = node_sums[node, 0] * inverse[0], node_sums[node, 1] * inverse[1]
                    gl, hl = left[0] * inverse[0], left[1] * inverse[1]
                    totals[b, d] += (gain(gl, hl) + gain(g - gl, h - hl)) - gain(g, h)
    flat = totals.reshape(-1)
    best = int(np.argmax(flat)) if np.isfinite(flat).any() else -1
    rows = []
    for node in range(n_nodes):
        if best < 0 or flat[best] == -np.inf:
            rows.append([0, 0, 0, 0, np.float64(-np.inf).view(np.int64), 0, 0, *node_sums[node]])
            continue
        b, d = divmod(best, 2)
        feature = int(feature_of_bin[b])
        left = left_of[node, b, d]
        g, h = node_sums[node, 0] * inverse[0], node_sums[node, 1] * inverse[1]
        gl, hl = left[0] * inverse[0], left[1] * inverse[1]
        score = (gain(gl, hl) + gain(g - gl, h - hl)) - gain(g, h) if active[node] else -np.inf
        valid = active[node] and flat[best] > MIN_SPLIT_GAIN and flat[best] >= rules.gamma
        rows.append([int(valid), feature, b - bin_offsets[feature], d, np.float64(score).view(np.int64),
                     *left, *(node_sums[node] - left)])
    return np.array(rows, np.int64)


@pytest.mark.parametrize("seed", range(8))
def test_level_split_equals_plain_loops(seed):
    from test_kernels import _random_level

    rng = np.random.default_rng(seed)
    hist, node_sums, active, feature_of_bin, bin_offsets = _random_level(rng, int(rng.integers(1, 9)),
                                                                          int(rng.integers(1, 6)))
    rules = [NO_REG, Regularisation(1.0, 0.5, 2.0, 0.0, 0.1), Regularisation(1.0, 0.0, 0.0, 0.7, 0.0)][seed % 3]
    allowed = rng.random(len(bin_offsets) - 1) < 0.7 if seed % 2 else None
    scales = np.array([0.5, 2.0])
    expected = _naive_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, allowed)
    np.testing.assert_array_equal(
        evaluate_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, allowed), expected)


def test_symmetric_trees_share_each_levels_split_and_predict_by_bits():
    from dgboost.tree.predict import Forest

    X, y = _data(np.random.default_rng(3), 6000)
    booster = dgboost.train({"max_depth": 5, "grow_policy": "symmetric", "gamma": 40.0}, X, y, num_boost_round=12)
    depths = [tree.depth for tree in booster.trees]
    assert max(depths) == 5 and min(depths) < 5  # gamma stops some trees early
    for tree in booster.trees:
        assert tree.n_nodes == (1 << (tree.depth + 1)) - 1  # complete
        for level in range(tree.depth):
            nodes = slice((1 << level) - 1, (1 << (level + 1)) - 1)
            for column in (tree.feature, tree.threshold, tree.default_left):
                assert np.all(column[nodes] == column[nodes][0])
    forest = Forest.from_trees(booster.trees, booster.tree_outputs, np)
    assert forest.oblivious is not None and forest.oblivious.depth == 5
    walked = dgboost.kernels.predict_margins(X, forest.left, forest.right, forest.feature, forest.threshold,
                                             forest.default_left, forest.value, forest.roots, forest.outputs_device,
                                             forest.depth, np.zeros((len(X), 1), np.float32))
    by_bits = dgboost.kernels.predict_oblivious(X, forest.oblivious.feature, forest.oblivious.threshold,
                                                forest.oblivious.default_left, forest.oblivious.leaf_value,
                                                forest.outputs_device, forest.oblivious.depth,
                                                np.zeros((len(X), 1), np.float32))
    np.testing.assert_array_equal(by_bits, walked)


def test_symmetric_models_export_to_xgboost(tmp_path):
    xgb = pytest.importorskip("xgboost")
    X, y = _data(np.random.default_rng(4), 3000)
    booster = dgboost.train({"max_depth": 4, "grow_policy": "symmetric"}, X, y, num_boost_round=10)
    booster.save_model(tmp_path / "model.json", format="xgboost")
    theirs = xgb.Booster(model_file=str(tmp_path / "model.json")).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(theirs, booster.predict(X), rtol=1e-6, atol=1e-6)


def test_symmetric_is_as_accurate_as_depthwise():
    from dgboost.datasets import make_higgs_like
    from sklearn.metrics import roc_auc_score

    X, y = make_higgs_like(40_000, seed=0)
    X_test, y_test = make_higgs_like(20_000, seed=1)
    auc = {policy: roc_auc_score(y_test, dgboost.train({"objective": "binary:logistic", "max_depth": 6, "eta": 0.1,
                                                         "grow_policy": policy}, X, y, num_boost_round=60)
                                 .predict(X_test)) for policy in ("depthwise", "symmetric")}
    assert auc["symmetric"] > auc["depthwise"] - 0.005, auc


@pytest.mark.parametrize("name, value", [("monotone_constraints", (1, 0, 0, 0, 0, 0)),
                                         ("interaction_constraints", [[0, 1]]), ("max_leaves", 8)])
def test_symmetric_refuses_per_node_rules(name, value):
    X, y = _data(np.random.default_rng(5), 100)
    with pytest.raises(ValueError, match=f"{name} does not apply to grow_policy='symmetric'"):
        dgboost.train({"grow_policy": "symmetric", name: value}, X, y)


@pytest.mark.gpu
def test_symmetric_kernels_equal_their_twins():
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cpu, cuda
    from test_kernels import _random_level

    for seed in range(6):
        rng = np.random.default_rng(seed)
        hist, node_sums, active, feature_of_bin, bin_offsets = _random_level(rng, 30, 9)
        rules = [NO_REG, Regularisation(1.0, 0.5, 2.0, 0.0, 0.1), Regularisation(1.0, 0.0, 0.0, 0.7, 0.0)][seed % 3]
        allowed = rng.random(9) < 0.7 if seed % 2 else None
        scales = np.array([0.5, 2.0])
        expected = cpu.evaluate_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, allowed)
        got = cuda.evaluate_level_split(*(cp.asarray(a) for a in (hist, node_sums, active, feature_of_bin)), bin_offsets,
                                        cp.asarray(scales), rules, None if allowed is None else cp.asarray(allowed))
        np.testing.assert_array_equal(got.get(), expected)
    # Features of 1 to 3 bins (a warp each) beside ones of 40 and 300 (a block each), in one level.
    rng = np.random.default_rng(11)
    n_bins = np.concatenate([rng.integers(1, 4, 200), [40, 300]])
    bin_offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    feature_of_bin = np.repeat(np.arange(len(n_bins)), n_bins).astype(np.int32)
    hist = np.stack([rng.integers(-50, 51, (7, bin_offsets[-1])), rng.integers(0, 51, (7, bin_offsets[-1]))], axis=-1)
    node_sums = hist[:, :300].sum(axis=1) + rng.integers(0, 200, (7, 2))
    active = np.array([True, True, False, True, True, True, False])
    for allowed in (None, rng.random(len(n_bins)) < 0.6):
        expected = cpu.evaluate_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, np.array([0.5, 2.0]),
                                            NO_REG, allowed)
        got = cuda.evaluate_level_split(*(cp.asarray(a) for a in (hist, node_sums, active, feature_of_bin)), bin_offsets,
                                        cp.asarray([0.5, 2.0]), NO_REG, None if allowed is None else cp.asarray(allowed))
        np.testing.assert_array_equal(got.get(), expected)
    # Wide features (bins past one block), and the prediction kernel.
    X, y = _data(np.random.default_rng(6), 30_000)
    booster = dgboost.train({"max_depth": 6, "grow_policy": "symmetric", "max_bin": 1024}, X, y, num_boost_round=8)
    from dgboost.tree.predict import Forest

    host, device = Forest.from_trees(booster.trees, booster.tree_outputs, np), None
    device = Forest.from_trees(booster.trees, booster.tree_outputs, cp)
    levels = device.oblivious
    got = cuda.predict_oblivious(cp.asarray(X), levels.feature, levels.threshold, levels.default_left,
                                 levels.leaf_value, device.outputs_device, levels.depth, cp.zeros((len(X), 1), np.float32))
    expected = cpu.predict_oblivious(X, host.oblivious.feature, host.oblivious.threshold, host.oblivious.default_left,
                                     host.oblivious.leaf_value, host.outputs_device, host.oblivious.depth,
                                     np.zeros((len(X), 1), np.float32))
    np.testing.assert_array_equal(got.get(), expected)


@pytest.mark.gpu
def test_symmetric_model_file_is_identical_to_the_cpus(tmp_path):
    cp = pytest.importorskip("cupy")
    X, y = _data(np.random.default_rng(7), 20_000)
    params = {"max_depth": 7, "eta": 0.3, "grow_policy": "symmetric", "colsample_bylevel": 0.8}
    dgboost.train(params, X, y, num_boost_round=15).save_model(tmp_path / "cpu.json")
    dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y),
                  num_boost_round=15).save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()


# ---- lossguide ----------------------------------------------------------------------------


@pytest.mark.parametrize("max_leaves, max_depth", [(2, 6), (10, 0), (31, 4), (0, 3)])
def test_lossguide_stops_at_its_leaves_and_depth(max_leaves, max_depth):
    X, y = _data(np.random.default_rng(8), 5000)
    booster = dgboost.train({"grow_policy": "lossguide", "max_leaves": max_leaves, "max_depth": max_depth}, X, y,
                            num_boost_round=4)
    for tree in booster.trees:
        if max_leaves:  # the data always has a split left to make, but depth may cap first (2**4 = 16)
            assert int(tree.is_leaf.sum()) == min(max_leaves, 2**max_depth if max_depth else max_leaves)
        if max_depth:
            assert tree.depth <= max_depth
    if max_depth == 0:  # best first grows deep where the gains are: deeper than a balanced tree
        assert max(tree.depth for tree in booster.trees) > np.ceil(np.log2(max_leaves))


def test_lossguide_splits_the_best_leaf_first():
    X, y = _data(np.random.default_rng(9), 5000)
    first = dgboost.train({"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0}, X, y,
                          num_boost_round=1).trees[0]
    # Ids are given as nodes are split: the gains of the splits, in id order, never rise
    # above the best gain still waiting (the heap's order): check it by replaying the heap.
    import heapq

    waiting, order = [(-first.gain[0], 0)], []
    while waiting:
        gain, node = heapq.heappop(waiting)
        if first.left[node] < 0:
            continue
        order.append(node)
        for child in (first.left[node], first.right[node]):
            if first.left[child] >= 0:
                heapq.heappush(waiting, (-first.gain[child], child))
    splits = np.flatnonzero(first.left >= 0)
    np.testing.assert_array_equal(first.left[order], 1 + 2 * np.arange(len(order)))  # children in split order
    assert sorted(order) == splits.tolist()


def test_max_depth_zero_needs_lossguide():
    X, y = _data(np.random.default_rng(10), 100)
    with pytest.raises(ValueError, match="max_depth=0 .* needs grow_policy='lossguide'"):
        dgboost.train({"max_depth": 0}, X, y)


def test_lossguide_as_accurate_as_xgboost():
    xgb = pytest.importorskip("xgboost")
    from dgboost.datasets import make_higgs_like
    from sklearn.metrics import roc_auc_score

    X, y = make_higgs_like(60_000, seed=0)
    X_test, y_test = make_higgs_like(20_000, seed=1)
    params = {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 63, "max_depth": 0, "eta": 0.1}
    ours = roc_auc_score(y_test, dgboost.train(params, X, y, num_boost_round=50).predict(X_test))
    theirs = roc_auc_score(y_test, xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), 50)
                           .predict(xgb.DMatrix(X_test)))
    assert abs(ours - theirs) < 0.002, (ours, theirs)  # the bound


def test_lossguide_batches_split_the_best_leaves_together():
    X, y = _data(np.random.default_rng(12), 5000)
    params = {"grow_policy": "lossguide", "max_leaves": 30, "max_depth": 0}
    one = dgboost.train(params, X, y, num_boost_round=3)
    batched = dgboost.train({**params, "max_greedy_nodes": 4}, X, y, num_boost_round=3)
    for a, b in zip(one.trees, batched.trees):
        assert int(b.is_leaf.sum()) == int(a.is_leaf.sum()) == 30
        # The first splits agree: the root, then its children together (both among the best 4).
        assert a.feature[0] == b.feature[0]
    assert [t.to_dict() for t in one.trees] != [t.to_dict() for t in batched.trees]  # later, the order differs
    with pytest.raises(ValueError, match="max_greedy_nodes=0 is out of range"):
        dgboost.train({**params, "max_greedy_nodes": 0}, X, y)


@pytest.mark.parametrize("width", [2, 5, 16])
@pytest.mark.parametrize("extra", [{}, {"max_depth": 4}, {"max_leaves": 0, "max_depth": 5},
                                   {"max_leaves": 0, "max_depth": 9, "min_child_weight": 2},  # the pools grow
                                   {"monotone_constraints": (1, 0, -1, 0, 0, 0), "colsample_bynode": 0.7,
                                    "interaction_constraints": [[0, 1, 2], [2, 3, 4, 5]]},
                                   {"subsample": 0.5, "sampling_method": "gradient_based", "min_child_weight": 5}])
def test_speculative_lossguide_grows_xgboosts_order(monkeypatch, width, extra, tmp_path):
    """One leaf a step, ``width`` nodes split on the device a step ahead of their turn, the tree
    taking them in XGBoost's order: the model file of one node split a step."""
    from dgboost.tree import lossguide

    X, y = _data(np.random.default_rng(13), 6000)
    params = {"grow_policy": "lossguide", "max_leaves": 45, "max_depth": 0, "eta": 0.3, **extra}
    monkeypatch.setattr(lossguide, "SPECULATION", 1)
    one = dgboost.train(params, X, y, num_boost_round=4)
    one.save_model(tmp_path / "one.json")
    batches = []
    step = lossguide.LossguideGrower._step
    monkeypatch.setattr(lossguide.LossguideGrower, "_step",
                        lambda self, tree, batch: batches.append(len(batch)) or step(self, tree, batch))
    monkeypatch.setattr(lossguide, "SPECULATION", width)
    dgboost.train(params, X, y, num_boost_round=4).save_model(tmp_path / "speculated.json")
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "speculated.json").read_bytes()
    n_splits = sum(int((~tree.is_leaf).sum()) for tree in one.trees)
    assert max(batches) > 1 and len(batches) < n_splits  # fewer steps than splits


@pytest.mark.gpu
@pytest.mark.parametrize("extra", [{}, {"monotone_constraints": (1, 0, -1, 0, 0, 0), "colsample_bynode": 0.7,
                                        "interaction_constraints": [[0, 1, 2], [2, 3, 4, 5]]},
                                   {"subsample": 0.5, "sampling_method": "gradient_based"},
                                   {"max_greedy_nodes": 8, "colsample_bylevel": 0.8},
                                   {"max_leaves": 0, "max_depth": 9}])  # the pools grow
def test_lossguide_model_file_is_identical_to_the_cpus(extra, tmp_path):
    cp = pytest.importorskip("cupy")
    X, y = _data(np.random.default_rng(11), 20_000)
    params = {"grow_policy": "lossguide", "max_leaves": 40, "max_depth": 0, "eta": 0.3, **extra}
    dgboost.train(params, X, y, num_boost_round=10).save_model(tmp_path / "cpu.json")
    dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y),
                  num_boost_round=10).save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()


# ---- every row at its leaf ----------------------------------------------------------------

LEAF_CASES = {
    "depthwise": {"max_depth": 8, "min_child_weight": 4},  # leaves at many depths
    "depthwise-capped": {"max_depth": 7, "max_leaves": 20},
    "depthwise-upper-bound": {"max_depth": 7, "min_child_weight": 4, "_upper_bound": True},  # a GPU's padded levels
    "symmetric": {"grow_policy": "symmetric", "max_depth": 6},
    "lossguide": {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0, "_width": 1},  # one node a step
    "lossguide-speculated": {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0},
    "lossguide-batches": {"grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0, "max_greedy_nodes": 4},
    "multiclass": {"objective": "multi:softprob", "num_class": 3, "max_depth": 6},
    "paged": {"max_depth": 6, "max_device_matrix_bytes": 12_000},  # streamed page by page
    "paged-sample": {"max_depth": 6, "max_device_matrix_bytes": 12_000, "subsample": 0.3,
                     "sampling_method": "gradient_based"},  # a sample gathered into one page
}


def _leaves_checked(monkeypatch):
    """Check every tree grown from all its rows as it is finished: each row's leaf
    (positions, set once the tree is grown) is where routing the row sends it. Returns the
    list of trees checked."""
    from dgboost.backend import to_numpy
    from dgboost.tree.grower import Grower

    checked, finish = [], Grower._finish

    def checked_finish(self, levels, positions, scales, drawn=None, *args, **kwargs):
        grown = finish(self, levels, positions, scales, drawn, *args, **kwargs)
        if drawn is None:  # else _finish routed every row itself
            np.testing.assert_array_equal(to_numpy(grown.positions), to_numpy(grown.route(self.matrix)))
            checked.append((type(self.matrix).__name__, to_numpy(grown.positions)))
        return grown

    monkeypatch.setattr(Grower, "_finish", checked_finish)
    return checked


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("case", list(LEAF_CASES))
def test_every_row_is_put_at_the_leaf_routing_sends_it_to(case, device, monkeypatch):
    from dgboost.tree import lossguide
    from dgboost.tree.grower import Grower

    params = dict(LEAF_CASES[case])
    if params.pop("_upper_bound", False):
        monkeypatch.setattr(Grower, "_next_level_parents", lambda self, splits, n_bins_total: splits.n_nodes)
    if "_width" in params:
        monkeypatch.setattr(lossguide, "SPECULATION", params.pop("_width"))
    X, y = _data(np.random.default_rng(7), 3000)
    if params.get("objective") == "multi:softprob":
        y = np.digitize(y, [-0.5, 0.5]).astype(np.float32)
    if device == "cuda":
        cp = pytest.importorskip("cupy")
        X, y = cp.asarray(X), cp.asarray(y)
    checked = _leaves_checked(monkeypatch)
    dgboost.train({**params, "device": device, "eta": 0.3}, X, y, num_boost_round=4)
    assert checked  # trees of every row (a gathered sample's rows) were grown and checked
    assert max(len(np.unique(positions)) for _, positions in checked) >= 6  # rows at many leaves
    if case == "paged":
        assert {matrix for matrix, _ in checked} == {"PagedMatrix"}
