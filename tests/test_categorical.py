"""Categorical features (data/categories.py): category-set splits chosen by XGBoost's scans, the
codes a frame's categories get, prediction by category value, the model file and its export to
XGBoost, and bad input refused before any work."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pd = pytest.importorskip("pandas")

import dgboost  # noqa: E402
from dgboost.data.categories import MAX_CATEGORIES  # noqa: E402
from dgboost.kernels import cpu  # noqa: E402
from dgboost.kernels.cpu import CategorySplits, Regularisation  # noqa: E402

PARAMS = {"enable_categorical": True, "max_depth": 3, "eta": 0.5, "min_child_weight": 0.0}


def _table(n=4000, seed=0, n_a=12, n_b=3, missing=0.05):
    """A frame of two category columns (one of strings) and a number, and a target that
    depends on each category (its effects the same for every ``seed``)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_a, n)
    b = rng.integers(0, n_b, n)
    x = rng.standard_normal(n)
    effect = np.random.default_rng(1234).standard_normal(n_a)  # the same for every seed: test sets fit
    y = effect[a] + (b == 1) * 1.5 + 0.3 * x + 0.05 * rng.standard_normal(n)
    names = np.array([f"city{i:02d}" for i in range(n_a)], dtype=object)[a]
    names[rng.random(n) < missing] = None
    frame = pd.DataFrame({"a": pd.Categorical(names, categories=[f"city{i:02d}" for i in range(n_a)]),
                          "b": pd.Categorical(b), "x": x.astype(np.float32)})
    return frame, y.astype(np.float32)


# ---- the scan of one node ---------------------------------------------------------------------

def _one_node(sums, missing=(0, 0)):
    """A histogram of one node over one categorical feature: ``sums`` its categories' fixed-point
    (g, h), the node's totals those plus ``missing``."""
    hist = np.array([sums], dtype=np.int64)
    node_sums = hist.sum(axis=1) + np.array([missing], dtype=np.int64)
    return hist, node_sums


def _evaluate(hist, node_sums, max_onehot, max_threshold, rules=Regularisation(0.0, 0.0, 0.0, 0.0, 0.0)):
    n_bins = hist.shape[1]
    categories = CategorySplits(np.array([0], np.int32), max_onehot, max_threshold, 1)
    table = cpu.evaluate_splits(hist, node_sums, np.ones(1, bool), np.zeros(n_bins, np.int32),
                                np.array([0, n_bins], np.int64), np.ones(2), rules, categories=categories)
    gain = table[0, 4:5].copy().view(np.float64)[0]
    right = {c for c in range(n_bins) if (int(table[0, 9]) >> c) & 1}
    return table[0], gain, right


def _gain(left_g, left_h, total_g, total_h):
    right_g, right_h = total_g - left_g, total_h - left_h
    if left_h <= 0 or right_h <= 0:
        return -math.inf
    return left_g ** 2 / left_h + right_g ** 2 / right_h - total_g ** 2 / total_h


