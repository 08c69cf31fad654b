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
