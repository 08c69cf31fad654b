"""Models written in XGBoost's JSON format load in XGBoost and predict what dgboost predicts."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost

xgb = pytest.importorskip("xgboost")

OBJECTIVES = {
    "reg:squarederror": {},
    "reg:pseudohubererror": {"huber_slope": 1.5},
    "reg:logistic": {},
    "binary:logistic": {},
    "binary:logitraw": {},
    "count:poisson": {},
    "multi:softprob": {"num_class": 3},
    "multi:softmax": {"num_class": 3},
}


def _labels(objective, X, rng):
    score = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    if objective.startswith("multi:"):
        return np.digitize(score, [-0.5, 0.5]).astype(np.float32)
    if objective in ("binary:logistic", "binary:logitraw"):
        return (score > 0).astype(np.float32)
    if objective == "reg:logistic":
        return (1 / (1 + np.exp(-score))).astype(np.float32)
    if objective == "count:poisson":
        return rng.poisson(np.exp(0.5 * score)).astype(np.float32)
    return (score + 0.1 * rng.standard_normal(len(score))).astype(np.float32)


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_xgboost_predicts_what_dgboost_predicts(objective, tmp_path, rng):
    X = rng.standard_normal((800, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan  # missing values take the learned default direction
    y = _labels(objective, X, rng)
    model = dgboost.train({"objective": objective, "max_depth": 4, **OBJECTIVES[objective]}, X, y,
                          num_boost_round=12)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    loaded = xgb.Booster()
    loaded.load_model(path)
    assert loaded.num_boosted_rounds() == 12 and loaded.num_features() == 5
    data = xgb.DMatrix(X, missing=np.nan)
    theirs_margin = loaded.predict(data, output_margin=True)
    ours_margin = model.predict(X, output_margin=True)
    np.testing.assert_allclose(theirs_margin.reshape(ours_margin.shape), ours_margin, rtol=0, atol=1e-5)
    theirs = loaded.predict(data)
    ours = model.predict(X)
    np.testing.assert_allclose(theirs.reshape(ours.shape), ours, rtol=1e-5, atol=1e-5)


def test_feature_names_and_best_iteration_travel(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(rng.standard_normal((300, 3)).astype(np.float32), columns=["a", "b", "c"])
    y = (X["a"] > 0).astype(np.float32)
    model = dgboost.train({"objective": "binary:logistic", "eval_metric": "logloss"}, X, y, num_boost_round=30,
                          evals=[(X, y, "train")], early_stopping_rounds=2)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    loaded = xgb.Booster(model_file=str(path))
    assert loaded.feature_names == ["a", "b", "c"]
    assert int(loaded.attr("best_iteration")) == model.best_iteration
    with pytest.raises(ValueError, match="format='onnx' must be"):
        model.save_model(path, format="onnx")