def test_the_partition_scan_finds_the_best_of_every_set_exactly():
    """Without regularisation, ordering categories by weight and scanning prefixes reaches the
    best of all 2**K - 2 sets (Fisher's result), the gain computed exactly."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = 7
        sums = np.stack([rng.integers(-50, 50, k), rng.integers(1, 30, k)], axis=1)
        hist, node_sums = _one_node(sums)
        row, gain, right = _evaluate(hist, node_sums, max_onehot=4, max_threshold=64)
        total_g, total_h = node_sums[0]
        brute = max(_gain(sum(sums[c, 0] for c in range(k) if c not in s), sum(sums[c, 1] for c in range(k)
                                                                             if c not in s), total_g, total_h)
                    for size in range(1, k) for s in itertools.combinations(range(k), size))
        assert row[2] == -1 and row[1] == 0  # a category-set split of the feature
        assert gain == pytest.approx(brute, rel=1e-12)
        left = [c for c in range(k) if c not in right]
        assert (row[5], row[6]) == tuple(sums[left].sum(axis=0))  # the left child's sums, exact


def test_one_hot_below_max_cat_to_onehot_sends_one_category_right():
    sums = [[10, 5], [-12, 4], [3, 6]]
    hist, node_sums = _one_node(sums)
    _, gain, right = _evaluate(hist, node_sums, max_onehot=4, max_threshold=64)
    best = max(range(3), key=lambda c: _gain(node_sums[0, 0] - sums[c][0], node_sums[0, 1] - sums[c][1],
                                             *node_sums[0]))
    assert right == {best} and gain == pytest.approx(_gain(node_sums[0, 0] - sums[best][0],
                                                           node_sums[0, 1] - sums[best][1], *node_sums[0]))


def test_max_cat_threshold_caps_the_categories_sent_right():
    rng = np.random.default_rng(5)
    sums = np.stack([rng.integers(-50, 50, 10), rng.integers(1, 30, 10)], axis=1)
    hist, node_sums = _one_node(sums)
    for cap in (1, 2, 3):
        _, _, right = _evaluate(hist, node_sums, max_onehot=4, max_threshold=cap)
        assert 1 <= len(right) <= cap


def test_missing_values_take_the_better_side_and_empty_categories_go_left():
    sums = [[40, 10], [0, 0], [-40, 10], [38, 10], [0, 0]]  # categories 1 and 4 have no rows here
    hist, node_sums = _one_node(sums, missing=(-45, 10))
    row, _, right = _evaluate(hist, node_sums, max_onehot=4, max_threshold=64)
    assert 1 not in right and 4 not in right
    # missing (negative gradients) goes with category 2's side
    assert bool(row[3]) == (2 not in right)


# ---- training and prediction --------------------------------------------------------------------

def test_a_frame_learns_its_categories_and_codes_give_the_same_model():
    frame, y = _table()
    model = dgboost.train(PARAMS, frame, y, num_boost_round=20)
    predictions = model.predict(frame)
    assert np.sqrt(np.mean((predictions - y) ** 2)) < 0.4  # the 5% missing "a" rows leave ~0.23; no categories: ~1.3
    assert any(tree.categories for tree in model.trees)
    codes = np.stack([frame["a"].cat.codes.replace(-1, np.nan), frame["b"].cat.codes, frame["x"]],
                     axis=1).astype(np.float32)
    by_codes = dgboost.train({**PARAMS, "feature_types": ["c", "c", "q"]}, codes, y, num_boost_round=20)
    np.testing.assert_array_equal(by_codes.predict(codes), predictions)


def test_a_numeric_split_of_codes_is_worse_than_category_sets():
    frame, y = _table(n_a=40)
    codes = np.stack([frame["a"].cat.codes.replace(-1, np.nan), frame["b"].cat.codes, frame["x"]],
                     axis=1).astype(np.float32)
    params = {**PARAMS, "max_depth": 2}
    by_sets = dgboost.train({**params, "feature_types": ["c", "c", "q"]}, codes, y, num_boost_round=10)
    by_order = dgboost.train({k: v for k, v in params.items() if k != "enable_categorical"}, codes, y,
                             num_boost_round=10)
    error = lambda m: np.mean((m.predict(codes) - y) ** 2)  # noqa: E731
    assert error(by_sets) < 0.7 * error(by_order)


@settings(max_examples=5, deadline=None)
@given(st.randoms(use_true_random=False))
def test_relabelling_the_categories_does_not_change_predictions(random):
    frame, y = _table(n=1500, n_a=9)
    order = list(frame["a"].cat.categories)
    random.shuffle(order)
    relabelled = frame.copy()
    relabelled["a"] = relabelled["a"].cat.reorder_categories(order)
    first = dgboost.train(PARAMS, frame, y, num_boost_round=5)
    second = dgboost.train(PARAMS, relabelled, y, num_boost_round=5)
    np.testing.assert_array_equal(first.predict(frame), second.predict(relabelled))
    np.testing.assert_array_equal(first.predict(relabelled), first.predict(frame))  # coded by value


def test_unseen_categories_and_codes_follow_the_default_direction():
    frame, y = _table()
    model = dgboost.train(PARAMS, frame, y, num_boost_round=5)
    new = frame.head(50).copy()
    new["a"] = pd.Categorical(["elsewhere"] * 50)
    missing = frame.head(50).copy()
    missing["a"] = pd.Categorical([None] * 50, categories=frame["a"].cat.categories)
    np.testing.assert_array_equal(model.predict(new), model.predict(missing))
    codes = np.stack([frame["a"].cat.codes.replace(-1, np.nan), frame["b"].cat.codes, frame["x"]],
                     axis=1).astype(np.float32)
    by_codes = dgboost.train({**PARAMS, "feature_types": ["c", "c", "q"]}, codes, y, num_boost_round=5)
    beyond, nan = codes[:50].copy(), codes[:50].copy()
    beyond[:, 0], nan[:, 0] = 1000, np.nan
    np.testing.assert_array_equal(by_codes.predict(beyond), by_codes.predict(nan))


def test_eval_sets_leaves_and_contributions():
    frame, y = _table()
    model = dgboost.train(PARAMS, frame, y, num_boost_round=8, evals=[(frame, y, "train"),
                                                                       (frame.iloc[::-1], y[::-1], "reversed")])
    result = model.evals_result()
    assert result["train"]["rmse"] == pytest.approx(result["reversed"]["rmse"], rel=1e-6)
    margins = model.predict(frame, output_margin=True)
    contributions = model.predict(frame, pred_contribs=True)
    np.testing.assert_allclose(contributions.sum(axis=1), margins, rtol=1e-5, atol=1e-5)
    leaves = model.predict(frame, pred_leaf=True)
    values = np.array([[tree.value[leaf] for tree, leaf in zip(model.trees, row)] for row in leaves[:200]])
    np.testing.assert_allclose(values.sum(axis=1) + model.base_margin[0], margins[:200], rtol=1e-5, atol=1e-5)


def test_lossguide_and_a_continued_model_take_categories():
    frame, y = _table()
    params = {**PARAMS, "grow_policy": "lossguide", "max_leaves": 8, "max_depth": 0}
    first = dgboost.train(params, frame, y, num_boost_round=4)
    assert any(tree.categories for tree in first.trees)
    whole = dgboost.train(params, frame, y, num_boost_round=8)
    continued = dgboost.train(params, frame, y, num_boost_round=4, init_model=first)
    np.testing.assert_array_equal(continued.predict(frame), whole.predict(frame))


def test_the_model_file_keeps_categories_and_xgboost_predicts_the_same(tmp_path):
    xgb = pytest.importorskip("xgboost")
    frame, y = _table()
    model = dgboost.train(PARAMS, frame, y, num_boost_round=10)
    path = tmp_path / "model.json"
    model.save_model(path)
    loaded = dgboost.Booster.load_model(path)
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))
    assert loaded.save_raw() == model.save_raw()
    model.save_model(tmp_path / "xgb.json", format="xgboost")
    theirs = xgb.Booster()
    theirs.load_model(tmp_path / "xgb.json")
    np.testing.assert_allclose(theirs.predict(xgb.DMatrix(frame, enable_categorical=True)), model.predict(frame),
                               rtol=1e-5, atol=1e-5)
    dump = model.get_dump()[0]
    assert ":{" in dump  # a set, XGBoost's text form
    table = model.trees_to_dataframe()
    assert table["Category"].notna().any()


def test_xgboost_partition_splits_reach_the_same_accuracy():
    xgb = pytest.importorskip("xgboost")
    frame, y = _table(n=6000, n_a=60)
    test, y_test = _table(n=3000, n_a=60, seed=1)
    params = {"max_depth": 4, "eta": 0.3, "max_cat_to_onehot": 4, "max_cat_threshold": 64}
    ours = dgboost.train({**params, "enable_categorical": True}, frame, y, num_boost_round=30)
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(frame, y, enable_categorical=True), 30)
    rmse = lambda p: float(np.sqrt(np.mean((p - y_test) ** 2)))  # noqa: E731
    assert rmse(ours.predict(test)) < rmse(theirs.predict(xgb.DMatrix(test, enable_categorical=True))) + 0.01


def test_the_scikit_learn_estimators_take_category_frames():
    pytest.importorskip("sklearn")
    frame, y = _table()
    labels = np.where(y > np.median(y), "high", "low")
    classifier = dgboost.DGBClassifier(enable_categorical=True, n_estimators=10, max_depth=3).fit(frame, labels)
    assert (classifier.predict(frame) == labels).mean() > 0.9
    assert list(classifier.feature_names_in_) == ["a", "b", "x"]
    regressor = dgboost.DGBRegressor(enable_categorical=True, n_estimators=10, max_cat_to_onehot=64).fit(frame, y)
    assert all(len(codes) == 1 for tree in regressor.get_booster().trees for codes in tree.categories.values())


# ---- target statistics ------------------------------------------------------------------------

def test_ordered_target_statistics_sum_the_earlier_blocks_of_each_category_exactly():
    from dgboost.collective import LocalCommunicator
    from dgboost.data.categories import Categories, statistics_blocks, target_statistics
    from dgboost._hashing import STREAM_TARGET_STATISTICS, stream_key, uniform

    rng = np.random.default_rng(2)
    n = 3000
    codes = rng.integers(0, 7, n).astype(np.float32)
    codes[rng.random(n) < 0.1] = np.nan
    X = np.stack([codes, rng.standard_normal(n).astype(np.float32)], axis=1)
    label = rng.standard_normal(n).astype(np.float32) * 3
    index = np.arange(100, 100 + n, dtype=np.int64)  # a shard of a larger data set
    categories = Categories((True, False), (None, None), (7, 0))
    encoded, fitted = target_statistics(X, label, index, n, categories, seed=5, comm=LocalCommunicator())
    blocks = statistics_blocks(7)
    block = np.minimum((uniform(index, stream_key(5, STREAM_TARGET_STATISTICS)) * blocks).astype(int), blocks - 1)
    prior = label.astype(np.float64).mean()
    for row in rng.choice(n, 200, replace=False):
        if np.isnan(codes[row]):
            assert np.isnan(encoded[row, 0])
            continue
        earlier = (codes == codes[row]) & (block < block[row])
        expected = (label[earlier].astype(np.float64).sum() + prior) / (earlier.sum() + 1.0)
        assert encoded[row, 0] == pytest.approx(expected, rel=1e-6)
    np.testing.assert_array_equal(encoded[:, 1], X[:, 1])  # numeric features as they were
    whole = [(label[codes == c].astype(np.float64).sum() + prior) / ((codes == c).sum() + 1.0) for c in range(7)]
    np.testing.assert_allclose(fitted.statistics[0], whole, rtol=1e-6)
    assert fitted.prior == pytest.approx(prior)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 499), st.integers(-50, 50))
def test_a_rows_own_label_never_enters_its_statistic(row, change):
    """Moving some of a row's label to a row of another category leaves the prior and every
    earlier sum of the row's category as they were: its statistic does not move."""
    from dgboost.collective import LocalCommunicator
    from dgboost.data.categories import Categories, target_statistics

    rng = np.random.default_rng(4)
    X = rng.integers(0, 3, (500, 1)).astype(np.float32)
    label = rng.integers(0, 10, 500).astype(np.float32)  # integers: the sums stay exact
    other = int(np.flatnonzero(X[:, 0] != X[row, 0])[0])
    changed = label.copy()
    changed[row] += change
    changed[other] -= change
    categories = Categories((True,), (None,), (3,))
    first, _ = target_statistics(X, label, np.arange(500), 500, categories, 0, LocalCommunicator())
    second, _ = target_statistics(X, changed, np.arange(500), 500, categories, 0, LocalCommunicator())
    assert first[row, 0] == second[row, 0]


