"""Side by side with xgboost-cpu's ``hist`` at the same parameters.

Two kinds of comparison:
- On features with few distinct values both libraries bin every value alone, so
  they must grow the same trees: same splits, thresholds, missing directions,
  covers, and leaf values equal to float32 rounding.
- On the generated Higgs-like data (the issue's protocol: 200k rows, 100 rounds,
  depth 6) and scikit-learn's bundled data sets, the test metrics must agree within
  the tolerances commented at each test.
"""

import numpy as np
import pytest
from sklearn import datasets as skdata
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split

import dgboost
from dgboost.datasets import make_higgs_like

xgb = pytest.importorskip("xgboost")


def _xgb_train(params, X, y, rounds):
    return xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y), rounds)


def _xgb_trees(booster):
    """Per tree: (feature, threshold, default_left, cover) of each node in id order, leaf value at leaves."""
    frame = booster.trees_to_dataframe()
    trees = []
    for _, tree in frame.groupby("Tree", sort=True):
        tree = tree.sort_values("Node")
        leaf = tree["Feature"] == "Leaf"
        trees.append({
            "feature": np.where(leaf, -1, tree["Feature"].str[1:].where(~leaf, "-1").astype(int)),
            "threshold": tree["Split"].to_numpy(),
            "default_left": (tree["Missing"] == tree["Yes"]).to_numpy() & ~leaf.to_numpy(),
            "cover": tree["Cover"].to_numpy(),
            "leaf_value": np.where(leaf, tree["Gain"], np.nan),
        })
    return trees


