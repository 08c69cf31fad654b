"""Metrics against scikit-learn's definitions, with weights and ties."""

import math

import numpy as np
import pytest
from sklearn import metrics as sk

from dgboost.collective import LocalCommunicator
from dgboost.objectives.metrics import make_metric
from dgboost.params import TrainParams

COMM = LocalCommunicator()


def _metric(name, **params):
    return make_metric(name, TrainParams.from_dict(params))


@pytest.fixture
def binary(rng):
    y = (rng.random(500) < 0.4).astype(np.float32)
    p = np.clip(0.3 * y + 0.7 * rng.random(500), 0.001, 0.999).astype(np.float32)
    p[:50] = 0.5  # ties across classes
    w = rng.random(500).astype(np.float32) + 0.1
    return y, p, w


def test_rmse_mae(binary):
    y, p, w = binary
    assert _metric("rmse")(y, p, w, COMM) == pytest.approx(math.sqrt(sk.mean_squared_error(y, p, sample_weight=w)))
    assert _metric("mae")(y, p, None, COMM) == pytest.approx(sk.mean_absolute_error(y, p))


def test_logloss_and_error(binary):
    y, p, w = binary
    metric = _metric("logloss", objective="binary:logistic")
    # sklearn takes the log of float32 inputs in float32; dgboost works in float64.
    assert metric(y, p, w, COMM) == pytest.approx(sk.log_loss(y, p, sample_weight=w), rel=1e-6)
    error = _metric("error", objective="binary:logistic")(y, p, w, COMM)
    assert error == pytest.approx(np.average((p > 0.5) != y, weights=w))


def test_auc_with_ties_and_weights(binary):
    y, p, w = binary
    auc = _metric("auc", objective="binary:logistic")
    assert auc(y, p, w, COMM) == pytest.approx(sk.roc_auc_score(y, p, sample_weight=w), rel=1e-12)
    assert auc(y, p, None, COMM) == pytest.approx(sk.roc_auc_score(y, p), rel=1e-12)


def test_auc_of_a_single_class_is_nan():
    auc = _metric("auc", objective="binary:logistic")
    assert math.isnan(auc(np.ones(5, np.float32), np.linspace(0, 1, 5), None, COMM))


def test_multiclass_metrics(rng):
    y = rng.integers(0, 3, 400).astype(np.float32)
    logits = rng.standard_normal((400, 3)) + 1.5 * np.eye(3)[y.astype(int)]
    p = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32)
    w = rng.random(400) + 0.5
    params = {"objective": "multi:softprob", "num_class": 3}
    assert _metric("mlogloss", **params)(y, p, w, COMM) == pytest.approx(
        sk.log_loss(y, p, sample_weight=w), rel=1e-6)
    assert _metric("merror", **params)(y, p, None, COMM) == pytest.approx(1 - sk.accuracy_score(y, p.argmax(1)))
    # One-vs-rest AUC weighted by class prevalence (sklearn: average="weighted").
    assert _metric("auc", **params)(y, p, None, COMM) == pytest.approx(
        sk.roc_auc_score(y, p, multi_class="ovr", average="weighted"), rel=1e-9)


def test_poisson_nloglik(rng):
    y = rng.poisson(3.0, 300).astype(np.float32)
    p = rng.random(300) * 5 + 0.1
    expected = np.mean([math.lgamma(v + 1) + q - v * math.log(q) for v, q in zip(y, p)])
    assert _metric("poisson-nloglik", objective="count:poisson")(y, p, None, COMM) == pytest.approx(expected)


def test_mphe():
    y = np.array([0.0, 0.0], np.float32)
    p = np.array([0.0, 2.0])
    # delta = 1: (sqrt(1 + 4) - 1) / 2 for the mean over two rows
    assert _metric("mphe")(y, p, None, COMM) == pytest.approx((math.sqrt(5) - 1) / 2)