def test_target_statistics_train_predict_save_and_refuse_export(tmp_path):
    frame, y = _table(n=4000, n_a=60)
    test, y_test = _table(n=2000, n_a=60, seed=1)
    params = {**PARAMS, "cat_encoding": "target_statistics", "max_depth": 4, "eta": 0.3}
    model = dgboost.train(params, frame, y, num_boost_round=20)
    assert not any(tree.categories for tree in model.trees)  # numeric splits of the statistics
    assert np.sqrt(np.mean((model.predict(test) - y_test) ** 2)) < 0.6
    path = tmp_path / "model.json"
    model.save_model(path)
    np.testing.assert_array_equal(dgboost.Booster.load_model(path).predict(test), model.predict(test))
    with pytest.raises(ValueError, match="target statistics.*cannot hold"):
        model.save_model(tmp_path / "xgb.json", format="xgboost")
    symmetric = dgboost.train({**params, "grow_policy": "symmetric"}, frame, y, num_boost_round=5)
    contributions = symmetric.predict(test, pred_contribs=True)
    np.testing.assert_allclose(contributions.sum(axis=1), symmetric.predict(test, output_margin=True), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match="one-output objectives"):
        dgboost.train({**params, "objective": "multi:softprob", "num_class": 3}, frame, (y > 0).astype(int) + 1,
                      num_boost_round=1)


