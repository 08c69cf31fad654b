"""The regression and classification objectives XGBoost 3.4 defines beyond the first eight:
their models against XGBoost's (identical trees on discrete features), their metrics, their
export, their intercepts, and their bad labels."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost
from dgboost.collective import LocalCommunicator
from dgboost.objectives.metrics import make_metric
from dgboost.objectives.regression import label_quantile
from dgboost.params import TrainParams

xgb = pytest.importorskip("xgboost")
#: XGBoost 3.4 replaced the absolute and quantile errors' leaf refresh by the smooth surrogates dgboost
#: implements; older releases train other trees.
XGBOOST_3_4 = tuple(int(part) for part in xgb.__version__.split(".")[:2]) >= (3, 4)


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(1)
    n = 4000
    X = (np.round(rng.standard_normal((n, 6)) * 2) / 2).astype(np.float32)  # discrete: the same bins
    mean = np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1])
    labels = {
        "reg:squaredlogerror": mean * rng.gamma(2, 0.5, n),
        "reg:gamma": mean * rng.gamma(2, 0.5, n),
        "reg:tweedie": np.where(rng.random(n) < 0.3, 0, mean * rng.gamma(2, 0.5, n)),
        "binary:hinge": (X[:, 0] + rng.standard_normal(n) > 0).astype(float),
        "reg:absoluteerror": 3 * X[:, 0] + rng.standard_t(2, n),
        "reg:quantileerror": 3 * X[:, 0] + rng.standard_normal(n),
    }
    weight = rng.uniform(0.5, 2.0, n).astype(np.float32)
    return X, {k: v.astype(np.float32) for k, v in labels.items()}, weight


CASES = [
    ("reg:squaredlogerror", {}), ("reg:gamma", {}), ("reg:tweedie", {"tweedie_variance_power": 1.3}),
    ("binary:hinge", {}), ("reg:absoluteerror", {}), ("reg:quantileerror", {"quantile_alpha": [0.1, 0.5, 0.9]}),
    ("reg:quantileerror", {"quantile_alpha": 0.3}),
]


@pytest.mark.parametrize("objective, extra", CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_models_are_xgboosts(rows, objective, extra, weighted):
    if objective in ("reg:absoluteerror", "reg:quantileerror") and not XGBOOST_3_4:
        pytest.skip(f"xgboost {xgb.__version__} refreshes leaves by quantiles; dgboost trains XGBoost 3.4's "
                    "surrogates (test_majorised_gradients_by_hand checks them without XGBoost)")
    X, labels, weight = rows
    y = labels[objective]
    w = weight if weighted else None
    params = {"objective": objective, "max_depth": 3, "eta": 0.3, **extra}
    ours = dgboost.train(params, X, y, sample_weight=w, num_boost_round=15, evals=[(X, y, "train")])
    result = {}
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, weight=w), 15,
                       evals=[(xgb.DMatrix(X, y, weight=w), "train")], evals_result=result, verbose_eval=False)
    expected = theirs.predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours.predict(X).reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
    (name, curve), = result["train"].items()
    assert ours.evals_result()["train"][name][-1] == pytest.approx(curve[-1], rel=1e-5)


@pytest.mark.parametrize("objective, extra", CASES)
def test_xgboost_predicts_the_exported_model(rows, objective, extra, tmp_path):
    X, labels, _ = rows
    model = dgboost.train({"objective": objective, "max_depth": 4, **extra}, X, labels[objective], num_boost_round=8)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    exported = xgb.Booster()
    exported.load_model(path)
    for margin in (False, True):
        expected = exported.predict(xgb.DMatrix(X), output_margin=margin)
        np.testing.assert_allclose(np.asarray(model.predict(X, output_margin=margin)).reshape(expected.shape),
                                   expected, rtol=1e-5, atol=1e-5)


def test_majorised_gradients_by_hand():
    """XGBoost 3.4's surrogates at a few points, written out: absolute error r c, c with
    c = delta / hypot(delta, r); quantile 0.5 S (tanh(x) + 1 - 2 alpha), 12.5 tanh(x) / x."""
    from dgboost.objectives import make_objective

    label = np.array([0.0, 1.0, 4.0, -2.0], np.float32)
    margin = np.array([[1.0], [1.0], [0.0], [-1.0]], np.float32)
    absolute = make_objective(TrainParams.from_dict({"objective": "reg:absoluteerror"}))
    absolute.comm = LocalCommunicator()
    delta = np.mean(np.sqrt(np.abs(margin[:, 0] - label))) ** 2
    r = margin[:, 0] - label
    c = np.where(np.hypot(delta, r) > 0, delta / np.hypot(delta, r), 1.0)
    np.testing.assert_allclose(absolute.gradients(margin, label, None)[:, 0], np.stack([r * c, c], 1), rtol=1e-6)
    quantile = make_objective(TrainParams.from_dict({"objective": "reg:quantileerror", "quantile_alpha": 0.8}))
    quantile.comm = LocalCommunicator()
    x = r / (0.04 * delta)
    ratio = np.maximum(np.where(x == 0, 1.0, np.tanh(x) / np.where(x == 0, 1.0, x)), 3e-4)
    expected = np.stack([0.5 * delta * (np.tanh(x) + 1 - 1.6), 12.5 * ratio], 1)
    np.testing.assert_allclose(quantile.gradients(margin, label, None)[:, 0], expected, rtol=1e-5)


def test_quantile_intercepts_are_the_labels_quantiles(rows):
    _, labels, weight = rows
    y = labels["reg:quantileerror"]
    for alpha in (0.1, 0.5, 0.9):  # R's type 6, numpy's "weibull"
        assert label_quantile(y, None, alpha) == pytest.approx(float(np.quantile(y.astype(np.float64), alpha,
                                                                                   method="weibull")))
    order = np.argsort(y)
    cdf = np.cumsum(weight[order])
    assert label_quantile(y, weight, 0.5) == y[order][np.searchsorted(cdf, cdf[-1] * 0.5)]
    model = dgboost.train({"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.9]}, rows[0], y,
                          num_boost_round=0)
    np.testing.assert_allclose(model.base_margin, [label_quantile(y, None, 0.1), label_quantile(y, None, 0.9)],
                               rtol=1e-6)


def test_several_quantiles_never_cross(rows):
    X, labels, _ = rows
    model = dgboost.train({"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9], "max_depth": 3},
                          X, labels["reg:quantileerror"], num_boost_round=20)
    predictions = model.predict(X)
    assert predictions.shape == (len(X), 3) and np.all(np.diff(predictions, axis=1) >= 0)
    covered = (labels["reg:quantileerror"][:, None] <= predictions).mean(axis=0)
    np.testing.assert_allclose(covered, [0.1, 0.5, 0.9], atol=0.06)  # a surrogate after 20 rounds: near


@pytest.mark.parametrize("name, objective, extra", [
    ("mape", "reg:gamma", {}), ("rmsle", "reg:squaredlogerror", {}), ("gamma-nloglik", "reg:gamma", {}),
    ("gamma-deviance", "reg:gamma", {}), ("tweedie-nloglik@1.2", "reg:tweedie", {"tweedie_variance_power": 1.2}),
    ("quantile", "reg:quantileerror", {"quantile_alpha": [0.2, 0.7]}), ("aucpr", "binary:logistic", {}),
    ("aucpr", "binary:hinge", {}), ("error", "binary:hinge", {}),
])
def test_metrics_are_xgboosts(rows, name, objective, extra):
    X, labels, weight = rows
    y = labels.get(objective, labels["binary:hinge"])
    params = {"objective": objective, "max_depth": 2, "eval_metric": name, **extra}
    result = {}
    matrix = xgb.DMatrix(X, y, weight=weight)
    theirs = xgb.train({**params, "tree_method": "hist"}, matrix, 3, evals=[(matrix, "t")], evals_result=result,
                       verbose_eval=False)
    predictions = theirs.predict(matrix)
    got = make_metric(name, TrainParams.from_dict(params))(y, predictions, weight, LocalCommunicator())
    assert got == pytest.approx(result["t"][name][-1], rel=2e-5)


@pytest.mark.parametrize("params, labels, match", [
    ({"objective": "reg:gamma"}, [1.0, 0.0, 2.0], "> 0 for objective='reg:gamma'"),
    ({"objective": "reg:tweedie"}, [1.0, -1.0, 2.0], ">= 0 for objective='reg:tweedie'"),
    ({"objective": "reg:squaredlogerror"}, [1.0, -1.0, 2.0], "> -1"),
    ({"objective": "binary:hinge"}, [1.0, 0.5, 0.0], "0 or 1"),
    ({"objective": "reg:quantileerror"}, [1.0, 2.0, 3.0], "needs quantile_alpha"),
    ({"objective": "reg:quantileerror", "quantile_alpha": 1.0}, [1.0, 2.0, 3.0], "in \\(0, 1\\)"),
    ({"objective": "reg:quantileerror", "quantile_alpha": 0.0}, [1.0, 2.0, 3.0], "quantile_alpha=0.0 must be .* in"),
    ({"objective": "reg:quantileerror", "quantile_alpha": [-0.1, 0.5]}, [1.0, 2.0, 3.0], "quantile_alpha\\[0\\]=-0.1"),
    ({"objective": "reg:quantileerror", "quantile_alpha": [0.5, 0.1]}, [1.0, 2.0, 3.0], "ascending"),
    ({"objective": "reg:squarederror", "quantile_alpha": 0.5}, [1.0, 2.0, 3.0], "only for"),
    ({"objective": "reg:tweedie", "tweedie_variance_power": 2.0}, [1.0, 2.0, 3.0], "out of range"),
    ({"objective": "reg:gamma", "base_score": -1.0}, [1.0, 2.0, 3.0], "must be > 0"),
    ({"objective": "reg:gamma", "eval_metric": "tweedie-nloglik@2.5"}, [1.0, 2.0, 3.0], "\\(1, 2\\)"),
    ({"objective": "reg:gamma", "eval_metric": "ndcg@5"}, [1.0, 2.0, 3.0], "does not fit"),
    ({"objective": "reg:gamma", "eval_metric": "rmse@5"}, [1.0, 2.0, 3.0], "takes no '@'"),
])
def test_bad_labels_and_params_are_refused_before_any_work(params, labels, match):
    X = np.arange(6, dtype=np.float32).reshape(3, 2)
    with pytest.raises(ValueError, match=match):
        dgboost.train(params, X, np.array(labels, np.float32), num_boost_round=1)


#: The metrics each objective's GPU test computes on the device beside the CPU's.
GPU_METRICS = {
    "reg:squaredlogerror": ["rmsle", "mape", "mphe"], "reg:gamma": ["gamma-nloglik", "gamma-deviance"],
    "reg:tweedie": ["tweedie-nloglik@1.3", "rmse"], "binary:hinge": ["error", "aucpr", "auc"],
    "reg:absoluteerror": ["mae", "rmse"], "reg:quantileerror": ["quantile"],
}


@pytest.mark.gpu
@pytest.mark.parametrize("objective, extra", CASES)
def test_gpu_models_are_the_cpus(rows, objective, extra):
    X, labels, weight = rows
    y = labels[objective]
    params = {"objective": objective, "max_depth": 4, "eval_metric": GPU_METRICS[objective], **extra}
    evals = [(X, y, "t")]  # the metrics on the device too
    on_cpu = dgboost.train(params, X, y, sample_weight=weight, num_boost_round=10, evals=evals)
    on_gpu = dgboost.train({**params, "device": "cuda"}, X, y, sample_weight=weight, num_boost_round=10, evals=evals)
    np.testing.assert_allclose(on_gpu.predict(X), on_cpu.predict(X), rtol=1e-5, atol=1e-5)
    for name, curve in on_cpu.evals_result()["t"].items():
        np.testing.assert_allclose(on_gpu.evals_result()["t"][name], curve, rtol=1e-5, err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("objective", ["reg:gamma", "reg:absoluteerror"])
def test_gpu_several_targets_are_the_cpus(rows, objective):
    X, labels, weight = rows
    Y = np.stack([labels[objective], labels[objective][::-1]], axis=1)
    params = {"objective": objective, "max_depth": 4}
    on_cpu = dgboost.train(params, X, Y, sample_weight=weight, num_boost_round=6, evals=[(X, Y, "t")])
    on_gpu = dgboost.train({**params, "device": "cuda"}, X, Y, sample_weight=weight, num_boost_round=6,
                           evals=[(X, Y, "t")])
    assert on_gpu.predict(X).shape == (X.shape[0], 2)
    np.testing.assert_allclose(on_gpu.predict(X), on_cpu.predict(X), rtol=1e-5, atol=1e-5)
    (name, curve), = on_cpu.evals_result()["t"].items()
    np.testing.assert_allclose(on_gpu.evals_result()["t"][name], curve, rtol=1e-5)


# ---- survival ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def survival():
    rng = np.random.default_rng(3)
    n = 3000
    X = (np.round(rng.standard_normal((n, 5)) * 2) / 2).astype(np.float32)
    time = np.exp(0.5 * X[:, 0] + 0.5 * rng.standard_normal(n)).astype(np.float32)
    lower, upper = time.copy(), time.copy()
    kind = rng.random(n)
    upper[kind < 0.3] = np.inf  # right censored
    lower[(kind >= 0.3) & (kind < 0.4)] = 0  # left censored
    interval = (kind >= 0.4) & (kind < 0.6)
    lower[interval], upper[interval] = time[interval] * 0.7, time[interval] * 1.3
    lower[kind > 0.95] = upper[kind > 0.95] = 0  # events at time 0: observed (XGBoost's limits)
    cox = np.where(rng.random(n) < 0.3, -time, time).astype(np.float32)  # negative: censored
    return X, lower, upper, cox


@pytest.mark.parametrize("distribution", ["normal", "logistic", "extreme"])
def test_aft_is_xgboosts(survival, distribution, tmp_path):
    X, lower, upper, _ = survival
    params = {"objective": "survival:aft", "aft_loss_distribution": distribution, "aft_loss_distribution_scale": 1.2,
              "max_depth": 3, "eval_metric": ["aft-nloglik", "interval-regression-accuracy"]}
    matrix = xgb.DMatrix(X)
    matrix.set_float_info("label_lower_bound", lower)
    matrix.set_float_info("label_upper_bound", upper)
    result = {}
    theirs = xgb.train({**params, "tree_method": "hist"}, matrix, 10, evals=[(matrix, "t")], evals_result=result,
                       verbose_eval=False)
    ours = dgboost.train(params, X, None, label_lower_bound=lower, label_upper_bound=upper, num_boost_round=10,
                         evals=[(X, np.stack([lower, upper], 1), "t")])
    np.testing.assert_allclose(ours.predict(X), theirs.predict(matrix), rtol=1e-5)
    for name in params["eval_metric"]:
        assert ours.evals_result()["t"][name][-1] == pytest.approx(result["t"][name][-1], rel=1e-6)
    path = tmp_path / "aft.json"
    ours.save_model(path, format="xgboost")
    exported = xgb.Booster()
    exported.load_model(path)
    np.testing.assert_allclose(exported.predict(matrix), ours.predict(X), rtol=1e-5)


def test_cox_is_xgboosts(survival, tmp_path):
    X, _, _, y = survival
    result = {}
    matrix = xgb.DMatrix(X, y)
    theirs = xgb.train({"objective": "survival:cox", "max_depth": 3, "tree_method": "hist"}, matrix, 10,
                       evals=[(matrix, "t")], evals_result=result, verbose_eval=False)
    ours = dgboost.train({"objective": "survival:cox", "max_depth": 3}, X, y, num_boost_round=10, evals=[(X, y, "t")])
    np.testing.assert_allclose(ours.predict(X), theirs.predict(matrix), rtol=1e-5)
    assert ours.evals_result()["t"]["cox-nloglik"][-1] == pytest.approx(result["t"]["cox-nloglik"][-1], rel=1e-6)
    path = tmp_path / "cox.json"
    ours.save_model(path, format="xgboost")
    exported = xgb.Booster()
    exported.load_model(path)
    np.testing.assert_allclose(exported.predict(matrix), ours.predict(X), rtol=1e-5)


@pytest.mark.parametrize("bounds, match", [
    ([[1.0, 0.5]], "upper bound must be >= its lower bound"),
    ([[-1.0, 2.0]], "lower bound must be a finite time >= 0"),
    ([[np.inf, np.inf]], "lower bound must be a finite time"),
    ([[np.nan, 1.0]], "must hold numbers"),
])
def test_bad_survival_bounds_are_refused(bounds, match):
    X = np.zeros((3, 2), np.float32)
    y = np.array([[1.0, 2.0], [1.0, 1.0]] + bounds, np.float32)
    with pytest.raises(ValueError, match=match):
        dgboost.train({"objective": "survival:aft"}, X, y, num_boost_round=1)


@pytest.mark.parametrize("params, y, bounds, match", [
    ({}, None, ([1.0, 2.0, 3.0], [1.0, 2.0, 2.5]),
     r"label_lower_bound/label_upper_bound holds \[3.0, 2.5\] at row 2: .* upper bound must be >= its lower"),
    ({}, None, ([1.0, 2.0, 3.0], None), "label_lower_bound was given without label_upper_bound: pass both"),
    ({}, None, (None, [1.0, 2.0, 3.0]), "label_upper_bound was given without label_lower_bound"),
    ({}, [1.0, 2.0, 3.0], ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
     "pass y or label_lower_bound/label_upper_bound, not both"),
    ({}, None, ([1.0, 2.0, 3.0], [1.0, 2.0]),
     r"label_upper_bound must be 1-D with one bound a row of X \(3\), got shape \(2,\)"),
    ({}, None, ([[1.0, 2.0, 3.0]], [1.0, 2.0, 3.0]), r"label_lower_bound must be 1-D .* got shape \(1, 3\)"),
    ({"objective": "reg:gamma"}, None, ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),
     "survival:aft's labels; objective='reg:gamma'"),
])
def test_bad_bound_keywords_are_refused(params, y, bounds, match):
    X = np.zeros((3, 2), np.float32)
    lower, upper = (None if b is None else np.array(b, np.float32) for b in bounds)
    with pytest.raises(ValueError, match=match):
        dgboost.train({"objective": "survival:aft", **params}, X, y, label_lower_bound=lower, label_upper_bound=upper,
                      num_boost_round=1)


@pytest.mark.gpu
@pytest.mark.parametrize("objective, extra", [
    ("survival:aft", {}), ("survival:cox", {}),
    ("survival:aft", {"aft_loss_distribution": "logistic", "aft_loss_distribution_scale": 0.7}),
    ("survival:aft", {"aft_loss_distribution": "extreme", "aft_loss_distribution_scale": 1.5}),
])
def test_gpu_survival_is_the_cpus(survival, objective, extra):
    X, lower, upper, cox = survival
    y = np.stack([lower, upper], 1) if objective == "survival:aft" else cox
    metrics = ["aft-nloglik", "interval-regression-accuracy"] if objective == "survival:aft" else ["cox-nloglik"]
    params = {"objective": objective, "max_depth": 4, "eval_metric": metrics, **extra}
    on_cpu = dgboost.train(params, X, y, num_boost_round=10, evals=[(X, y, "t")])
    on_gpu = dgboost.train({**params, "device": "cuda"}, X, y, num_boost_round=10, evals=[(X, y, "t")])
    np.testing.assert_allclose(on_gpu.predict(X), on_cpu.predict(X), rtol=1e-5)
    for name, curve in on_cpu.evals_result()["t"].items():
        np.testing.assert_allclose(on_gpu.evals_result()["t"][name], curve, rtol=1e-5, err_msg=name)


# ---- several targets ---------------------------------------------------------------------------

@pytest.mark.parametrize("objective", ["reg:squarederror", "reg:gamma", "reg:absoluteerror", "binary:logistic"])
def test_several_targets_are_xgboosts(rows, objective, tmp_path):
    if objective == "reg:absoluteerror" and not XGBOOST_3_4:
        pytest.skip(f"xgboost {xgb.__version__} refreshes leaves by quantiles")
    X, labels, _ = rows
    rng = np.random.default_rng(9)
    Y = np.stack([labels["reg:gamma"], labels["reg:tweedie"] + 0.5, np.exp(0.3 * X[:, 2])], axis=1)
    if objective == "binary:logistic":
        Y = (Y > np.median(Y, axis=0)).astype(np.float32)
    elif objective != "reg:gamma":
        Y = Y + rng.standard_normal(Y.shape).astype(np.float32)
    Y = Y.astype(np.float32)
    result = {}
    matrix = xgb.DMatrix(X, Y)
    theirs = xgb.train({"objective": objective, "max_depth": 3, "tree_method": "hist"}, matrix, 10,
                       evals=[(matrix, "t")], evals_result=result, verbose_eval=False)
    ours = dgboost.train({"objective": objective, "max_depth": 3}, X, Y, num_boost_round=10, evals=[(X, Y, "t")])
    assert ours.predict(X).shape == (len(X), 3) and ours.num_boosted_rounds() == 10 and len(ours.trees) == 30
    np.testing.assert_allclose(ours.predict(X), theirs.predict(matrix), rtol=1e-5, atol=1e-5)
    (name, curve), = result["t"].items()
    assert ours.evals_result()["t"][name][-1] == pytest.approx(curve[-1], rel=1e-5)
    path = tmp_path / "targets.json"
    ours.save_model(path)
    assert dgboost.Booster.load_model(path).save_raw() == ours.save_raw()
    ours.save_model(path, format="xgboost")
    exported = xgb.Booster()
    exported.load_model(path)
    np.testing.assert_allclose(exported.predict(matrix), ours.predict(X), rtol=1e-5, atol=1e-5)


def test_several_targets_in_the_estimator_and_their_errors(rows):
    X, labels, _ = rows
    Y = np.stack([labels["reg:quantileerror"], labels["reg:absoluteerror"]], axis=1)
    model = dgboost.DGBRegressor(n_estimators=5, max_depth=3).fit(X, Y)
    assert model.predict(X).shape == (len(X), 2)
    with pytest.raises(ValueError, match="does not take"):
        dgboost.train({"objective": "reg:quantileerror", "quantile_alpha": 0.5}, X, Y, num_boost_round=1)
    with pytest.raises(ValueError, match="num_target=3 but y has 2 columns"):
        dgboost.train({"num_target": 3}, X, Y, num_boost_round=1)
    with pytest.raises(ValueError, match="does not take several targets"):
        dgboost.train({"objective": "binary:logistic", "eval_metric": "auc"}, X, (Y > 0).astype(np.float32),
                      num_boost_round=1)


def test_a_given_base_score_of_a_log_link_is_taken_as_it_is():
    X = np.zeros((4, 1), np.float32)
    booster = dgboost.train({"objective": "count:poisson", "base_score": 1e-8}, X, np.ones(4, np.float32),
                            num_boost_round=0)
    assert booster.predict(X, output_margin=True)[0] == pytest.approx(np.log(1e-8), rel=1e-6)  # XGBoost's -18.42


@pytest.mark.parametrize("objective", ["survival:aft", "survival:cox"])
def test_a_survival_base_score_must_be_positive(objective):
    X, y = np.zeros((4, 1), np.float32), np.ones((4, 2) if objective == "survival:aft" else 4, np.float32)
    with pytest.raises(ValueError, match=r"base_score=0.0 must be > 0 for objective='survival"):
        dgboost.train({"objective": objective, "base_score": 0.0}, X, y, num_boost_round=1)


def test_metric_arguments_and_labels_that_cannot_be_scored_are_refused():
    X = np.zeros((4, 1), np.float32)
    with pytest.raises(ValueError, match=r"tweedie-nloglik@1.*in \(1, 2\)"):
        dgboost.train({"objective": "reg:tweedie", "eval_metric": "tweedie-nloglik@1"}, X, np.ones(4, np.float32),
                      num_boost_round=1)
    graded, qid = np.array([0, 0.5, 1, 2], np.float32), [0, 0, 1, 1]
    copy = graded.copy()
    for params in ({"objective": "rank:pairwise"}, {"objective": "rank:pairwise", "eval_metric": "ndcg@2"}):
        with pytest.raises(ValueError, match=r"evals\[0\] y has 0.5 at row 1: eval_metric 'ndcg@(32|2)' .* integer "
                                             r"labels in \[0, 31\]"):
            dgboost.train(params, X, graded, num_boost_round=1, qid=qid, evals=[(X, copy, "e")], eval_qid=[qid])
        with pytest.raises(ValueError, match=r"evals\[0\] y has 0.5 at row 1"):  # the training set as an eval set
            dgboost.train(params, X, graded, num_boost_round=1, qid=qid, evals=[(X, graded, "train")])
        dgboost.train(params, X, graded, num_boost_round=1, qid=qid)  # not scored: pairwise takes any labels
    dgboost.train({"objective": "rank:pairwise", "ndcg_exp_gain": False}, X, graded, num_boost_round=1, qid=qid,
                  evals=[(X, copy, "e")], eval_qid=[qid])  # linear gain takes them