def test_sums_do_not_depend_on_row_order(binary):
    y, p, w = binary
    order = np.random.default_rng(9).permutation(len(y))
    for name in ("rmse", "logloss", "auc"):
        metric = _metric(name, objective="binary:logistic") if name != "rmse" else _metric(name)
        assert metric(y, p, w, COMM) == metric(y[order], p[order], w[order], COMM)


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_exact_sums_equal_the_array_program(dtype, n_threads, monkeypatch):
    """The host's compiled passes of exact sums (bounds, then fixed-point sums) give the GPU's
    array program's integers, with NaN and infinities, empty and single-row columns, on
    runs of rows of any thread count."""
    from dgboost.backend import column_max_abs
    from dgboost.fixed_point import SUM_HEADROOM_BITS, fixed_column_sums, power_of_two_scale
    from dgboost.kernels import cpu, loops

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1)

    rng = np.random.default_rng(3)
    for n_rows in (0, 1, 2, 999, 70_001):
        columns = (rng.standard_normal((n_rows, 3)) * np.array([1e-6, 1.0, 1e9])).astype(dtype)
        for poison in (None, np.nan, np.inf, -np.inf):
            if poison is not None and n_rows:
                columns = columns.copy()
                columns[n_rows // 2, 1] = poison
            bounds = cpu.host_column_bounds(columns)
            expected = column_max_abs(columns).astype(np.float64) if n_rows else np.zeros(3)
            np.testing.assert_array_equal(bounds, expected)
            finite = bool(np.isfinite(bounds).all())
            scale = power_of_two_scale(np.where(np.isfinite(bounds), bounds, 1.0), n_rows, SUM_HEADROOM_BITS)
            if finite:  # exact_sums_partial sums in fixed point only then
                fixed = cpu.host_fixed_sums(columns, scale)
                np.testing.assert_array_equal(fixed, fixed_column_sums(columns, scale))


def test_soft_labels_score_by_their_share_as_xgboost():
    """reg:logistic's labels lie anywhere in [0, 1]: error, auc and aucpr count a row's label as its
    positive share (XGBoost 3.2.0 gives these values for the same labels and predictions)."""
    y = np.array([0.3, 0.3, 0.8, 0.5], np.float32)
    p = (1 / (1 + np.exp(-np.array([2, -2, 2, 2])))).astype(np.float32)
    assert _metric("error", objective="reg:logistic")(y, p, None, COMM) == pytest.approx(0.425)
    assert _metric("auc", objective="reg:logistic")(y, p, None, COMM) == pytest.approx(0.5877192966)
    assert _metric("aucpr", objective="reg:logistic")(y, p, None, COMM) == pytest.approx(0.5282876756)


def test_logloss_bounds_both_sides_alike():
    """A certain wrong prediction costs -log(1e-16) whichever side it is on (XGBoost's 36.8414)."""
    logloss = _metric("logloss", objective="binary:logistic")
    assert logloss(np.zeros(2, np.float32), np.ones(2, np.float32), None, COMM) == pytest.approx(-math.log(1e-16))
    assert logloss(np.ones(2, np.float32), np.zeros(2, np.float32), None, COMM) == pytest.approx(-math.log(1e-16))


def test_regression_metrics_of_several_quantiles_compare_each_with_the_label():
    y = np.array([1.0, 2.0, 4.0], np.float32)
    p = np.array([[1.0, 2.0, 3.0]] * 3, np.float32)  # as many rows as quantiles: a wrong broadcast runs too
    params = {"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9]}
    assert _metric("mape", **params)(y, p, None, COMM) == pytest.approx(np.mean(np.abs((y[:, None] - p) / y[:, None])))
    rmsle = np.sqrt(np.mean((np.log1p(y[:, None]) - np.log1p(p)) ** 2))
    assert _metric("rmsle", **params)(y, p, None, COMM) == pytest.approx(rmsle)
    y10 = np.arange(1, 11, dtype=np.float32)  # 10 rows, 3 quantiles: it failed to broadcast
    assert _metric("mape", **params)(y10, np.ones((10, 3), np.float32), None, COMM) == \
        pytest.approx(np.mean(np.abs((y10 - 1) / y10)))


def test_error_at_a_threshold_is_xgboosts(binary, tmp_path):
    """error@t counts a row as positive above t; its name keeps the "@t" (XGBoost's values and name)."""
    xgb = pytest.importorskip("xgboost")
    import dgboost

    y, p, w = binary
    X = np.zeros((len(y), 1), np.float32)
    margin = np.log(p / (1 - p)).astype(np.float32)
    ours = dgboost.train({"objective": "binary:logistic", "eval_metric": ["error@0.7", "error"], "eta": 0}, X, y,
                         num_boost_round=1, sample_weight=w, base_margin=margin, evals=[(X, y, "t")])
    matrix = xgb.DMatrix(X, y, weight=w, base_margin=margin)
    theirs = {}
    xgb.train({"objective": "binary:logistic", "eval_metric": ["error@0.7", "error"], "eta": 0}, matrix, 1,
              evals=[(matrix, "t")], evals_result=theirs, verbose_eval=False)
    assert list(ours.evals_result()["t"]) == list(theirs["t"]) == ["error@0.7", "error"]
    for name in ("error@0.7", "error"):
        assert ours.evals_result()["t"][name][0] == pytest.approx(theirs["t"][name][0], rel=1e-6)
    with pytest.raises(ValueError, match=r"'error@1.5': the threshold after '@' must be a number in \[0, 1\]"):
        dgboost.train({"eval_metric": "error@1.5", "objective": "binary:logistic"}, X, y, num_boost_round=1)