def test_combinations_find_the_interacting_pair_and_predict_through_it():
    rng = np.random.default_rng(8)
    n = 20_000
    codes = rng.integers(0, 8, (n, 3)).astype(np.float32)
    table = np.random.default_rng(9).standard_normal((8, 8))
    y = (table[codes[:, 0].astype(int), codes[:, 2].astype(int)] + 0.1 * rng.standard_normal(n)).astype(np.float32)
    X = np.concatenate([codes, rng.standard_normal((n, 1)).astype(np.float32)], axis=1)
    params = {"enable_categorical": True, "feature_types": ["c", "c", "c", "q"], "cat_encoding": "target_statistics",
              "max_depth": 4, "eta": 0.3}
    paired = dgboost.train(params, X, y, num_boost_round=30)
    assert paired.categories.combinations[0] == (0, 2)  # the pair that carries the signal, found first
    alone = dgboost.train({**params, "max_cat_combinations": 0}, X, y, num_boost_round=30)
    assert alone.categories.combinations == ()
    error = lambda m: float(np.mean((m.predict(X) - y) ** 2))  # noqa: E731
    assert error(paired) < 0.5 * error(alone)
    assert "f0*f2" in paired.get_score("gain")
    contributions = paired.predict(X[:300], pred_contribs=True)
    assert contributions.shape == (300, 5)  # the pair's shared by its two features
    np.testing.assert_allclose(contributions.sum(axis=1), paired.predict(X[:300], output_margin=True), rtol=1e-5,
                               atol=1e-5)
    constrained = dgboost.train({**params, "interaction_constraints": [[0, 1, 2, 3]]}, X, y, num_boost_round=2)
    assert constrained.categories.combinations == ()
    # Continued on its rows, the model is the one trained at once; on other labels its trees would
    # read other statistics: refused.
    first = dgboost.train(params, X, y, num_boost_round=20)
    assert dgboost.train(params, X, y, num_boost_round=10, init_model=first).save_raw() == paired.save_raw()
    shuffled = y[np.random.default_rng(1).permutation(n)]
    with pytest.raises(ValueError, match="init_model's target statistics differ"):
        dgboost.train(params, X, shuffled, num_boost_round=1, init_model=paired)