def _discrete_task(objective, rng):
    X = rng.integers(0, 10, size=(2000, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan  # missing values exercise the default directions
    score = np.nan_to_num(X[:, 0]) * 0.3 + np.sin(np.nan_to_num(X[:, 1])) + 0.3 * rng.standard_normal(2000)
    if objective.startswith("multi"):
        return X, np.digitize(score, [0.5, 1.5]).astype(np.float32)
    if objective == "count:poisson":
        return X, rng.poisson(np.exp(0.3 * np.nan_to_num(X[:, 0]))).astype(np.float32)
    if objective.startswith(("binary", "reg:logistic")):
        return X, (score > 1).astype(np.float32)
    return X, score.astype(np.float32)


# base_score is given where dgboost estimates the intercept differently by design
# (docs/parameters.md): pseudo-Huber (weighted mean, not a Newton step from 0) and
# logitraw (logit of the mean, not the mean used as a margin).
@pytest.mark.parametrize("objective, extra", [
    ("reg:squarederror", {}), ("reg:pseudohubererror", {"base_score": 1.2}), ("reg:logistic", {}),
    ("binary:logistic", {}), ("binary:logitraw", {"base_score": 0.3}), ("count:poisson", {}),
    ("multi:softprob", {"num_class": 3}), ("multi:softmax", {"num_class": 3}),
    ("binary:logistic", {"lambda": 0.0, "alpha": 0.5, "min_child_weight": 5, "gamma": 0.2}),
    ("reg:squarederror", {"max_delta_step": 0.3}),
    ("reg:squarederror", {"max_leaves": 5}), ("binary:logistic", {"max_leaves": 6, "max_depth": 4}),
    ("reg:squarederror", {"monotone_constraints": "(1,0,-1,0)"}),
    ("reg:squarederror", {"grow_policy": "lossguide", "max_leaves": 8, "max_depth": 0}),
    ("binary:logistic", {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 5, "min_child_weight": 3}),
    # Not max_delta_step with alpha together: there XGBoost scores a clipped weight as
    # -(2Gw + (H+l)w^2) + alpha|w|, which is not the objective's reduction; dgboost uses
    # -(2Gw + (H+l)w^2 + 2 alpha|w|) (tests/test_kernels.py, docs/parameters.md).
])
def test_same_trees_as_xgboost_on_discrete_features(objective, extra):
    X, y = _discrete_task(objective, np.random.default_rng(0))
    params = {"objective": objective, "max_depth": 3, "eta": 0.3, **extra}
    ours = dgboost.train(params, X, y, num_boost_round=5)
    theirs = _xgb_train(params, X, y, 5)
    for tree, reference in zip(ours.trees, _xgb_trees(theirs), strict=True):
        split = ~tree.is_leaf
        np.testing.assert_array_equal(tree.feature, reference["feature"])
        np.testing.assert_array_equal(tree.threshold[split], reference["threshold"][split])
        np.testing.assert_array_equal(tree.default_left, reference["default_left"])
        # float32 sums (XGBoost) against exact fixed point (dgboost): equal to float32 rounding.
        np.testing.assert_allclose(tree.cover, reference["cover"], rtol=1e-5)
        np.testing.assert_allclose(tree.value[~split], reference["leaf_value"][~split], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.predict(X, output_margin=True),
                               theirs.predict(xgb.DMatrix(X), output_margin=True), atol=2e-6)


@pytest.fixture(scope="module")
def higgs_protocol():
    """The issue's protocol: Higgs-like, 200k training rows, 100 rounds, depth 6."""
    return {"rows": 200_000, "test_rows": 100_000, "rounds": 100, "params": {"max_depth": 6, "eta": 0.1}}


def _higgs(task, protocol):
    X, y = make_higgs_like(protocol["rows"], seed=0, task=task)
    X_test, y_test = make_higgs_like(protocol["test_rows"], seed=1, task=task)
    return X, y, X_test, y_test


def test_higgs_binary_auc_within_0_003_of_xgboost(higgs_protocol):
    X, y, X_test, y_test = _higgs("binary", higgs_protocol)
    params = {"objective": "binary:logistic", **higgs_protocol["params"]}
    ours = dgboost.train(params, X, y, num_boost_round=higgs_protocol["rounds"])
    theirs = _xgb_train(params, X, y, higgs_protocol["rounds"])
    auc = roc_auc_score(y_test, ours.predict(X_test))
    reference = roc_auc_score(y_test, theirs.predict(xgb.DMatrix(X_test)))
    print(f"higgs binary: test AUC dgboost {auc:.5f}, xgboost {reference:.5f}")
    assert abs(auc - reference) <= 0.003


def test_higgs_regression_rmse_within_1_percent_of_xgboost(higgs_protocol):
    X, y, X_test, y_test = _higgs("regression", higgs_protocol)
    params = {"objective": "reg:squarederror", **higgs_protocol["params"]}
    ours = dgboost.train(params, X, y, num_boost_round=higgs_protocol["rounds"])
    theirs = _xgb_train(params, X, y, higgs_protocol["rounds"])
    rmse = float(np.sqrt(np.mean((ours.predict(X_test) - y_test) ** 2)))
    reference = float(np.sqrt(np.mean((theirs.predict(xgb.DMatrix(X_test)) - y_test) ** 2)))
    print(f"higgs regression: test RMSE dgboost {rmse:.5f}, xgboost {reference:.5f}")
    # One-sided: no more than 1% worse. (dgboost has measured about 1% better here:
    # its cuts are exact quantiles at this size, XGBoost's come from a sketch.)
    assert rmse <= 1.01 * reference


def test_higgs_multiclass_accuracy_within_half_a_point_of_xgboost(higgs_protocol):
    X, y, X_test, y_test = _higgs("multiclass", higgs_protocol)
    params = {"objective": "multi:softprob", "num_class": 4, **higgs_protocol["params"]}
    ours = dgboost.train(params, X, y, num_boost_round=higgs_protocol["rounds"])
    theirs = _xgb_train(params, X, y, higgs_protocol["rounds"])
    accuracy = accuracy_score(y_test, ours.predict(X_test).argmax(axis=1))
    reference = accuracy_score(y_test, theirs.predict(xgb.DMatrix(X_test)).argmax(axis=1))
    print(f"higgs multiclass: test accuracy dgboost {accuracy:.4f}, xgboost {reference:.4f}")
    assert abs(accuracy - reference) <= 0.005


# scikit-learn's bundled sets are small (hundreds of test rows), so a single row
# moves a metric by 0.2-0.7 points: the tolerances below are a few rows wide.
@pytest.mark.parametrize("loader, objective, tolerance", [
    (skdata.load_breast_cancer, "binary:logistic", 0.01),   # AUC, 171 test rows
    (skdata.load_digits, "multi:softprob", 0.02),          # accuracy, 540 test rows
    (skdata.load_wine, "multi:softprob", 0.04),            # accuracy, 54 test rows: 2 rows
    (skdata.load_diabetes, "reg:squarederror", 0.03),      # relative RMSE, 133 test rows
])
def test_bundled_data_sets(loader, objective, tolerance):
    X, y = loader(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    params = {"objective": objective, "max_depth": 4, "eta": 0.1}
    if objective.startswith("multi"):
        params["num_class"] = int(y.max()) + 1
    ours = dgboost.train(params, X_train, y_train, num_boost_round=50).predict(X_test)
    theirs = _xgb_train(params, X_train, y_train, 50).predict(xgb.DMatrix(X_test))
    if objective == "binary:logistic":
        assert abs(roc_auc_score(y_test, ours) - roc_auc_score(y_test, theirs)) <= tolerance
    elif objective.startswith("multi"):
        assert abs(accuracy_score(y_test, ours.argmax(1)) - accuracy_score(y_test, theirs.argmax(1))) <= tolerance
    else:
        rmse, reference = (float(np.sqrt(np.mean((p - y_test) ** 2))) for p in (ours, theirs))
        assert rmse <= (1 + tolerance) * reference