def test_a_code_past_a_trees_sets_goes_left_as_in_training():
    """Sets of low codes (one word) of a feature of 100 categories, missing values sent right: a
    code of 32 or more is in no set, so it goes left at prediction as in training; continued
    training, which starts from the trees' predictions, gives the model trained at once."""
    rng = np.random.default_rng(6)
    n = 6000
    codes = rng.integers(0, 100, n).astype(np.float32)
    codes[rng.random(n) < 0.2] = np.nan
    y = np.where(np.isnan(codes) | (codes < 3), 3.0, 0.0).astype(np.float32) + 0.1 * rng.standard_normal(n)
    X = np.stack([codes, rng.standard_normal(n).astype(np.float32)], axis=1)
    params = {"enable_categorical": True, "feature_types": ["c", "q"], "max_cat_threshold": 3, "max_depth": 1}
    whole = dgboost.train(params, X, y, num_boost_round=6)
    first = dgboost.train(params, X, y, num_boost_round=3)
    sets = [(tree, node) for tree in first.trees for node in tree.categories]
    assert sets and all(tree.categories[node][-1] < 32 for tree, node in sets)  # one word: codes past 31 in no set
    assert any(not tree.default_left[node] for tree, node in sets)  # where the default is right
    assert dgboost.train(params, X, y, num_boost_round=3, init_model=first).save_raw() == whole.save_raw()
    past = X[:200].copy()
    past[:, 0] = 99.0
    np.testing.assert_array_equal(first.predict(past), first.predict(np.where(past == 99.0, 40.0, past)))


def test_continuing_keeps_the_models_categories_and_encoding():
    X = np.stack([np.arange(400) % 10, np.arange(400) % 7], axis=1).astype(np.float32)
    y = (X[:, 0] == 9).astype(np.float32)
    params = {"enable_categorical": True, "feature_types": ["c", "q"], "max_depth": 2}
    model = dgboost.train(params, X, y, num_boost_round=2)
    fewer = X[X[:, 0] < 8]
    continued = dgboost.train(params, fewer, y[X[:, 0] < 8], num_boost_round=1, init_model=model)
    assert continued.categories.counts[0] == 10  # its trees may send code 9 right
    with pytest.raises(ValueError, match="cat_encoding='partition'"):
        dgboost.train({**params, "cat_encoding": "target_statistics"}, X, y, num_boost_round=1, init_model=model)


def test_missing_does_not_apply_to_category_codes():
    frame, y = _table(n=600)
    model = dgboost.train({**PARAMS, "missing": 0.0}, frame, y, num_boost_round=3)
    zero = frame[frame["b"] == 0].head(20)
    unseen = zero.assign(b=pd.Categorical([None] * len(zero), categories=frame["b"].cat.categories))
    assert not np.array_equal(model.predict(zero), model.predict(unseen))


# ---- bad input ------------------------------------------------------------------------------------

def test_a_category_column_needs_enable_categorical():
    frame, y = _table(n=100)
    with pytest.raises(TypeError, match="column 'a' is categorical.*enable_categorical=True"):
        dgboost.train({}, frame, y, num_boost_round=1)


@pytest.mark.parametrize("params, message", [
    ({"feature_types": ["c", "q"]}, "feature_types has 2 entries but X has 3 features"),
    ({"feature_types": ["c", "q", "x"]}, r"feature_types\[2\]='x' is not a feature type"),
    ({"feature_types": ["q", "c", "q"], "enable_categorical": False}, "pass enable_categorical=True"),
    ({"feature_types": ["c", "q", "q"], "grow_policy": "symmetric"}, "symmetric.*category-set splits"),
    ({"feature_types": ["c", "q", "q"], "monotone_constraints": [1, 0, 0]}, r"monotone_constraints\[0\]=1"),
    ({"feature_types": ["c", "q", "q"], "max_cat_threshold": 0}, "max_cat_threshold=0"),
])
def test_bad_categorical_parameters_are_refused(params, message):
    X = np.array([[0, 1, 2], [1, 0, 3]] * 10, dtype=np.float32)
    with pytest.raises((ValueError, TypeError), match=message):
        dgboost.train({"enable_categorical": True, **params}, X, np.arange(20, dtype=np.float32),
                      num_boost_round=1)


@pytest.mark.parametrize("value, row", [(-1.0, 3), (1.5, 3), (float(MAX_CATEGORIES), 3)])
def test_bad_codes_are_refused_naming_the_row(value, row):
    X = np.zeros((10, 2), dtype=np.float32)
    X[row, 0] = value
    with pytest.raises(ValueError, match=f"categorical column 0 at row {row}.*integers from 0"):
        dgboost.train({"enable_categorical": True, "feature_types": ["c", "q"]}, X, np.ones(10, np.float32),
                      num_boost_round=1)


def test_predict_refuses_a_numeric_column_for_a_categorical_one():
    frame, y = _table(n=200)
    model = dgboost.train(PARAMS, frame, y, num_boost_round=1)
    numeric = frame.assign(a=frame["a"].cat.codes)
    with pytest.raises(TypeError, match="column 'a' has dtype int8 but is categorical in the model"):
        model.predict(numeric)


def test_predict_and_eval_sets_name_columns_out_of_place_before_their_codes():
    """A categorical model given its columns in another order, or one too many or too few: the
    columns are named as a numeric model's are, not a column's dtype blamed (or a train-only
    enable_categorical advised)."""
    frame, y = _table(n=200)
    model = dgboost.train(PARAMS, frame, y, num_boost_round=1)
    reordered = frame[list(frame.columns)[::-1]]
    for X, detail in [(reordered, "same names in another order"), (frame.assign(extra=1.0), "missing \\[\\], unexpected \\['extra'\\]"),
                      (frame[list(frame.columns)[:1]], "missing \\[")]:
        with pytest.raises(ValueError, match=f"X columns do not match the training features \\({detail}"):
            model.predict(X)
    with pytest.raises(ValueError, match="evals\\[0\\] X columns do not match the training features"):
        dgboost.train(PARAMS, frame, y, num_boost_round=1, evals=[(reordered, y, "v")])


def test_categories_of_another_kind_than_the_models_are_refused():
    """Numbers in training, their text at predict (or the reverse): every value would be unseen,
    the column lost without a word; refused, as XGBoost refuses it. Another order is fine."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": pd.Categorical(rng.choice([1, 2, 3], 60)), "b": rng.normal(size=60)})
    y = (frame["a"].cat.codes.to_numpy() == 1) + rng.normal(size=60) * 0.1
    model = dgboost.train(PARAMS, frame, y, num_boost_round=2)
    with pytest.raises(TypeError, match="column 'a' has categories of text but the model's are numbers"):
        model.predict(frame.assign(a=pd.Categorical(frame["a"].astype(str))))
    reordered = frame.assign(a=pd.Categorical(frame["a"], categories=[3, 2, 1]))
    np.testing.assert_array_equal(model.predict(reordered), model.predict(frame))


def test_monotone_constraints_by_name_on_a_category_column_are_refused():
    frame, y = _table(n=100)
    with pytest.raises(ValueError, match=r"monotone_constraints\['a'\]=1: feature 'a' is categorical"):
        dgboost.train({**PARAMS, "monotone_constraints": {"a": 1}}, frame, y, num_boost_round=1)


def test_categories_of_other_types_are_refused():
    frame = pd.DataFrame({"day": pd.Categorical(pd.to_datetime(["2026-01-01", "2026-01-02"] * 5))})
    with pytest.raises(TypeError, match="column 'day' has a category of type Timestamp.*rename_categories"):
        dgboost.train({"enable_categorical": True}, frame, np.ones(10, np.float32), num_boost_round=1)


def test_too_many_categories_are_refused_before_work():
    frame = pd.DataFrame({"a": pd.Categorical([0, 1], categories=range(MAX_CATEGORIES + 1))})
    with pytest.raises(ValueError, match=f"at most {MAX_CATEGORIES}"):
        dgboost.train({"enable_categorical": True}, frame, np.ones(2, np.float32), num_boost_round=1)


# ---- on a GPU: the kernels' twins and the CPU's model ---------------------------------------------

def _random_level(rng, n_nodes, n_categories, numeric_bins, empty=0.2):
    """A level's histograms over a numeric feature of ``numeric_bins`` bins and categorical
    features of ``n_categories`` bins, some categories empty in a node, some rows missing."""
    n_bins = [numeric_bins, *n_categories]
    offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    hist = np.stack([rng.integers(-400, 400, (n_nodes, offsets[-1])), rng.integers(1, 60, (n_nodes, offsets[-1]))],
                    axis=2).astype(np.int64)
    hist[rng.random(hist.shape[:2]) < empty] = 0
    node_sums = hist.sum(axis=1) + np.stack([rng.integers(-300, 300, n_nodes), rng.integers(0, 40, n_nodes)], 1)
    feature_of_bin = np.repeat(np.arange(len(n_bins)), n_bins).astype(np.int32)
    return hist, node_sums, offsets, feature_of_bin


@pytest.mark.gpu
@pytest.mark.parametrize("rules", [Regularisation(1.0, 0.0, 1.0, 0.0, 0.0), Regularisation(0.5, 2.0, 0.0, 0.7, 0.1)])
@pytest.mark.parametrize("max_onehot, max_threshold", [(4, 64), (64, 3), (1, 1)])
@pytest.mark.parametrize("in_shared", [True, False], ids=["sorted-in-shared", "ranked-in-global"])
def test_category_split_kernels_equal_their_twins(rules, max_onehot, max_threshold, in_shared, monkeypatch):
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cuda

    monkeypatch.setattr(cuda, "CATEGORY_SORT_IN_SHARED", in_shared)
    rng = np.random.default_rng(11)
    hist, node_sums, offsets, feature_of_bin = _random_level(rng, 37, [3, 40, 300, 2], 30)
    categories = CategorySplits(np.array([1, 2, 3, 4], np.int32), max_onehot, max_threshold, 5)
    active = rng.random(37) < 0.9
    allowed = rng.random((37, 5)) < 0.8
    scales = np.array([2.0 ** 8, 2.0 ** 4])  # hessians of categories above min_child_weight: weights differ
    for mask in (None, allowed):
        expected = cpu.evaluate_splits(hist, node_sums, active, feature_of_bin, offsets, scales, rules, mask,
                                       categories=categories)
        got = cuda.evaluate_splits(cp.asarray(hist), cp.asarray(node_sums), cp.asarray(active),
                                   cp.asarray(feature_of_bin), cp.asarray(offsets), cp.asarray(scales), rules,
                                   None if mask is None else cp.asarray(mask), categories=categories)
        np.testing.assert_array_equal(cp.asnumpy(got), expected)
        assert (expected[:, 2] == -1).any() and (expected[:, 2] >= 0).any()  # both kinds were chosen


@pytest.mark.gpu
def test_a_feature_of_many_categories_splits_as_its_twin():
    """12000 categories: sorted in shared memory (12 x 16384 bytes a block, on an H100), ties of
    equal weights (repeated sums) in code order, as the twin."""
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cuda

    rng = np.random.default_rng(12)
    hist, node_sums, offsets, feature_of_bin = _random_level(rng, 3, [12_000], 4, empty=0.5)
    hist[:, 4:, 0] = hist[:, 4:, 0] % 7  # many equal (g, h): equal weights
    hist[:, 4:, 1] = np.where(hist[:, 4:, 1] > 0, hist[:, 4:, 1] % 3 + 1, 0)
    node_sums = hist.sum(axis=1) + 5
    categories = CategorySplits(np.array([1], np.int32), 4, 5000, -(-12_000 // 64))
    rules, scales = Regularisation(1.0, 0.0, 0.0, 0.0, 0.0), np.array([2.0 ** 8, 2.0 ** 4])
    expected = cpu.evaluate_splits(hist, node_sums, np.ones(3, bool), feature_of_bin, offsets, scales, rules,
                                   categories=categories)
    got = cuda.evaluate_splits(*(cp.asarray(a) for a in (hist, node_sums, np.ones(3, bool), feature_of_bin, offsets,
                                                           scales)), rules, categories=categories)
    np.testing.assert_array_equal(cp.asnumpy(got), expected)
    assert (expected[:, 2] == -1).any()


@pytest.mark.gpu
def test_partition_route_and_prediction_of_category_sets_equal_their_twins():
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cuda

    frame, y = _table(n=5000, n_a=70)
    model = dgboost.train({**PARAMS, "max_depth": 5}, frame, y, num_boost_round=6)
    gpu_model = dgboost.train({**PARAMS, "max_depth": 5, "device": "cuda"}, frame, y, num_boost_round=6)
    assert gpu_model.save_raw() == model.save_raw()  # histograms, split tables, partitions: the CPU's
    codes = np.stack([frame["a"].cat.codes.replace(-1, np.nan), frame["b"].cat.codes, frame["x"]],
                     axis=1).astype(np.float32)
    codes[:20, 0] = 69 + np.arange(20)  # some codes past the sets' words
    forest = model._forest(np, 0, 6)
    expected = model.predict(codes, output_margin=True)
    got = model.predict(cp.asarray(codes), output_margin=True)
    np.testing.assert_array_equal(cp.asnumpy(got), expected)
    leaves = model.predict(cp.asarray(codes), pred_leaf=True)
    np.testing.assert_array_equal(cp.asnumpy(leaves), model.predict(codes, pred_leaf=True))
    del forest, cuda


@pytest.mark.gpu
def test_target_statistics_on_the_gpu_give_the_cpus_model():
    pytest.importorskip("cupy")
    frame, y = _table(n=5000, n_a=70)
    params = {**PARAMS, "cat_encoding": "target_statistics", "max_depth": 5}
    model = dgboost.train(params, frame, y, num_boost_round=6)
    assert dgboost.train({**params, "device": "cuda"}, frame, y, num_boost_round=6).save_raw() == model.save_raw()
